"""The symbolic differentiation pass: forward graph -> backward graph, both IR.

`derive` walks the forward graph in reverse topological order and, for each op on a
path from the differentiated inputs to the outputs, calls its derivative rule from the
op table on symbolic tensors, so the rule's ops record into the backward graph. The
plumbing is done here, once for every op: summing fan-out, reducing broadcast
dimensions back to each input's shape, casting each gradient to its input's dtype,
and a loud error for an op without a rule.

Forward values a rule reads become inputs of the backward graph ("saved" values),
bound lazily: a rule that only asks for `x.shape` saves nothing.
"""

import networkx as nx
import numpy as np

from .ir.graph import Graph, V
from .tracing import Proxy, trace, proxy_input
from .ir.layout import order_attr, value_order
from .ops.primitives import sum_to, DerivativeNotImplemented, DERIVATIVE_NAMES, PRIMITIVES as P, EFFICIENT_ZERO
from .ops import functional as F
from .autograd._grad_io import _seeds, _results
from . import _dtype as D
from .tracing import apply, value_of, TraceError, LOCAL
from .interpret import run_eager
from .tensor import Tensor


class DerivativeError(RuntimeError):
    pass


# an argument that is a tensor, for a grad_fn name computed from which arguments are (_underived)
_TENSOR = Tensor._make(np.zeros((), np.float32), D.float32)


def _lazy(bwd, fwd, value, src, saved_inputs, orders):
    """A symbolic stand-in for forward value `value`, made an input of `bwd` on first use.
    A rule that asks its layout (matmul's) is answered from the forward graph (ir/layout.py;
    `orders`: the orders found so far), and a saved value keeps its order for the derivative
    of this backward graph."""
    a = fwd[value]
    p = Proxy.make(bwd, None, a["shape"], a["dtype"])
    p.__dict__["_layout_of"] = (fwd, value, orders)

    def bind(proxy):
        # a value the op saved apart (its own memory since: `x.data = y` after the op saved
        # x's old memory, as torch's view made inside the op or its saved output keeps it) is
        # an input of its own, not the value the other ops saved
        op = fwd[src[0]]
        if op["op"] == "proj":
            op = fwd[op["args"][0]]
        apart = op.get("saved_apart")
        key = (value, src) if apart is not None and (src[1], src[2]) in apart else value
        name = saved_inputs.get(key)
        if name is None:
            name = bwd.add_input(a["shape"], a["dtype"], "saved", name=None, fwd=value, srcs=[],
                                 **order_attr(value_order(fwd, value, orders), a["shape"]))
            saved_inputs[key] = name
        srcs = bwd[name]["srcs"]
        if src not in srcs:
            srcs.append(src)
        proxy.__dict__["_name"] = name
        return name
    p.__dict__["_bind"] = bind
    return p


def carries_grad(a):
    """Whether a value of these attributes can hold a gradient: a floating-point one (a
    multi-output op's tuple where any element is). As in torch, an integer or bool result
    (a comparison, argmax, `.long()`) does not require grad, so no gradient flows through it."""
    d = a["dtype"]
    if isinstance(d, (list, tuple)):
        return any(x is not None and x.is_floating_point for x in d)
    return d is not None and d.is_floating_point


def needed_values(fwd, outputs, wrt):
    """Values on some path from a differentiated input to an output, through values that
    can hold a gradient."""
    down = _closure(lambda n: [u for u in fwd.nx.successors(n) if carries_grad(fwd[u])],
                    [w for w in wrt if w in fwd.nx])
    up = _closure(fwd.nx.predecessors, [o for o in outputs if o in fwd.nx])
    return (down | set(wrt)) & (up | set(outputs))


def _closure(step, starts):
    """The starts and everything `step` leads to from them: one walk for all the starts
    (a walk per start is quadratic in a function of many inputs)."""
    seen, stack = set(starts), list(starts)
    while stack:
        for m in step(stack.pop()):
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return seen


