"""A compiled call and the calls that follow it, run as one program.

Written torch's way, a higher derivative is a compiled function followed by calls outside it:

    y = loss(x)                                           # @tracegrad.compile
    (g,) = tracegrad.autograd.grad(y, x, create_graph=True)
    (h,) = tracegrad.autograd.grad(g.sum(), x)

Each call runs a program of its own: the loss's, then its create_graph backward (which
recomputes the forward to differentiate it again), then the backward of that. The same
derivative compiled whole (`grad` inside the compiled function) is one program, where the
compiler shares the forward and its derivatives and fuses their elementwise work: 3-10x
faster on small workloads.

This module gives the first form the second's speed. Once a compiled program's create_graph
backward has run, the calls that follow its calls are *recorded*: each `autograd.grad` and
each tensor method in STEP_METHODS that takes the call's results (or results of such steps),
with its arguments (a result by its place in the chain, any other tensor by its place among
the chain's inputs, a number by its type and bits). The chain ends where anything else
touches one of its results: its values read, its grad_fn, an op that is not a step. When
two calls in a row are followed by the same chain, the next calls *speculate*:

- the compiled call returns pending tensors, which have a shape, dtype and requires_grad but
  no values yet;
- each step, checked against the chain (the same op, the same constants, the same input
  tensors as the steps before took, of the same metadata), returns pending tensors too;
- the last step runs the whole chain as one compiled program: the steps written out as a
  Python function (its source is the compiled function's `chain_source`) and compiled whole,
  as the user could have written it. It returns the last step's results, and the values of
  the chain's results that are still alive; or, where the program reads nothing but the
  chain's inputs and they are small, the last step keeps copies of them, and those values
  are computed when first read, by running the steps on the copies as eager runs them (a
  record whose values get read computes them in the program from then on).

A pending tensor used in any other way first makes the chain *real*: its steps so far run
one by one, as eager runs them (the compiled call's program, then each step), and every
pending tensor takes the result it stands for, its grad_fn included. So nothing differs
from running the calls as written, but the time. After the last step, the results keep the
values the whole program gave them (or get them from the copies); their graphs are made
the same way when first needed, as are the graphs of the last step's results that require
grad (a chain whose callers need those graphs is given up).
The chain's inputs must then be as they were: an input changed in place since makes that
graph raise torch's error when a backward reaches it, as a graph that saved the input would;
where the last step kept copies of the inputs, the graph is made from them instead, each
input at its version as taken, and raises where torch's graph reads an input written since.
An input changed in place before the last step makes the last step raise. A write that no
version counter sees is one the whole chain would read where eager's call did not: the
memory of a speculated chain's input handed out before its last step (`.data` read or
replaced, an array handed to numpy) first makes the chain real; an input whose memory numpy
code held before (from_numpy) is copied as taken, and written makes the last step raise.
After the last step, a write through `.data` is not seen (as autograd does not see it).

A tensor the program reads itself (a compiled module's parameter) that a step takes, as
`grad(loss, model.parameters())` does, is taken by identity, and the whole chain reads it as
the program does; what the program reads itself is checked for writes as the inputs are.

A chain whose steps change from call to call is recorded again, and given up after a few
changes; so are chains with no autograd.grad step. Programs that write their inputs or have
symbolic sizes, chains whose inputs have hooks or are views (or, taken by a step after the
call, a graph of their own), and calls from another thread than the one that recorded the
chain run as written.
"""
import threading
import weakref
from threading import get_ident as _get_ident

import numpy as np

from . import _dtype as D
from .grad_mode import STATE
from .ops.shapes import normalize_dim
from .tensor import Tensor, Size, CPU, Above, CHAINS_LIVE, memory_root, _ESCAPED
from .tracing import _ANOMALY, _PROFILE

LIVE = CHAINS_LIVE      # runs open (recording or speculating): autograd.grad looks for steps while not 0
SUSPENDED = [0]         # a chain's own program running: compiled calls and steps in it are plain
NOT_STEP = object()
MISS = object()         # (a speculated step that is not the chain's next: _advancer)
REAL_GRAD = [None]      # autograd's grad without the step check (tracegrad.autograd plugs it in)
RUN_PROGRAM = [None]    # compile's run_program (tracegrad.compile plugs it in)
ARRAY_RUNNER = [None]   # compile's array_runner
STALE_GRAD_FN = [None]  # compile's grad_fn for a result whose graph cannot be rebuilt
COMPILER = [None]       # compile's CompiledFunction
# saved_tensors_hooks contexts open and global module backward hooks (autograd.graph's counts,
# plugged in by tracegrad.compile): while any is, the steps run as written, so that the hooks run
HOOK_COUNTS = [[0], [0]]
HIDDEN_HOOKS = [None]   # autograd.graph's hidden_saved_tensors_hooks

RECORD, READY, OFF = "record", "ready", "off"
SAME_TO_SPECULATE = 2   # chains recorded the same in a row before the next call speculates
MAX_CHANGES = 4         # chains recorded differently (or missed) before giving up
MAX_PROGRAMS = 4        # whole-chain programs kept (one per set of results alive at the end)
LAZY_BYTES = 1 << 18    # inputs of a chain copied at its last step, at most, so that results alive get values later

# the tensor methods a chain takes as steps (any other touches the chain's results, and ends it)
STEP_METHODS = ("sum", "mean", "mul", "add", "sub", "div", "neg", "pow", "dot", "square", "exp", "log", "tanh",
                "sigmoid", "abs", "__mul__", "__rmul__", "__add__", "__radd__", "__sub__", "__rsub__",
                "__truediv__", "__rtruediv__", "__neg__", "__pow__", "__matmul__")

_DEFAULT_DTYPE = D._default    # (D.get_default_dtype()'s list, read without the call)
_IN_STEP = [0]          # a step (or a recorded call) running: its own reads of the chain's tensors are its own
_LOCK = threading.RLock()
_ESCAPED_REFS = _ESCAPED.data    # (the weak dictionary's own: id -> weak reference)
# the slots of a tensor, read and written past _Pending's properties
_SLOT_NAMES = [s for s in Tensor.__slots__ if s not in ("__weakref__", "__dict__")]
_DESC = {s: Tensor.__dict__[s] for s in _SLOT_NAMES}
_DATA = _DESC["_data"]
_new = object.__new__
_ref = weakref.ref
_MARKS = ("_cr", "_ci", "_pm")


class _Refused(Exception):
    """An argument a chain cannot take (another chain's tensor, a view, a tensor with hooks, an object)."""


