"""torch.autograd.gradcheck and gradgradcheck.

The analytical Jacobian of each differentiable output is built row by row, one
`autograd.grad` call (a vector-Jacobian product with a one-hot vector) per output
element, twice, to catch a backward that is not reentrant. The numerical Jacobian is
built column by column by central differences, perturbing one element of an input's
numpy storage in place (as torch perturbs `.data`), so the function sees the same
tensor objects. Fast mode compares the scalars v^T J u instead of whole Jacobians.
"""
import warnings

import numpy as np

from .. import _dtype as D
from .. import autograd            # autograd.grad: autograd/__init__ imports this module
from ..tensor import Tensor
from ..grad_mode import no_grad
from .function import Function, _call_user_backward
from . import forward_ad
from ..creation import rand

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Error raised by :func:`gradcheck` and :func:`gradgradcheck`."""


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:

If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `fast_mode=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_fast_mode=False`
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_fast_mode=False`
""".strip()

UNDEFINED_GRAD_BC_MSG = ("Backwards compatibility: New undefined gradient support checking feature is enabled by "
                         "default, but it may break existing callers of this function. If this is true for you, you "
                         "can call this function with \"check_undefined_grad=False\" to disable the feature")


# -- small helpers ----------------------------------------------------------------

def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _is_float_tensor(x):
    return isinstance(x, Tensor) and x._dtype.is_floating_point


def _differentiable_outputs(out):
    return tuple(o for o in _as_tuple(out) if o.requires_grad)


def _diff_inputs(inputs):
    """(positions, tensors) of the inputs that require grad."""
    pairs = [(i, t) for i, t in enumerate(inputs) if isinstance(t, Tensor) and t._req]
    return [i for i, _ in pairs], [t for _, t in pairs]


def _tensor(a, dtype):
    return Tensor._make(np.array(a, dtype=dtype.np, order="C"), dtype)


def _allclose(a, b, rtol, atol):
    """torch.allclose(a, b) after promoting both to a common dtype: |a - b| <= atol + rtol * |b|."""
    dt = D.promote_types(a._dtype, b._dtype).np
    return bool(np.allclose(a._data.astype(dt), b._data.astype(dt), rtol=rtol, atol=atol))


def _notallclose_msg(analytical, numerical, output_idx, input_idx):
    return (f"Jacobian mismatch for output {output_idx:d} with respect to input {input_idx:d},\n"
            f"numerical:{numerical}\nanalytical:{analytical}\n")


def _grad(outputs, inputs, grad_outputs, retain_graph=None, create_graph=False):
    return autograd.grad(outputs, inputs, grad_outputs, retain_graph=retain_graph, create_graph=create_graph,
                         allow_unused=True)


# -- input and output checks ------------------------------------------------------

def _check_inputs(tupled_inputs):
    any_requires_grad = False
    for idx, inp in enumerate(tupled_inputs):
        if isinstance(inp, Tensor) and inp.requires_grad:
            if inp.dtype is not D.float64:
                warnings.warn(f"Input #{idx} requires gradient and is not a double precision floating point or "
                              "complex. This check will likely fail if all the inputs are not of double precision "
                              "floating point or complex. ", stacklevel=4)
            if not all(st > 0 or sz <= 1 for st, sz in zip(inp.stride(), inp.size())):
                raise RuntimeError(f"The {idx}th input has a dimension with stride 0. gradcheck only supports inputs "
                                   "that are non-overlapping to be able to compute the numerical gradients correctly. "
                                   "You should call .contiguous on the input before passing it to gradcheck.")
            any_requires_grad = True
    if not any_requires_grad:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")


# -- numerical Jacobians ----------------------------------------------------------

def _evaluate(func, inputs):
    """func(*inputs) as float64 copies of its floating outputs (None for the others)."""
    outs = _as_tuple(func(*inputs))
    return outs, [np.array(o._data, dtype=np.float64, copy=True) if _is_float_tensor(o) else None for o in outs]