def opmath_source(fwd, a):
    """For the convert that rounds a float32 op to float16 or bfloat16 where the tracer computed a
    low-precision op in float32 (a number read at float32 precision: x16 * 0.1, x16 / y16 of a 0-dim
    y), the op as eager autograd records it: the op itself on the arguments before their casts to
    float32, with the convert's value as its result. Its derivative rule then runs on those, each
    of its ops rounded to the low dtype as eager's and torch's are; differentiating the cast and the
    float32 op instead rounded once at the end (x16 / y16's gradient for y, -g * (x / y) / y summed,
    came out a float16 step away). None for any other convert."""
    v = a["args"][0]
    if not isinstance(v, V) or v not in fwd.nx:
        return None
    src = fwd[v]
    mark = src.get("opmath")
    if mark is None or src["prim"] is None or src["prim"].name != mark[0] or len(list(fwd.nx.successors(v))) != 1:
        return None
    args = list(src["args"])
    for i in mark[1]:
        x = args[i] if i < len(args) else None
        if not isinstance(x, V) or fwd[x]["op"] != "convert":
            return None
        args[i] = fwd[x]["args"][0]
    return dict(src, args=tuple(args))


def uncast_args(fwd, a):
    """An op's arguments as eager autograd records them: where the tracer cast an argument to the
    op's compute dtype (int16 ** float16 casts the base, float16 * a float32 0-dim tensor the
    tensor), the value before the cast. Derivative rules are torch's, written for the arguments
    as given: pow's exponent gradient takes the log of the base cast to the result dtype, and
    pow(x16, y) computes y - 1 in y's dtype; on the cast arguments the compiled backward
    differed from eager's (1.41 ** int16 y: -inf eagerly and in torch, where y - 1 wraps to
    32767; compiled y was bfloat16 first, -0.0). The gradient reaches the value before the cast
    with the same broadcast and dtype plumbing as the cast's own rule."""
    pos = a.get("cast_args")
    if not pos:
        return a
    args = list(a["args"])
    for i in pos:
        x = args[i] if i < len(args) else None
        if isinstance(x, V) and x in fwd.nx and fwd[x]["op"] == "convert":
            args[i] = fwd[x]["args"][0]
    return dict(a, args=tuple(args))


def x_needed(x, need):
    return isinstance(x, V) and x in need


def _ctx_proxy(bwd, n, cache):
    """The run-time grad_fn node of forward value n, as a backward-graph input (role "ctx")."""
    if n not in cache:
        cache[n] = proxy_input(bwd, (), D.bool_, role="ctx", fwd=n)
    return cache[n]


