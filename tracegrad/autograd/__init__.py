"""torch.autograd's API over the symbolic engine: backward, grad, grad modes."""
import sys
import warnings
import weakref
from collections.abc import Mapping

import numpy as np

from .. import _dtype as D
from ..grad_mode import (no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
                         is_inference_mode_enabled, STATE)
from ..tensor import Tensor, Above
from ..tracing import _DUAL
from .. import chain
from . import engine
from .graph import Node, AccumulateGrad, RemovableHandle, node_class, RETAIN_USED
from ._grad_io import _seeds, _results
from ..autodiff import grad_in_trace
from ..creation import zeros
from ..functionalize import backward_in_trace
from ._grad_io import _obeys_layout, _copy_obeying, _dense
from ..ops.functional import stack, contiguous_format
from ..ops.primitives import check_hook_results, GradStep, HANDED

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "Node", "graph"]


def _as_list(x, what):
    if isinstance(x, Tensor):
        return [x]
    if x is None:
        return []
    return list(x)


def _requires(t):
    """t.requires_grad, after a stale view's grad_fn is made again (it may now require grad)."""
    if t._view is None:
        return t._req or t._grad_fn is not None
    return t.grad_fn is not None or t._req


def _root(t, i):
    if not _requires(t):
        raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    return (t._accumulator(), 0)


def _target(t):
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    return (t._accumulator(), 0)