class Record:
    """What followed the calls of one compiled program: the chain last recorded, how often in a
    row it repeated, and the whole-chain programs built for it."""
    __slots__ = ("name", "fn", "steps", "ext_meta", "same", "changes", "state", "programs", "open", "advance",
                 "thread", "default", "held", "lazy", "lazy_run", "__weakref__")

    def __init__(self, program):
        self.name = program.__name__   # (not the program: it holds its record)
        self.fn = None              # the compiled function (weakly), set by each call
        self.steps = None
        self.ext_meta = None
        self.same = 0
        self.changes = 0
        self.state = RECORD
        self.programs = {}          # results alive at the end -> CompiledFunction of the whole chain
        self.open = None            # the last call's run, while open
        self.advance = None         # each step's check and pending results (_advancer), once READY
        self.thread = _get_ident()     # the thread whose calls it follows
        self.default = None            # the default dtype of the chain recorded
        self.held = ()                 # tensors the program reads itself that the steps take (_enc's "o")
        self.lazy = False              # whether the last step leaves the values of results alive for later (_snap)
        self.lazy_run = None           # (weakly) the last run that did


class Run:
    """One call of the program and the steps after it: recorded as they run, or speculated."""
    __slots__ = ("record", "spec", "steps", "pos", "objs", "ext", "ext_ids", "seen", "call", "closed", "done",
                 "error", "default", "consts", "held", "copies", "unread", "watched", "__weakref__")

    def __init__(self, record, spec):
        self.record = record
        self.spec = spec
        self.steps = record.steps if spec else []
        self.pos = 0
        self.objs = []              # weak references to the results, by place (None for a None result)
        self.ext = []               # the chain's input tensors, by place
        self.ext_ids = {}
        self.seen = []          # each input: (version counter, version, array, requires_grad, (grad_fn, output_nr))
        self.call = None            # (program, argument tensors, distinct) of the compiled call
        self.closed = False
        self.done = False
        self.error = None
        self.default = record.default if spec else D.get_default_dtype()
        self.consts = ()            # (tensor, version counter, version, array, requires_grad) of what the program reads
        self.held = record.held if spec else []     # the tensors of those the steps take, by place
        self.copies = None          # copies of the inputs' arrays the last step took (_snap), until a graph is made
        self.unread = False         # whether results alive have no values yet (_fill computes them from the copies)
        self.watched = ()           # (tensor, array, copy) of those whose memory numpy code holds (_watch)


def _meta(t):
    d = t._data
    return (d.shape, t._dtype, t._req, d.strides)


def _ext_meta(t):
    """An input's metadata as the chain compares it: _meta's, and whether it is a leaf."""
    return _meta(t) + (t._grad_fn is None,)


def _independent(run):
    """Whether the run's inputs that require grad (and the tensors the steps take that the
    program reads) are independent as the whole chain, a function of them, takes them: not
    where a non-leaf among them has a graph that may reach another (f(base * 2, base): the
    derivative with respect to base has a term through the first argument, which the whole
    chain would not see)."""
    req = [t for t in run.ext if t._req]
    return len(req) + len(run.held) < 2 or all(t._grad_fn is None for t in req)


def _enc(a, run):
    """An argument as the chain compares it: a result by its place, another tensor by its place
    among the chain's inputs (taken now where new), a number by its type and bits."""
    c = a.__class__
    if c is _Pending:
        d = a.__dict__
        if d.get("_cr") is run:
            return ("p", d["_ci"])
        raise _Refused
    if isinstance(a, Tensor):
        slot = run.ext_ids.get(id(a))
        if slot is None:
            if (a._hooks or a._post_acc_hooks or a._retains_grad or _node_hooks(a) or a._view is not None or a.__dict__
                    or a._data.__class__ is not np.ndarray):
                raise _Refused
            read = run.call[0].read_ids
            if read is not None and id(a) in read:
                # a tensor the program reads itself (a module's parameter): the whole chain reads it
                # as the program does, as a constant, so it is taken by identity (a speculated
                # run's matchers check those by identity: here a speculated run finds one where the
                # recorded chain had an input)
                if run.spec:
                    raise _Refused
                for j, h in enumerate(run.held):
                    if h is a:
                        return ("o", j)
                run.held.append(a)
                return ("o", len(run.held) - 1)
            if run.steps and a._req and a._grad_fn is not None:
                # (a step's tensor with a graph of its own, which may reach the chain's inputs: the
                # previous call's gradient. The whole chain, a function of its inputs, would not
                # see that path, and its derivatives would leave out what flows along it)
                raise _Refused
            slot = len(run.ext)
            run.ext.append(a)
            run.ext_ids[id(a)] = slot
            run.seen.append((a._vc, a._vc[0], a._data, a._req, (a._grad_fn, a._output_nr)))
        return ("x", slot)
    if c is int or c is bool or c is str or a is None or c is D.dtype:
        return ("c", c, a)
    if c is float:
        return ("f", a.hex())
    if c is tuple or c is list:
        return (c, tuple([_enc(x, run) for x in a]))
    raise _Refused