def derive(fwd, outputs, wrt, hooks=None, node_hooks=(), defer_errors=False, leaf_rank=None, hook_rank=None,
           run_ops=()):
    """Build the backward graph of `fwd`.

    Inputs of the result: one gradient per output (role "grad"), then the forward values
    the rules read (role "saved", attribute `fwd` naming the forward value and `srcs`
    where it came from). Outputs: the gradient of each value in `wrt` (None where no
    path reaches it). `hooks` maps a forward value to a list of callables applied to its
    gradient once all of it has been summed (tensor hooks). With `defer_errors`, an op
    without a derivative (floor_divide) gets a `derivative_error` op that raises torch's
    error when the backward runs, instead of raising now (compile derives the backward
    before the first forward runs; eager autograd derives it when backward is called, and
    the hooks and rules torch runs before it reaches that op run first there too).
    `leaf_rank` orders the hooks of leaves whose gradients one op completes (torch's engine
    runs their AccumulateGrad nodes as its ready queue yields them); by argument without it.
    `hook_rank` orders the hooks of the outputs of one multi-output op (projections) that have
    them: they run when that op is reached, in this order. `run_ops`: the ops torch's engine runs
    though no gradient is wanted below them (backward(inputs=[an output of it])): the hooks of
    their outputs no gradient reached see None there too.
    """
    bwd = Graph("backward")
    bwd.number_after(fwd)           # no backward value takes the name of a forward value it is printed beside
    saved_inputs = {}
    orders = {}
    need = needed_values(fwd, outputs, wrt)
    hooks = hooks or {}
    ctxs = {}
    added_projs = []
    with trace(bwd):
        grads = _Grads()
        for o in outputs:
            a = fwd[o]
            seed = proxy_input(bwd, a["shape"], a["dtype"], role="grad")
            grads[o] = grads[o] + seed if o in grads else seed
        tuple_grads = {}
        captured = {}
        deferred = {}
        wrt_set = set(wrt)
        order = _walk_order(fwd, list(fwd.nx.nodes), need)
        reach = differentiable_reach(fwd, [w for w in wrt if w in fwd.nx])   # (where an error op is wanted)
        last_use = _last_uses(fwd, order, hooks)
        pending = ()
        for n in reversed(order):
            for x in pending:            # a leaf whose last consumer just ran: its hooks now
                if x in grads:
                    grads[x] = _call_hooks(grads[x], hooks[x])
            a = fwd[n]
            pending = [x for x in dict.fromkeys(a["args"]) if isinstance(x, V) and last_use.get(x) == n] \
                if last_use and a["op"] != "input" else ()
            if leaf_rank and len(pending) > 1:
                pending.sort(key=lambda x: leaf_rank.get(x, -1))
            if a["op"] == "proj" and n in hooks and n not in grads:
                # an output no gradient reached: torch calls its hooks with None when the op runs
                deferred.setdefault(a["args"][0], []).append(n)
            elif hook_rank and n in hook_rank:
                if n in grads:           # hooks on several outputs of one op: run at that op, below
                    deferred.setdefault(a["args"][0], []).append(n)
            elif n in grads and n in hooks and n not in last_use:
                if n in wrt_set and _runs_below(fwd, n, need):
                    # torch's grad() takes the gradient of an input whose grad_fn it runs anyway
                    # (for an input below it) before that node's tensor hooks, which it runs later
                    captured[n] = grads[n]
                grads[n] = _call_hooks(grads[n], hooks[n])
            op = a["op"]
            if op == "input":
                continue
            if op == "proj":
                if n in grads:
                    tuple_grads.setdefault(a["args"][0], {})[a["params"]["index"]] = grads[n]
                continue
            if deferred and n in deferred:
                # torch runs the tensor hooks of a node's outputs one output after another, in the
                # order each output got its first hook; those of an output no gradient reached
                # see None, where the node runs (another output got one)
                us = deferred.pop(n)
                got = tuple_grads.get(n)
                for u in sorted(us, key=hook_rank.__getitem__) if hook_rank else us:
                    if u not in grads:
                        if got and (n in need or n in run_ops):
                            k = next(iter(got))
                            got[k] = _call_hooks(got[k], hooks[u], none=True)
                            if n not in need:
                                # (no rule reads it: the output's own gradient passes through it)
                                for w in fwd.nx.successors(n):
                                    if fwd[w]["op"] == "proj" and fwd[w]["params"]["index"] == k and w in grads:
                                        grads[w] = got[k]
                        continue
                    if u in wrt_set and _runs_below(fwd, u, need):
                        captured[u] = grads[u]
                    k = fwd[u]["params"]["index"]
                    # (its gradient as the hooks before left it: passed through those given None)
                    grads[u] = _call_hooks(got[k], hooks[u])
                    got[k] = grads[u]
            prim = a["prim"]
            if n not in need:
                continue
            if op == "convert":
                src = opmath_source(fwd, a)
                if src is not None:
                    a = src               # its arguments are those before the casts already
                    prim = a["prim"]
            elif "cast_args" in a:
                a = uncast_args(fwd, a)
            if prim.multi:
                got = tuple_grads.get(n)
                if not got:
                    continue
                g = tuple(got.get(k) for k in range(len(a["shape"])))
                present = tuple(x is not None for x in g)
                if n in node_hooks and not prim.takes_ctx and not all(present):
                    # grad_fn hooks see None for the outputs no gradient reached (as torch)
                    ctx = _ctx_proxy(bwd, n, ctxs)
                    kept = apply(P["node_prehooks"], tuple(x for x in g if x is not None) + (ctx,),
                                 {"present": present})
                    kept = iter(kept if isinstance(kept, tuple) else (kept,))
                    g = tuple(next(kept) if p else None for p in present)
                if not prim.takes_ctx and a["params"].get("materialize", True):
                    # a custom Function gets None for undefined gradients (traced: set_materialize_grads(False))
                    g = tuple(x if x is not None else F.full(tuple(s), 0, dtype=d)
                              for x, s, d in zip(g, a["shape"], a["dtype"]))
                out = tuple(_lazy(bwd, fwd, p, (n, -1, k), saved_inputs, orders)
                            for k, p in enumerate(_projections(fwd, n, a, added_projs)))
            else:
                if n not in grads:
                    continue
                g = grads[n]
                out = _lazy(bwd, fwd, n, (n, -1, 0), saved_inputs, orders)
            args = a["args"]
            numbers = a.get("numbers") or {}      # Python numbers as given, where the kernel's are rounded
            in_proxies = tuple(_lazy(bwd, fwd, x, (n, i, 0), saved_inputs, orders) if isinstance(x, V) else
                               numbers.get(i, x) for i, x in enumerate(args))
            if prim.vjp is None:
                if any(isinstance(x, V) and x in need for x in args):
                    raise DerivativeError(f"the derivative for '{prim.name}' is not implemented")
                continue
            bwd.__dict__["source_hint"] = f"d {n} = {a.get('label') or a['op']}(...)"
            bwd.__dict__["origin"] = n
            hooked = n in node_hooks
            if prim.multi and not prim.takes_ctx and not all(present):
                hooked_post = hooked
                hooked = False           # its pre-hooks ran above
            else:
                present = None
                hooked_post = hooked
            if hooked:                   # grad_fn pre-hooks see (and may replace) the incoming grads
                gs = g if isinstance(g, tuple) else (g,)
                if any(x is None for x in gs):
                    # a custom Function's outputs no gradient reached (or not tensors): hooks see None
                    pres = tuple(x is not None for x in gs)
                    kept = apply(P["node_prehooks"], tuple(x for x in gs if x is not None) +
                                 (_ctx_proxy(bwd, n, ctxs),), {"present": pres})
                    kept = iter(kept if isinstance(kept, tuple) else (kept,))
                    gs = tuple(next(kept) if q else None for q in pres)
                else:
                    gs = apply(P["node_prehooks"], gs + (_ctx_proxy(bwd, n, ctxs),), {})
                g = gs if isinstance(g, tuple) else gs[0]
            if prim.takes_ctx:
                res = prim.vjp(g, out, *in_proxies, ctx=_ctx_proxy(bwd, n, ctxs), **a["params"])
            elif defer_errors and prim.name == "traced_function":
                # a custom Function's backward, traced now: what it raises (its own error, a
                # wrong shape or count of gradients) is raised when the backward runs, as in
                # torch, not by a forward that may never be differentiated
                try:
                    res = prim.vjp(g, out, *in_proxies, **a["params"])
                except TraceError:
                    raise                # not traceable: the call runs eagerly (compile falls back)
                except Exception as e:   # noqa: BLE001  (the user's code: any error)
                    g0 = next(x for x in g if x is not None)
                    res = tuple(apply(P["derivative_error"], (g0,), {"message": str(e), "error": e,
                                                                     "shape": tuple(fwd[x]["shape"])})
                                if isinstance(x, V) else None for x in args)
            else:
                try:
                    res = prim.vjp(g, out, *in_proxies, **a["params"])
                except DerivativeNotImplemented as e:
                    if not defer_errors or isinstance(g, tuple):
                        raise
                    # (torch's not_implemented(...) raises NotImplementedError: raised as it is)
                    # (one per argument, of its shape: a gradient of another shape would raise
                    # _fit's error before this one)
                    res = tuple(apply(P["derivative_error"], (g,), {"message": str(e), "shape": tuple(fwd[x]["shape"]),
                                                                    **({"error": e} if isinstance(
                                                                        e, NotImplementedError) else {})})
                                if isinstance(x, V) else None for x in args)
                except TraceError:
                    raise
                except (RuntimeError, TypeError) as e:
                    # the rule itself refuses its arguments (a bool exponent: `exponent - 1` raises
                    # torch's error in eager's backward, as in torch's): raised when the backward
                    # runs, as there, not by the forward of a compiled call
                    if not defer_errors or isinstance(g, tuple):
                        raise
                    res = tuple(apply(P["derivative_error"], (g,), {"message": str(e), "error": e,
                                                                    "shape": tuple(fwd[x]["shape"])})
                                if isinstance(x, V) else None for x in args)
            if not isinstance(res, tuple):
                res = (res,)
            res = _drop_unneeded_errors(bwd, args, res, need, reach)
            if (hooked_post or "stale_args" in a or "stale_out" in a or "stale_guard" in a) and \
                    any(r is EFFICIENT_ZERO for r in res):
                res = tuple(_Zero(fwd[x]).make() if r is EFFICIENT_ZERO else r for x, r in zip(args, res))
            if "stale_args" in a or "stale_out" in a or "stale_guard" in a:
                res = _refuse_stale_reads(fwd, n, res, need, out if isinstance(out, tuple) else (out,), in_proxies)
            if hooked_post:              # grad_fn hooks: fn(grad_inputs, grad_outputs)
                gs = g if isinstance(g, tuple) else (g,)
                params = {}
                if present is None and any(x is None for x in gs):
                    present = tuple(x is not None for x in gs)
                if present is not None:
                    gs = tuple(x for x, p in zip(gs, present) if p)
                    params["present"] = present
                live = [i for i, x in enumerate(args) if x_needed(x, need) and i < len(res) and res[i] is not None]
                mask = tuple(i in live for i in range(len(args)))
                new = apply(P["node_hooks"], tuple(res[i] for i in live) + tuple(gs) +
                            (_ctx_proxy(bwd, n, ctxs),), dict(params, mask=mask, n_out=len(gs)))
                new = dict(zip(live, new if isinstance(new, tuple) else (new,)))
                res = tuple(new.get(i) for i in range(len(args)))
            for i, x in enumerate(args):
                if not isinstance(x, V) or x not in need:
                    continue
                gi = res[i] if i < len(res) else None
                if gi is None:
                    continue
                xa = fwd[x]
                if gi is EFFICIENT_ZERO:
                    if x not in grads:
                        grads[x] = _Zero(xa)
                    continue
                gi = _fit(gi, xa["shape"], xa["dtype"], prim, i)
                if gi.__dict__.get("_name"):
                    # for anomaly checks: the rule that computed the value (a rule that passes
                    # its incoming gradient through, as add's, does not take it over)
                    made = bwd[gi.__dict__["_name"]]
                    made.setdefault("grad_of", (n, i))
                    if made["grad_of"] == (n, i) and prim.name in DERIVATIVE_NAMES:
                        made["grad_fn_name"] = DERIVATIVE_NAMES[prim.name]
                cur = dict.get(grads, x)
                grads[x] = gi if cur is None or cur.__class__ is _Zero else cur + gi
        for x in pending:
            if x in grads:
                grads[x] = _call_hooks(grads[x], hooks[x])
        result = []
        for w in wrt:
            result.append(captured[w] if w in captured else grads.get(w))
    bwd.outputs = [None if r is None else V(F_value(bwd, r)) for r in result]
    read = {k[0] if k.__class__ is tuple else k for k in saved_inputs}
    for u in added_projs:                # projections made for rules that did not read them
        if u not in read:
            fwd.nx.remove_node(u)
    # rules compute every input's gradient; those no output needs (and the saved
    # values only they read) go here
    from .passes import eliminate_dead_code  # deferred: import tracegrad does not load tracegrad.passes
    return eliminate_dead_code(bwd, drop_inputs=("saved",), own=True)