def _check_same_meta(a, b, eps, idx):
    on_index = f"on index {idx} " if idx is not None else ""
    if a.shape != b.shape:
        raise AssertionError(f"Expected `func` to return outputs with the same shape when inputs are perturbed "
                             f"{on_index}by {eps}, but got: shapes {a.shape} and {b.shape}.")
    if a.dtype != b.dtype:
        raise AssertionError(f"Expected `func` to return outputs with the same dtype when inputs are perturbed "
                             f"{on_index}by {eps}, but got: dtypes {a.dtype} and {b.dtype}.")


def _central_difference(func, inputs, inp, where, delta, eps, idx=None):
    """(f(x + delta) - f(x - delta)) / (2 eps) per output, perturbing `inp`'s storage at `where` in place."""
    held = inp._data
    storage = held if held.flags.writeable else np.array(held, copy=True)  # read-only: perturb a private copy
    inp._data = storage
    orig = np.array(storage[where], copy=True)
    try:
        storage[where] = orig - delta
        outs_a, a = _evaluate(func, inputs)
        storage[where] = orig + delta
        outs_b, b = _evaluate(func, inputs)
    finally:
        storage[where] = orig
        inp._data = held
    cols = []
    for oa, ob, va, vb in zip(outs_a, outs_b, a, b):
        if va is None:
            cols.append(None)
            continue
        _check_same_meta(oa, ob, eps, idx)
        cols.append(((vb - va) / (2 * eps)).reshape(-1))
    return cols


def _numerical_jacobian(func, inputs, func_out, eps):
    """For each input that requires grad, a list over outputs of (input numel x output numel) tensors."""
    func_out = _as_tuple(func_out)
    _, diff = _diff_inputs(inputs)
    result = []
    for inp in diff:
        jacs = [np.zeros((inp.numel(), o.numel())) if _is_float_tensor(o) else None for o in func_out]
        for d_idx, idx in enumerate(np.ndindex(*inp._data.shape)):
            cols = _central_difference(func, inputs, inp, idx, eps, eps, idx)
            for jac, col in zip(jacs, cols):
                if jac is not None:
                    jac[d_idx] = col
        result.append([None if j is None else _tensor(j, o.dtype) for j, o in zip(jacs, func_out)])
    return result


def _check_no_differentiable_outputs(func, inputs, func_out, eps):
    for per_input in _numerical_jacobian(func, inputs, func_out, eps):
        for jac in per_input:
            if jac is not None and np.count_nonzero(jac._data) > 0:
                raise GradcheckError("Numerical gradient for function expected to be zero")
    return True


# -- analytical Jacobians ---------------------------------------------------------

def _analytical_rows(output, diff_inputs, vectors):
    """vjp(v) for each v in `vectors`: a list over inputs of lists over v of gradients (or None)."""
    rows = [[] for _ in diff_inputs]
    for v in vectors:
        grads = _grad(output, diff_inputs, v, retain_graph=True)
        for per_input, g in zip(rows, grads):
            per_input.append(None if g is None else Tensor._make(np.array(g._data, copy=True), g._dtype))
    return rows


def _one_hot_vectors(output):
    n = output.numel()
    for j in range(n):
        e = np.zeros(n, dtype=output._dtype.np)
        e[j] = 1
        yield Tensor._make(e.reshape(output._data.shape), output._dtype)


def _stack_rows(rows, diff_inputs, width):
    """Jacobians (input numel x width) in each input's dtype, and whether sizes and dtypes were right."""
    jacs, sizes_ok, types_ok = [], True, True
    for inp, per_input in zip(diff_inputs, rows):
        jac = np.zeros((inp.numel(), width), dtype=inp._dtype.np)
        for j, g in enumerate(per_input):
            if g is None:
                continue
            if tuple(g.shape) != tuple(inp.shape):
                sizes_ok = False
            elif g._dtype is not inp._dtype:
                types_ok = False
            if g.numel() != inp.numel():
                raise GradcheckError("Analytical gradient has incorrect size")
            jac[:, j] = g._data.reshape(-1)
        jacs.append(Tensor._make(jac, inp._dtype))
    return jacs, sizes_ok, types_ok


