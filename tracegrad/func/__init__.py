"""torch.func: functional_call, and the function transforms written on reverse mode: grad,
grad_and_value, vjp and jacrev.

A transform calls the function on its inputs lifted to a level of their own (an alias that
requires grad), takes the derivative with autograd.grad, and returns it with a graph only where
the inputs had one (so that grad(grad(f)) and a gradient of grad(f)(x) with respect to x work,
and grad(f)(x) of a plain x is a plain tensor). Gradients of inputs the output does not use are
zeros, as torch.func's. tracegrad has no forward mode: jvp is the derivative of a vector-Jacobian
product with respect to its vector (J t, from two reverse passes), jacfwd takes the Jacobian's
columns that way, and hessian is jacfwd of jacrev, as torch's. vmap runs the function once per
sample and stacks the results (torch's semantics, not its batching rules: see vmap)."""
import numpy as np

from ..autograd import grad as _grad
from ..creation import zeros, zeros_like, RNG
from ..grad_mode import STATE, enable_grad
from ..nn.utils.stateless import _functional_call
from ..tensor import Tensor
from ..ops import functional as O

__all__ = ["functional_call", "stack_module_state", "grad", "grad_and_value", "vjp", "jacrev", "jvp", "jacfwd",
           "hessian", "vmap"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """`module(*args, **kwargs)` with the given parameters and buffers (a dict, or a sequence of
    dicts with distinct keys) in place of the module's, for this call alone."""
    if isinstance(parameter_and_buffer_dicts, dict):
        given = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        seen, repeated = set(), []
        for d in parameter_and_buffer_dicts:
            for k in d:
                if k in seen and k not in repeated:
                    repeated.append(k)
                seen.add(k)
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        given = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    return _functional_call(module, given, args, kwargs, tie_weights=tie_weights, strict=strict)


def stack_module_state(models):
    """(parameters, buffers) of models of one architecture, each name's tensors stacked along a new
    first dim (torch.func.stack_module_state), for an ensemble run with vmap and functional_call:
    the stacked parameters are new leaves (requiring grad as the models' do), the buffers plain."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")

    def stacked(named):
        names = [n for n, _ in named(models[0])]
        out = {}
        for n in names:
            parts = [dict(named(m))[n] for m in models]
            out[n] = O.stack([t.detach() for t in parts])
        return out, {n: dict(named(models[0]))[n] for n in names}
    params, first = stacked(lambda m: m.named_parameters())
    for n, t in params.items():
        t.requires_grad_(first[n].requires_grad)
    buffers, _ = stacked(lambda m: m.named_buffers())
    return params, buffers


# -- pytrees of tensors: dicts, lists and tuples ------------------------------------------------------

def _flatten(tree):
    if isinstance(tree, dict):
        parts = [_flatten(v) for v in tree.values()]
        return [x for leaves, _ in parts for x in leaves], ("dict", list(tree), [s for _, s in parts])
    if isinstance(tree, (list, tuple)):
        parts = [_flatten(v) for v in tree]
        return [x for leaves, _ in parts for x in leaves], (type(tree), None, [s for _, s in parts])
    return [tree], None


def _unflatten(spec, leaves):
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        kind, keys, subs = s
        vals = [build(x) for x in subs]
        if kind == "dict":
            return dict(zip(keys, vals))
        return tuple(vals) if kind is tuple else list(vals)
    return build(spec)


def _spec_str(spec):
    """A tree's structure as torch's pytree prints it: * for a leaf."""
    if spec is None:
        return "*"
    kind, keys, subs = spec
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_spec_str(v)}" for k, v in zip(keys, subs)) + "}"
    inner = ", ".join(_spec_str(v) for v in subs)
    return f"[{inner}]" if kind is list else f"({inner},)" if len(subs) == 1 else f"({inner})"


def _argnums(argnums, n):
    if isinstance(argnums, bool) or not isinstance(argnums, (int, tuple)) or \
            (isinstance(argnums, tuple) and not all(isinstance(a, int) and not isinstance(a, bool) for a in argnums)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    many = isinstance(argnums, tuple)
    if many and len(set(argnums)) != len(argnums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    out = []
    for a in (argnums if many else (argnums,)):
        if not -n <= a < n:
            raise RuntimeError(f"Got argnum={a}, but only {n} positional inputs")
        out.append(a % n)
    return out, many


def _lift(t):
    if not isinstance(t, Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
    if t.requires_grad:
        return O.view_as(t, t)            # an alias in the caller's graph: the result keeps a path to t
    u = t.detach()
    u.requires_grad_()
    return u


def _derivatives(out, wrt, seeds, create_graph):
    """d out / d wrt (each output with its seed), zeros where wrt is not used."""
    pairs = [(o, s) for o, s in zip(out, seeds) if o.requires_grad]
    if not pairs:
        return [zeros_like(w) for w in wrt]
    gs = _grad([o for o, _ in pairs], wrt, [s for _, s in pairs], retain_graph=True, create_graph=create_graph,
               allow_unused=True)
    return [zeros_like(w) if g is None else g for g, w in zip(gs, wrt)]


def _plain(x, keep):
    """x (a tree) as the caller's level sees it: without the transform's graph unless `keep`."""
    if keep:
        return x
    leaves, spec = _flatten(x)
    return _unflatten(spec, [t.detach() if isinstance(t, Tensor) else t for t in leaves])


def _lifted_args(args, nums, grad_enabled):
    """The positional arguments with those at `nums` lifted; (new args, the lifted leaves per
    argument with their tree specs, whether any came with a graph the caller records: it
    requires grad and the caller's grad mode, `grad_enabled`, is on)."""
    args = list(args)
    lifted, connected = [], False
    for k in nums:
        leaves, spec = _flatten(args[k])
        connected = connected or any(isinstance(t, Tensor) and t.requires_grad for t in leaves)
        new = [_lift(t) for t in leaves]
        lifted.append((new, spec))
        args[k] = _unflatten(spec, new)
    return args, lifted, connected and grad_enabled


def _tensors_only(leaves, what):
    """`what` names the call and says what it expected: each leaf of a function's result a tensor."""
    for o in leaves:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{what}, got unsupported type {type(o)}")


def _split_aux(res, has_aux, api):
    """(output, aux) of a transformed function's result; aux None without has_aux."""
    if not has_aux:
        return res, None
    if not (isinstance(res, tuple) and len(res) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return res


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: a function returning (the gradient of func's scalar output with
    respect to the arguments at argnums, the output) (with has_aux: (gradient, (output, aux)))."""
    def wrapper(*args, **kwargs):
        nums, many = _argnums(argnums, len(args))
        outer = STATE.grad_enabled
        with enable_grad():
            new, lifted, connected = _lifted_args(args, nums, outer)
            out, aux = _split_aux(func(*new, **kwargs), has_aux, "grad_and_value(f)(*args)")
            if not isinstance(out, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(out)}")
            if out.ndim != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
                                   f"with {out.ndim} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            wrt = [t for leaves, _ in lifted for t in leaves]
            gs = iter(_derivatives([out], wrt, [None], connected))
            per_arg = [_unflatten(spec, [next(gs) for _ in leaves]) for leaves, spec in lifted]
        g = tuple(per_arg) if many else per_arg[0]
        value = _plain(out, connected)
        return (g, (value, _plain(aux, connected))) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: a function returning the gradient of func's scalar output with respect to
    the arguments at argnums (with has_aux: (gradient, aux))."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn) where vjp_fn(cotangents) gives the
    vector-Jacobian products with respect to each primal (with has_aux: and the aux)."""
    outer = STATE.grad_enabled
    with enable_grad():
        new, lifted, connected = _lifted_args(primals, range(len(primals)), outer)
        res, aux = _split_aux(func(*new), has_aux, "vjp(f, *primals)")
        out_leaves, out_spec = _flatten(res)
        _tensors_only(out_leaves, "vjp(f, *primals): Expected f(*primals) to return only tensors")

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        ct_leaves, ct_spec = _flatten(cotangents)
        if ct_spec != out_spec or len(ct_leaves) != len(out_leaves):
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                               f"to the function. cotangents: {_spec_str(ct_spec)}, primal output: "
                               f"{_spec_str(out_spec)}")
        keep = connected if create_graph is None else create_graph
        with enable_grad():
            wrt = [t for leaves, _ in lifted for t in leaves]
            gs = iter(_derivatives(out_leaves, wrt, ct_leaves, keep))
            per = [_unflatten(spec, [next(gs) for _ in leaves]) for leaves, spec in lifted]
        return tuple(_plain(p, keep) for p in per)

    out = _plain(res, connected)
    return (out, vjp_fn, _plain(aux, connected)) if has_aux else (out, vjp_fn)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: the Jacobian of func's outputs with respect to the arguments at argnums,
    one vector-Jacobian product per output element; each block has the output's shape then the
    input's."""
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    def wrapper(*args, **kwargs):
        nums, many = _argnums(argnums, len(args))
        outer = STATE.grad_enabled
        with enable_grad():
            new, lifted, connected = _lifted_args(args, nums, outer)
            res, aux = _split_aux(func(*new, **kwargs), has_aux, "jacrev(f, ...)(*args)")
            out_leaves, out_spec = _flatten(res)
            wrt = [t for leaves, _ in lifted for t in leaves]
            blocks = []
            _tensors_only(out_leaves, "jacrev(f, ...)(*args): expected f(*args) to return only tensors")
            for o in out_leaves:
                flat = O.reshape(o, (-1,))
                rows = []
                for i in range(flat.shape[0]):
                    seed = zeros_like(flat)
                    seed[i] = 1
                    rows.append(_derivatives([flat], wrt, [seed], connected))
                per_in = []
                for j, w in enumerate(wrt):
                    shape = tuple(o.shape) + tuple(w.shape)
                    per_in.append(O.reshape(O.stack([r[j] for r in rows]), shape) if rows
                                  else zeros(shape, dtype=w.dtype))
                it = iter(per_in)
                per_arg = [_unflatten(spec, [next(it) for _ in leaves]) for leaves, spec in lifted]
                blocks.append(tuple(per_arg) if many else per_arg[0])
        jac = _plain(_unflatten(out_spec, blocks), connected)
        return (jac, _plain(aux, connected)) if has_aux else jac
    return wrapper


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: (func(*primals), J tangents), computed as the derivative of u -> J^T u
    (linear in u) against the tangents, with respect to u."""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to call "
                           "f(*primals).")
    p_leaves, p_spec = _flatten(primals)
    t_leaves, t_spec = _flatten(tangents)
    if not isinstance(tangents, tuple) or p_spec != t_spec:
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, tangents also must be. Got "
                           f"primals with structure {_spec_str(p_spec)} and tangents with structure "
                           f"{_spec_str(t_spec)}")
    for p, t in zip(p_leaves, t_leaves):
        if isinstance(p, Tensor) and isinstance(t, Tensor) and tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                               f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                               f"forward gradient is of size {list(t.shape)}.")
    outer = STATE.grad_enabled
    with enable_grad():
        new, lifted, connected = _lifted_args(primals, range(len(primals)), outer)
        res, aux = _split_aux(func(*new), has_aux, "jvp(f, primals, tangents)")
        out_leaves, out_spec = _flatten(res)
        _tensors_only(out_leaves, "jvp(f, primals, tangents): expected f(*primals) to return only tensors")
        wrt = [t for leaves, _ in lifted for t in leaves]
        us = []
        for o in out_leaves:
            u = zeros_like(o.detach())
            u.requires_grad_()
            us.append(u)
        jtu = _derivatives(out_leaves, wrt, us, True)
        terms = [(g * t).sum() for g, t in zip(jtu, t_leaves) if g.requires_grad]
        if terms:
            total = terms[0]
            for term in terms[1:]:
                total = total + term
            jv = _derivatives([total], us, [None], connected)
        else:
            jv = [zeros_like(o) for o in out_leaves]
    out = _plain(res, connected)
    jv = _plain(_unflatten(out_spec, jv), connected)
    return (out, jv, _plain(aux, connected)) if has_aux else (out, jv)


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian with respect to the arguments at argnums, one column
    (a jvp) per input element; each block has the output's shape then the input's."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")

    def wrapper(*args, **kwargs):
        nums, many = _argnums(argnums, len(args))
        aux = None

        def at(*diff):
            a = list(args)
            for k, d in zip(nums, diff):
                a[k] = d
            return func(*a, **kwargs)
        diff = tuple(args[k] for k in nums)
        d_leaves, d_spec = _flatten(diff)
        cols_per_leaf = []
        out_spec, out_shapes = None, None
        for j, leaf in enumerate(d_leaves):
            cols = []
            n = leaf.numel() if isinstance(leaf, Tensor) else 0
            for i in range(n):
                basis = []
                for k, other in enumerate(d_leaves):
                    e = zeros_like(other.detach())
                    if k == j:
                        O.reshape(e, (-1,))[i] = 1
                    basis.append(e)
                r = jvp(at, diff, _unflatten(d_spec, basis), has_aux=has_aux)
                out, col = r[0], r[1]
                if has_aux:
                    aux = r[2]
                cols.append(_flatten(col)[0])
                out_spec, out_shapes = _flatten(out)[1], [tuple(o.shape) for o in _flatten(out)[0]]
            cols_per_leaf.append(cols)
        if out_spec is None and out_shapes is None:       # (no input element: evaluate for the shapes)
            res = at(*diff)
            if has_aux:
                res, aux = res
            leaves, out_spec = _flatten(res)
            out_shapes = [tuple(o.shape) for o in leaves]
        blocks = []
        for m, oshape in enumerate(out_shapes):
            per_in = []
            for leaf, cols in zip(d_leaves, cols_per_leaf):
                shape = oshape + tuple(leaf.shape)
                per_in.append(O.reshape(O.stack([c[m] for c in cols], -1), shape) if cols
                              else zeros(shape, dtype=leaf.dtype))
            per_arg = _unflatten(d_spec, per_in)
            blocks.append(per_arg if many else per_arg[0])
        jac = _unflatten(out_spec, blocks)
        return (jac, aux) if has_aux else jac
    return wrapper


def hessian(func, argnums=0):
    """torch.func.hessian: jacfwd(jacrev(func, argnums), argnums)."""
    return jacfwd(jacrev(func, argnums), argnums)


# -- vmap ------------------------------------------------------------------------------------------------

def _fname(func):
    return getattr(func, "__name__", repr(func))


class _Mismatch(Exception):
    pass


def _treespec_repr(spec, indent=0):
    """A tree's structure as torch's pytree TreeSpec prints it."""
    if spec is None:
        return "*"
    kind, keys, subs = spec
    name = "dict" if kind == "dict" else kind.__name__
    inner = ""
    if subs:
        indent += 2
        inner = _treespec_repr(subs[0], indent) + ("," if len(subs) > 1 else "")
        inner += ",".join("\n" + " " * indent + _treespec_repr(c, indent) for c in subs[1:])
    return f"TreeSpec({name}, {keys if kind == 'dict' else None}, [{inner}])"


def _dims_for(dims, spec, leaves_count, what, head, tree):
    """in_dims (or out_dims) broadcast over a tree of `spec`: a value per leaf. An int or None
    applies to a whole subtree (torch's tree prefix); a structure that does not match raises
    torch's error, naming both whole trees."""
    out = []

    def walk(d, s):
        if d is None or (isinstance(d, int) and not isinstance(d, bool)):
            out.extend([d] * _count(s))
            return
        if s is None or not isinstance(d, (tuple, list, dict)) or isinstance(d, dict) != (s[0] == "dict") or \
                (not isinstance(d, dict) and type(d) is not s[0] and not (isinstance(d, tuple) and s[0] is tuple)):
            raise _Mismatch
        kind, keys, subs = s
        if kind == "dict":
            if list(d) != list(keys):
                raise _Mismatch
            for k, sub in zip(keys, subs):
                walk(d[k], sub)
            return
        if len(d) != len(subs):
            raise _Mismatch
        for dd, sub in zip(d, subs):
            walk(dd, sub)
    try:
        walk(dims, spec)
    except _Mismatch:
        which = "inputs" if what == "in_dims" else "outputs"
        raise ValueError(f"{head}: {what} is not compatible with the structure of `{which}`. {what} has structure "
                         f"{_treespec_repr(_flatten(dims)[1])} but {which} has structure "
                         f"{_treespec_repr(tree)}.") from None
    assert len(out) == leaves_count
    return out


def _count(spec):
    if spec is None:
        return 1
    return sum(_count(s) for s in spec[2])


def _rng_state():
    """(the generator, its state); None for the state while compile traces (its stand-in raises
    at a draw, so the function runs eagerly)."""
    gen = RNG.gen
    return gen, gen.bit_generator.state if isinstance(gen, np.random.Generator) else None


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap: func mapped over a dimension of its inputs (in_dims: an int, None or a tree
    of them matching the arguments), the results stacked along out_dims.

    tracegrad runs func once per sample on views of the inputs (select along the mapped
    dimension) and stacks what it returns: the values and gradients of torch's vmap, for any
    function torch's can map, without its batching rules' speed. Where looping would differ from
    mapping, it raises: an in-place write to an argument that is not mapped (torch writes it
    once; a loop would write it once per sample), randomness="error" with a random draw inside.
    randomness="same" replays the same draws for every sample, "different" draws afresh. Python
    side effects inside func run once per sample (torch's run once)."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    name = _fname(func)

    def wrapper(*args, **kwargs):
        head = f"vmap({name}, in_dims={in_dims}, ...)(<inputs>)"
        if not (in_dims is None or isinstance(in_dims, (int, tuple)) and not isinstance(in_dims, bool)) or \
                in_dims is None:
            raise ValueError(f"{head}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                             f"structure of inputs, got: {type(in_dims)}.")
        leaves, spec = _flatten(tuple(args))
        dims = _dims_for(in_dims if isinstance(in_dims, tuple) else tuple([in_dims] * len(args)), spec, len(leaves),
                         "in_dims", head, spec)
        sizes = []
        for leaf, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(leaf, Tensor):
                raise ValueError(f"{head}: Got in_dim={d} for an input but the input is of type {type(leaf)}. We "
                                 f"cannot vmap over non-Tensor arguments, please use None as the respective in_dim")
            if not -leaf.ndim <= d < leaf.ndim:
                raise ValueError(f"{head}: Got in_dim={d} for some input, but that input is a Tensor of dimensionality "
                                 f"{leaf.ndim} so expected in_dim to satisfy -{leaf.ndim} <= in_dim < {leaf.ndim}.")
            sizes.append(leaf.shape[d])
        if not sizes:
            raise ValueError("vmap: Expected at least one Tensor to vmap over")
        if len(set(sizes)) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes} for the mapped dimension")
        n = sizes[0]
        unmapped = [(t, t._version) for t, d in zip(leaves, dims) if d is None and isinstance(t, Tensor)]
        before = _rng_state()
        results = []
        for i in range(max(n, 1)):
            if randomness == "same" and i and before[1] is not None:
                RNG.gen.bit_generator.state = before[1]
            if n:
                sample = [t if d is None else t.select(d, i) for t, d in zip(leaves, dims)]
            else:                          # (no sample: the function once on zeros, for the outputs' shapes)
                sample = [t if d is None else zeros(tuple(s for k, s in enumerate(t.shape) if k != d % t.ndim),
                                                    dtype=t.dtype) for t, d in zip(leaves, dims)]
            results.append(func(*_unflatten(spec, sample), **kwargs))
            if randomness == "error" and i == 0:
                after = _rng_state()
                if after[0] is not before[0] or after[1] != before[1]:
                    raise RuntimeError("vmap: called random operation while in randomness error mode. Please either "
                                       "use the 'same' or 'different' randomness flags on vmap or perform the "
                                       "randomness operation out of vmap")
        if n > 1 and any(t._version != v for t, v in unmapped):
            raise RuntimeError(f"vmap({name}): an in-place write to an argument that is not mapped (in_dim None): "
                               f"tracegrad's vmap runs the function once per sample and would write it {n} times "
                               f"where torch's writes it once; write it outside vmap")
        return _stack_outputs(results, n, out_dims, name)
    return wrapper


def _stack_outputs(results, n, out_dims, name):
    out_leaves, out_spec = _flatten(results[0])
    per = [_flatten(r)[0] for r in results]
    for leaf in out_leaves:
        if not isinstance(leaf, Tensor) and out_dims is not None:
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(leaf)}. Did you "
                             f"mean to set out_dims= to None for output?")
    head = f"vmap({name}, ..., out_dims={out_dims})(<inputs>)"
    if isinstance(out_dims, (tuple, list, dict)):
        if out_spec is None and isinstance(out_dims, (tuple, list)) and len(out_dims) == 1:
            out_dims = out_dims[0]           # (one output: out_dims=(1,) is its dim, as torch's)
        dims = [out_dims] * len(out_leaves) if not isinstance(out_dims, (tuple, list, dict)) else \
            _dims_for(out_dims, out_spec, len(out_leaves), "out_dims", head, out_spec)
    else:
        dims = [out_dims] * len(out_leaves)
    stacked = []
    for j, d in enumerate(dims):
        column = [p[j] for p in per]
        if d is None:
            first = column[0]
            same = all(c is first for c in column) or (isinstance(first, Tensor) and all(
                isinstance(c, Tensor) and tuple(c.shape) == tuple(first.shape) and bool(O.equal(c, first))
                for c in column))
            if not isinstance(first, Tensor):
                same = all(c == first for c in column)
            if not same:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            stacked.append(first)
            continue
        if n == 0:
            t = column[0]
            stacked.append(O.stack([t], d)[(slice(None),) * (d % (t.ndim + 1)) + (slice(0, 0),)])
            continue
        stacked.append(O.stack(column, d))
    return _unflatten(out_spec, stacked)