def _drop_unneeded_errors(bwd, args, res, need, reach):
    """A rule's `derivative_error` ops for the gradients of arguments that need none go: torch's
    node computes no gradient for an input that does not require one (igamma's in its first
    argument raises only where that argument requires grad). Dead-code elimination keeps every
    such op (a rule that ignores its gradient, round's, does not spare the node that raises), so
    the ones no argument that needs a gradient has are removed here (and from `res`, returned)."""
    wanted, spare = set(), set()
    for i, x in enumerate(args):
        r = res[i] if i < len(res) else None
        name = r.__dict__.get("_name") if r is not None and hasattr(r, "__dict__") else None
        if name is None or name not in bwd.nx or bwd[name]["op"] != "derivative_error":
            continue
        # (an argument a gradient reaches only through detach is needed by no one: torch has no
        # node for floor_divide(a.detach(), b.detach()))
        (wanted if isinstance(x, V) and x in need and x in reach else spare).add(name)
    gone = set()
    for name in spare - wanted:
        if not any(True for _ in bwd.nx.successors(name)):
            bwd.nx.remove_node(name)
            gone.add(name)
    if not gone:
        return res
    return tuple(None if r is not None and hasattr(r, "__dict__") and r.__dict__.get("_name") in gone else r
                 for r in res)


