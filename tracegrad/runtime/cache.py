"""A bounded cache of compiled programs per compiled callable (least recently used goes)."""
import collections
import warnings


class ProgramCache:
    def __init__(self, name, limit=8):
        self.name = name
        self.limit = limit
        self.entries = collections.OrderedDict()
        self.warned = False
        self.compiles = 0

    def get(self, key):
        p = self.entries.get(key)
        if p is not None and len(self.entries) > 1:
            self.entries.move_to_end(key)
        return p

    def put(self, key, program):
        self.compiles += 1
        self.entries[key] = program
        if len(self.entries) > self.limit:
            self.entries.popitem(last=False)
            if not self.warned:
                self.warned = True
                warnings.warn(f"tracegrad.compile: {self.name} was recompiled {self.compiles} times (a guard on "
                              f"shapes, dtypes, requires_grad, grad mode or a Python constant keeps changing); "
                              f"only the {self.limit} most recent programs are kept", RuntimeWarning, stacklevel=4)

    def __len__(self):
        return len(self.entries)

    def clear(self):
        self.entries.clear()