def _jacobians_equal(j1, j2, tol):
    for a, b in zip(j1, j2):
        if a.numel() != 0 and np.max(np.abs(a._data - b._data)) > tol:
            return False
    return True


def _checked_analytical(inputs, output, nondet_tol, check_grad_dtypes, v=None):
    """The analytical Jacobians of one output (slow mode) or v^T J (fast mode, v given), computed twice."""
    _, diff = _diff_inputs(inputs)
    if v is None:
        width = output.numel()
        rows1 = _analytical_rows(output, diff, _one_hot_vectors(output))
        rows2 = _analytical_rows(output, diff, _one_hot_vectors(output))
    else:
        width = 1
        vec = Tensor._make(v._data.reshape(output._data.shape), v._dtype)
        rows1 = _analytical_rows(output, diff, [vec])
        rows2 = _analytical_rows(output, diff, [vec])
    jacs1, sizes_ok, types_ok = _stack_rows(rows1, diff, width)
    jacs2, _, _ = _stack_rows(rows2, diff, width)
    reentrant = _jacobians_equal(jacs1, jacs2, nondet_tol)
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError("Backward is not reentrant, i.e., running backward with same input and grad_output "
                             "multiple times gives different values, although analytical gradient matches numerical "
                             f"gradient.The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG)
    return jacs1


# -- slow and fast mode -----------------------------------------------------------

def _slow_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol):
    func_out = _as_tuple(func_out)
    if not outputs:
        return _check_no_differentiable_outputs(func, inputs, func_out, eps)
    per_input = _numerical_jacobian(func, inputs, func_out, eps)
    numerical = [list(col) for col in zip(*per_input)]              # [output][input]
    numerical = [n for o, n in zip(func_out, numerical) if o.requires_grad]
    for i, o in enumerate(outputs):
        analytical = _checked_analytical(inputs, o, nondet_tol, check_grad_dtypes)
        for j, (a, n) in enumerate(zip(analytical, numerical[i])):
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(_notallclose_msg(a, n, i, j))
    return True


class _TorchCPUGenerator:
    """The stream of a fresh `torch.Generator()` on CPU: mt19937 seeded with torch's default seed.

    torch's fast mode draws its random vectors from such a generator with `torch.rand`,
    which turns each 32-bit draw into a float with 24 random bits (53 bits from two
    draws when the default dtype is float64); drawing the same numbers here makes
    tracegrad's fast mode check the same v^T J u as torch's.
    """
    SEED = 67280421310721

    def __init__(self):
        self._mt = np.random.RandomState(self.SEED & 0xFFFFFFFF)

    def rand(self, n):
        if D.get_default_dtype() is D.float64:
            words = self._mt.randint(0, 2 ** 32, size=2 * n, dtype=np.uint32).astype(np.uint64)
            bits = ((words[0::2] << np.uint64(32)) | words[1::2]) & np.uint64((1 << 53) - 1)
            return bits.astype(np.float64) * 2.0 ** -53
        words = self._mt.randint(0, 2 ** 32, size=n, dtype=np.uint32).astype(np.uint64)
        return (words & np.uint64((1 << 24) - 1)).astype(np.float64) * 2.0 ** -24


def _random_unit_vector(gen, numel, dtype):
    v = gen.rand(numel).astype(dtype.np)
    norm = np.sqrt(np.sum(v * v))
    return Tensor._make(v / norm if norm > 0 else v, dtype)


def _slow_mode_report(func, inputs, outputs, input_idx, output_idx, rtol, atol, eps):
    numerical = _numerical_jacobian(func, inputs, outputs, eps)[input_idx][output_idx]
    analytical = _checked_analytical(inputs, outputs[output_idx], float("inf"), False)[input_idx]
    max_diff = _tensor(np.max(np.abs(numerical._data - analytical._data.astype(np.float64))),
                       D.promote_types(numerical._dtype, analytical._dtype))
    msg = ("\nThe above quantities relating the numerical and analytical jacobians are computed \n"
           "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more background \n"
           "about fast mode. Below, we recompute numerical and analytical jacobians in slow mode:\n\n"
           f"Numerical:\n {numerical}\n"
           f"Analytical:\n{analytical}\n\n"
           f"The max per-element difference (slow mode) is: {max_diff}.\n")
    if _allclose(analytical, numerical, rtol, atol):
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