def _advancer(rec, pos, bound, read_ids):
    """A speculated run's step at place `pos` of the chain recorded in `rec`, as one generated
    function `advance(kind, name, a, run)`: the step's check (the same op, in the same modes,
    on the recording's thread; the same results, the inputs of those places (taken where new,
    from place `bound` on, as _enc takes them, of the recorded inputs' metadata), the tensors
    the program reads itself, equal constants of the same types; before a derivative, no
    input's requires_grad flipped or hook registered since) and then its pending results, or
    MISS. Written out, a step costs a microsecond or
    two, where the walks of its spec and metadata cost several. `read_ids`: the tensors the
    program reads itself (a speculated run takes none of them where the chain had an input)."""
    kind, name, spec, out = rec.steps[pos]
    table = {"P": _Pending, "T": Tensor, "ND": np.ndarray, "ADD": _add, "RI": read_ids, "H": rec.held, "S": STATE,
             "NH": _node_hooks,
             "AN": _ANOMALY, "PR": _PROFILE,
             "DD": _DEFAULT_DTYPE, "HC": HOOK_COUNTS, "GI": _get_ident, "MISS": MISS, "new": _new, "ref": _ref,
             "KIND": kind, "NAME": name}
    conds = []

    def walk(expr, spec):
        kind = spec[0]
        if kind == "p":
            conds.append(f"{expr}.__class__ is P")
            conds.append(f"{expr}.__dict__.get('_cr') is run")
            conds.append(f"{expr}.__dict__['_ci'] == {int(spec[1])}")
        elif kind == "x":
            slot = int(spec[1])
            if slot < walk.bound:
                conds.append(f"{expr} is run.ext[{slot}]")
            else:
                # (a tensor the chain can take, as _enc takes one, of the recorded input's metadata)
                m = f"M{len(table)}"
                table[m] = rec.ext_meta[slot]
                x, d = f"x{slot}", f"d{slot}"
                conds.append(f"({x} := {expr}).__class__ is not P and isinstance({x}, T)")
                conds.append(f"id({x}) not in run.ext_ids and not {x}._hooks and not {x}._post_acc_hooks "
                             f"and not {x}._retains_grad and {x}._view is None and not {x}.__dict__ "
                             f"and ({x}._grad_fn is None or not NH({x}))")
                conds.append(f"({d} := {x}._data).__class__ is ND")
                if read_ids:
                    conds.append(f"id({x}) not in RI")
                if pos:
                    conds.append(f"(not {x}._req or {x}._grad_fn is None)")     # (as _enc refuses)
                conds.append(f"{d}.shape == {m}[0] and {x}._dtype == {m}[1] and {x}._req == {m}[2] "
                             f"and {d}.strides == {m}[3] and ({x}._grad_fn is None) is {m}[4]")
                conds.append(f"ADD(run, {x}, {d})")
                walk.bound = slot + 1
        elif kind == "o":
            conds.append(f"{expr} is H[{int(spec[1])}]")
        elif kind == "c" and (spec[2] is None or spec[2] is True or spec[2] is False):
            conds.append(f"{expr} is {spec[2]!r}")
        elif kind == "c" or kind == "f":
            k = f"k{len(table)}"
            table[k] = spec
            conds.append(f"{expr}.__class__ is {k}[1]" if kind == "c" else f"{expr}.__class__ is float")
            conds.append(f"{expr} == {k}[2]" if kind == "c" else f"{expr}.hex() == {k}[1]")
        else:
            k = f"k{len(table)}"
            table[k] = kind
            conds.append(f"{expr}.__class__ is {k}")
            conds.append(f"len({expr}) == {len(spec[1])}")
            for i, item in enumerate(spec[1]):
                walk(f"{expr}[{i}]", item)
    walk.bound = bound
    walk("a", spec)
    last = pos == len(rec.steps) - 1
    if kind == "grad" or last:
        # (a derivative sees hooks and requires_grad: any registered or flipped since the chain took
        # its inputs makes the steps run as written; the inputs' requires_grad as taken is the recorded one)
        for slot in range(walk.bound):
            conds.append(f"run.ext[{slot}]._req is {bool(rec.ext_meta[slot][2])}")
            conds.append(f"not run.ext[{slot}]._hooks and not run.ext[{slot}]._post_acc_hooks "
                         f"and not run.ext[{slot}]._retains_grad "
                         f"and (run.ext[{slot}]._grad_fn is None or not NH(run.ext[{slot}]))")
        for j in range(len(rec.held)):
            conds.append(f"not H[{j}]._hooks and not H[{j}]._post_acc_hooks")
    lines = ["def advance(kind, name, a, run):",
             "    if kind != KIND or name != NAME or not S.grad_enabled or S.inference or AN[0] \\",
             "            or PR[0] is not None or DD[0] is not run.default or HC[0][0] or HC[1][0]:",
             "        return MISS"]
    if pos:
        lines += [f"    if GI() != {int(rec.thread)}:", "        return MISS"]
    lines += ["    if not (" + "\n            and ".join(conds or ["True"]) + "):", "        return MISS",
              f"    run.pos = {pos + 1}"]
    if last:
        lines += _completion(rec, pos, walk.bound, table)
    else:
        names = []
        objs = len(_places(rec.steps[:pos]))
        for m in ([out[1]] if out[0] == "t" else out[1]):
            if m is None:
                lines.append("    run.objs.append(None)")
                names.append("None")
                objs += 1
                continue
            k = f"m{len(table)}"
            table[k] = m
            t = f"t{len(names)}"
            names.append(t)
            lines += [f"    {t} = new(P)", f"    {t}._dtype = {k}[1]", f"    {t}._req = {bool(m[2])}",
                      f"    d = {t}.__dict__", "    d['_cr'] = run", f"    d['_ci'] = {objs}", f"    d['_pm'] = {k}",
                      f"    run.objs.append(ref({t}))"]
            objs += 1
        lines.append(f"    return {names[0]}" if out[0] == "t" else f"    return ({', '.join(names)},)")
    src = "\n".join(lines) + "\n"
    exec(compile(src, "<tracegrad:chain step>", "exec"), table)
    return table["advance"], walk.bound


def _completion(rec, pos, n_ext, table):
    """The lines of the last step's code (_advancer) after its check: the whole chain's program
    for the results alive, run without its guards (see _complete), and the values of those
    results; _complete where there is none yet (or it needs run_program)."""
    table.update({"LOCK": _LOCK, "CHANGED": _changed, "STALE": _stale_end, "SLOW": _complete, "FAILED": _failed,
                  "SUSP": SUSPENDED, "SETD": _DATA.__set__, "LIVE": LIVE, "MAKE": Tensor._make, "SNAP": _snap})
    out = rec.steps[pos][3]
    k = 1 if out[0] == "t" else len(out[1])
    objs = [i for i, m in enumerate(_places(rec.steps[:pos])) if m is not None]     # (tensors, not None results)
    changed = " or ".join([f"run.ext[{s}]._vc is not run.seen[{s}][0] or run.seen[{s}][0][0] != run.seen[{s}][1] "
                           f"or run.ext[{s}]._data is not run.seen[{s}][2]" for s in range(n_ext)]
                          + ["run.consts", "run.watched"])
    lines = ["    with LOCK:",
             f"        if {changed}:",
             "            t = CHANGED(run)",
             "            if t is not None:",
             "                STALE(run, t)",
             "        o = run.objs"]
    lines += [f"        a{i} = o[{i}]()" for i in objs]
    mask = " | ".join([f"(0 if a{i} is None else {1 << i})" for i in objs] or ["0"])
    alive = ", ".join(f"a{i}" for i in objs)
    lines += [f"        mask = {mask}",
              "        rec = run.record",
              "        lazy = False",
              "        if mask and rec.lazy:",
              "            # (the values of the results alive computed when first read, from copies of the",
              "            # inputs; unless the last call's results are kept unread: then the program's)",
              "            pr = rec.lazy_run() if rec.lazy_run is not None else None",
              "            if pr is not None and pr.unread:",
              "                rec.lazy = False",
              "            else:",
              "                lazy = True",
              "        e = rec.programs.get(0 if lazy else mask)",
              "        if e is None or e[4] is None or e[3] is not run.steps or e[2] is not run.call[0] \\",
              "                or e[1].evicted:",
              "            if lazy:",
              "                return SLOW(run, 0, [], True)",
              f"            return SLOW(run, mask, [a for a in ({alive}{',' if len(objs) == 1 else ''}) "
              f"if a is not None])",
              "        SUSP[0] += 1",
              "        try:",
              "            res = e[4](run.ext)",
              "        except Exception:",
              "            return FAILED(run, mask)",
              "        finally:",
              "            SUSP[0] -= 1",
              "        if lazy:",
              "            SNAP(run)",
              "        else:",
              f"            j = {k}"]
    for i in objs:
        lines += [f"            if a{i} is not None:", f"                SETD(a{i}, res[j])", "                j += 1"]
    lines += ["        run.done = run.closed = True",
              "        run.watched = ()",
              "        LIVE[0] -= 1",
              "        if run.record.open is run:",
              "            run.record.open = None",
              "        dt = e[1].out_meta"]
    finals = [f"MAKE(res[{j}], dt[{j}][1])" for j in range(k)]
    lines.append(f"        return {finals[0]}" if out[0] == "t" else f"        return ({', '.join(finals)},)")
    return lines


