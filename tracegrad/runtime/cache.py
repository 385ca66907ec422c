"""The compiled programs of one compiled callable, each with the guards it was built under.

A lookup takes the key of the call's arguments (shapes, dtypes, devices, requires_grad,
grad mode, Python constants by bits) and then the guards of each program under that key
(runtime/sources.py: the globals, closures, attributes and modules it read). Past `limit`
programs, torch's recompile limit applies: one warning naming what kept changing, and
calls that match no program run eagerly from then on.
"""
import collections


class ProgramCache:
    def __init__(self, name, limit=8):
        self.name = name
        self.limit = limit
        self.entries = collections.OrderedDict()      # key -> [(guards, program), ...]
        self.count = 0
        self.compiles = 0
        self.warned = False
        self.last_miss = None                         # why the last lookup found no program

    def lookup(self, key, env, leaves=None):
        """The program under key whose guards hold for env; for a key with symbolic sizes
        (`leaves` given), whose size guards (`sym_check`, compile.build) hold too."""
        bucket = self.entries.get(key)
        if bucket is None:
            self.last_miss = "its arguments differ (shapes, dtypes, requires_grad, grad mode or Python constants)" \
                if self.entries else None
            return None
        for i, (guards, p) in enumerate(bucket):
            if leaves is not None:
                check = getattr(p, "sym_check", None)
                if check is not None and not check(leaves):
                    why = "a symbolic size's guard"
                    continue
            # the generated check first (-1: all hold); the guards' own verdict where it is not
            why = None if guards is None or guards.check(env) == -1 else guards.failed(env)
            if why is None:
                if i:
                    bucket.insert(0, bucket.pop(i))
                if len(self.entries) > 1:
                    self.entries.move_to_end(key)
                return p
        self.last_miss = f"{why} changed"
        return None

    def full(self):
        return self.count >= self.limit

    def put(self, key, guards, program):
        self.compiles += 1
        self.count += 1
        self.entries.setdefault(key, []).insert(0, (guards, program))
        self.entries.move_to_end(key)

    def get(self, key):
        """The program of the most recent entry under key (guards unchecked): for inspection."""
        bucket = self.entries.get(key)
        return bucket[0][1] if bucket else None

    def programs(self):
        return [p for bucket in self.entries.values() for _, p in bucket]

    def __len__(self):
        return self.count

    def clear(self):
        old = self.programs()
        self.entries.clear()
        self.count = 0
        for p in old:                  # what refers to them from elsewhere lets go (compile.Program.release)
            release = getattr(p, "release", None)
            if release is not None:
                release()