class _Zero:
    """The gradient of a value that only an efficient zero (primitives.EFFICIENT_ZERO) reached so
    far: the next gradient replaces it; read, it is zeros."""
    __slots__ = ("shape", "dtype")

    def __init__(self, a):
        self.shape, self.dtype = tuple(a["shape"]), a["dtype"]

    def make(self):
        return F.full(self.shape, 0, dtype=self.dtype)


class _Grads(dict):
    """derive's gradients by value: one read where only an efficient zero reached is zeros."""

    def __getitem__(self, k):
        v = dict.__getitem__(self, k)
        if v.__class__ is _Zero:
            v = v.make()
            dict.__setitem__(self, k, v)
        return v

    def get(self, k, default=None):
        return self[k] if k in self else default


def _runs_below(fwd, n, need):
    """Whether the backward runs the rule of the op that made value n (some argument of it
    needs a gradient)."""
    a = fwd[n]
    if a["op"] == "proj":
        a = fwd[a["args"][0]]
    if a["op"] == "input":
        return False
    return any(isinstance(x, V) and x in need for x in a["args"])


def _refuse_stale_reads(fwd, n, res, need, outs, ins):
    """The gradients of op n, made to raise torch's error when they run if its rule read a
    value that an in-place write inside the traced function replaced after n was recorded
    (functionalize._note_stale_readers marks such ops)."""
    a = fwd[n]
    read = [k for k in a.get("stale_out", ()) if k < len(outs) and _bound(outs[k])] + \
        [i for i in a.get("stale_args", ()) if i < len(ins) and _bound(ins[i])]
    if not read and not a.get("stale_guard"):       # (a guard is checked whether or not the rule reads it)
        return res
    shape, dtype = a["shape"], a["dtype"]
    if a.get("stale_args") and read and read[-1] in a["stale_args"]:
        x = fwd[a["args"][read[-1]]]
        shape, dtype = x["shape"], x["dtype"]
    elif isinstance(dtype, (list, tuple)):
        shape, dtype = shape[read[0] if read else 0], dtype[read[0] if read else 0]
    msg = (f"one of the variables needed for gradient computation has been modified by an inplace operation: "
           f"[torch.{D.LEGACY.get(dtype, dtype)} [{', '.join(map(str, shape))}]], saved by {a['op']} for backward, "
           f"was written in place afterwards inside the compiled function. Hint: clone it before the in-place op, "
           f"or write the in-place op's result to a new tensor.")
    args = a["args"]
    return tuple(r if r is None or i >= len(args) or not x_needed(args[i], need) else
                 apply(P["saved_value_written"], (r,), {"message": msg}) for i, r in enumerate(res))