def _places(steps):
    """The metadata of the results `steps` make, by their places in run.objs (None for a None
    result)."""
    return [m for step in steps for m in ([step[3][1]] if step[3][0] == "t" else step[3][1])]


def _add(run, t, data):
    """A speculated run's input taken (its check passed: _advancer) -> True; False where numpy
    code holds its memory and it is too large to watch (_watch)."""
    if not _watch(run, t, data):
        return False
    run.ext_ids[id(t)] = len(run.ext)
    run.ext.append(t)
    run.seen.append((t._vc, t._vc[0], data, t._req, (t._grad_fn, t._output_nr)))
    return True


def _watch(run, t, data):
    """A speculated run takes a tensor whose memory numpy code may hold (t.numpy(), from_numpy):
    a write there is seen by no version counter, and the whole chain would read it at the last
    step where eager read the tensor at its call or step. A copy of its values as taken is kept
    (up to LAZY_BYTES in all; more -> False), and _changed compares them."""
    r = data if data.base is None else memory_root(data)
    held = _ESCAPED_REFS.get(id(r))          # (tensor.escaped(data), without its calls)
    if held is None or held() is not r:
        return True
    if sum([c.nbytes for _, _, c in run.watched]) + data.nbytes > LAZY_BYTES:
        return False
    run.watched = list(run.watched) + [(t, data, data.copy(order="K"))]
    return True


def _node_hooks(t):
    """The hooks of a non-leaf tensor (register_hook keeps them on its grad_fn, by output_nr), or None."""
    fn = t._grad_fn
    if fn is None:
        return None
    th = fn.__dict__.get("_tensor_hooks")
    return th.get(t._output_nr) if th else None


def _changed(run):
    """An input of the chain changed in place (or given other memory) since it was taken, or None."""
    for t, (vc, v, data, _, _) in zip(run.ext, run.seen):
        if t._vc is not vc or vc[0] != v or t._data is not data:
            return t
    for t, vc, v, data, _ in run.consts:    # (a module's parameters, a global tensor the program reads)
        if t._vc is not vc or vc[0] != v or t._data is not data:
            return t
    for t, data, copy in run.watched:       # (written by numpy code: _watch)
        if data.tobytes() != copy.tobytes():
            return t
    return None


def _adopt(run, out):
    """Mark a recorded step's results as the chain's (-> their description), or None where they
    cannot be (a view, an input, another chain's tensor, a structure other than a tensor or tuple)."""
    if out.__class__ is Tensor:
        if not _adoptable(run, out):
            return None
        return ("t", _enlist(run, out))
    if out.__class__ is tuple:
        for i, o in enumerate(out):
            if o is not None and (o.__class__ is not Tensor or not _adoptable(run, o)
                                  or any(o is q for q in out[:i])):     # (the same tensor twice)
                return None
        metas = []
        for o in out:
            if o is None:
                run.objs.append(None)
                metas.append(None)
            else:
                metas.append(_enlist(run, o))
        return ("s", tuple(metas))
    return None


def _adoptable(run, t):
    return (t._data.__class__ is np.ndarray and t._view is None and not t.__dict__ and id(t) not in run.ext_ids
            and not t._inference)


def _enlist(run, t):
    fn = t._grad_fn
    m = _meta(t) + (None if fn is None else type(fn).__name__,)      # (and its grad_fn's name: _stale)
    d = t.__dict__
    d["_cr"] = run
    d["_ci"] = len(run.objs)
    d["_pm"] = m
    run.objs.append(weakref.ref(t))
    t.__class__ = _Pending
    return m


def _unmark(t):
    d = t.__dict__
    for k in _MARKS:
        d.pop(k, None)
    t.__class__ = Tensor


def _plain_mode(run):
    """The modes a chain's steps run in (and were recorded in): grad on, no inference mode,
    anomaly detection or profiler, the default dtype as at the chain's call."""
    return STATE.grad_enabled and not STATE.inference and not _ANOMALY[0] and _PROFILE[0] is None \
        and _DEFAULT_DTYPE[0] is run.default and not HOOK_COUNTS[0][0] and not HOOK_COUNTS[1][0]


# -- the compiled call --------------------------------------------------------------------------

def on_call(fn, p, rec, args, kwargs, leaves, distinct):
    """A call of compiled program p (CompiledFunction.__call__, its guards passed): its run, or
    NOT_STEP where the call is to run as any call."""
    if rec.thread != _get_ident():
        return NOT_STEP             # (a record follows the calls of one thread: no lock on its path)
    prev = rec.open
    if prev is not None:
        rec.open = None
        if not prev.closed:
            with _LOCK:
                _settle(prev)
    if rec.state is OFF or kwargs:
        return NOT_STEP
    if rec.state is READY:
        # (the program is the one the chain was recorded after: what it is was checked then)
        run = Run(rec, True)
        if rec.fn is None or rec.fn() is not fn:
            rec.fn = weakref.ref(fn)
        run.call = (p, leaves, distinct)
        out = rec.advance[0]("call", "", args, run)
        if out is MISS:
            _missed(rec)
            return NOT_STEP
        if p.consts or run.held:
            run.consts = [(t, t._vc, t._vc[0], t._data, t._req) for t in list(p.consts) + list(run.held)]
            for c in run.consts:
                if not _watch(run, c[0], c[3]):
                    _realize(run)            # (too large to watch: the call runs as written)
                    return NOT_STEP
        LIVE[0] += 1
        rec.open = run
        return out
    if not p.__dict__.get("plain") or p.sym_sources or not p.needs_grad:
        rec.state = OFF              # (what the program is does not change)
        return NOT_STEP
    run = Run(rec, False)
    if not _plain_mode(run):
        return NOT_STEP
    if rec.fn is None or rec.fn() is not fn:
        rec.fn = weakref.ref(fn)
    run.call = (p, leaves, distinct)
    try:
        spec = _enc(args, run)
    except _Refused:
        _give_up(rec)
        return NOT_STEP
    out = RUN_PROGRAM[0](p, leaves, distinct)
    o = _adopt(run, out)
    if o is None:
        _unmark_all(run)
        _give_up(rec)
        return out
    run.steps.append(("call", "", spec, o))
    LIVE[0] += 1
    rec.open = run
    return out