def _fast_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol):
    func_out = _as_tuple(func_out)
    positions, diff = _diff_inputs(inputs)
    rng = _TorchCPUGenerator()                   # its own generator: the user's random state is left alone
    all_u = [_random_unit_vector(rng, t.numel(), t._dtype) for t in diff]
    all_v = [_random_unit_vector(rng, o.numel(), o._dtype) for o in outputs]
    # numerical J u for each input, as central differences along u
    numerical = []
    for inp, u in zip(diff, all_u):
        cols = _central_difference(func, inputs, inp, Ellipsis,
                                   eps * u._data.astype(np.float64).reshape(inp._data.shape), eps)
        if not outputs:
            for c in cols:
                if c is not None and c.size and np.max(np.abs(c)) > nondet_tol:
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        cols = [c for c, o in zip(cols, func_out) if c is not None and o.requires_grad]
        numerical.append([_tensor(np.dot(v._data.astype(np.float64), c), o.dtype)
                          for v, c, o in zip(all_v, cols, outputs)])
    # analytical v^T J u for each output
    analytical = []
    for o, v in zip(outputs, all_v):
        vjs = _checked_analytical(inputs, o, nondet_tol, check_grad_dtypes, v=v)
        analytical.append([_tensor(np.dot(vj._data.reshape(-1), u._data), vj._dtype) for vj, u in zip(vjs, all_u)])
    for i, per_output in enumerate(numerical):
        for j, n in enumerate(per_output):
            a = analytical[j][i]
            tol = atol * float(all_u[i]._data.sum()) * float(all_v[j]._data.sum())
            if not _allclose(a, n, rtol, tol):
                report = _slow_mode_report(func, inputs, outputs, i, j, rtol, atol, eps)
                raise GradcheckError(_notallclose_msg(a, n, j, i) + report)
    return True


# -- forward mode -------------------------------------------------------------------

def _forward_jacobians(func, inputs, func_out):
    """The Jacobians forward-mode AD gives, column by column: each input that requires grad
    made dual (of its detached value) with a one-hot tangent, the outputs' tangents read (none
    is zeros). For each input, a list over outputs of (input numel x output numel) tensors."""
    positions, diff = _diff_inputs(inputs)
    func_out = _as_tuple(func_out)
    result = []
    for pos, inp in zip(positions, diff):
        jacs = [np.zeros((inp.numel(), o.numel())) if _is_float_tensor(o) else None for o in func_out]
        for j in range(inp.numel()):
            with forward_ad.dual_level():
                args = list(inputs)
                for p, x in zip(positions, diff):
                    tangent = np.zeros(x._data.shape, x._data.dtype)
                    if p == pos:
                        tangent.reshape(-1)[j] = 1
                    args[p] = forward_ad.make_dual(x.detach(), Tensor._make(tangent, x._dtype))
                outs = _as_tuple(func(*args))
                for jac, o in zip(jacs, outs):
                    if jac is not None:
                        tangent = forward_ad.unpack_dual(o).tangent
                        if tangent is not None:
                            jac[j] = np.asarray(tangent._data, dtype=np.float64).reshape(-1)
        result.append([None if j is None else _tensor(j, o.dtype) for j, o in zip(jacs, func_out)])
    return result


def _forward_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol):
    """torch's check_forward_ad: forward-mode Jacobians against central differences (in slow
    mode's element by element form, whatever fast_mode says)."""
    func_out = _as_tuple(func_out)
    if not outputs:
        return True
    keep = [k for k, o in enumerate(func_out) if o.requires_grad]
    numerical = _numerical_jacobian(func, inputs, func_out, eps)
    forward = _forward_jacobians(func, inputs, func_out)
    for j, (n_in, a_in) in enumerate(zip(numerical, forward)):
        for i, k in enumerate(keep):
            a, n = a_in[k], n_in[k]
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(f"Jacobian computed with forward mode mismatch for output {i:d} with respect to "
                                     f"input {j:d},\nnumerical:{n}\nanalytical:{a}\n")
    return True