def _bound(p):
    """Whether a rule read this lazy stand-in of a forward value (made it a saved input)."""
    return isinstance(p, Proxy) and p.__dict__.get("_name") is not None


def _underived(fwd, a):
    """Whether torch records op a's node as NotImplemented (an op without a derivative, floor_divide):
    the op table's name, fixed or computed from which arguments are tensors (remainder's of a
    number by a tensor, 2 % x). A convert that rounds a float32 op to float16 (opmath_source)
    stands for that op."""
    if a["op"] == "convert":
        a = opmath_source(fwd, a) or a
    prim = a["prim"]
    if prim is None or prim.multi:
        return False
    name = prim.grad_fn
    if callable(name):
        try:
            name = name(tuple(_TENSOR if isinstance(x, V) else x for x in a["args"]), a["params"])
        except Exception:          # noqa: BLE001 (a name that reads more of its tensors than a stand-in has)
            return False
    return name == "NotImplemented"


def _walk_order(fwd, order, need):
    """The forward values in the order derive walks them backwards: creation order (torch's
    engine runs the ready node of the highest sequence number), except that an op without a
    derivative runs as soon as its last consumer has: torch numbers its NotImplemented node
    UINT64_MAX, as an AccumulateGrad. Its rule raises, so where another rule raises too (pow's
    `exponent - 1` of a bool exponent) the error is the one torch's backward meets first."""
    moved = [n for n in order if n in need and _underived(fwd, fwd[n])]
    if not moved:
        return order
    key = {n: (i, 0, 0) for i, n in enumerate(order)}
    end = (len(order), 0, 0)
    for n in reversed(moved):      # (an op without a derivative that reads another's result: both move)
        users = [key[u] for u in fwd.nx.successors(n) if u in need]
        first = min(users) if users else end
        key[n] = (first[0], first[1] - 1, key[n][0])
    return sorted(order, key=key.__getitem__)