_READY = weakref.WeakSet()      # the records that speculate (or did): their open runs (_memory_out)


def _memory_out(a):
    """Memory that user code gets past autograd's version counters (`.data`, read or replaced;
    an array handed to numpy), while chains are open: a speculated chain whose inputs (or the
    tensors its program reads) have it runs its steps so far as written first. Its whole
    program would read the inputs when its last step runs, after a write no counter sees,
    where eager's call read them at the call (Tensor.data's and escape's hook)."""
    if a.__class__ is not np.ndarray or SUSPENDED[0] or _IN_STEP[0]:
        return
    root = memory_root(a)
    for rec in list(_READY):
        run = rec.open
        if run is not None and run.spec and not run.closed and (
                any(memory_root(t._data) is root for t in run.ext)
                or any(memory_root(c[3]) is root for c in run.consts)):
            with _LOCK:
                _settle(run)


Above.chain_memory = _memory_out


def _give_up(rec):
    rec.changes += 1
    if rec.changes > MAX_CHANGES:
        rec.state = OFF


def _missed(rec):
    """A speculated chain that the calls did not follow: recorded again (or given up)."""
    rec.state = RECORD
    rec.same = 0
    _give_up(rec)


def _settle(run):
    """The run of a call that another call of its program follows: a recording ends; a
    speculation not finished is made real now, while its inputs are as it took them."""
    if run.closed:
        return
    if run.spec:
        try:
            _realize(run)
        except Exception as e:       # raised again where one of its tensors is used
            run.error = e
    else:
        _end(run)


# -- steps ---------------------------------------------------------------------------------------

def _step(run, kind, name, args, fn):
    """A step on a recording's tensors, recorded and run -> its results, or NOT_STEP where it is
    no step of the chain (which ends it). (A speculated run's step is its record's `advance` code:
    grad_step and the step methods call it, and _miss where it answers MISS.)"""
    if run.closed:
        return NOT_STEP
    with _LOCK:
        return _record_step(run, kind, name, args, fn)


def _miss(run):
    """A speculated step that is not the chain's next: the steps before are made real -> NOT_STEP."""
    with _LOCK:
        _missed(run.record)
        _realize(run)
    return NOT_STEP


def _record_step(run, kind, name, args, fn):
    try:
        if not _plain_mode(run):
            raise _Refused
        spec = _enc(args, run)
    except _Refused:
        _end(run)
        return NOT_STEP
    _IN_STEP[0] += 1
    SUSPENDED[0] += 1            # (compiled calls and steps inside it are its own)
    try:
        out = fn(*args)
    except BaseException:
        _end(run)
        raise
    finally:
        _IN_STEP[0] -= 1
        SUSPENDED[0] -= 1
    o = _adopt(run, out)
    if o is None:
        _end(run)
    else:
        run.steps.append((kind, name, spec, o))
    return out


def _end(run):
    """A recording's end: its tensors are plain again, and the record learns whether the chain
    repeated."""
    if run.closed:
        return
    run.closed = True
    LIVE[0] -= 1
    _unmark_all(run)
    rec = run.record
    if rec.open is run:
        rec.open = None
    steps = run.steps
    metas = [_ext_meta(t) for t in run.ext]
    if not any(step[0] == "grad" for step in steps):
        _give_up(rec)                # no derivative taken: nothing to share with the call's program
    elif not _independent(run):
        _give_up(rec)
    elif steps == rec.steps and metas == rec.ext_meta and run.default is rec.default \
            and len(run.held) == len(rec.held) and all(a is b for a, b in zip(run.held, rec.held)):
        rec.same += 1
        if rec.same + 1 >= SAME_TO_SPECULATE and rec.state is RECORD:
            # (a program that reads tensors besides its arguments, or steps that take its
            # parameters, read what the inputs' copies would not hold)
            rec.lazy = not rec.held and not run.call[0].consts and not run.call[0].read_ids \
                and sum(t._data.nbytes for t in run.ext) <= LAZY_BYTES
            bound, rec.advance = 0, []
            for pos in range(len(steps)):
                f, bound = _advancer(rec, pos, bound, run.call[0].read_ids)
                rec.advance.append(f)
            rec.state = READY
            _READY.add(rec)
    else:
        if rec.steps is not None:
            _give_up(rec)
        rec.steps = steps
        rec.ext_meta = metas
        rec.default = run.default
        rec.held = run.held
        rec.same = 0
        rec.programs = {}            # (the whole programs of the chain recorded before)


def _unmark_all(run):
    for w in run.objs:
        t = w() if w is not None else None
        if t is not None and t.__class__ is _Pending:
            _unmark(t)


def grad_step(api, outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused,
              is_grads_batched, materialize_grads):
    """autograd.grad of a chain's tensors: a step, or NOT_STEP."""
    if SUSPENDED[0]:
        return NOT_STEP
    run = outputs.__dict__.get("_cr") if outputs.__class__ is _Pending else _run_of(outputs)
    if run is None or run.closed:
        return NOT_STEP
    if only_inputs is not True or is_grads_batched or inputs.__class__ is dict:
        _refuse(run)
        return NOT_STEP
    args = (outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads)
    if run.spec:
        out = run.record.advance[run.pos]("grad", "", args, run)
        return out if out is not MISS else _miss(run)
    return _step(run, "grad", "", args, lambda *a: _grad(api, *a))