def _run(outputs, seeds, targets, retain_graph, create_graph, retain=False):
    """grad()'s backward: the gradients at `targets` (None where unreachable); with `retain`,
    retain_grad() tensors on the way get theirs too, as torch's hooks give it them."""
    roots = [_root(t, i) for i, t in enumerate(outputs)]
    order, index, structure, hooks = engine.walk_keyed([r[0] for r in roots])
    reach = []
    for n, s in targets:
        k = index.get(id(n))
        if k is None:
            index[id(n)] = -2          # unreachable: its gradient is None
        elif k >= 0:
            reach.append((n, s))
    retained = _retained(order, index, reach) if retain else ()
    done = ()
    user_hooks = hooks
    if retained and (hooks or structure[1]):
        done = _Steps()
        hooks = _with_steps(hooks, retained, (), create_graph, done)
    with engine.final_callbacks(captures=reach):
        try:
            outs = engine.execute(order, index, roots, seeds, reach + [tg for tg, _ in retained], retain_graph,
                                  create_graph, hooks, structure)
        except Exception as e:
            partial = e.__dict__.pop("_partial", None)
            if partial is not None and retained:        # what torch's retains_grad hooks took first
                got = partial[1][len(reach):]
                for i in _ran_first(index, retained, (partial[0], got)):
                    if (id(retained[i][0][0]), retained[i][0][1]) not in done:
                        _retain(retained[i][1], got[i])
            if retain and getattr(e, "_at_bind", False):
                # a saved value written in place or freed: torch runs the nodes before it first
                ran = {id(n) for n in engine.executed(order, reach)}
                err = _run_until_stale(order, index, roots, seeds, retain_graph, create_graph, user_hooks,
                                       structure, ran | {id(n) for n, _ in reach}, ran)
                if err is not None:
                    raise err from None
            raise
    if retained:
        for (tg, t), g in zip(retained, outs[len(reach):]):
            if g is not None and (id(tg[0]), tg[1]) not in done:
                _retain(t, g)
        outs = outs[:len(reach)]
    if len(reach) == len(targets):
        return outs, order
    res = iter(outs)
    return [next(res) if index[id(n)] >= 0 else None for n, s in targets], order


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulate gradients of `tensors` into the .grad of the graph's leaves (or of `inputs`)."""
    if grad_variables is not None:
        grad_tensors = grad_variables
    outputs = _as_list(tensors, "tensors")
    if _DUAL[0]:
        forward_ad.refuse_backward(outputs, "backward")
    if inputs is not None:
        inputs = _as_list(inputs, "inputs")
        if len(inputs) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    if any(t.__class__.__name__ == "Proxy" for t in outputs):     # inside a function being traced (compile)
        return backward_in_trace(outputs, _as_list(grad_tensors, "grad_tensors"), retain_graph, create_graph,
                                 inputs)
    for i, t in enumerate(outputs):
        if not _requires(t):
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    seeds = _seeds(outputs, _as_list(grad_tensors, "grad_tensors"), create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    roots = [_root(t, i) for i, t in enumerate(outputs)]
    order, index, structure, hooks = engine.walk_keyed([r[0] for r in roots])
    if inputs is not None:
        targets, seen = [], set()
        for t in inputs:
            if not _requires(t):
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            if t.grad_fn is not None:
                t.retain_grad()        # torch takes a non-leaf input's gradient as retain_grad() does
            tg = _target(t)
            if (id(tg[0]), tg[1]) not in seen:         # an input named twice gets its gradient once
                seen.add((id(tg[0]), tg[1]))
                targets.append(tg)
        leaves = [(tg, tg[0].variable) for tg in targets if isinstance(tg[0], AccumulateGrad)]
        idle_nodes, err = _idle_nodes(order, index, targets)
        if err is not None:              # a saved value of an input's grad_fn, written in place
            for n, _ in targets:
                index.setdefault(id(n), -2)
            raise _run_until_stale(order, index, roots, seeds, retain_graph, create_graph, hooks, structure,
                                   _wanted(order, targets, idle_nodes)) or err
    else:
        idle_nodes = ()
        targets = [(node, 0) for node in order if isinstance(node, AccumulateGrad)]
        leaves = [(tg, tg[0].variable) for tg in targets]
    for n, _ in targets:
        index.setdefault(id(n), -2)
    every = inputs is None               # torch runs every node it reaches (engine.sinks)
    retained = _retained(order, index, targets, every)
    reach = retained + [(tg, t) for tg, t in leaves if index[id(tg[0])] >= 0]
    done = ()
    user_hooks = hooks
    if hooks or structure[1] or (retained and any(t._post_acc_hooks for _, t in leaves)) or \
            (inputs is None and _function_sinks(order)):
        done = _Steps()
        # Python runs inside the backward (a hook) and may read .grad: each leaf's AccumulateGrad
        # step and each retain_grad() runs in the program where torch's engine runs it
        idle = _idle_targets(order, targets) if inputs is not None else ()
        sinks = _sink_steps(order, roots, targets, done, structure[1]) if inputs is None else None
        hooks = _with_steps(hooks, retained, reach[len(retained):], create_graph, done, idle, sinks)
    if create_graph and (WARN_ALWAYS[0] or not _WARNED_CYCLE[0]):
        _WARNED_CYCLE[0] = True        # once a process, as torch's TORCH_WARN_ONCE
        warnings.warn("Using backward() with create_graph=True will create a reference cycle between the parameter "
                      "and its gradient which can cause a memory leak. We recommend using autograd.grad when creating "
                      "the graph to avoid this. If you have to use this function, make sure to reset the .grad fields "
                      "of your parameters to None after use to break the cycle and avoid the leak.", UserWarning,
                      stacklevel=3)
    with set_grad_enabled(create_graph), engine.final_callbacks(accumulates=True):
        try:
            outs = engine.execute(order, index, roots, seeds, [tg for tg, _ in reach], retain_graph, create_graph,
                                  hooks, structure, every, _idle_hooked(index, idle_nodes))
        except Exception as e:
            partial = e.__dict__.pop("_partial", None)
            if partial is not None:
                _deliver_partial(order, index, roots, reach, retained, partial, create_graph, done, every)
                raise
            if not getattr(e, "_at_bind", False):
                raise
            err = _run_until_stale(order, index, roots, seeds, retain_graph, create_graph, user_hooks, structure,
                                   _wanted(order, targets, idle_nodes) if inputs is not None else None)
            if err is None:
                raise
            raise err from None
        _deliver(order, roots, reach, retained, outs, create_graph, done, every)
        if idle_nodes and not retain_graph:
            engine.free_graph(idle_nodes)    # torch ran them: their saved values go as theirs do


def _idle_hooked(index, idle_nodes):
    """The positions of the idle nodes (_idle_nodes) of several outputs with tensor hooks: torch
    runs them, calling the hooks of their outputs no gradient reached with None."""
    return tuple(sorted(index[id(n)] for n in idle_nodes
                        if len(n._out_meta) > 1 and n.__dict__.get("_tensor_hooks")))


def _idle_nodes(order, index, targets):
    """backward(inputs=[non-leaf]): the grad_fn nodes of such inputs that nothing below them
    wanted run. torch runs them (it marks every input's node needed), unpacking their saved
    tensors: one written in place since, or freed, raises as there (before anything runs here)."""
    idle = [n for n, _ in targets if n._prim is not None and index.get(id(n), -1) >= 0]
    if not idle:
        return (), None
    ran = {id(n) for n in engine.executed(order, targets)}
    idle = [n for n in idle if id(n) not in ran]
    for node in idle:
        err = _stale_error(node)
        if err is not None:
            return idle, err
    return idle, None


def _sink_steps(order, roots, targets, done, node_hooks):
    """backward() without inputs: the steps that run the grad_fn hooks of the nodes among
    engine.sinks that have them, as {(id(node), slot): (node, step)}, one for each floating output.
    torch runs such a node's pre-hooks and hooks with nothing below it to compute; the engine makes
    its outputs targets, so their gradients are computed, and the step after the tensor hooks of
    the last of its outputs to get one runs the node's hooks with all of them (None for an output
    no gradient reaches), as _idle_node_step does for a node of one output. `node_hooks`: the
    positions of the nodes with hooks (walk_keyed's); None where each of them reaches a leaf."""
    if all(k < 0 or _reaches_a_leaf(order[k]) for k in node_hooks) and not _function_sinks(order):
        return None
    per_node = {}
    for n, s in engine.sinks(order, targets):      # (one (node, slot) per floating output)
        if n._pre_hooks or n._hooks or n._prim.takes_ctx:
            per_node.setdefault(id(n), (n, []))[1].append(s)
    if not per_node:
        return None
    reached = {(id(n), s) for n, s in roots}       # the outputs a gradient reaches: a root, or read
    for n in order:
        for nf, s in n._edges:
            if nf is not None and id(nf) in per_node:
                reached.add((id(nf), s))
    steps = {}
    for k, (node, slots) in per_node.items():
        if len(slots) == 1:
            steps[(k, slots[0])] = (node, _idle_node_step(node, done))
            continue
        want = [s for s in slots if (k, s) in reached]
        got = {}
        for s in want:
            steps[(k, s)] = (node, _idle_node_gather(node, s, slots, want, got, done))
    return steps


def _reaches_a_leaf(node):
    """Whether a path leads from `node` to a leaf's AccumulateGrad (a walk that stops at the first:
    a hooked node of an ordinary graph finds one in a few steps)."""
    seen = set()
    stack = [node]
    while stack:
        n = stack.pop()
        for nf, _ in n._edges:
            if nf is not None and id(nf) not in seen:
                if nf._prim is None:
                    return True
                seen.add(id(nf))
                stack.append(nf)
    return False


def _idle_node_gather(node, slot, slots, want, got, done):
    def run_node_hooks(g, shared):
        got[slot] = g
        if len(got) == len(want):
            done.add((id(node), None))
            gs = tuple(got.get(s) for s in slots)
            got.clear()
            _run_idle_node(node, gs)
    return GradStep(run_node_hooks)


def _wanted(order, targets, idle):
    """The ids of the nodes a backward(inputs=...) runs in torch: those leading to an input,
    the inputs' AccumulateGrads and the idle grad_fns of non-leaf inputs."""
    wanted = {id(n) for n in engine.executed(order, targets)}
    wanted.update(id(n) for n, _ in targets)
    wanted.update(id(n) for n in idle)
    return wanted


def _idle_targets(order, targets):
    """backward(inputs=[non-leaf]): the grad_fn nodes of such inputs that torch runs though
    nothing below them is wanted (it marks every input's node needed): their hooks run, their
    post-hooks seeing None for every grad_input. One output each (see _target_prehooks)."""
    ran = None
    idle = set()
    for node, _ in targets:
        if node._prim is not None and (node._pre_hooks or node._hooks) and len(node._out_meta) == 1:
            if ran is None:
                ran = {id(n) for n in engine.executed(order, targets)}
            if id(node) not in ran:
                idle.add(id(node))
    return idle


def _ran_first(index, retained, partial):
    """Of a backward that failed at a node (partial: its index in creation order, and the
    gradients complete by then), which retain_grad() tensors torch's engine reached first: those
    whose grad_fn is that node (its tensor pre-hooks run before it) or runs before it (made
    after it)."""
    k, outs = partial
    return [i for i, ((node, _), _) in enumerate(retained) if index[id(node)] >= k and outs[i] is not None]


def _deliver_partial(order, index, roots, reach, retained, partial, create_graph, done, every=False):
    """A node's backward raised (a custom Function's): hand over what torch's engine had before
    it raised, the gradients of the retain_grad() tensors it reached and of the leaves whose
    AccumulateGrad it ran: those whose last node to run (the first made of those reading the
    leaf) was made after the failing one."""
    k, outs = partial
    keep = set(_ran_first(index, retained, partial))
    first = {}
    for node in order:
        if node._prim is not None:
            for nf, _ in node._edges:
                if nf is not None and id(nf) not in first:
                    first[id(nf)] = index[id(node)]
    keep.update(i for i in range(len(retained), len(reach)) if first.get(id(reach[i][0][0]), -1) > k)
    keep = sorted(keep)
    _deliver(order, roots, [reach[i] for i in keep], [retained[i] for i in keep if i < len(retained)],
             [outs[i] for i in keep], create_graph, done, every)


def _with_steps(hooks, retained, leaves, create_graph, done, idle=(), sinks=None):
    """The tensor hooks with torch's own steps after them: a retain_grad() tensor's copy of its
    gradient (torch's retains_grad hook runs after the tensor's hooks, as its grad_fn is
    reached) and a leaf's AccumulateGrad (its node's pre-hooks, .grad, its post-accumulate-grad
    hooks, its node's hooks), which torch runs as soon as the last node feeding it has run.
    What a step handled is noted in `done` ((id(node), slot)): _deliver skips it. `sinks`: the
    steps that run the hooks of nodes with no path to a leaf (_sink_steps)."""
    hooks = dict(hooks)

    def add(key, owner, slot, steps):
        had = hooks.get(key)
        hooks[key] = engine.LiveHooks(owner, slot, tuple(steps) if had is None else had.steps + tuple(steps))
    sinks = dict(sinks) if sinks else {}
    for (node, slot), t in retained:
        steps = [_retain_step(node, slot, t, done)]
        if id(node) in idle:
            steps.append(_idle_node_step(node, done))
        sink = sinks.pop((id(node), slot), None)
        if sink is not None:
            steps.append(sink[1])
        add((node, slot), node, slot, steps)
    for (_, slot), (node, step) in sinks.items():      # (an output not retained: the node's hooks alone)
        add((node, slot), node, slot, [step])
    for (node, slot), t in leaves:
        add((node, slot), t, None, [_accumulate_step(node, t, create_graph, done)])
    return hooks


def _retain_step(node, slot, t, done):
    def retain_grad_hook(g, shared):
        done.add((id(node), slot))
        if g is not None:
            _retain(t, g)
    return GradStep(retain_grad_hook)


def _idle_node_step(node, done):
    def run_node_hooks(g, shared):
        done.add((id(node), None))
        _run_idle_node(node, (g,))
    return GradStep(run_node_hooks)


def _function_sinks(order):
    """Whether a custom Function node with no edge, which backward() runs though no path leads from
    it to a leaf (engine.sinks), is among the nodes reached."""
    return function.SINKS_MADE[0] and any(n._prim is not None and n._prim.takes_ctx and
                                          all(e[0] is None for e in n._edges) for n in order)


def _run_idle_node(node, gs):
    """The hooks of a node torch runs with nothing to compute: pre-hooks (what they return is
    checked, and changes nothing), then post-hooks given None for each grad_input. A custom
    Function's node runs its backward between them (torch runs it, and drops what it returns)."""
    for h in list(node._pre_hooks.values()) if node._pre_hooks else ():
        r = h(gs)
        if r is not None:
            gs = check_hook_results(h, gs, r)
    gi = None
    if node._prim.takes_ctx:
        gi = function.call_unreached(node, gs)
    if node._hooks:
        if gi is None:
            gi = (None,) * len(node.next_functions)
        for h in list(node._hooks.values()):
            r = h(gi, gs)
            if r is not None:
                check_hook_results(h, gi, r)


def _accumulate_step(node, t, create_graph, done):
    shape, dt = node._out_meta[0]

    def accumulate_grad(g, shared):
        done.add((id(node), 0))
        if g is not None and not create_graph:
            # the engine hands this gradient back to no one (_gradient_tensors makes no copy of it):
            # every target of a backward() with steps is a step's
            taken = HANDED.__dict__.get("taken")
            if taken is None:
                taken = HANDED.taken = set()
            taken.add(id(g._data))
        if g is None:
            pass
        elif g._dtype is not dt:          # (a bfloat16 leaf's gradient runs as float32)
            g = g.to(dt) if create_graph else Tensor._make(g._data.astype(dt.np), dt)
        elif not shared and not create_graph:
            # the memory is the program's: taken over only where nothing else of the run
            # (its inputs, a gradient another leaf took) may hold it
            a = g._data
            if done.args is None:
                task = engine.current_task()
                done.args = {id(b) for b in getattr(task, "args", None) or ()}
            shared = a.__class__ is not np.ndarray or not (a.flags.owndata and a.flags.writeable) or \
                id(a) in done or id(a) in done.args or _held_elsewhere(a, g, done)
            if not shared:
                done.add(id(a))
        _deliver_leaf(node, t, g, create_graph, shared)
    return GradStep(accumulate_grad)


def _held_elsewhere(a, g, done):
    """Whether a tensor the backward handed to Python (a hook kept it), other than `g`, has
    array `a` as its memory (the tensors handed out so far are indexed once, in `done`)."""
    refs = getattr(HANDED, "tensors", None) or ()
    holders = done.holders
    for ref in refs[done.seen:]:
        t = ref()
        if t is not None:
            d = t._data
            holders.setdefault(id(d), set()).add(id(t))
            b = getattr(d, "base", None)
            if b is not None:
                holders.setdefault(id(b), set()).add(id(t))
    done.seen = len(refs)
    h = holders.get(id(a))
    return bool(h) and (len(h) > 1 or id(g) not in h)


class _Steps(set):
    """What the steps of one backward handled ((id(node), slot), ids of arrays a .grad took), and
    what they looked up once: the ids of the program's inputs, the arrays of handed-out tensors."""
    __slots__ = ("args", "holders", "seen")

    def __init__(self):
        super().__init__()
        self.args = None
        self.holders = {}
        self.seen = 0


def _run_until_stale(order, index, roots, seeds, retain_graph, create_graph, hooks, structure, wanted=None,
                     checked=None):
    """A backward whose saved value was written in place raised before it ran anything; torch's
    engine runs the nodes before the one that fails (its hooks, its AccumulateGrads: .grad set,
    post-accumulate hooks) and raises there. That part is run here, and the error of that node
    returned (None where no node's saved value is found written). `wanted`: the ids of the
    nodes torch reaches (backward(inputs=...), grad()), None for all; `checked`: those of them it
    runs (unpacking their saved values), None for all. A grad() (`checked` given) sets no .grad."""
    run = engine.torch_run_order([r[0] for r in roots])
    if wanted is not None:
        run = [n for n in run if id(n) in wanted]
    for k, node in enumerate(run):
        err = _stale_error(node) if checked is None or id(node) in checked else None
        if err is not None:
            break
    else:
        return None
    before = run[:k]
    targets = [(node, s) for s in range(len(node._out_meta))]
    leaves = []
    for n in before:
        if isinstance(n, AccumulateGrad):
            leaves.append(((n, 0), n.variable))
        else:
            targets.extend((n, s) for s in range(len(n._out_meta)))
    targets.extend(tg for tg, _ in leaves)
    retained = _retained(order, index, targets)
    reach = retained + leaves
    outs = engine.execute(order, index, roots, seeds, [tg for tg, _ in retained] + targets, True, create_graph, hooks,
                          structure)
    got = {(id(n), s): g for (n, s), g in zip([tg for tg, _ in retained] + targets, outs)}
    if checked is not None:
        reach = retained                 # grad(): the leaves' hooks ran; no .grad is set
    # (the failing node runs no further than its pre-hooks: its hooks are not run as an idle node's)
    _deliver(order, roots, reach, retained, [got[(id(n), s)] for (n, s), _ in reach], create_graph, {(id(node), None)})
    if not retain_graph:
        engine.free_graph(before)         # what ran frees its saved values, as torch's nodes release theirs
    if node._prim is not None and node._pre_hooks:
        # torch's node runs its pre-hooks, then unpacks what it saved and raises
        gs = tuple(got.get((id(node), s)) for s, (_, d) in enumerate(node._out_meta)
                   if d.is_floating_point or node._prim.takes_ctx)
        for h in list(node._pre_hooks.values()):
            r = h(gs)
            if r is not None:
                gs = check_hook_results(h, gs, r)
    return err


# the op table's argument names as torch's nodes name their saved values
_TORCH_NAMES = {"x": "self", "a": "self", "y": "other", "b": "other", "w": "weight"}


def _in_torchs_order(prim, saved):
    """A node's saved values (its result, then its arguments) in the order torch's node unpacks
    them, which names the first one found written: by name (mul(a, b) with both written names
    other, pow names exponent before result before self, clamp max before min)."""
    names = prim.inputs
    keyed = [("result", saved[0])]
    for i, s in enumerate(saved[1:]):
        name = names[min(i, len(names) - 1)] if names else ""
        keyed.append((_TORCH_NAMES.get(name, name) if i < len(names) or prim.variadic else "~", s))
    if prim.name == "pow":
        keyed[2] = ("exponent", keyed[2][1])
    return tuple(s for _, s in sorted(keyed, key=lambda k: k[0]))


def _stale_error(node):
    """The error torch's engine raises when it runs `node`, one of whose saved tensors was
    written in place since (it unpacks them all first) or freed by an earlier backward, or None."""
    if node._prim is not None and node._saved is None and (not node._prim.takes_ctx or node._freed):
        return RuntimeError(node.__dict__.get("_why") or engine.FREED_MSG)       # (_why: chain._stale)
    items = []
    saved = node._saved or ()
    if node._guarded:
        # what torch's node for the composite saves first: its decomposition's own saved values
        # may be other tensors made from them (index_add's index, expanded), named otherwise
        n = len(node._args_meta) + 1
        saved = saved[n:] + saved[:n]
    elif node._prim is not None and len(saved) > 2:
        saved = _in_torchs_order(node._prim, saved)
    for s in saved:
        if isinstance(s, tuple):
            items.extend(s)
        else:
            items.append(s)
    items.extend(node.__dict__.get("_fn_saved") or ())
    items.extend(node.__dict__.get("_read", ()))
    for s in items:
        if s is not None and hasattr(s, "vc"):
            try:
                engine._check_version(s, node)
            except RuntimeError as e:
                return e
    return None


def _deliver(order, roots, reach, retained, outs, create_graph, done=(), every=False):
    """backward()'s gradients handed over: retain_grad() tensors, then the leaves' .grad, each
    with its AccumulateGrad's hooks and its post-accumulate-grad hooks (those the program's
    steps, `done`, handed over already excepted). `every`: the backward ran every node it
    reached (backward() without inputs), their hooks with them: none is left idle."""
    if not every:
        _target_prehooks(reach, outs, engine.executed(order, [tg for tg, _ in reach]), done)
    steps = enumerate(zip(reach, outs))
    if any(tg[0]._pre_hooks or tg[0]._hooks or t._post_acc_hooks for tg, t in reach[len(retained):]):
        # what the hooks see: torch's order of AccumulateGrad nodes (a model's last layer
        # first, its bias before its weight), not the leaves' order of creation
        rank = {id(n): i for i, n in enumerate(engine.torch_run_order([r[0] for r in roots]))}
        steps = sorted(steps, key=lambda s: -1 if s[0] < len(retained) else rank.get(id(s[1][0][0][0]), -1))
    for k, ((tg, t), g) in steps:
        if done and (id(tg[0]), tg[1]) in done:
            continue
        if k < len(retained):
            if g is not None:
                _retain(t, g)
            continue
        node = tg[0]
        if node._pre_hooks or node._hooks or t._post_acc_hooks:
            # a leaf the backward reaches: torch runs its AccumulateGrad even where its gradient
            # is undefined (its hooks see None; .grad is left as it is)
            _deliver_leaf(node, t, g, create_graph)
        elif g is not None and t._req:
            _accumulate(t, g, create_graph)


def _deliver_leaf(node, t, g, create_graph, shared=False):
    """torch's AccumulateGrad node for leaf `t` given gradient `g`: its pre-hooks, .grad, the
    leaf's post-accumulate-grad hooks, its hooks. `shared`: the gradient is copied into .grad
    (not taken over)."""
    if node._pre_hooks:
        first = g
        base = sys.getrefcount(g)
        for h in list(node._pre_hooks.values()):     # AccumulateGrad pre-hooks: (grad,) -> (grad,)
            r = h((g,))
            if r is not None:
                g, = check_hook_results(h, (g,), r)
        r = h = None
        # torch steals the gradient only where nothing else holds it (its use_count): a
        # hook may have kept the tensor it was given or the one it returned
        shared = shared or sys.getrefcount(g) > (base if g is first else 2)
        first = None
    # an undefined gradient (a hook made it None) sets nothing; the hooks after still run, as torch's
    if t._req and g is not None:   # a leaf set to requires_grad=False since takes nothing, as torch's
        _accumulate(t, g, create_graph, shared)
    _post_accumulate_hooks(t)
    if node._hooks:
        for h in list(node._hooks.values()):         # post-hooks see no grad_inputs, as in torch
            r = h((), (g,))
            if r is not None:
                check_hook_results(h, (), r)


_WARNED_CYCLE = [False]
WARN_ALWAYS = [False]                  # torch.set_warn_always: warnings given once a process come every time


def _retained(order, index, targets, every=False):
    """(target, tensor) for each retain_grad() tensor whose grad_fn a backward to `targets`
    runs or which is a target itself: torch's retains_grad hook runs as that node is
    reached, in backward() and in grad() alike, and not where the node is not run. `every`: the
    backward runs every node it reaches (backward() without inputs, engine.sinks)."""
    if not RETAIN_USED[0]:               # no retain_grad() yet: no node holds one
        return []
    out = []
    ran = None
    for node in order:
        ret = node.__dict__.get("_retained") if node._prim is not None else None
        if not ret:
            continue
        if ran is None and not every:
            ran = {id(n) for n in engine.executed(order, targets)}
            ran.update(id(n) for n, _ in targets if index[id(n)] >= 0)
        if not every and id(node) not in ran:
            continue
        for slot, ref in ret.items():
            t = ref()
            if t is not None and (t.grad_fn is node or t._grad_fn is None and t._view is None):
                # (or detach_()'d since: torch's hook stays on the node and fills .grad all the same)
                out.append(((node, slot), t))
    return out


def _retain(t, g):
    """torch's retains_grad hook, run in the backward's grad mode: the first gradient is
    copied, later ones are added out of place (the old .grad object is left as it was)."""
    t._grad = g.clone() if t._grad is None else t._grad + g


def _target_prehooks(reach, outs, ran, done=()):
    """backward(inputs=[non-leaf]): the grad_fn of a non-leaf input is run with nothing to
    compute, as torch runs it: its pre-hooks (after the gradient is captured, which they do
    not change), then its post-hooks with None for each grad_input (those the program ran,
    `done`, excepted)."""
    ran = {id(n) for n in ran}
    per_node = {}
    for ((node, slot), _), g in zip(reach, outs):
        if node._prim is not None and (node._pre_hooks or node._hooks) and id(node) not in ran and \
                (id(node), None) not in done:
            per_node.setdefault(id(node), (node, {}))[1][slot] = g
    for node, got in per_node.values():
        # (torch's node has no input for an integer output, max(dim)'s indices)
        _run_idle_node(node, tuple(got.get(k) for k, (_, d) in enumerate(node._out_meta)
                                   if d.is_floating_point or node._prim.takes_ctx))


def _accumulate(t, g, create_graph, shared=False):
    """torch's AccumulateGrad: without create_graph the first gradient is stolen where nothing
    else holds it (`shared`: a hook saw it, and it is copied) and later ones are added in place
    (even into a .grad that requires grad, which keeps its history); with create_graph the
    first is copied (it may be the caller's own tensor: a seed) and later ones added out of
    place."""
    if g._data.shape != t._data.shape and (t._grad is not None or create_graph or shared or
                                           not _obeys_layout(g._data, t._data)):
        g = _to_leaf_shape(t, g)
    if not create_graph:
        g = Tensor._make(g._data, g._dtype) if g._req else g
    if t._grad is None:
        gd, td = g._data, t._data
        obeys = _obeys_layout(gd, td)
        if shared and not create_graph or not obeys and not create_graph:
            # torch's clone_obey_contract: the leaf's layout where it is dense, else C order
            g = Tensor._make(_copy_obeying(gd, td), g._dtype)
        elif create_graph:
            # torch's clone_obey_contract: empty_strided(the leaf's strides).copy_(g) where the
            # leaf is dense, else g.clone(contiguous_format)
            if td.flags.c_contiguous or _dense(td):
                if obeys:
                    g = g.clone()
                else:
                    out = Tensor._make(_copy_obeying(gd, td), g._dtype)
                    g = out.copy_(g) if g._req else out
                if g._grad_fn is not None:
                    g._grad_fn.__class__ = node_class("CopyBackwards")
            else:
                g = g.clone(memory_format=contiguous_format)
            g._vc[0] += 1
        t._grad = g
    elif create_graph:
        t._grad = t._grad + g
    else:
        t._grad._data += g._data.astype(t._grad._data.dtype, copy=False)
        t._grad._vc[0] += 1


def _to_leaf_shape(t, g):
    """The gradient of a leaf whose .data was given another shape after the graph was recorded
    (x.data = torch.ones(3) for x of shape [2, 3]), as torch's AccumulateGrad makes it: copied
    into the leaf's shape (clone_obey_contract), broadcast, or copy_'s error where it does not
    broadcast to it. tracegrad's .grad took the old shape."""
    out = zeros(tuple(t.shape), dtype=g.dtype)
    with no_grad():
        out.copy_(g)
    return out


def _post_accumulate_hooks(t):
    """A leaf's post-accumulate-grad hooks, run after its AccumulateGrad (also where it took
    nothing, a leaf set not to require grad since: torch runs them all the same)."""
    if t.grad_fn is None and t._post_acc_hooks:
        for h in list(t._post_acc_hooks.values()):
            r = h(t)
            if r is not None:        # torch checks it as a tensor hook's result first
                if not isinstance(r, Tensor):
                    raise TypeError(f"expected Variable, but hook returned '{type(r).__name__}'")
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs` (nothing is accumulated into .grad);
    `inputs` a dict gives a dict of gradients under the same keys, as torch's."""
    if _DUAL[0]:
        forward_ad.refuse_backward(outputs, "autograd.grad")
    if chain.LIVE[0]:            # a step of a chain after a compiled call (tracegrad/chain.py)?
        r = chain.grad_step(_grad_api, outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs,
                            allow_unused, is_grads_batched, materialize_grads)
        if r is not chain.NOT_STEP:
            return r
    return _grad_api(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused,
                     is_grads_batched, materialize_grads)


def _grad_api(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused,
              is_grads_batched, materialize_grads):
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    keys = None
    cls = inputs.__class__
    if cls is Tensor:
        inputs = [inputs]
    elif cls is dict:
        keys = list(inputs)
        inputs = list(inputs.values())
    elif cls is not list and cls is not tuple and isinstance(inputs, Mapping):
        raise TypeError(f"`inputs` argument to `grad()` must be a dict, not {type(inputs).__name__}. Other Mapping "
                        f"types are not supported.")
    else:
        inputs = _as_list(inputs, "inputs")
    outputs = [outputs] if outputs.__class__ is Tensor else _as_list(outputs, "outputs")
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use torch.autograd.backward.", FutureWarning,
                      stacklevel=2)
    res = _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, is_grads_batched,
                materialize_grads)
    return res if keys is None else dict(zip(keys, res))


def _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, is_grads_batched,
          materialize_grads):
    # torch's checks in torch's order: each output's type (its _make_grads), the outputs' requires_grad,
    # the implicit seeds and grad_outputs' shapes, then each input's type and requires_grad (its engine)
    proxy = False
    for t in outputs:
        if t.__class__ is not Tensor:
            if not isinstance(t, Tensor):
                raise AssertionError("Expected output to be a torch.Tensor")
            proxy = proxy or t.__class__.__name__ == "Proxy"
    if proxy:                                       # inside a function being traced
        for t in inputs:
            _check_input_type(t)
        return grad_in_trace(outputs, inputs, _as_list(grad_outputs, "grad_outputs"), create_graph, allow_unused,
                             materialize_grads)
    grad_outputs = () if grad_outputs is None else _as_list(grad_outputs, "grad_outputs")
    for i, t in enumerate(outputs):
        if not (t._req or t._grad_fn is not None if t._view is None else _requires(t)):
            if not is_grads_batched:
                _seed_errors(outputs, grad_outputs)
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    if is_grads_batched:
        n = _batch_size(outputs, grad_outputs)
    else:
        seeds = _seeds(outputs, grad_outputs, create_graph, "grad_outputs")
    for t in inputs:
        if t.__class__ is not Tensor:
            _check_input_type(t)
        if not (t._req or t._grad_fn is not None if t._view is None else _requires(t)):
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    targets = [_target(t) for t in inputs]
    if is_grads_batched:
        res = _batched(outputs, grad_outputs, n, targets, retain_graph, create_graph)
    else:
        if create_graph.__class__ is not bool:
            with set_grad_enabled(create_graph):       # (which refuses a mode that is no bool)
                res, _ = _run(outputs, seeds, targets, retain_graph, create_graph, True)
        else:
            prev = STATE.grad_enabled             # set_grad_enabled(create_graph), without a context object
            STATE.grad_enabled = create_graph
            try:
                res, _ = _run(outputs, seeds, targets, retain_graph, create_graph, True)
            finally:
                STATE.grad_enabled = prev
    return _results(inputs, res, allow_unused, materialize_grads, create_graph)


def _seed_errors(outputs, grads):
    """What torch's _make_grads raises, which runs before its engine asks whether each output
    requires grad: for an output that does and has no gradient, the implicit gradient's errors;
    for a gradient given, its shape's. An output without grad and without a gradient it passes over."""
    if len(grads) == 0:
        grads = [None] * len(outputs)
    for i, (o, g) in enumerate(zip(outputs, grads)):
        if g is None:
            if _requires(o):
                if o.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not o.dtype.is_floating_point:
                    raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got "
                                       f"{o.dtype}")
        elif isinstance(g, Tensor) and tuple(g.shape) != tuple(o.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a "
                               f"shape of {o.shape}.")


def _check_input_type(t):
    if not isinstance(t, Tensor):
        raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type(t).__name__}")


def _batch_size(outputs, grad_outputs):
    """is_grads_batched=True: torch's checks of the batched grad_outputs; their batch size."""
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad_outputs should be a sequence of length {len(outputs)}, got {len(grad_outputs)}")
    sizes = set()
    for i, (o, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(g, Tensor):
            raise RuntimeError("is_grads_batched=True needs a batched Tensor for each grad_output")
        if g.ndim == 0 or tuple(g.shape[1:]) != tuple(o.shape):
            raise RuntimeError(
                f"If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the batch "
                f"dimension. The sizes of the remaining dimensions are expected to match the shape of corresponding "
                f"output, but a mismatch was detected: grad_output[{i}] has a shape of {g.shape[1:]} and "
                f"output[{i}] has a shape of {o.shape}. If you only want some tensors in `grad_output` to be "
                f"considered batched, consider using vmap.")
        sizes.add(g.shape[0])
    if len(sizes) > 1:
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sorted(sizes)} for the mapped dimension")
    return sizes.pop()


def _batched(outputs, grad_outputs, n, targets, retain_graph, create_graph):
    """is_grads_batched=True: the first dimension of each grad_output indexes a batch of
    vector-Jacobian products (`n` of them), run one after another and stacked (torch vmaps them)."""
    per = []
    for b in range(n):
        seeds = _seeds(outputs, [g[b] for g in grad_outputs], create_graph, "grad_outputs")
        with set_grad_enabled(create_graph):
            res, _ = _run(outputs, seeds, targets, retain_graph or b < n - 1, create_graph)
        per.append(res)
    out = []
    for k, (node, slot) in enumerate(targets):
        col = [r[k] for r in per]
        if all(g is None for g in col):
            out.append(None)
            continue
        shape, dt = node._out_meta[slot]
        col = [zeros(shape, dtype=dt) if g is None else g for g in col]
        with set_grad_enabled(create_graph):
            out.append(stack(col) if n else zeros((0,) + tuple(shape), dtype=dt))
    return out


from . import graph  # noqa: E402  (torch.autograd.graph)
from .function import Function, FunctionCtx, once_differentiable, InplaceFunction, NestedIOFunction  # noqa: E402
from . import function  # noqa: E402
from .anomaly_mode import detect_anomaly, set_detect_anomaly, is_anomaly_enabled  # noqa: E402
from . import profiler  # noqa: E402
from .gradcheck import gradcheck, gradgradcheck  # noqa: E402
from . import functional  # noqa: E402
from . import forward_ad  # noqa: E402


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)

    def __call__(cls, data, requires_grad=False, volatile=False):
        return data.detach().requires_grad_(requires_grad)


class Variable(metaclass=_VariableMeta):
    """The pre-0.4 wrapper, kept by torch for old code: Variable(t, requires_grad=True) is a new
    leaf on t's values, and every tensor counts as a Variable."""

Above.backward = backward        # Tensor.backward()

chain.REAL_GRAD[0] = _grad_api