# -- the checks after the Jacobians -----------------------------------------------

def _test_backward_mul_by_grad_output(outputs, inputs, masked):
    _, diff = _diff_inputs(inputs)
    if not diff:
        raise GradcheckError("no Tensors requiring grad found in input")
    zeros = [Tensor._make(np.zeros(o._data.shape, dtype=o._dtype.np), o._dtype) for o in outputs]
    grads = _grad(outputs, diff, zeros)
    for gi, di in zip(grads, diff):
        if gi is None:
            continue
        if masked:
            if not np.allclose(gi._data, 0):
                raise GradcheckError("backward not multiplied by grad_output")
        elif np.any(gi._data != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if gi._dtype is not di._dtype:
            raise GradcheckError("grad is incorrect type")
        if tuple(gi.shape) != tuple(di.shape):
            raise GradcheckError("grad is incorrect size")
    return True


def _test_undefined_backward_mode(func, outputs, inputs):
    """Backward must treat absent (zero) output gradients as zeros and give zero input gradients.

    tracegrad has no undefined-gradient tensors: an absent output gradient is a zero
    tensor, so one call with all-zero output gradients covers every case torch checks.
    """
    _, diff = _diff_inputs(inputs)
    if not diff:
        raise GradcheckError("no Tensors requiring grad found in input")
    outs = [o for o in _differentiable_outputs(func(*inputs)) if isinstance(o, Tensor)]
    zeros = [Tensor._make(np.zeros(o._data.shape, dtype=o._dtype.np), o._dtype) for o in outs]

    class UndefinedGrad(Function):
        """torch._C._functions.UndefinedGrad: identity forward; backward gives None."""
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return None

    try:
        # the backward sees undefined (None) output gradients, as torch's check feeds it
        grads = _grad([UndefinedGrad.apply(o) if o.requires_grad else o for o in outs], diff, zeros)
    except RuntimeError as e:
        warnings.warn(UNDEFINED_GRAD_BC_MSG, stacklevel=4)
        raise GradcheckError("Expected backward function to handle undefined output grads. Please look at \"Notes "
                             "about undefined output gradients\" in \"tools/autograd/derivatives.yaml\"") from e
    _check_zero_grads(grads)
    # a custom Function that asked for undefined gradients (set_materialize_grads(False)) gets
    # None, as torch's UndefinedGrad gives it: all of them, then one at a time
    for o in outs:
        node = o.grad_fn
        if node is None or node._prim is None or not node._prim.takes_ctx or \
                node.__dict__.get("_materialize", True):
            continue
        n = len(node._out_meta)
        cases = [[None] * n]
        if n > 1:
            cases += [[None if k == i else Tensor._make(np.zeros(s, d.np), d) for k, (s, d) in
                       enumerate(node._out_meta)] for i in range(n)]
        for gs in cases:
            try:
                with no_grad():
                    grads = _call_user_backward(node, gs, node._args_meta, True)
            except RuntimeError as e:
                warnings.warn(UNDEFINED_GRAD_BC_MSG, stacklevel=4)
                raise GradcheckError("Expected backward function to handle undefined output grads. Please look at "
                                     "\"Notes about undefined output gradients\" in "
                                     "\"tools/autograd/derivatives.yaml\"") from e
            _check_zero_grads(grads)
    return True


def _check_zero_grads(grads):
    for gi in grads:
        if gi is not None and np.any(gi._data != 0):
            warnings.warn(UNDEFINED_GRAD_BC_MSG, stacklevel=5)
            raise GradcheckError("Expected all input grads to be undefined or zero when all output grads are "
                                 "undefined or zero. Please look at \"Notes about undefined output gradients\" in "
                                 "\"tools/autograd/derivatives.yaml\"")


def _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad, check_grad_dtypes,
                      fast_mode, masked, check_forward_ad=False, check_backward_ad=True):
    tupled_inputs = _as_tuple(inputs)
    _check_inputs(tupled_inputs)
    func_out = func(*tupled_inputs)
    outputs = _differentiable_outputs(func_out)
    # (torch's order: reverse mode's Jacobians, then forward mode's, then the checks that need a backward)
    if check_backward_ad:
        check = _fast_gradcheck if fast_mode else _slow_gradcheck
        check(func, func_out, tupled_inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
    if check_forward_ad:
        _forward_gradcheck(func, func_out, tupled_inputs, outputs, eps, rtol, atol)
    if not check_backward_ad:
        return True
    _test_backward_mul_by_grad_output(outputs, tupled_inputs, masked)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, outputs, tupled_inputs)
    return True