def _grad(api, outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    return api(outputs, inputs, grad_outputs, retain_graph, create_graph, True, allow_unused, False, materialize_grads)


def _run_of(outputs):
    if outputs.__class__ is _Pending:
        return outputs.__dict__.get("_cr")
    if outputs.__class__ is list or outputs.__class__ is tuple:
        for o in outputs:
            if o.__class__ is _Pending:
                return o.__dict__.get("_cr")
    return None


def _refuse(run):
    with _LOCK:
        if run.closed:
            return
        if run.spec:
            _missed(run.record)
            _realize(run)
        else:
            _end(run)


# -- the end of a speculated chain ------------------------------------------------------------

def _alive(run):
    """The mask of the run's results still alive (bit i: result i), and those results."""
    mask, alive = 0, []
    for i, w in enumerate(run.objs):
        o = w() if w is not None else None
        if o is not None:
            mask |= 1 << i
            alive.append(o)
    return mask, alive


def _complete(run, mask, alive, lazy=False):
    """The chain's last step (its check passed, with the inputs' flags and hooks; its inputs
    unchanged): the whole chain as one program, which computes the values of the results in
    `alive` (of `mask`) too. The last step's code (_advancer) runs a program built here
    itself when it can. `lazy`: the results alive take their values when first read (_snap)."""
    rec = run.record
    entry = rec.programs.get(mask)
    if entry is not None and entry[3] is not run.steps:
        entry = None                 # (built for another chain: never run for this one)
    if entry is None:
        if len(rec.programs) >= MAX_PROGRAMS or rec.fn is None or rec.fn() is None:
            return _fall_back(run)
        live = tuple([i for i in range(len(run.objs)) if mask >> i & 1])
        entry = rec.programs[mask] = [_whole_chain(rec.fn(), run.steps, len(run.ext), rec.held, live), None, None,
                                      run.steps, None]
    whole, wp, p, _, _ = entry
    out = run.steps[-1][3]
    k = 1 if out[0] == "t" else len(out[1])
    SUSPENDED[0] += 1
    try:
        if wp is not None and p is run.call[0] and not wp.evicted:
            # The program the whole chain's guards chose before, run without them: they check
            # what this call's guards (its program is the one it was traced with) and each step's
            # check (constants, inputs' metadata and layout) have checked already.
            res = RUN_PROGRAM[0](wp, run.ext, None)
        else:
            res = whole(*run.ext)
            wp = whole.last_program
            if wp is not None and wp.__dict__.get("plain") is not None and not wp.sym_sources:
                entry[1], entry[2] = wp, run.call[0]
                entry[4] = ARRAY_RUNNER[0](wp)      # (None where it needs run_program)
    except Exception:
        return _failed(run, mask)
    finally:
        SUSPENDED[0] -= 1
    if lazy:
        _snap(run)
    return _finish(run, alive, out, res[:k], [v._data for v in res[k:]])


def _snap(run):
    """The last step of a run whose results alive take their values when first read: copies of
    the inputs as the program read them (the inputs may change in place since, through .data
    too, as autograd does not see)."""
    run.copies = [t._data.copy(order="K") for t in run.ext]       # (in their layouts)
    run.unread = True
    run.record.lazy_run = weakref.ref(run)


def _fill(run):
    """The values of a finished run's results alive, where its last step left them for later:
    its steps before the last run as they first ran, on the copies of its inputs. Its record
    then computes them in the whole program (they are read)."""
    with _LOCK:
        if not run.unread:
            return
        run.record.lazy = False
        alive = [(i, w()) for i, w in enumerate(run.objs) if w is not None and w() is not None]
        n = len(_places(run.steps[:-1]))       # (the last step's result has its value: _finish)
        alive = [(i, o) for i, o in alive if o.__class__ is _Pending and i < n]
        try:
            if alive:
                stand = [Tensor._make(a, t._dtype, seen[3]) for t, seen, a in zip(run.ext, run.seen, run.copies)]
                real = _replay(run, stand, len(run.steps) - 1)
                for i, o in alive:
                    _DATA.__set__(o, real[i]._data)
        except Exception as e:
            run.error = e
            raise
        finally:
            run.unread = False


def _failed(run, mask):
    """The whole chain refused to compile (or its program raised): its steps run as written,
    from now on."""
    run.record.programs.pop(mask, None)
    return _fall_back(run)


def _stale_end(run, t):
    """The last step, where input t of the chain changed in place since the call took it."""
    run.closed = True
    LIVE[0] -= 1
    run.error = _stale_error(run.record, t)
    raise run.error


def _finish(run, alive, out, final, values):
    """_complete's end: the results alive take their values (arrays); the last step's results
    (tensors) return in its structure. Those that require grad get their graphs as the
    results alive do, when first needed: the whole program's grad_fn would reach the chain's
    inputs alone, not the results they are made of (a hook or retain_grad on them, a
    derivative with respect to one, the grad_fn's name: eager's)."""
    for o, v in zip(alive, values):
        _DATA.__set__(o, v)
    metas = [out[1]] if out[0] == "t" else out[1]
    if any(f is not None and f._req for f in final):
        for f, m in zip(final, metas):
            if f is not None and f._req and f.__class__ is Tensor and f._view is None and not f.__dict__:
                d = f.__dict__
                d["_cr"], d["_ci"], d["_pm"] = run, len(run.objs), m
                run.objs.append(weakref.ref(f))
                f.__class__ = _Pending
            else:
                run.objs.append(None)
    _done(run)
    return final[0] if out[0] == "t" else tuple(final)


def _done(run):
    run.done = True
    run.closed = True
    run.watched = ()        # (a write after the last step is not seen, as a write through .data)
    LIVE[0] -= 1
    if run.record.open is run:
        run.record.open = None


def _fall_back(run, off=True):
    """The last step as written: the chain made real up to it, then the step runs as any call
    (NOT_STEP to the caller, which runs it); with `off`, this chain is not speculated again."""
    rec = run.record
    if off:
        rec.state = OFF
    run.pos -= 1
    _realize(run)
    return NOT_STEP


def _stale_error(rec, t):
    return RuntimeError(
        f"one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{t.type()} {list(t.shape)}] changed after the call of compiled {rec.name} that took it "
        f"and before the last of the calls that followed it. tracegrad.compile runs that call and the "
        f"autograd.grad calls and tensor ops that repeat after it as one program, which reads its inputs when "
        f"it runs: change the tensor after the last call, or clone it first.")


# -- a chain made real ------------------------------------------------------------------------

def _realize(run):
    """Run the chain's steps taken so far as eager runs them; every pending tensor of the run
    becomes the result it stands for (after the last step: keeping the value it has)."""
    with _LOCK:
        if run.error is not None:
            raise run.error
        if run.closed and not run.done:
            return
        if run.unread:
            _fill(run)
        if not run.closed:
            run.closed = True
            LIVE[0] -= 1
            if run.record.open is run:
                run.record.open = None
        alive = [(i, w()) for i, w in enumerate(run.objs) if w is not None and w() is not None]
        alive = [(i, o) for i, o in alive if o.__class__ is _Pending]
        if not alive:
            return
        if run.done and alive[-1][0] >= len(_places(run.steps[:-1])):
            # (the last step's result, its graph needed (_finish): eager's steps run again after
            # the whole program, each call; this chain is recorded again, and given up)
            _missed(run.record)
        t = _changed(run)
        rewind = None
        if t is not None:
            if not run.done:
                run.error = _stale_error(run.record, t)
                raise run.error
            rewind = _rewinder(run)
            if rewind is None:
                for _, o in alive:
                    _stale(run, o, t)
                return
        try:
            real = _replay(run, rewind=rewind)
        except Exception as e:
            run.error = e
            raise
        finally:
            run.copies = None
        for i, o in alive:
            _transplant(o, real[i], run.done)


def _rewinder(run):
    """Where a finished run's inputs were written in place since (autograd saw it: the same
    memory, the version counted up) and the copies of them as the call took them are kept
    (_snap): the inputs, their copies and versions as taken, for _replay, which gives each
    its values and version as taken while the steps run. So the graphs are eager's: a saved
    input is at its version as taken, and raises torch's error when a backward reads it; the
    results made from it keep the values they had. Else None (the graphs cannot be rebuilt)."""
    if run.copies is None or run.consts:
        return None
    for t, (vc, _, data, _, _) in zip(run.ext, run.seen):
        if t._vc is not vc or t._data is not data:
            return None
    return [(t, a, seen[1]) for t, a, seen in zip(run.ext, run.copies, run.seen) if t._vc[0] != seen[1]]


def _replay(run, stand=None, upto=None, rewind=None):
    """The steps taken so far (or the first `upto`), run as they first ran: grad mode on, the
    inputs' requires_grad as the chain took them, and without the hooks registered since on
    the chain's inputs or the saved-tensor hooks entered since (a grad step checks for new
    hooks and flags, so none was there when the steps before it ran). `stand`: tensors that
    stand for the inputs (their values as the chain took them). `rewind`: (input, its array
    and version as taken) for inputs written in place since (_rewinder). Each input has its
    place in a graph as taken (a write under grad mode or detach_() since moved it)."""
    real = []
    ext, leaves = run.ext, run.call[1]
    if stand is not None:
        ext = stand
        by_id = {id(t): s for t, s in zip(run.ext, stand)}
        leaves = [by_id.get(id(t), t) for t in leaves]
    prev_grad, prev_inf = STATE.grad_enabled, STATE.inference
    STATE.grad_enabled, STATE.inference = True, False
    hidden = [(t, t._hooks, t._post_acc_hooks) for t in list(run.ext) + list(run.held)
              if t._hooks or t._post_acc_hooks]
    for t, _, _ in hidden:
        t._hooks = t._post_acc_hooks = None
    # (a non-leaf input's hooks and retain_grad are its grad_fn's, by output_nr, as taken: none then)
    hidden_nodes = [(fn.__dict__[k], nr, fn.__dict__[k].pop(nr)) for fn, nr in [seen[4] for seen in run.seen]
                    if fn is not None for k in ("_tensor_hooks", "_retained") if nr in fn.__dict__.get(k, ())]
    flipped = [(t, t._req) for t, seen in zip(run.ext, run.seen) if t._req is not seen[3]]
    flipped += [(t, t._req) for t, _, _, _, req in run.consts if t._req is not req]
    for t, seen in zip(run.ext, run.seen):
        t._req = seen[3]                # (requires_grad_ since: the steps ran before it)
    for t, _, _, _, req in run.consts:
        t._req = req                    # (a module's parameters frozen since, as well)
    saved_hooks = HIDDEN_HOOKS[0]()
    saved_hooks.__enter__()
    SUSPENDED[0] += 1
    now = [(t, t._data, t._vc[0]) for t, _, _ in rewind or ()]
    for t, a, v in rewind or ():
        _DATA.__set__(t, a)
        t._vc[0] = v
    moved = [(t, (t._grad_fn, t._output_nr)) for t, seen in zip(run.ext, run.seen)
             if t._grad_fn is not seen[4][0] or t._output_nr != seen[4][1]]
    for t, seen in zip(run.ext, run.seen):
        t._grad_fn, t._output_nr = seen[4]
    try:
        for kind, name, spec, out in run.steps[:run.pos if upto is None else upto]:
            if kind == "call":
                res = RUN_PROGRAM[0](run.call[0], leaves, run.call[2])
            else:
                args = _dec(spec, real, ext, run.held)
                if kind == "grad":
                    res = _grad(REAL_GRAD[0], *args)
                else:
                    res = getattr(Tensor, name)(*args)
            if out[0] == "t":
                real.append(res)
            else:
                real.extend(res)
    finally:
        for t, a, v in now:
            _DATA.__set__(t, a)
            t._vc[0] = v
        for t, (fn, nr) in moved:
            t._grad_fn, t._output_nr = fn, nr
        SUSPENDED[0] -= 1
        saved_hooks.__exit__(None, None, None)
        for t, hooks, post in hidden:
            t._hooks, t._post_acc_hooks = hooks, post
        for th, nr, hooks in hidden_nodes:
            th[nr] = hooks
        for t, req in flipped:
            t._req = req
        STATE.grad_enabled, STATE.inference = prev_grad, prev_inf
    return real


def _dec(spec, real, ext, held):
    kind = spec[0]
    if kind == "p":
        return real[spec[1]]
    if kind == "x":
        return ext[spec[1]]
    if kind == "o":
        return held[spec[1]]
    if kind == "c":
        return spec[2]
    if kind == "f":
        return float.fromhex(spec[1])
    return kind([_dec(s, real, ext, held) for s in spec[1]])


def _transplant(o, r, keep_data):
    data = _DATA.__get__(o) if keep_data else None
    for name in _SLOT_NAMES:
        d = _DESC[name]
        d.__set__(o, d.__get__(r))
    if keep_data:
        _DATA.__set__(o, data)
    _unmark(o)
    if r.__dict__:
        o.__dict__.update(r.__dict__)


def _stale(run, o, t):
    """A finished chain's result whose graph cannot be rebuilt (input t changed in place since):
    its value stays; a backward that reaches it raises."""
    tmpl = Tensor._make(None, o._dtype, o._req)
    for name in _SLOT_NAMES:
        d = _DESC[name]
        try:
            d.__get__(o)
        except AttributeError:              # (a speculated tensor's slots are set when it settles)
            d.__set__(o, d.__get__(tmpl))
    m = o.__dict__.get("_pm")
    _unmark(o)
    if o._req:
        # (a grad_fn of the name eager's has: SumBackward0 for a step's sum)
        STALE_GRAD_FN[0](run.call[0], o, run.ext, _stale_error(run.record, t).args[0], m[4] if m else None)


# -- the whole chain as one function --------------------------------------------------------------

def _whole_chain(fn, steps, n_ext, held, live):
    """The chain's steps written out as a Python function of its inputs, compiled whole:
    it returns the last step's results and the values of the results in `live`."""
    table = {"call": fn, "grad": _whole_grad, "held": held}
    lines = [f"def chain({', '.join(f'x{i}' for i in range(n_ext))}):"]
    k = 0
    for j, (kind, name, spec, out) in enumerate(steps):
        if kind == "call":
            expr = f"call({', '.join(_src(s, table) for s in spec[1])})"
        elif kind == "grad":
            expr = f"grad({', '.join(_src(s, table) for s in spec[1])})"
        else:
            table[f"m{j}"] = getattr(Tensor, name)
            expr = f"m{j}({', '.join(_src(s, table) for s in spec[1])})"
        if j == len(steps) - 1:
            lines.append(f"    last = {expr}")
            break
        if out[0] == "t":
            lines.append(f"    r{k} = {expr}")
            k += 1
        else:
            names = []
            for m in out[1]:
                names.append(f"r{k}" if m is not None else "_")
                k += 1
            lines.append(f"    {', '.join(names)}, = {expr}")
    values = "".join(f", r{i}.detach()" for i in live)
    lines.append(f"    return ({'*last' if steps[-1][3][0] == 's' else 'last'}{values},)")
    src = "\n".join(lines) + "\n"
    code = compile(src, f"<tracegrad:chain after {getattr(fn, '__name__', 'a compiled function')}>", "exec")
    exec(code, table)
    whole = COMPILER[0](table["chain"], fullgraph=True, dynamic=False, name=f"{fn.__name__}_chain")
    whole.chain_source = src
    whole._chains = False
    return whole


def _whole_grad(*args):
    return _grad(REAL_GRAD[0], *args)


def _src(spec, table):
    """A step's argument as source: a result, an input, or a constant by its name in the table
    (never its text)."""
    kind = spec[0]
    if kind == "p":
        return f"r{spec[1]}"
    if kind == "x":
        return f"x{spec[1]}"
    if kind == "o":
        name = f"k{len(table)}"
        table[name] = table["held"][spec[1]]
        return name
    if kind == "c" or kind == "f":
        name = f"k{len(table)}"
        table[name] = spec[2] if kind == "c" else float.fromhex(spec[1])
        return name
    items = [_src(s, table) for s in spec[1]]
    if kind is list:
        return f"[{', '.join(items)}]"
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


# -- the chain's tensors ---------------------------------------------------------------------------

def _touch(t, name):
    """A read or write of one of t's slots from outside a step: ends a recording; makes a
    speculated chain real (its values only, after its last step, are there already)."""
    run = t.__dict__.get("_cr")
    if run is None:
        return
    if not run.spec:
        if not _IN_STEP[0]:
            with _LOCK:
                _end(run)
        return
    if run.error is not None:
        raise run.error
    if run.done:
        last = t.__dict__.get("_ci") >= len(_places(run.steps[:-1]))
        if name == "_data" or (last and name in _VALUE_SLOTS):
            if run.unread and not last:
                _fill(run)
            return              # (the last step's results have their values and memory: _finish)
        if run.unread:
            _fill(run)
    _realize(run)


_VALUE_SLOTS = ("_vc", "_inference", "_view", "_base", "_is_param")     # (no part of a graph: detach(), numpy())


def _slot(name):
    d = _DESC[name]

    def get(self):
        _touch(self, name)
        return d.__get__(self)

    def put(self, value):
        _touch(self, name)
        d.__set__(self, value)

    return property(get, put)


def _step_method(name):
    def step(self, *args, **kwargs):
        run = self.__dict__.get("_cr")
        if run is not None and not run.closed and not kwargs and not SUSPENDED[0]:
            if run.spec:
                r = run.record.advance[run.pos]("method", name, (self,) + args, run)
                if r is not MISS:
                    return r
                _miss(run)
            else:
                r = _step(run, "method", name, (self,) + args, getattr(Tensor, name))
                if r is not NOT_STEP:
                    return r
        return getattr(Tensor, name)(self, *args, **kwargs)
    step.__name__ = step.__qualname__ = name
    return step


def _meta_of(self):
    m = self.__dict__.get("_pm")
    return m if m is not None else _meta(self)


class _Pending(Tensor):
    """A tensor of a chain (see the module's docstring): one a recorded step made, or one a
    speculated step stands for. Its metadata is known; anything else first settles the chain."""
    __slots__ = ()

    @property
    def shape(self):
        return tuple.__new__(Size, _meta_of(self)[0])

    def size(self, dim=None):
        if dim is None or "_pm" not in self.__dict__:
            return self.shape if dim is None else Tensor.size(self, dim)
        return _meta_of(self)[0][self._dim_index(dim)]

    def _dim_index(self, dim):
        shape = _meta_of(self)[0]
        if not shape:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return normalize_dim(dim, len(shape))

    def dim(self):
        return len(_meta_of(self)[0])

    ndimension = dim

    @property
    def ndim(self):
        return len(_meta_of(self)[0])

    def numel(self):
        n = 1
        for s in _meta_of(self)[0]:
            n *= s
        return n

    nelement = numel

    @property
    def requires_grad(self):
        if "_pm" in self.__dict__:
            return self._req
        return Tensor.requires_grad.fget(self)

    @requires_grad.setter
    def requires_grad(self, value):
        Tensor.requires_grad.fset(self, value)

    requires_grad = requires_grad.deleter(Tensor.requires_grad.fdel)      # (refused, as a tensor's)

    @property
    def device(self):
        return CPU if "_pm" in self.__dict__ else Tensor.device.fget(self)

    @property
    def is_cuda(self):
        return False if "_pm" in self.__dict__ else Tensor.is_cuda.fget(self)


for _name in _SLOT_NAMES:
    if _name not in ("_dtype", "_req"):
        setattr(_Pending, _name, _slot(_name))
# (Tensor._grad_fn is the slot's own descriptor, past the property above: a read of it, as an
# in-place op's check makes first, settles the chain as the slot's read does)
_Pending._grad_fn = _Pending.__dict__["_grad_fn_slot"].deleter(Tensor._grad_fn.fdel)
for _name in STEP_METHODS:
    setattr(_Pending, _name, _step_method(_name))
_Pending.__name__ = _Pending.__qualname__ = "Tensor"
del _name