def _last_uses(fwd, order, hooks):
    """{leaf input with tensor hooks: the op that reads it first}: torch runs a leaf's
    AccumulateGrad, and with it the leaf's hooks, as soon as the last of its consumers has run
    backward, the leaves of one node in the order of its arguments (a * b: a's hooks, then b's)."""
    if not hooks:
        return {}
    found = {}
    for n in order:
        a = fwd[n]
        if a["op"] in ("input", "proj"):
            continue
        for x in a["args"]:
            if isinstance(x, V) and x in hooks and x not in found and fwd[x]["op"] == "input":
                found[x] = n
    return found


def _call_hooks(g, key, none=False):
    """Tensor hooks run at backward time: an opaque op whose callables are bound per run. With
    `none`, the hooks of an output no gradient reached, called with None after `g` (another
    output's gradient, passed through): their place in the program."""
    bwd = g.__dict__["_graph"]
    fns = proxy_input(bwd, (), D.bool_, role="hook", hook_key=key)
    # (the gradient's dtype: a bfloat16 one is stored as float32, and its hooks see bfloat16)
    return apply(P["call_hooks"], (g, fns), {"dtype": g.dtype, "none": True} if none else {"dtype": g.dtype})


def F_value(bwd, proxy):
    return value_of(bwd, proxy)


def _projections(fwd, n, a, added):
    """The proj node of each output of multi-output node n; an output whose projection a
    pass removed as unused gets a new one, which `derive` drops again if no rule reads it."""
    projs = [None] * len(a["shape"])
    for u in fwd.nx.successors(n):
        if fwd[u]["op"] == "proj":
            projs[fwd[u]["params"]["index"]] = u
    for k, u in enumerate(projs):
        if u is None:
            projs[k] = fwd.add_proj(n, k, tuple(a["shape"][k]), a["dtype"][k])
            added.append(projs[k])
    return projs


def _fit(gi, shape, dtype, prim, i):
    """The broadcast and dtype plumbing, shared by every rule."""
    if len(gi.shape) != len(shape) or tuple(gi.shape) != tuple(shape):      # (ranks first: no guard on a symbolic size)
        try:
            gi = sum_to(gi, tuple(shape))
        except Exception:
            raise DerivativeError(f"the derivative of '{prim.name}' for input {i} has shape {list(gi.shape)}, "
                                  f"which does not reduce to the input's shape {list(shape)}") from None
    if gi.dtype is not dtype and dtype.is_floating_point:
        gi = F.convert(gi, dtype)
    return gi


