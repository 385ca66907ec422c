"""The eager autograd engine.

`run_backward` walks the recorded grad_fn nodes from the roots (iteratively), computes
a structural key, and looks up the backward program for that structure; on a miss it
builds the forward IR from the nodes, derives the backward IR (autodiff.derive) and
generates its numpy code. Then it binds the seeds and saved tensors, runs the program,
and delivers gradients. A training loop that records the same graph every step pays
for derivation and code generation once.

With create_graph=True the backward IR instead runs op by op through the eager ops with
grad mode on (one generated function per cached backward, interpret.plan_eager), so its
results have their own grad_fn (any order).
"""
import collections
import itertools
import operator
import sys
import threading
import time
import warnings

import numpy as np

from .. import _dtype as D
from .._autocast_state import shielded
from ..grad_mode import STATE, enable_grad, set_grad_enabled
from ..ir.graph import Graph, V
from ..ir.layout import order_attr, tensor_order
from ..tensor import Tensor
from .graph import AccumulateGrad, HOOK_USED, hooked_saved, FREED_MSG, Engine, Node, op_name
from .._collect import paused
from .. import cuda as _cuda
from ..ops.primitives import PRIMITIVES, HANDED
from ..autodiff import derive
from ..codegen.numpy_cpu import compile_graph, interpret_graph
from .. import tracing as tracer
from . import profiler
from ..interpret import plan_eager

_CACHE = collections.OrderedDict()
_CACHE_LIMIT = 512
# backwards kept per family (one structure of ops, any shapes): a loop over ever new shapes
# (eager calls past a compiled function's recompile limit) keeps this many, not one per shape
_FAMILY_LIMIT = 8
_FAMILIES = {}
_CACHE_MAX_NODES = 20000          # bigger graphs are derived afresh, not kept
_CODEGEN_MAX_NODES = 5000
_LOCK = threading.RLock()
STATS = collections.Counter()


class Program:
    __slots__ = ("fwd", "bwd", "fn", "binds", "node_count", "triton", "transfers", "owners", "undefined",
                 "family", "kin", "eager", "ran", "hook_keys", "unread", "sinks", "shared")


def _owners(order):
    """The compiled programs (compile.Program) whose calls are among the recorded nodes:
    a cached backward of this structure refers to each of them (in its key, its graphs'
    parameters and its generated code)."""
    found = {}
    for node in order:
        params = node._params
        if params:
            for v in params.values():
                if getattr(v, "backward_keys", None) is not None:
                    found[id(v)] = v
    return tuple(found.values())


def forget(program):
    """Drop every cached backward that refers to `program` (evicted from its compiled
    function's cache: nothing may keep it alive)."""
    with _LOCK:
        for key in list(program.backward_keys):
            _drop(key)
        program.backward_keys.clear()