def _unsupported(what, missing):
    raise NotImplementedError(f"{what} is not supported by tracegrad: it has no {missing}")


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """Check the gradients of `func` at `inputs` against central finite differences.

    Inputs that are floating-point tensors with requires_grad=True are checked; the
    defaults are meant for float64. Returns True, or raises GradcheckError (returns
    False when raise_exception=False).
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    if check_batched_grad:
        _unsupported("gradcheck(check_batched_grad=True)", "vmap (batched gradients)")
    if check_batched_forward_grad:
        _unsupported("gradcheck(check_batched_forward_grad=True)", "vmap (batched forward gradients)")
    try:
        return _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                                 check_grad_dtypes, fast_mode, bool(masked), check_forward_ad, check_backward_ad)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _random_grad_output(shape, dtype, noncontiguous):
    dt = dtype if dtype.is_floating_point else D.float64
    values = rand(tuple(shape), dtype=D.float64)._data * 2 - 1
    if noncontiguous and values.size > 1:
        spread = np.empty(values.shape + (2,), dtype=dt.np)
        spread[..., 0] = values
        data = spread[..., 0]
    else:
        data = values.astype(dt.np)
    t = Tensor._make(data, dt)
    t.requires_grad_(True)
    return t


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, masked=False):
    """Check second derivatives: gradcheck of (inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs).

    Without `grad_outputs`, random ones in [-1, 1) that require grad are drawn from the
    global generator, as torch does.
    """
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be True")
    if check_fwd_over_rev:
        # (a backward runs as a compiled program, which carries no tangents)
        _unsupported("gradgradcheck(check_fwd_over_rev=True)", "forward-mode AD through a backward")
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = _differentiable_outputs(func(*tupled_inputs))
        tupled_grad_outputs = tuple(_random_grad_output(o.shape, o.dtype, gen_non_contig_grad_outputs)
                                    for o in outputs)
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_input_indices = {i for i, x in enumerate(tupled_inputs) if isinstance(x, Tensor) and x.requires_grad}
    diff_grad_output_indices = {i for i, x in enumerate(tupled_grad_outputs) if x.requires_grad}

    def new_func(*args):
        input_args = tuple(x.requires_grad_() if i in diff_input_indices else x
                           for i, x in enumerate(args[:-num_outputs]))
        outputs = _differentiable_outputs(func(*input_args))
        grad_outs = tuple(x.requires_grad_() if i in diff_grad_output_indices else x
                          for i, x in enumerate(args[-num_outputs:]))
        diff_input_args = tuple(x for i, x in enumerate(input_args) if i in diff_input_indices)
        grad_inputs = _grad(outputs, diff_input_args, grad_outs, create_graph=True)
        return tuple(g for g in grad_inputs if g is not None)

    return gradcheck(new_func, tupled_inputs + tupled_grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad, check_grad_dtypes=check_grad_dtypes,
                     check_batched_grad=check_batched_grad, fast_mode=fast_mode, masked=masked)
gradcheck.GradcheckError = GradcheckError    # reachable as tracegrad.autograd.gradcheck.GradcheckError too