def differentiable_reach(g, wrt):
    """Values a gradient can flow to from `wrt` (not through detach or ops without a rule)."""
    reach, stack = set(wrt), list(wrt)
    while stack:
        n = stack.pop()
        for u in g.users(n):
            a = g[u]
            if u in reach or a["op"] == "detach" or (a["prim"] is not None and a["prim"].vjp is None) or \
                    not carries_grad(a):
                continue
            reach.add(u)
            stack.append(u)
    return reach


def mark_no_grad(graph, before):
    """The values a derivative without create_graph added to `graph` (all but `before`): as
    torch's backward computes them, none requires grad (functionalize._carries_grad: a write
    through their detach loses no gradient)."""
    graph.__dict__.setdefault("no_grad_values", set()).update(n for n in graph.nx if n not in before)


def grad_in_trace(outputs, inputs, grad_outputs, create_graph, allow_unused, materialize_grads):
    """`autograd.grad` on symbolic tensors, inside a function being traced (`compile`).

    The backward graph is derived from the graph recorded so far and traced into it, as
    `create_graph=True` re-traces a backward graph eagerly: the gradients are values of
    the same graph, so a compiled function may take derivatives of derivatives and the
    whole computation becomes one program. Without `create_graph` the gradients are
    detached, as torch's do not require grad."""
    graph = next(t.__dict__["_graph"] for t in outputs + inputs if isinstance(t, Proxy))
    for t in outputs + inputs:
        if isinstance(t, Proxy) and t.__dict__["_graph"] is not graph:
            raise TraceError("autograd.grad across two traced graphs")
    sources = [v for v in graph.inputs if graph[v].get("requires_grad")]
    outs = [value_of(graph, t) for t in outputs]
    wrt = [value_of(graph, t) for t in inputs]
    sh = LOCAL.shadow
    if sh is not None and sh.graph is graph:
        # the real leaves that require grad the function read (a module's parameters), as
        # backward() inside the trace takes them (functionalize.backward_in_trace)
        sources += [name for _, name in sh.leaf_values.values()]
    reach = differentiable_reach(graph, sources)
    for i, v in enumerate(outs):
        if v not in reach:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    for v in wrt:
        if v not in reach:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if sh is not None and sh.graph is graph and sh.stale_saves:
        # through an op whose saved value was written in place since: eager raises (the call runs
        # eagerly; functionalize._mark_saved_written)
        sub = graph.nx.subgraph(reach)
        up = set(outs)
        for o in outs:
            up |= nx.ancestors(sub, o)
        if any(n in sh.stale_saves and n not in sh.backwarded for n in up):
            raise TraceError("autograd.grad through a value saved for the backward and written in place since; "
                             "eager autograd raises there (modified by an inplace operation)")
    seeds = _seeds(outputs, list(grad_outputs or ()), True, "grad_outputs",
                   ones=lambda o: F.full(tuple(o.shape), 1.0, dtype=o.dtype))
    bwd = derive(graph, outs, wrt)
    args = backward_args(bwd, seeds, lambda v, a: Proxy.make(graph, v, a["shape"], a["dtype"]))
    if any(bwd[n]["prim"] is not None and bwd[n]["prim"].eager for n in bwd.nodes()):
        raise TraceError("autograd.grad through an op that runs eagerly inside a traced function")
    before = set(graph.nx) if not create_graph else None
    res = run_eager(bwd, args)
    if not create_graph:           # as torch's: the gradients do not require grad
        mark_no_grad(graph, before)
        res = [None if g is None else g.detach() for g in res]
    return _results(inputs, res, allow_unused, materialize_grads)


def backward_args(bwd, seeds, saved):
    """The arguments of backward graph `bwd` in its input order: `seeds` for its gradient
    inputs, `saved(forward value, attrs)` for its saved inputs, constants' own values."""
    args, k = [], 0
    for v in bwd.inputs:
        a = bwd[v]
        if a["role"] == "grad":
            args.append(seeds[k])
            k += 1
        elif a["role"] == "saved":
            args.append(saved(a["fwd"], a))
        elif a["role"] == "const":
            args.append(a["value"])
        else:
            raise TraceError("a backward graph that calls Python (a custom autograd.Function or a hook) "
                             "inside a traced function")
    return args