def torch_run_order(roots):
    """The order in which torch's engine runs the nodes reachable from `roots` (grad_fn nodes):
    a node is ready once every edge into it from a node that ran has delivered, and the ready
    node of the highest sequence number runs next, an AccumulateGrad before any other (torch
    numbers it UINT64_MAX), one of several ready AccumulateGrads as its std::priority_queue
    yields them; several roots hang under one GraphRoot, numbered after every node. The
    generated backward runs as one program; accumulating into .grad and the post-accumulate
    hooks follow this order (torch's Linear: bias, then weight, last layer first)."""
    roots = [r for r in roots if r is not None]
    deps = {}
    seen = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for nxt, _ in n._edges:
            if nxt is not None:
                deps[id(nxt)] = deps.get(id(nxt), 0) + 1
                stack.append(nxt)
    top = float("inf")
    key = lambda n: top if isinstance(n, AccumulateGrad) else getattr(n, "_seq", -1)   # noqa: E731
    heap = []

    def push(n):                         # libstdc++'s push_heap, comparing by `key`
        heap.append(n)
        hole, v = len(heap) - 1, key(n)
        while hole > 0 and key(heap[(hole - 1) // 2]) < v:
            heap[hole] = heap[(hole - 1) // 2]
            hole = (hole - 1) // 2
        heap[hole] = n

    def pop():                           # libstdc++'s pop_heap (its __adjust_heap), then pop_back
        first = heap[0]
        last = heap.pop()
        n = len(heap)
        if n:
            hole = child = 0
            while child < (n - 1) // 2:
                child = 2 * (child + 1)
                if key(heap[child]) < key(heap[child - 1]):
                    child -= 1
                heap[hole] = heap[child]
                hole = child
            if n % 2 == 0 and child == (n - 2) // 2:
                child = 2 * (child + 1)
                heap[hole] = heap[child - 1]
                hole = child - 1
            v = key(last)
            while hole > 0 and key(heap[(hole - 1) // 2]) < v:
                heap[hole] = heap[(hole - 1) // 2]
                hole = (hole - 1) // 2
            heap[hole] = last
        return first

    ran = []
    if len(roots) == 1:
        push(roots[0])
    else:
        for r in roots:                  # GraphRoot's edges
            deps[id(r)] = deps.get(id(r), 0) + 1
        for r in roots:                  # GraphRoot runs first and delivers to each root
            deps[id(r)] -= 1
            if not deps[id(r)]:
                push(r)
    while heap:
        n = pop()
        ran.append(n)
        for nxt, _ in n._edges:
            if nxt is not None:
                deps[id(nxt)] -= 1
                if not deps[id(nxt)]:
                    push(nxt)
    return ran


def walk(roots):
    """Nodes reachable from `roots`, producers first (iterative post-order DFS): (order, index)."""
    return walk_keyed(roots)[:2]


def walk_keyed(roots):
    """The nodes reachable from `roots` in creation order (producers first), the graph's
    structure as a cache key (ops, parameters, types, edges, leaves' layouts), the nodes with
    hooks (node_hooks_of) and the tensor hooks, in one pass over the nodes (what a backward of
    a small graph spends most of its bookkeeping on): (order, index, (structure, node_hooks),
    hooks_spec), hooks_spec as autograd's {(node, slot): LiveHooks}; node_hooks holds -1 where
    a custom Function's backward (Python) runs too.

    Creation order, not the walk's post-order: the backward runs the nodes in reverse, and a
    value's gradients from its several users are summed in that order, which is torch's (its
    engine runs nodes by decreasing sequence number); in float16 and bfloat16 another order of
    three or more terms rounds to another number."""
    order = []
    index = {}
    for r in roots:
        if r is None or id(r) in index:
            continue
        index[id(r)] = -1
        stack = [(r, iter(r._edges))]
        while stack:
            node, it = stack[-1]
            for nxt, _ in it:
                if nxt is not None and id(nxt) not in index:
                    index[id(nxt)] = -1
                    nf = nxt._edges
                    if nf:
                        stack.append((nxt, iter(nf)))
                        break
                    order.append(nxt)        # no inputs (a leaf): done at once, where its pop would put it
            else:
                stack.pop()
                order.append(node)
    try:
        got = _keyed(sorted(order, key=_SEQ), index)  # (a post-order is mostly sorted: Timsort's linear case)
    except AttributeError:               # a node made without a number
        got = None
    if got is None:                      # or one made after a node that reads it: the walk's order
        for node in order:
            index[id(node)] = -1
        got = _keyed(order, index)
    return got


def _keyed(order, index):
    """walk_keyed's result for the nodes in `order`, or None where a node comes before one of its
    producers."""
    key = []
    hooks = []
    spec = {}
    hooked = HOOK_USED[0]
    for k, node in enumerate(order):
        index[id(node)] = k
        if node._hooks or node._pre_hooks:
            hooks.append(k)
        d = node.__dict__
        if d:
            th = d.get("_tensor_hooks")
            if th:
                for slot, fns in th.items():
                    if fns:
                        spec[(node, slot)] = LiveHooks(node, slot)
        prim = node._prim
        if prim is None:
            if node.__class__ is AccumulateGrad:     # (_leaf_order and the hooks below, without the calls)
                v = node.variable
                key.append(node._out_meta if v._data.flags.c_contiguous else
                           (node._out_meta, tensor_order(v._data)))
                if v._hooks:
                    spec[(node, 0)] = LiveHooks(v, None)
                continue
            lo = _leaf_order(node)
            key.append(node._out_meta if lo is True else (node._out_meta, lo))
            if node.__class__ is AccumulateGrad or isinstance(node, AccumulateGrad):
                v = node.variable
                if v._hooks:
                    spec[(node, 0)] = LiveHooks(v, None)
            continue
        edges = []
        for n, s in node._edges:
            if n is None:
                edges.append(-1)
                continue
            i = index[id(n)]
            if i < 0:                        # not placed yet: it comes after this node
                return None
            edges.append((i, s))
        key.append((prim.name, tuple(node._params.items()), node._args_meta, tuple(edges), node._out_meta))
        if prim.takes_ctx and prim.name == "function":
            hooks.append(-1)             # a custom Function's backward: Python runs inside the backward
        if node._neg_zero:
            key.append(("-0.0", node._neg_zero))
        if hooked:
            key.append(hooked_saved(node))
    return order, index, (tuple(key), frozenset(hooks)), spec


_SEQ = operator.attrgetter("_seq")


class LiveHooks:
    """A tensor's hooks as a running backward calls them: read from the tensor's own dict when
    they run, as torch's hook reads its dict, so a hook removed by an earlier hook of the
    backward does not run and one added to a tensor whose hooks are still to run does; then
    the engine's own `steps` (autograd's retain_grad and AccumulateGrad, GradStep). `owner`:
    the leaf tensor (slot None) or the grad_fn node of output `slot`."""
    __slots__ = ("owner", "slot", "steps")

    def __init__(self, owner, slot, steps=()):
        self.owner = owner
        self.slot = slot
        self.steps = steps

    def live(self):
        if self.slot is None:
            return self.owner._hooks or {}
        return self.owner.__dict__.get("_tensor_hooks", {}).get(self.slot) or {}

    def __len__(self):
        return len(self.live()) + len(self.steps)

    def __iter__(self):
        live = self.live()
        if live:
            keys = list(live)
            if len(keys) == 1:
                yield live[keys[0]]
            else:
                for k in keys:
                    fn = live.get(k)
                    if fn is not None:
                        yield fn
            live = self.live()
            while len(live) and live.keys() - keys:        # added by the hooks that ran
                new = [k for k in live if k not in keys]
                keys = keys + new
                for k in new:
                    fn = live.get(k)
                    if fn is not None:
                        yield fn
                live = self.live()
        yield from self.steps


def _leaf_order(node):
    """True for a leaf laid out C-contiguous, else its memory order (ir/layout.py): matmul's
    derivative picks its products by its operands' layouts, as torch's does."""
    v = getattr(node, "variable", None)
    if v is None or v._data.flags.c_contiguous:
        return True
    return tensor_order(v._data)


def forward_graph(order, apart=None):
    """The recorded nodes as a forward IR graph (leaves and constants become inputs). `apart`:
    {node position: {(argument position or -1, output slot)}}, the saved values that hold memory
    of their own (see _apart), each a backward input of its own."""
    g = Graph("forward")
    vals = {}
    for k, node in enumerate(order):
        prim = node._prim
        if prim is None:
            (shape, dtype), = node._out_meta
            order = _leaf_order(node)
            v = g.add_input(shape, dtype, "leaf", name=f"x{k}", node_index=k,
                            **({} if order is True else order_attr(order, shape)))
            vals[(id(node), 0)] = v
            continue
        # a value saved through saved-tensor hooks is read as the hook unpacks it: a clone
        # of it in the forward graph keeps that read apart from the other reads of the value
        hooked = hooked_saved(node) if HOOK_USED[0] else None
        args = []
        for i, m in enumerate(node._args_meta):
            if type(m) is tuple:
                nf, slot = node._edges[i]
                if nf is None:
                    args.append(g.add_input(m[0], m[1], "const"))
                elif hooked and i in hooked[0]:
                    args.append(g.add_op(PRIMITIVES["clone"], (vals[(id(nf), slot)],), {}, m[0], m[1]))
                else:
                    args.append(vals[(id(nf), slot)])
            else:
                args.append(m)
        metas = node._out_meta
        src = node._trace[-1].strip().split("\n")[0] if node._trace else None
        if prim.multi:
            t = g.add_op(prim, tuple(args), node._params, [m[0] for m in metas], [m[1] for m in metas], src)
            g[t]["node_index"] = k
            for slot, (s, d) in enumerate(metas):
                vals[(id(node), slot)] = g.add_proj(t, slot, s, d)
        else:
            t = g.add_op(prim, tuple(args), node._params, metas[0][0], metas[0][1], src)
            g[t]["node_index"] = k
            vals[(id(node), 0)] = t
        if hooked and hooked[1]:
            # the node's own rule reads its hooked output; later ops read a clone of it
            for slot in hooked[1]:
                s, d = metas[slot]
                vals[(id(node), slot)] = g.add_op(PRIMITIVES["clone"], (vals[(id(node), slot)],), {}, s, d)
        if prim.takes_ctx:
            g[t]["label"] = node._params["cls"].__name__ + ".apply"
        if apart is not None and k in apart:
            g[t]["saved_apart"] = apart[k]
    return g, vals


def _slot_ranks(hooks_spec, vals, name):
    """{name((node, slot)): rank} for the hooked outputs of nodes with hooks on several outputs:
    torch runs those outputs' hooks in the order each output got its first hook (a hook list
    per output, appended to the node's list at that output's first register_hook); outputs with
    only the engine's steps (retain_grad) after them. None where no node has two."""
    per = {}
    for (n, s), f in hooks_spec.items():
        if n._prim is not None and len(n._out_meta) > 1:
            per.setdefault(id(n), []).append((n, s, f))
    ranks = None
    for got in per.values():
        if len(got) > 1:
            if ranks is None:
                ranks = {}
            for n, s, f in got:
                live = f.live()
                ranks[name(vals[(id(n), s)]) if vals is not None else (n, s)] = \
                    (min(live), s) if live else (float("inf"), s)
    return ranks


def _value_names(g, vals, order, index, refs):
    return [vals[(id(n), s)] for n, s in refs]


def node_hooks_of(order):
    return frozenset([k for k, n in enumerate(order) if n._hooks or n._pre_hooks])


def build_program(order, index, roots, targets, hooks_spec, idle=(), apart=None):
    fwd, vals = forward_graph(order, apart)
    outputs = [vals[(id(n), s)] for n, s in roots]
    wrt = [vals[(id(n), s)] for n, s in targets]
    hooks = {}
    for (n, s), fns in hooks_spec.items():
        hooks[vals[(id(n), s)]] = (index[id(n)], s)
    hooked = node_hooks_of(order)
    node_hooks = {v for v in fwd.nodes() if fwd[v].get("node_index") in hooked and fwd[v]["op"] != "input"}
    rank = None
    if sum(1 for n, _ in hooks_spec if n._prim is None) > 1:
        # leaves' hooks (and the AccumulateGrad steps autograd.backward puts among them) run as
        # torch's ready queue yields the leaves one node completes, not by argument
        ran = {id(n): k for k, n in enumerate(torch_run_order([n for n, _ in roots]))}
        rank = {vals[(id(n), 0)]: ran.get(id(n), -1) for n, _ in hooks_spec if n._prim is None}
    # (defer_errors: a rule that raises raises when the program reaches it, after the hooks and
    # rules torch's engine runs before that node, and after they released their saved values)
    bwd = derive(fwd, outputs, wrt, hooks, node_hooks, leaf_rank=rank, defer_errors=True,
                 hook_rank=_slot_ranks(hooks_spec, vals, lambda v: v),
                 run_ops={v for v in fwd.nodes() if fwd[v].get("node_index") in idle and fwd[v]["op"] != "input"})
    binds = []
    for name in bwd.inputs:
        a = bwd[name]
        if a["role"] == "grad":
            binds.append(("seed", len([b for b in binds if b[0] == "seed"])))
        elif a["role"] == "saved":
            srcs = []
            for (fv, pos, slot) in a["srcs"]:
                srcs.append((fwd[fv]["node_index"] if fwd[fv]["op"] != "proj" else
                             fwd[fwd[fv]["args"][0]]["node_index"], pos, slot))
            binds.append(("saved", srcs))
        elif a["role"] == "hook":
            binds.append(("hook", a["hook_key"]))
        elif a["role"] == "ctx":
            binds.append(("ctx", fwd[a["fwd"]]["node_index"]))
        else:
            binds.append(("const", a["value"]))
    p = Program()
    p.fwd = fwd
    p.bwd = bwd
    p.binds = binds
    # the saved values several nodes saved, each read as one input (see _apart)
    p.shared = tuple([info for kind, info in binds if kind == "saved" and len(info) > 1]) if apart is None else ()
    p.node_count = len(order)
    p.triton = None
    p.eager = None                       # bwd run through the eager ops (create_graph), made on first use
    p.transfers = any(fwd[v]["op"] == "to_copy" for v in fwd.nodes())
    # a custom Function's backward may return None (an undefined gradient, torch's): such a
    # backward runs node by node, where None flows on as torch's engine lets it. A compiled
    # call's backward never does (its kernel answers zeros where no gradient reaches). A
    # grad_fn hook may make a gradient undefined too, returning None in its place
    p.undefined = any(order[k]._prim is not None for k in hooked) or any(
        n._prim is not None and n._prim.takes_ctx and n._prim.name != "compiled_call" for n in order)
    # generated source pays off for graphs a loop runs again; very deep ones are interpreted
    p.fn = compile_graph(bwd, "backward") if len(bwd) <= _CODEGEN_MAX_NODES else interpret_graph(bwd)
    return p


_FINAL = threading.local()


def queue_callback(callback):
    """torch.autograd.Variable._execution_engine.queue_callback: run `callback()` once the
    running backward has delivered every gradient (a hook calls this during backward)."""
    stack = getattr(_FINAL, "stack", None)
    if not stack:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    stack[-1].append(callback)


def accumulating():
    """Whether the running backward accumulates into .grad (backward(), not autograd.grad):
    where torch would run AccumulateGrad nodes."""
    stack = getattr(_FINAL, "stack", None)
    return bool(stack) and stack[-1].accumulates


class final_callbacks(list):
    """The scope of one backward (a context manager): the callbacks queued in it run at its
    end, in order (a callback may queue more); none run when the backward raised. `captures`:
    the (node, slot) whose gradients a grad() returns (torch's exec_info captures)."""
    __slots__ = ("accumulates", "captures")

    def __init__(self, accumulates=False, captures=()):
        super().__init__()
        self.accumulates = accumulates
        self.captures = captures

    def __enter__(self):
        stack = _FINAL.__dict__.get("stack")
        if stack is None:
            stack = _FINAL.stack = []
        stack.append(self)
        return self

    def __exit__(self, kind, value, tb):
        try:
            if kind is None:
                i = 0
                while i < len(self):
                    self[i]()
                    i += 1
        finally:
            _FINAL.stack.pop()
        return False


def _check_version(s, node):
    if s.hook is not None:               # torch checks no version of a tensor saved through hooks
        return
    t = s.tensor
    if t is not None and s.nonleaf and t._grad_fn is None and not t._req:
        raise RuntimeError("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This "
                           "is not supported, please use out-of-place `.detach()` instead")
    if s.vc[0] != s.version:
        t = s.tensor
        dt = t._dtype if t is not None else node._out_meta[s.output_nr][1]
        shape = tuple(t._data.shape) if t is not None else node._out_meta[s.output_nr][0]
        # torch names the op that made a non-leaf; of a leaf it gives the type alone
        which = (f", which is output {s.output_nr} of {op_name(node)}," if t is None else
                 (f", which is output {t._output_nr} of {op_name(t.grad_fn)}," if t.grad_fn is not None else ""))
        raise RuntimeError(
            f"one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[torch.{D.LEGACY[dt]} [{', '.join(map(str, shape))}]]{which} is at version {s.vc[0]}; "
            f"expected version {s.version} instead. Hint: enable anomaly detection to find the operation that "
            f"failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")


def _check_at_bind(s, node):
    """_check_version of saved value s of node before anything runs: anomaly mode's warning names
    the node, and the error is marked as raised at bind (autograd.backward runs what torch runs
    before it)."""
    try:
        _check_version(s, node)
    except RuntimeError as e:
        if tracer._ANOMALY[0]:
            anomaly_warn(type(node).__name__, node)
        e._at_bind = True
        raise


def _check_guards(node):
    """torch's check of what a composite op's node saves and its decomposition does not read
    (tracing.keep_saved), made as the node runs: raised before anything runs, as a saved value
    found written when it is bound (autograd.backward runs what torch runs before it)."""
    saved = node._saved
    if saved is None:
        return
    for s in saved[len(node._args_meta) + 1:]:
        _check_at_bind(s, node)


def _saved_memory(order, k, pos, slot):
    """The array that node k's saved value (argument pos, or output slot where pos is -1) reads;
    None where it saved none, or one through saved-tensor hooks (a value of its own already)."""
    saved = order[k]._saved
    if saved is None:
        return None
    s = saved[pos + 1]
    if pos == -1 and s is not None:
        s = s[slot] if slot < len(s) else None
    if s is None or not hasattr(s, "vc") or s.hook is not None:
        return None
    return s.tensor._data if s.tensor is not None else s.data


def _apart(order, shared):
    """{node position: {(argument position or -1, output slot)}} for the saved values of `shared`
    (a program's binds of values several nodes saved) whose nodes hold different memory for
    them: torch's node keeps the memory it saved, the old one after `x.data = y` where it saved
    an output (exp's result) or a view made inside the op (mm's x.unsqueeze(0) of a 1-D x),
    the new one where it saved the input itself. Empty where each reads one array."""
    apart = {}
    for srcs in shared:
        seen = None
        for k, pos, slot in srcs:
            m = _saved_memory(order, k, pos, slot)
            if m is None:
                continue
            if seen is None:
                seen = m
            elif m is not seen:
                for k2, pos2, slot2 in srcs:
                    apart.setdefault(k2, set()).add((pos2, slot2))
                break
    return {k: frozenset(v) for k, v in apart.items()}


def _saved_value(order, srcs, as_tensor):
    """The data (or, for create_graph, the tensor) of a saved forward value. Every node that
    saved it is checked, not only the one read: torch checks each node's saved tensors, and
    in-place ops keep a copy of self's old value beside self saved as another operand
    (y.clamp_(w, y) reads the copy, and y written raises, as torch's)."""
    if len(srcs) > 1:
        # (the latest node first: torch's engine runs them so, and names the first that fails)
        for k, pos, slot in sorted(srcs, reverse=True):
            s = order[k]._saved
            if s is not None:
                s = s[pos + 1]
                if pos == -1 and s is not None:
                    s = s[slot]
                if s is not None and hasattr(s, "vc"):
                    _check_version(s, order[k])
    for k, pos, slot in srcs:
        node = order[k]
        saved = node._saved
        if saved is None:
            raise RuntimeError(FREED_MSG)
        s = saved[pos + 1]
        if pos == -1:
            if s is None:
                continue
            s = s[slot]
        if s is None:
            continue
        if not hasattr(s, "vc"):
            return s                     # a saved Python scalar
        _check_version(s, node)
        if s.hook is not None:
            t = s.unpack_hooked(node)
            return t if as_tensor else t._data
        if not as_tensor:
            return s.tensor._data if s.tensor is not None else s.data
        return unpack(node, s)
    raise RuntimeError(f"internal error: the derivative of {type(order[srcs[0][0]]).__name__} reads a value that "
                       f"was not saved for backward")


def unpack(node, s):
    if s.hook is not None:
        return s.unpack_hooked(node)
    if s.tensor is not None:
        return s.tensor
    shape, dt = node._out_meta[s.output_nr]
    if not dt.is_floating_point:         # an integer output (indices) is no part of the graph
        return Tensor._make(s.data, dt, vc=s.vc)
    return Tensor._make(s.data, dt, True, node, s.output_nr, vc=s.vc)


def unpack_saved(node, s):
    if node._saved is None:
        raise RuntimeError(FREED_MSG)
    if isinstance(s, tuple):
        return tuple(unpack(node, x) for x in s)
    if s is None or not hasattr(s, "vc"):
        return s
    _check_version(s, node)
    return unpack(node, s)


def program_key(order, index, roots, targets, hooks_spec, structure):
    """The cache key of a backward: the graph's structure (walk_keyed's), the roots, the
    targets and which tensor hooks and node hooks there are."""
    structure, node_hooks = structure
    hooked = ()
    if hooks_spec:
        hooked = tuple(sorted([((index[id(n)], s), len(f)) for (n, s), f in hooks_spec.items()]))
        ranks = _slot_ranks(hooks_spec, None, None)
        if ranks:                        # (the order of a node's hooked outputs is the program's)
            hooked += (tuple([k for _, k in sorted([(r, (index[id(n)], s)) for (n, s), r in ranks.items()])]),)
    return (structure, tuple([(index[id(n)], s) for n, s in roots]), tuple([(index[id(n)], s) for n, s in targets]),
            hooked, node_hooks)


def cached_program(key):
    """The cached backward of `key`, or None."""
    with _LOCK:
        p = _CACHE.get(key)
        if p is not None:
            _CACHE.move_to_end(key)
            p.kin.move_to_end(key)          # the least recently used of a family goes first
            STATS["hits"] += 1
        return p


def get_program(order, index, roots, targets, hooks_spec, structure=None, key=None, ran=None, n_targets=None,
                idle=(), apart=None):
    """The backward of `roots` to `targets`, cached by `key`; `ran`: the nodes it runs, where the
    caller has them; the targets past the first `n_targets` are sinks (their gradients dropped);
    `idle`: the positions of the nodes torch runs with nothing wanted below them (execute's)."""
    if key is None:
        key = program_key(order, index, roots, targets, hooks_spec, structure) + ((("idle",) + idle,) if idle else ())
    p = cached_program(key)
    if p is not None:
        return p
    with paused():
        p = build_program(order, index, roots, targets, hooks_spec, idle, apart)
    STATS["misses"] += 1
    # the nodes a backward of this structure runs (executed), by position
    p.ran = tuple([index[id(n)] for n in (executed(order, targets) if ran is None else ran)])
    p.sinks = () if n_targets is None or n_targets == len(targets) else \
        tuple([(index[id(n)], s) for n, s in targets[n_targets:]])
    # the tensors whose hooks the backward calls, by (position, slot): will_engine_execute_node
    p.hook_keys = frozenset(info for kind, info in p.binds if kind == "hook")
    p.unread = _unread_saved(order, p)
    p.owners = _owners(order)
    # a backward through an evicted compiled program is not kept: it would keep it alive
    if len(order) <= _CACHE_MAX_NODES and not any(o.evicted for o in p.owners):
        p.family = (tuple(None if n._prim is None else n._prim.name for n in order), key[1], key[2])
        with _LOCK:
            _CACHE[key] = p
            for o in p.owners:
                o.backward_keys.add(key)
            family = p.kin = _FAMILIES.setdefault(p.family, collections.OrderedDict())
            family[key] = None
            while len(family) > _FAMILY_LIMIT:
                _drop(family.popitem(last=False)[0])
            while len(_CACHE) > _CACHE_LIMIT:
                _drop(next(iter(_CACHE)))
    return p


def _unread_saved(order, p):
    """The saved values of the nodes the backward runs that its program never reads, by (node
    position, argument position or -1, output slot): torch's node unpacks every tensor it saved as
    it runs, and raises for one written in place since, read or not (pow(2.0, x)'s node saves x
    and reads only its result; x written gave a gradient here). Empty where every one is read."""
    read = set()
    for kind, info in p.binds:
        if kind == "saved":
            for k, pos, slot in info:
                read.add((k, pos, slot if pos == -1 else 0))
    unread = []
    for k in p.ran:
        node = order[k]
        saved = node._saved
        if not saved or node._prim is None or node._prim.takes_ctx:
            continue
        for pos in range(len(node._args_meta)):
            s = saved[pos + 1]
            if s is not None and hasattr(s, "vc") and (k, pos, 0) not in read:
                unread.append((k, pos, 0))
        outs = node._prim.torch_saved_outputs
        for slot, s in enumerate(saved[0] or ()):
            if s is not None and (k, -1, slot) not in read and (outs is None or slot in outs):
                unread.append((k, -1, slot))
    return tuple(unread)


def _check_unread(order, unread):
    """torch's version check of the saved values a backward does not read (_unread_saved), made
    before anything runs, as a saved value found written when it is bound."""
    for k, pos, slot in unread:
        node = order[k]
        saved = node._saved
        if saved is None:
            continue
        s = saved[pos + 1]
        if pos == -1 and s is not None:
            s = s[slot] if slot < len(s) else None
        if s is None or not hasattr(s, "vc"):
            continue
        _check_at_bind(s, node)


def _check_sinks(order, sinks):
    """A compiled call among the sinks (engine.sinks): its kernel, which checks what it saved as it
    runs, does not run where nothing below it wants a gradient; torch's node runs and checks them.
    Checked before anything runs, as a saved value found written when it is bound."""
    for k in dict.fromkeys([k for k, _ in sinks]):
        node = order[k]
        d = node.__dict__
        if "_residuals" in d:
            if node._saved is None:
                e = RuntimeError(d.get("_why") or FREED_MSG)
                e._at_bind = True
                raise e
            for s in d.get("_read") or ():
                _check_at_bind(s, node)


def _drop(key):
    """Take one backward out of the cache (and out of its family, and its owners' keys)."""
    old = _CACHE.pop(key, None)
    if old is None:
        return
    for o in old.owners:
        o.backward_keys.discard(key)
    family = _FAMILIES.get(old.family)
    if family is not None:
        family.pop(key, None)
        if not family:
            del _FAMILIES[old.family]


def clear_cache():
    with _LOCK:
        for p in _CACHE.values():
            for o in p.owners:
                o.backward_keys.clear()
        _CACHE.clear()
        _FAMILIES.clear()


def execute(order, index, roots, seeds, targets, retain_graph, create_graph, hooks_spec=None, structure=None,
            every=False, idle=()):
    """Run the backward of `roots` (list of (node, slot)) with `seeds`; return the gradient of
    each target (node, slot), None where no path reaches it. `structure`: walk_keyed's, where
    the caller walked the graph with it. `every`: run every node the roots reach, those with no
    path to a target too (backward() without inputs; see sinks). `idle`: the positions of nodes
    torch runs though nothing below them is wanted (backward(inputs=[an output of one])): the
    hooks of their outputs no gradient reached see None."""
    hooks_spec = hooks_spec or {}
    stack = _TASKS.stack
    if len(stack) >= _REENTRANT_DEPTH:
        # a backward called from a backward called from ... (reentrant): as torch's engine, a
        # deep chain goes on in a fresh thread, whose stack and recursion count start empty
        return _on_fresh_thread(execute, order, index, roots, seeds, targets, retain_graph, create_graph,
                                hooks_spec, structure, every, idle)
    task = graph_task()                  # what `with graph_task():` does, without its two calls
    task.id = next(_task_ids)
    task.at_end = []
    task.spec, task.index = hooks_spec, index     # (where a hook added during the run has a place)
    stack.append(task)
    try:
        with shielded():        # (autocast's casts are the forward's: see tracegrad.amp)
            outs = _execute(order, index, roots, seeds, targets, retain_graph, create_graph, hooks_spec, structure,
                            every, idle)
    finally:
        stack.pop()
    for fn in task.at_end:
        fn()
    return outs


_REENTRANT_DEPTH = 12


def _on_fresh_thread(fn, *args):
    modes = dict(STATE.__dict__)
    box = {}

    def run():
        STATE.__dict__.update(modes)           # grad mode is per thread: the caller's goes along
        try:
            box["out"] = fn(*args)
        except BaseException as e:              # re-raised in the caller's thread
            box["err"] = e

    t = threading.Thread(target=run, name="tracegrad-reentrant-backward")
    t.start()
    t.join()
    if "err" in box:
        raise box["err"]
    return box["out"]


class _Tasks(threading.local):
    def __init__(self):
        self.stack = []


_TASKS = _Tasks()
_task_ids = itertools.count()


class graph_task:
    """One backward call (torch's GraphTask): an id, and callbacks run when it ends."""

    def __enter__(self):
        self.id = next(_task_ids)
        self.at_end = []
        _TASKS.stack.append(self)
        return self

    def __exit__(self, exc_type, *exc):
        _TASKS.stack.pop()
        if exc_type is None:
            for fn in self.at_end:
                fn()


def current_task():
    return _TASKS.stack[-1] if _TASKS.stack else None


def will_call_hooks(t):
    """Whether the running backward calls the hooks of tensor `t` (torch's
    _will_engine_execute_node for its node): its hooks have a place in the running program."""
    task = current_task()
    keys = getattr(task, "hook_keys", None) if task is not None else None
    if keys is None:
        return None
    if t.grad_fn is not None:
        node, slot = t.grad_fn, t._output_nr
    else:
        node = t._grad_acc() if t._grad_acc is not None else None
        slot = 0
    k = task.index.get(id(node)) if node is not None else None
    if k is not None and k >= 0 and not any(nf is not None for nf, _ in node._edges):
        final = getattr(_FINAL, "stack", None)
        captures = final[-1].captures if final else ()
        if any(n is node for n, _ in captures):
            # a node with no edge on (a leaf's AccumulateGrad) whose gradient grad() returns
            raise RuntimeError("A leaf node was passed to _will_engine_execute_node but we are currently running "
                               "autograd.grad(). This is currently not supported.")
    return k is not None and (k, slot) in keys


def _execute(order, index, roots, seeds, targets, retain_graph, create_graph, hooks_spec, structure=None,
             every=False, idle=()):
    key = program_key(order, index, roots, targets, hooks_spec, structure)
    if every:
        key += (True,)
    if idle:
        key += (("idle",) + idle,)
    p = cached_program(key)
    n_targets = len(targets)
    if p is None:
        extra = sinks(order, targets) if every else ()
        ran = executed(order, targets + extra) if extra else executed(order, targets)
        if extra:
            ran += list({id(n): n for n, _ in extra}.values())
            targets = targets + extra
    else:
        ran = [order[k] for k in p.ran]
        if p.sinks:
            targets = targets + [(order[k], s) for k, s in p.sinks]
    for node in ran:
        # freed by an earlier backward (see free_graph); a custom Function raises only where
        # its backward reads ctx.saved_tensors, as in torch; a node marked _freed at once
        if node._saved is None and (not node._prim.takes_ctx or node._freed):
            e = RuntimeError(node.__dict__.get("_why") or FREED_MSG)     # (_why: chain._stale)
            e._at_bind = True            # nothing has run yet (autograd.backward runs what torch would first)
            raise e
        if node._guarded:
            _check_guards(node)
    if p is None:
        p = get_program(order, index, roots, targets, hooks_spec, key=key, ran=ran, n_targets=n_targets, idle=idle)
    if p.shared:
        apart = _apart(order, p.shared)
        if apart:
            # a backward whose nodes saved one value in different memory: its own program
            key += (("apart",) + tuple(sorted([(k, pos, slot) for k, got in apart.items() for pos, slot in got])),)
            q = cached_program(key)
            p = q if q is not None else get_program(order, index, roots, targets, hooks_spec, key=key,
                                                    ran=ran, n_targets=n_targets, idle=idle, apart=apart)
    if p.unread:
        _check_unread(order, p.unread)
    if p.sinks:
        _check_sinks(order, p.sinks)
    hook_by_key = {(index[id(n)], s): fns for (n, s), fns in hooks_spec.items()} if hooks_spec else {}
    if hooks_spec:
        _TASKS.stack[-1].hook_keys = p.hook_keys
    if create_graph:
        args = []
        for kind, info in p.binds:
            if kind == "seed":
                args.append(seeds[info])
            elif kind == "saved":
                args.append(_bind_saved(order, info, True))
            elif kind == "hook":
                args.append(hook_by_key[info])
            elif kind == "ctx":
                args.append(order[info])
            else:
                args.append(info)
        grad_mode = STATE.grad_enabled
        STATE.grad_enabled = True            # enable_grad(), without a context object per backward
        try:
            outs = (run_checked(p, args, order, eager=True) if tracer._ANOMALY[0] or p.undefined else
                    (p.eager or _plan_eager(p))(*args))
        except BaseException as e:
            if not retain_graph:
                free_graph(ran)
            done = e.__dict__.pop("_ran_before", None) if isinstance(e, Exception) else None
            if done is not None:
                e._partial = (done[0], list(done[1])[:n_targets])
            raise
        finally:
            STATE.grad_enabled = grad_mode
        if p.sinks:
            outs = outs[:n_targets]
    else:
        args = []
        for kind, info in p.binds:
            if kind == "seed":
                args.append(seeds[info]._data)
            elif kind == "saved":
                args.append(_bind_saved(order, info, False))
            elif kind == "hook":
                args.append(hook_by_key[info])
            elif kind == "ctx":
                args.append(order[info])
            else:
                args.append(info._data)
        if hooks_spec:
            _TASKS.stack[-1].args = args     # (memory a .grad may not take over: autograd's steps)
        freeing = STATE.freeing_saved
        STATE.freeing_saved = not retain_graph
        handed = getattr(HANDED, "tensors", None)
        HANDED.tensors = []                 # what hooks and custom backwards are given or return
        try:
            if tracer._CUDA[0] and (p.transfers or any(a.__class__ is _cuda.CudaArray for a in args)):
                raw = _cuda.run_backward(p, args)
            elif tracer._PROFILE[0] is not None or tracer._ANOMALY[0] or p.undefined:
                raw = run_checked(p, args, order)
            else:
                raw = p.fn(*args)
        except BaseException as e:
            # a hook or a custom backward raised part way: what ran may have written over saved
            # values, so the graph is freed as torch frees the nodes it ran (a retry raises)
            if not retain_graph:
                free_graph(ran)
            done = e.__dict__.pop("_ran_before", None) if isinstance(e, Exception) else None
            if done is not None:
                # the gradients complete before the failing node, for autograd.backward to hand
                # over as torch's engine has (.grad, retain_grad) before it raises
                shared = HANDED.tensors
                HANDED.__dict__.pop("taken", None)
                e._partial = (done[0], _gradient_tensors(done[1], args, targets[:n_targets], shared))
            raise
        finally:
            STATE.freeing_saved = freeing
            shared, HANDED.tensors = HANDED.tensors, handed
        taken = HANDED.__dict__.pop("taken", None) if shared else None
        outs = _gradient_tensors(raw, args, targets[:n_targets] if p.sinks else targets, shared, taken)
    if not retain_graph:
        free_graph(ran)
    return outs


def _plan_eager(p):
    p.eager = plan_eager(p.bwd)
    return p.eager


def executed(order, targets):
    """The nodes a backward to `targets` runs: those with a path down to a target node (as
    torch's engine, which runs and then frees only these; the rest keep what they saved)."""
    goal = {id(n) for n, _ in targets}
    below = {}
    ran = []
    for node in order:                   # producers first
        hit = False
        for nf, _ in node._edges:
            if nf is not None and (id(nf) in goal or below.get(id(nf))):
                hit = True
                break
        below[id(node)] = hit
        if hit and node._prim is not None:
            ran.append(node)
    return ran


def sinks(order, targets):
    """The nodes a backward() without inputs runs though no path leads from them to a target: torch's
    engine (its exec_info empty) runs every node it reaches, such a node too, unpacking what it saved
    (a value written in place since raises), calling its hooks and freeing it. Such nodes are the
    ops on a view made under no_grad of a tensor that requires grad, or on a view whose base was
    detach_()'d since (their edges lead to no node), and the ops on their results. Of those, each
    one none of whose edges leads to another, as a (node, slot) target for each floating output:
    the backward computes the gradients reaching it (and drops them), running every such node above
    it. Empty where every node leads to a target (one pass over the nodes, made when a backward's
    program is built)."""
    goal = {id(n) for n, _ in targets}
    below = {}
    nowhere = set()
    out = []
    for node in order:                   # producers first
        hit = deeper = False
        for nf, _ in node._edges:
            if nf is not None:
                if id(nf) in goal or below.get(id(nf)):
                    hit = True
                    break
                if id(nf) in nowhere:
                    deeper = True
        below[id(node)] = hit
        if not hit and node._prim is not None:   # (a target itself too: a retained output's node)
            nowhere.add(id(node))
            if not deeper:
                out.extend((node, s) for s, (_, dt) in enumerate(node._out_meta) if dt.is_floating_point)
    return out


def holds_saved(node):
    """Whether a node keeps values for its backward (torch's SavedVariables): a node that
    keeps none, such as AddBackward0 or SumBackward0, may be run again after a backward."""
    saved = node._saved
    if saved is None:
        return True
    if node._prim.takes_ctx:                         # a custom Function: ctx.saved_tensors raises
        return True
    if "_residuals" in node.__dict__:                # a compiled call
        return True
    for s in saved:
        if s is not None:
            return True
    return False


def free_graph(order):
    """Free the saved values of the graph's nodes (retain_graph=False)."""
    for node in order:
        saved = node._saved
        if saved is None:
            continue
        prim = node._prim
        if prim is None:
            continue
        # what holds_saved says, without asking twice: a node that saved nothing stays runnable
        if prim.takes_ctx or "_residuals" in node.__dict__:
            node._saved = None
            continue
        for v in saved:
            if v is not None:
                node._saved = None
                break


def _gradient_tensors(raw, args, targets, shared=(), taken=None):
    """The backward program's results as tensors of their targets' dtypes that alias
    nothing: no input of the program, no other gradient and no tensor the user still holds
    (`shared`: weak references to the tensors hooks and custom backwards were given or
    returned; torch's AccumulateGrad too steals only a gradient nothing else holds). None for
    an array in `taken` (ids): a .grad took it over inside the run, and has it."""
    seen = {id(a) for a in args if isinstance(a, np.ndarray)}
    for ref in shared:
        t = ref()
        if t is not None:              # kept by the user: its memory must not become a .grad
            seen.add(id(t._data))
            if getattr(t._data, "base", None) is not None:
                seen.add(id(t._data.base))
    on_device = None                   # storage pointers of device arrays, gathered on first need
    outs = []
    for (n, s), o in zip(targets, raw):
        if o is None or taken and id(o) in taken:
            outs.append(None)
            continue
        shape, dt = n._out_meta[s]
        if o.__class__ is _cuda.CudaArray:
            if on_device is None:
                on_device = {a.t.untyped_storage().data_ptr() for a in args if a.__class__ is _cuda.CudaArray}
            if o.dtype != dt.np:
                o = o.astype(dt.np)
            ptr = o.t.untyped_storage().data_ptr()
            if ptr in on_device or not o.t.is_contiguous() or id(o) in seen:
                o = o.copy()
                ptr = o.t.untyped_storage().data_ptr()
            on_device.add(ptr)
        else:
            if type(o) is not np.ndarray:
                o = np.asarray(o)
            if o.dtype != dt.np:
                o = o.astype(dt.np)
            if id(o) in seen or not o.flags.writeable or not o.flags.owndata:
                o = np.array(o)           # gradients never alias inputs or each other
            seen.add(id(o))
        outs.append(Tensor._make(o, dt))
    return outs


def _origin_name(p, order, n):
    k = p.fwd[n].get("node_index")
    return (type(order[k]).__name__, order[k]) if k is not None else (n, None)


# run-time calls into Python (hooks, custom Function backwards): they take undefined gradients as None
_PASSES_NONE = frozenset({"call_hooks", "node_hooks", "node_prehooks", "function_backward", "delayed_error"})
UNDEFINED_OK = threading.local()


def anomaly_warn(name, node):
    """Anomaly mode's warning for an error in the backward of `node`: where its forward ran
    (torch's), or that it is unknown; a warning the filters turn into an error goes to stderr.
    The node is named as torch's fn.name() (torch::autograd::NotImplemented)."""
    name = node.name() if hasattr(node, "name") else name
    if node._trace:
        msg = f"Error detected in {name}. Traceback of forward call that caused the error:\n" + "".join(node._trace)
    else:
        msg = (f"Error detected in {name}. No forward pass information available. Enable detect anomaly during "
               f"forward pass for more information.")
    msgs = [msg]
    parent = node.__dict__.get("_anomaly_parent")
    while parent is not None:
        msgs.append(f"\n\nPrevious calculation was induced by {type(parent).__name__}. Traceback of forward call "
                    f"that induced the previous calculation:\n" + "".join(parent._trace or ()))
        parent = parent.__dict__.get("_anomaly_parent")
    for m in msgs:
        try:
            warnings.warn(m, UserWarning)
        except Warning:
            print(m, file=sys.stderr)


def _bind_saved(order, info, as_tensor):
    """_saved_value, with anomaly mode's warning naming the node whose saved value failed."""
    try:
        return _saved_value(order, info, as_tensor)
    except RuntimeError as e:
        if tracer._ANOMALY[0]:
            node = order[info[0][0]]
            anomaly_warn(type(node).__name__, node)
        e._at_bind = True                # nothing has run yet (autograd.backward runs what torch would first)
        raise


def run_checked(p, args, order, eager=False):
    """Run a backward program node by node: time each node for the profiler (charged to
    the grad_fn of the forward op it differentiates) and, in anomaly mode, stop at the
    first derivative rule that returns NaN, naming the forward op and where it was made;
    an error raised while differentiating an op warns with where that op was made.
    `eager` runs each node through the eager ops (create_graph=True)."""
    g = p.bwd
    env = dict(zip(g.inputs, args))
    return _run_checked(p, g, env, order, eager)


def _run_checked(p, g, env, order, eager):
    anomaly = tracer._ANOMALY[0]
    check = anomaly and tracer._ANOMALY_NAN[0]
    prof = profiler.is_profiling()
    spans = {}

    def warn_forward(fwd_value):
        name, node = _origin_name(p, order, fwd_value)
        if node is not None:
            anomaly_warn(name, node)
        return name

    for n in g.nodes():
        a = g[n]
        if a["op"] == "input":
            continue
        vals = [env[x] if isinstance(x, V) else x for x in a["args"]]
        if a["op"] != "proj" and a["op"] not in _PASSES_NONE and any(
                v is None and isinstance(x, V) for v, x in zip(vals, a["args"])):
            # an undefined gradient: a sum treats it as zero, any other rule passes it on
            live = [v for v, x in zip(vals, a["args"]) if isinstance(x, V) and v is not None]
            env[n] = live[0] if a["op"] == "add" and len(live) == 1 and not a["params"] else None
            continue
        t0 = time.perf_counter()
        origin_node = _origin_name(p, order, a["origin"])[1] if eager and a.get("origin") is not None else None
        parent, tracer._ANOMALY_PARENT[0] = tracer._ANOMALY_PARENT[0], origin_node or tracer._ANOMALY_PARENT[0]
        # a custom Function's backward run here may hand on None (it is not inside generated code)
        undefined_ok, UNDEFINED_OK.on = getattr(UNDEFINED_OK, "on", False), a["op"] == "function_backward"
        try:
            if a["op"] == "proj":
                out = None if vals[0] is None else vals[0][a["params"]["index"]]
            else:
                with np.errstate(all="ignore"):        # as the generated backward: NaN is checked below
                    if not eager or (a["prim"].eager is None and any(v is None for v in vals)):
                        out = a["prim"].impl(*vals, **a["params"])
                    elif a["prim"].eager:
                        out = a["prim"].eager(*vals, **a["params"])
                    else:
                        out = tracer.apply(a["prim"], tuple(vals), a["params"])
        except Exception as e:
            if anomaly and a.get("origin") is not None:
                warn_forward(a["origin"])
            # what ran before the failing node: the gradients complete by then (torch's engine has
            # run the AccumulateGrad of each), and where the failing node sits in creation order
            _note_ran_before(e, p, g, env, a.get("origin"))
            raise
        finally:
            tracer._ANOMALY_PARENT[0] = parent
            UNDEFINED_OK.on = undefined_ok
        t1 = time.perf_counter()
        env[n] = out
        origin = a.get("origin")
        if prof and origin is not None:
            s = spans.setdefault(origin, [t0, t1])
            s[0], s[1] = min(s[0], t0), max(s[1], t1)
        if check and a.get("grad_of") is not None and out is not None:
            arr = out._data if isinstance(out, Tensor) else np.asarray(out)
            if np.isnan(arr.astype(np.float64) if arr.dtype.kind != "f" else arr).any():
                fwd_value, i = a["grad_of"]
                name = warn_forward(fwd_value)
                e = RuntimeError(f"Function '{name}' returned nan values in its {i}th output.")
                # torch's engine has run the nodes before this one (their leaves' .grad set)
                env.pop(n)
                _note_ran_before(e, p, g, env, fwd_value)
                raise e
    if prof:
        for origin, (t0, t1) in sorted(spans.items(), key=lambda kv: kv[1][0]):
            profiler.record(_origin_name(p, order, origin)[0], t0, t1, kind="backward")
    return tuple(None if o is None else env[o] for o in g.outputs)


def _note_ran_before(e, p, g, env, origin):
    """What ran before the failing node of a backward run node by node, on its error: the
    gradients complete by then (torch's engine has run the AccumulateGrad of each), and where
    the node that made `origin` (a forward value) sits in creation order."""
    k = p.fwd[origin].get("node_index") if origin is not None else None
    if k is not None and p.fwd[origin]["op"] == "proj":
        k = p.fwd[p.fwd[origin]["args"][0]].get("node_index")
    if k is not None:
        e._ran_before = (k, [None if o is None else env.get(o) for o in g.outputs])


def call_node(node, grads):
    """grad_fn(*grad_outputs): run one node's backward alone; its gradients for each of the inputs
    torch's node has an edge for (Primitive.torch_edges), one gradient for each of its
    floating outputs (max(x, 1)'s node takes its values' alone, slogdet's its sign's too, as torch's)."""
    prim = node._prim
    outs_diff = [k for k, (_, dt) in enumerate(node._out_meta) if dt.is_floating_point]
    n_out = len(outs_diff)
    if len(grads) != n_out:
        raise TypeError(f"expected {n_out} arguments, got {len(grads)} instead")
    if prim is None:
        raise RuntimeError(f"{type(node).__name__} cannot be called directly")
    if prim.takes_ctx:
        raise TypeError(f"'{type(node).__name__}' object is not callable")
    composite = node.__dict__.get("_composite_inputs")
    if composite is not None:
        # (a leaf's edge is a weak reference to its AccumulateGrad, slot -1)
        composite = tuple(e if e is None or e[1] != -1 else (lambda a: None if a is None else (a, 0))(e[0]())
                          for e in composite)
        return _call_composite(node, grads, composite, outs_diff)
    # the node's own rule, each input apart: a copy of the node whose edges lead to leaves of
    # their own (through its real edges, an input used twice, or reached again through
    # another input, got the sum of every path to it: x * x's node answered 2x for each)
    alone = object.__new__(type(node))
    for slot in ("_prim", "_params", "_args_meta", "_saved", "_out_meta", "_seq"):
        setattr(alone, slot, getattr(node, slot))
    if node._guarded:
        alone._guarded = True            # (its Guards are checked as it runs)
    edges = []
    fresh = []
    for nf, s in node._edges:
        if nf is None:
            fresh.append((None, 0))
            continue
        leaf = object.__new__(Node)
        leaf._prim, leaf._params, leaf._args_meta, leaf._edges, leaf._saved = None, None, (), (), ()
        leaf._seq = -1
        leaf._out_meta = (nf._out_meta[s],)
        fresh.append((leaf, 0))
        edges.append((leaf, 0))
    alone._edges = tuple(fresh)
    node = alone
    seeds = _direct_seeds(node, grads, outs_diff)
    order, index, structure, _ = walk_keyed([node])
    with set_grad_enabled(False):
        outs = iter(execute(order, index, [(node, i) for i in outs_diff], seeds, edges, True, False, {},
                            structure))
    res = tuple(None if nf is None else next(outs) for nf, _ in node._edges)
    res = tuple(res[i] for i in prim.torch_edges(node._args_meta))
    return res[0] if len(res) == 1 else res


def _direct_seeds(node, grads, outs_diff):
    """The gradients a direct call of a node (`y.grad_fn(g)`) was given, checked as torch checks
    them and cast to its outputs' dtypes."""
    seeds = []
    for i, (g, (shape, dt)) in enumerate(zip(grads, [node._out_meta[k] for k in outs_diff])):
        if not isinstance(g, Tensor):
            raise TypeError(f"argument {i} is not a Variable")
        if tuple(g.shape) != tuple(shape):
            raise RuntimeError(f"{type(node).__name__}: expected a gradient of shape {list(shape)}, got "
                               f"{list(g.shape)}")
        seeds.append(g if g._dtype is dt else g.to(dt))
    return seeds


def _call_composite(node, grads, inputs, outs_diff):
    """grad_fn(*grad_outputs) of a composite op's last node (tracing.note_composite_inputs): the
    gradients of the whole op for each of its inputs (None where one needs none), through the
    nodes the op recorded."""
    seeds = _direct_seeds(node, grads, outs_diff)
    # the op's nodes copied, each edge to an input led to a leaf of its own: a gradient reaching an
    # input through another input (mse_loss(x, x * 2)) is no part of the op's
    leaves = {}
    for e in inputs:
        if e is None:
            continue
        if (id(e[0]), e[1]) in leaves:
            raise RuntimeError(f"{type(node).__name__}: calling the node of a composite op that was given one tensor "
                               f"as two of its inputs is not supported (its gradient for each cannot be told "
                               f"apart); use torch.autograd.grad(output, inputs, grad_outputs)")
        leaf = object.__new__(Node)
        leaf._prim, leaf._params, leaf._args_meta, leaf._edges, leaf._saved = None, None, (), (), ()
        leaf._seq = -1
        leaf._out_meta = (e[0]._out_meta[e[1]],)
        leaves[(id(e[0]), e[1])] = leaf
    bound = max(e[0]._seq for e in inputs if e is not None)   # the op's own nodes were made after its inputs
    copies = {}
    stack = [node]
    while stack:                         # (a walk, not a recursion: a long scan makes thousands of nodes)
        n = stack.pop()
        if id(n) in copies:
            continue
        c = copies[id(n)] = (object.__new__(type(n)), n)
        for slot in ("_prim", "_params", "_args_meta", "_saved", "_out_meta", "_seq"):
            setattr(c[0], slot, getattr(n, slot))
        c[0].__dict__.update({k: v for k, v in n.__dict__.items() if k != "_composite_inputs"})
        for nf, s in n._edges:
            if nf is not None and (id(nf), s) not in leaves and nf._prim is not None and nf._seq > bound:
                stack.append(nf)
    for c, n in copies.values():
        edges = []
        for nf, s in n._edges:
            leaf = leaves.get((id(nf), s)) if nf is not None else None
            inner = copies.get(id(nf)) if nf is not None and leaf is None else None
            edges.append((leaf, 0) if leaf is not None else (inner[0], s) if inner is not None else (None, 0))
        c._edges = tuple(edges)
    root = copies[id(node)][0]
    targets = [(leaf, 0) for leaf in leaves.values()]
    order, index, structure, _ = walk_keyed([root])
    with set_grad_enabled(False):
        outs = iter(execute(order, index, [(root, i) for i in outs_diff], seeds, targets, True, False, {},
                            structure))
    res = tuple(None if e is None else next(outs) for e in inputs)
    return res[0] if len(res) == 1 else res


# what the nodes of autograd/graph.py call of the engine
Engine.call_node, Engine.unpack_saved, Engine.unpack = call_node, unpack_saved, unpack
Engine.current_task, Engine.will_call_hooks = current_task, will_call_hooks
