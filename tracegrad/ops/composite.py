"""Public ops with torch's signatures that are decompositions into the other public ops
(their gradients are the gradients of the ops they are written in), and a few counting ops
that torch does not differentiate either (bincount, histc): diagonal/trace/diag_embed,
log10/trunc/frac, fmax/fmin, masked_select, movedim, ravel, std_mean/var_mean, nan_to_num,
argwhere, cdist, matrix_power, matrix_exp, normal."""
import math

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor
from ..ir.symbolic import Sym
from . import functional as O
from . import math_functional as M
from . import shapes as S
from .primitives import PRIMITIVES
from ..tracing import rename_grad_fn, keep_saved
from ..creation import tensor, zeros, from_numpy, eye, randn, arange
from ..tracing import apply, Proxy

__all__ = ["diagonal", "trace", "diag_embed", "log10", "trunc", "fix", "frac", "fmax", "fmin", "fmod", "masked_select",
           "movedim", "moveaxis", "ravel", "std_mean", "var_mean", "nan_to_num", "argwhere", "cdist", "bincount",
           "histc", "matrix_power", "matrix_exp", "normal", "logaddexp", "xlogy", "addmm", "baddbmm", "index_fill", "index_copy",
           "take", "scatter_reduce", "logaddexp2", "deg2rad", "rad2deg", "logit", "sinc", "sgn", "positive",
           "float_power", "heaviside", "addcmul", "addcdiv", "nansum", "nanmean", "diff", "aminmax", "bitwise_not", "xlog1py"]


def _index(values):
    return tensor(np.asarray(values, dtype=np.int64))


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The offset diagonal of the (dim1, dim2) planes, as a last dimension (torch.diagonal): a
    view, so writes through it reach the input."""
    O._check_tensor(input, "diagonal")
    if input.ndim < 2:
        raise RuntimeError(f"diagonal(): input must have at least 2 dimensions, got {input.ndim}")
    d1, d2 = S.normalize_dim(dim1, input.ndim), S.normalize_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(PRIMITIVES["diagonal"], (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def trace(input):
    O._check_tensor(input, "trace")
    if input._dtype is D.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return rename_grad_fn(O.sum(diagonal(input)), "TraceBackward0")


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Each last-dimension vector as the offset diagonal of a square matrix placed at (dim1, dim2)."""
    O._check_tensor(input, "diag_embed")
    n = input.shape[-1] if input.ndim else 1
    m = n + abs(offset)
    flat = _index((np.arange(n) + max(-offset, 0)) * m + np.arange(n) + max(offset, 0))
    lead = tuple(input.shape[:-1])
    base = zeros(lead + (m * m,), dtype=input.dtype)
    if input.is_cuda:                       # (the matrix and its positions on input's device)
        flat, base = flat.to(input.device), base.to(input.device)
    idx = O.expand(flat.reshape((1,) * len(lead) + (n,)), *(lead + (n,)))
    out = O.scatter(base, len(lead), idx, input).reshape(*lead, m, m)
    nd = out.ndim
    return rename_grad_fn(movedim(out, (nd - 2, nd - 1), (S.normalize_dim(dim1, nd), S.normalize_dim(dim2, nd))),
                     "DiagEmbedBackward0")


def log10(input):
    return rename_grad_fn(O.log(input) / math.log(10.0), "Log10Backward0")


def trunc(input):
    """Rounds toward zero; integers are their own truncation. Its derivative is zero, as torch's."""
    O._check_tensor(input, "trunc")
    if input.dtype is D.bool_:
        raise NotImplementedError("\"trunc_vml_cpu\" not implemented for 'Bool'")
    if not input.dtype.is_floating_point:
        return O.clone(input)
    return O.where(input >= 0, O.floor(input), O.ceil(input))


fix = trunc


def frac(input):
    O._check_tensor(input, "frac")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"frac_cpu" not implemented for \'{D.SCALAR_NAME[input.dtype]}\'')
    return input - trunc(input).detach()


def fmax(input, other):
    """maximum that ignores NaN: where one operand is NaN, the other (torch.fmax). As torch's,
    input wins ties (its value and the whole gradient: torch's FmaxBackward0 gives input the
    gradient where input >= other or other is NaN, other the rest)."""
    O._check_tensors("fmax", (input, other), ("input", "other"))      # (no overload takes a number)
    a, b = input, other
    # (torch's node saves both operands: either written before the backward raises; the comparison
    # first, so that the result is laid out by input, as torch's TensorIterator lays it out)
    return keep_saved(rename_grad_fn(O.where((a >= b) | O.isnan(b), a, b), "FmaxBackward0"), a, (b,))


def fmin(input, other):
    O._check_tensors("fmin", (input, other), ("input", "other"))
    a, b = input, other
    return keep_saved(rename_grad_fn(O.where((a <= b) | O.isnan(b), a, b), "FminBackward0"), a, (b,))


_fmod = O.fmod         # the primitive's function: this module's fmod replaces it in O below


def fmod(input, other):
    """The remainder with the dividend's sign (C's fmod): one primitive (np.fmod), whose
    derivative in other is -trunc(input / other), as torch's."""
    return _fmod(O._operand(input, "fmod"), other)


def _logaddexp(input, other, name):
    """log(exp(input) + exp(other)) in base e or 2 without overflow (torch.logaddexp/logaddexp2):
    float tensors; a bool or integer operand takes the float dtype; 16-bit ones are computed in
    float32 and rounded once (torch's opmath: in half precision the sum of the two exponentials
    lost hundreds of ulps)."""
    for i, (arg, v) in enumerate((("input", input), ("other", other))):
        if not isinstance(v, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {i + 1}) must be Tensor, not {type(v).__name__}")
    dt = D.result_type((input, other))
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{D.SCALAR_NAME[dt]}'")
    input, other = input.to(dt), other.to(dt)
    if dt is D.float16 or dt is D.bfloat16:
        return rename_grad_fn(_logaddexp(input.float(), other.float(), name).to(dt),
                              "Logaddexp2Backward0" if name == "logaddexp2" else "LogaddexpBackward0")
    # one primitive with torch's kernel and derivative (ops/primitives.py)
    return apply(PRIMITIVES["logaddexp"], (input, other), {"base2": True} if name == "logaddexp2" else {})


def logaddexp(input, other):
    return _logaddexp(input, other, "logaddexp")


def logaddexp2(input, other):
    return _logaddexp(input, other, "logaddexp2")


def _floating(input, op):
    """input in a float dtype (integers and bool take the default one), as torch's unary float ops."""
    O._check_tensor(input, op)
    return input if input.dtype.is_floating_point else input.to(D.get_default_dtype())


def deg2rad(input):
    x = _floating(input, "deg2rad")
    return rename_grad_fn(x * (math.pi / 180.0), "Deg2RadBackward0")


def rad2deg(input):
    x = _floating(input, "rad2deg")
    return rename_grad_fn(x * (180.0 / math.pi), "Rad2DegBackward0")


def logit(input, eps=None):
    """log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given (its gradient 0 outside),
    as torch.logit."""
    x = _floating(input, "logit")
    return rename_grad_fn(apply(PRIMITIVES["logit"], (x,), {} if eps is None else {"eps": float(eps)}),
                          "LogitBackward0")


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0 (its gradient there 0), as torch.sinc."""
    x = _floating(input, "sinc")
    # one primitive with torch's derivative rule (math_primitives._sinc_vjp); its node saves its input
    return apply(PRIMITIVES["sinc"], (x,), {})


def sgn(input):
    """sign(x) for real tensors, as torch.sgn."""
    O._check_tensor(input, "sgn")
    # torch's node saves its input and its result (its derivative is zero for real tensors, but
    # either written before the backward raises)
    return keep_saved(apply(PRIMITIVES["sign"], (input,), {"sgn": True}), input, result=True)


def positive(input):
    """input itself, as torch.positive (a bool tensor raises)."""
    O._check_tensor(input, "positive")
    if input.dtype is D.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def float_power(input, exponent):
    """input ** exponent in float64, as torch.float_power."""
    if isinstance(input, Tensor):
        base = input.to(D.float64)
    else:
        base = float(input)
    if isinstance(exponent, Tensor):
        exponent = exponent.to(D.float64)
    elif isinstance(exponent, (bool, np.bool_)):
        exponent = float(exponent)
    return O.pow(base, exponent)


def heaviside(input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0, as torch.heaviside (no
    derivative: backward through it raises)."""
    O._check_tensors("heaviside", (input, values), ("input", "values"))     # (values is position 2)
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return apply(PRIMITIVES["heaviside"], (input, values), {})


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, as torch.addcmul."""
    O._check_tensors("addcmul", (input, tensor1, tensor2), ("input", "tensor1", "tensor2"))
    # torch's kernel: fma(value * tensor1, tensor2, input), one rounding for the product and the
    # sum (3e38 + 1.5e38 * -2.5 is -7.5e37, not -inf); below float64 that is the float64 result
    # rounded once
    # (16-bit operands: value * tensor1 and the fma in float32, as torch's opmath, then rounded once more)
    dt = D.result_type((input, tensor1 if value == 1 else value * tensor1, tensor2))
    if dt is D.bool_:
        raise NotImplementedError("\"addcmul_cpu_out\" not implemented for 'Bool'")
    half = dt is D.float16 or dt is D.bfloat16
    given = (tensor1, tensor2)
    if dt.is_floating_point:
        # every operand in the result's dtype first, as torch's kernel takes them (an int64 tensor
        # beside bfloat16 ones is rounded to bfloat16 before the float32 product)
        tensor1, tensor2 = O.convert(tensor1, dt), O.convert(tensor2, dt)
    t1 = tensor1.float() if half else tensor1
    p = value * t1 if value != 1 else t1
    if half:
        out = (input.double() + p.double() * tensor2.double()).float().to(dt)
    elif dt.is_floating_point and dt is not D.float64:
        out = (input.double() + p.to(dt).double() * tensor2.double()).to(dt)
    else:
        # (integers multiply in the result's dtype: int32 + uint8 255 * 255 is int32's 2147483647 + 65025,
        # wrapped; in uint8 the product wrapped to 1 first)
        if dt.is_floating_point:
            out = input + p * tensor2
        else:
            t1 = O.convert(tensor1, dt)
            out = input + (value * t1 if value != 1 else t1) * O.convert(tensor2, dt)
    out = rename_grad_fn(out, "AddcmulBackward0")
    # torch's node saves tensor1 for tensor2's gradient and tensor2 for tensor1's, named as they were
    # given (the product's saved values are its float copies, checked in another order)
    t1, t2 = given
    req = [t for t, r in ((t1, isinstance(t2, Tensor) and t2.requires_grad),
                          (t2, isinstance(t1, Tensor) and t1.requires_grad)) if r]
    return keep_saved(out, None, tuple(req)) if req else out


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2, as torch.addcdiv (integer operands raise, as torch's)."""
    O._check_tensors("addcdiv", (input, tensor1, tensor2), ("input", "tensor1", "tensor2"))
    if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a "
            "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + "
            "value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * "
            "tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: "
            "(input + value * tensor1 / tensor2), for all dtypes.")
    out = rename_grad_fn(input + value * tensor1 / tensor2 if value != 1 else input + tensor1 / tensor2,
                         "AddcdivBackward0")
    # (torch's node saves tensor2 whatever requires grad, and tensor1 where tensor2 does)
    return keep_saved(out, None, (tensor1, tensor2) if tensor2.requires_grad else (tensor2,))


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum with NaN counted as 0 (its gradient 0 there), as torch.nansum."""
    O._check_tensor(input, "nansum")
    x = input if dtype is None else input.to(dtype)
    if x.dtype.is_floating_point:
        x = O.where(O.isnan(x), O.zeros_like(x), x)
    # torch's node saves self (its NaNs get no gradient): written before the backward, it raises
    return O._in_dtype(keep_saved(rename_grad_fn(O.sum(x, dim, keepdim), "NansumBackward0"), input), dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean of the values that are not NaN, as torch.nanmean (NaN where all are)."""
    O._check_tensor(input, "nanmean")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{D.SCALAR_NAME[input.dtype]}")
    if dtype is not None and not dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): could not infer output dtype. Optional dtype must be either a floating point "
                           f"or complex dtype. Got: {D.SCALAR_NAME[dtype]}")
    x = input if dtype is None else input.to(dtype)
    count = O.sum(O.logical_not(O.isnan(x)), dim, keepdim)
    return nansum(x, dim, keepdim) / count


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (prepend and append joined first), as torch.diff."""
    O._check_tensor(input, "diff")
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = S.normalize_dim(dim, input.ndim)
    x = input
    if prepend is not None or append is not None:
        if any(p is not None and p.ndim != x.ndim for p in (prepend, append)):
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        x = O.cat([p for p in (prepend, x, append) if p is not None], d)
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        hi, lo = O.narrow(x, d, 1, length - 1), O.narrow(x, d, 0, length - 1)
        x = O.logical_xor(hi, lo) if x.dtype is D.bool_ else hi - lo
    return x


_AminmaxType = O._pair_type("aminmax", "min", "max")


def aminmax(input, *, dim=None, keepdim=False):
    """(amin, amax) over dim (every element without one), as torch.aminmax."""
    O._check_tensor(input, "aminmax")
    if input.numel() == 0:
        if dim is None:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.")
        d = S.normalize_dim(dim, max(input.ndim, 1))
        if input.ndim and input.shape[d] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
    dims = tuple(range(input.ndim)) if dim is None else dim
    return _AminmaxType(rename_grad_fn(O.amin(input, dims, keepdim), "AminmaxBackward0"),
                        rename_grad_fn(O.amax(input, dims, keepdim), "AminmaxBackward0"))


def bitwise_not(input):
    """~input: logical not of bool, -input - 1 of integers (wrapping), as torch.bitwise_not."""
    O._check_tensor(input, "bitwise_not")
    if input.dtype.is_floating_point:
        raise NotImplementedError(f"\"bitwise_not_cpu\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    return ~input


def xlogy(input, other):
    """x * log(y), 0 where x == 0 (unless y is NaN), as torch.xlogy (a primitive: its derivative
    in x is xlogy(grad, y), zero where the gradient is)."""
    return _x_log("xlogy", input, other)


def xlog1py(input, other):
    """x * log1p(y), 0 where x == 0 (unless y is NaN), as torch.special.xlog1py."""
    return _x_log("xlog1py", input, other)


def _x_log(name, input, other):
    # torch's overloads: (Tensor, Tensor), (Number, Tensor), (Tensor, Number); None or a string was
    # taken for a number (xlogy(x, None) gave NaN)
    if not (isinstance(input, Tensor) or isinstance(other, Tensor)) or \
            not isinstance(input, (Tensor, Sym) + O._Scalar) or not isinstance(other, (Tensor, Sym) + O._Scalar):
        op = "xlogy" if name == "xlogy" else "special_" + name
        raise TypeError(f"{op}() received an invalid combination of arguments - got ({type(input).__name__}, "
                        f"{type(other).__name__}), but expected one of:\n * (Tensor input, Tensor other, *, Tensor out "
                        f"= None)\n * (Number self, Tensor other, *, Tensor out = None)\n * (Tensor input, Number "
                        f"other, *, Tensor out = None)\n")
    x = input if isinstance(input, Tensor) else O._scalar(input)
    y = other if isinstance(other, Tensor) else O._scalar(other)
    return apply(PRIMITIVES[name], (x, y), {})


def same_dtypes(name, input, a, b):
    """torch's dtype checks of the addmm family, each op in its own words: addmm(float16, float32,
    float32) computed, and gave a float16 result, where torch raises."""
    S_, T_ = D.SCALAR_NAME, D.TYPE_NAME
    i, a, b = input.dtype, a.dtype, b.dtype
    if name in ("AddmmBackward0", "AddbmmBackward0"):
        if i is not b:
            raise RuntimeError(f"self and mat2 must have the same dtype, but got {S_[i]} and {S_[b]}")
        if a is not b:
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {S_[a]} and {S_[b]}")
    elif name == "AddmvBackward0":
        if not i is a is b:
            raise RuntimeError(f"addmv input tensors must have the same dtype, but got {S_[i]}, {S_[a]}, and {S_[b]}")
    elif name == "BaddbmmBackward0":
        if a is not i:
            raise RuntimeError(f"Input dtypes must be the same, got: input {T_[i]}, batch1: {T_[a]}, batch2: {T_[b]}")
        if b is not i:
            raise RuntimeError(f"expected scalar type {S_[i]} but found {S_[b]}")


def scaled_sum(name, input, product, operands, beta, alpha):
    """beta * input + alpha * product(*operands), as torch's addmm family: beta = 0 ignores input
    (its NaN and inf are not propagated; its gradient is zeros), and 16-bit operands are computed
    in float32 and rounded once (a float16 product of 300s overflowed before alpha = 1e-3 scaled
    it). The node is torch's (`name`). Every op but addr takes one dtype (torch's checks); addr
    promotes its three operands, as torch's."""
    if all(isinstance(t, Tensor) for t in (input,) + tuple(operands)):
        if name == "AddrBackward0":
            d = D.result_type([input, *operands])
            input, operands = O.convert(input, d), [O.convert(t, d) for t in operands]
        else:
            same_dtypes(name, input, *operands)
    dt = input.dtype if input.dtype in (D.float16, D.bfloat16) else None
    if dt is not None:
        input, operands = input.float(), [t.float() for t in operands]
    if not input.dtype.is_floating_point:
        # torch reads beta and alpha in an integer op's dtype (0.5 is 0): tracegrad's float scalars
        # made a float result of int64 operands
        beta, alpha = (bool(v) if input.dtype is D.bool_ else int(v) for v in (beta, alpha))
    prod = product(*operands)
    prod = prod if alpha == 1 else prod * alpha
    if beta == 0:
        # adding -0.0 is exact for every value, -0.0 included; the where passes input a zero gradient
        out = prod + O.where(O.zeros_like(input, dtype=D.bool_), input, -0.0 if input.dtype.is_floating_point else 0)
    else:
        out = (input if beta == 1 else input * beta) + prod
    if name != "AddrBackward0":
        out = O.contiguous(out)        # (torch's gemm writes C-contiguous, whatever input's layout; addr's follows it)
    return rename_grad_fn(out if dt is None else out.to(dt), name)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    return scaled_sum("AddmmBackward0", input, O.mm, (mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return scaled_sum("BaddbmmBackward0", input, O.bmm, (batch1, batch2), beta, alpha)


def masked_select(input, mask):
    O._check_tensor(input, "masked_select")
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask")
    x, m = O.broadcast_tensors(input, mask)
    return x[m]


def movedim(input, source, destination):
    O._check_tensor(input, "movedim")
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
                           f"contain the same number of dims as destination ({list(dst)} dims)")
    nd = max(input.ndim, 1)
    src = [S.normalize_dim(d, nd) for d in src]
    dst = [S.normalize_dim(d, nd) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError("movedim: repeated dim in `source` or `destination`")
    if input.ndim == 0:
        return input.view(())
    order = [None] * input.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(input.ndim) if i not in src)
    order = [next(rest) if o is None else o for o in order]
    return O.permute(input, *order)


moveaxis = movedim


def ravel(input):
    # torch's contiguous().view(-1): a view of the contiguous copy where the input is not
    # contiguous (ViewBackward0 over CloneBackward0), where reshape copies into no view
    return O.view(O.contiguous(input), -1)


def _floating_only(input, name):
    O._check_tensor(input, name)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name} only support floating point and complex dtypes")


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):          # std_mean(x, False): the old `unbiased` positional
        dim, unbiased = None, dim
    _floating_only(input, "std_mean")
    outs = (O.std(input, dim, unbiased, keepdim, correction=correction),
            O.mean(input, dim, keepdim) if dim is not None else O.mean(input))
    return _one_node_name(outs, "StdMeanBackward0", input)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):          # var_mean(x, False): the old `unbiased` positional
        dim, unbiased = None, dim
    _floating_only(input, "var_mean")
    outs = (O.var(input, dim, unbiased, keepdim, correction=correction),
            O.mean(input, dim, keepdim) if dim is not None else O.mean(input))
    return _one_node_name(outs, "VarMeanBackward0", input)


def _one_node_name(outs, name, input):
    """std_mean's and var_mean's two results under the name of torch's one node for both, each
    node's edge input's (each node still takes its own result's gradient alone)."""
    for t in outs:
        if t.__class__ is not Proxy and t.grad_fn is not None:
            rename_grad_fn(t, name, inputs=(input,))
    return outs


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by default with 0 and the dtype's largest and smallest finite
    values); the gradient passes through where the value was kept, zero where it was replaced."""
    O._check_tensor(input, "nan_to_num")
    if not input.dtype.is_floating_point:
        return O.clone(input)
    info = np.finfo(np.float32 if input.dtype is D.bfloat16 else input.dtype.np)
    if input.dtype is D.bfloat16:
        big = float.fromhex("0x1.fep127")
        info = type("I", (), {"max": big, "min": -big})
    hi = float(info.max) if posinf is None else float(posinf)
    lo = float(info.min) if neginf is None else float(neginf)
    out = O.where(O.isnan(input), float(nan), input)
    out = O.where(input == math.inf, hi, out)
    out = keep_saved(O.where(input == -math.inf, lo, out), input)      # (torch's node saves its input)
    return out if out.__class__ is Proxy else rename_grad_fn(out, "NanToNumBackward0")


def argwhere(input):
    return O.nonzero(input)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm (public as tracegrad.linalg.vector_norm; here for cdist)."""
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{D.SCALAR_NAME[x.dtype]}")
    if dtype is not None:
        # torch's checks: a floating dtype, one the input converts to without narrowing
        if not dtype.is_floating_point:
            raise RuntimeError(f"linalg.vector_norm: dtype should be floating point or complex, but got "
                               f"{D.SCALAR_NAME[dtype]}")
        if D.promote_types(x.dtype, dtype) is not dtype:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({D.SCALAR_NAME[x.dtype]}) should be "
                               f"convertible without narrowing to the specified dtype ({D.SCALAR_NAME[dtype]})")
        x = x.to(dtype)
    dims = tuple(range(x.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    # the norm primitive for every order: torch's LinalgVectorNormBackward0 (its derivative, zero
    # where the norm is zero, differentiates again as torch's), 16-bit input accumulated in float32
    return O.norm(x, ord, dims, keepdim)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Pairwise p-norm distances between the rows of x1 (..., P, M) and of x2 (..., R, M)."""
    O._check_tensor(x1, "cdist")
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {D.SCALAR_NAME[x.dtype]}")
    if x1.dtype is D.float16 or x1.dtype is D.bfloat16:
        raise NotImplementedError(f"\"cdist\" not implemented for '{D.SCALAR_NAME[x1.dtype]}'")
    if x2.dtype is not x1.dtype:
        raise RuntimeError(f"expected scalar type {D.SCALAR_NAME[x1.dtype]} but found {D.SCALAR_NAME[x2.dtype]}")
    diff = O.unsqueeze(x1, -2) - O.unsqueeze(x2, -3)
    out = vector_norm(diff, p, -1)
    if p == math.inf:
        out = _cdist_inf_gradient(diff, out)
    # (torch's node saves both inputs and the distances)
    return keep_saved(rename_grad_fn(out, "CdistBackward0"), x1, (x2,), result=True)


def _cdist_inf_gradient(diff, dist):
    """torch's cdist backward for p=inf gives grad * sign(diff) to every coordinate that attains
    the distance (vector_norm's shares it among them). dist + (s - s.detach()), s the sum of |diff|
    over those coordinates, has dist's value and that gradient; where s is not finite (inf - inf
    would be NaN) the norm is kept as it is."""
    a = O.abs(diff)
    hit = a.detach() == O.unsqueeze(dist.detach(), -1)
    s = O.sum(O.where(hit, a, O.zeros_like(a)), -1)
    frozen = s.detach()
    return O.where(O.isfinite(frozen), dist.detach() + (s - frozen), dist)


def bincount(input, weights=None, minlength=0):
    """How often each non-negative integer occurs (weighted): counts, not differentiable (torch's
    bincount has no derivative either)."""
    O._check_tensor(input, "bincount")
    if input.dtype.is_floating_point or input.dtype is D.bool_:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    if input.ndim != 1 or input.dtype.is_floating_point or input.dtype is D.bool_:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    a = input.detach().numpy()
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return from_numpy(np.bincount(a, minlength=minlength).astype(np.int64))
    if weights.shape != input.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    w = weights.detach().numpy()
    out = np.bincount(a, weights=w.astype(np.float64), minlength=minlength)
    return from_numpy(out.astype(np.float32 if weights.dtype is D.float32 else np.float64))


def histc(input, bins=100, min=0, max=0):
    """A histogram of equal-width bins between min and max (the data's range when both are 0);
    values outside are ignored. Not differentiable, as torch's."""
    O._check_tensor(input, "histc")
    if not input.dtype.is_floating_point:
        # (bool fails first in torch's linspace of the bin edges)
        raise NotImplementedError(f"\"{'linspace_cpu' if input.dtype is D.bool_ else 'histogram_cpu'}\" not "
                                  f"implemented for '{D.SCALAR_NAME[input.dtype]}'")
    if bins <= 0:
        raise RuntimeError("torch.histc: bins must be > 0, but got " + str(bins) + " for bins")
    a = input.detach().float().numpy().astype(np.float64).reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc: max must be larger than min, but got min {lo} max {hi}")
    counts, _ = np.histogram(a[(a >= lo) & (a <= hi)], bins=bins, range=(lo, hi))
    return from_numpy(counts.astype(np.float64)).to(input.dtype)


def matrix_power(input, n):
    """A @ A @ ... (n times) by repeated squaring; n = 0 gives the identity, n < 0 powers the inverse."""
    O._check_tensor(input, "matrix_power")
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{input.shape[-2] if input.ndim >= 2 else 1} by {input.shape[-1]} matrices")
    if n == 0:
        # the identity, connected to input (with a zero gradient) as torch's result is
        ident = O.expand(eye(input.shape[-1], dtype=input.dtype), *input.shape)
        return O.where(O.zeros_like(ident, dtype=D.bool_), input, ident)
    a = M.linalg_inv(input) if n < 0 else input
    n, result = abs(int(n)), None
    while n:
        if n & 1:
            result = a if result is None else O.matmul(result, a)
        n >>= 1
        if n:
            a = O.matmul(a, a)
    return result


# the [13/13] Padé coefficients and the 1-norm bounds of Higham's scaling and squaring (2005)
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = {np.dtype(np.float64): 5.371920351148152, np.dtype(np.float32): 3.925724783138660}


def matrix_exp(input):
    """exp(A) by scaling and squaring with the [13/13] Padé approximant; the number of squarings
    comes from the values' 1-norm, so a traced call is refused (it would fix them)."""
    O._check_tensor(input, "matrix_exp")
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError("linalg.matrix_exp: A must be batches of square matrices")
    if isinstance(input, Proxy):
        raise NotImplementedError("matrix_exp: the number of squarings depends on the values, which a traced "
                                  "program does not see; call it outside tracegrad.compile")
    dt = input.dtype
    if dt is D.float16 or dt is D.bfloat16:
        # (its solve takes float and double alone, as LAPACK's: computed in float32, rounded once)
        return matrix_exp(input.float()).to(dt)
    a_np = input.detach().double().numpy()
    norm1 = float(np.abs(a_np).sum(-2).max()) if a_np.size else 0.0
    theta = _THETA13[np.dtype(np.float32 if dt is not D.float64 else np.float64)]
    s = max(0, int(math.ceil(math.log2(norm1 / theta)))) if norm1 > theta else 0
    A = input / (2.0 ** s) if s else input
    ident = O.expand(eye(input.shape[-1], dtype=dt), *input.shape)
    b = _PADE13
    A2 = O.matmul(A, A)
    A4 = O.matmul(A2, A2)
    A6 = O.matmul(A4, A2)
    U = O.matmul(A, O.matmul(A6, b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4 + b[3] * A2
                 + b[1] * ident)
    V = O.matmul(A6, b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * ident
    R = M.linalg_solve(V - U, V + U)
    for _ in range(s):
        R = O.matmul(R, R)
    if not s and R.requires_grad:
        # the solve's node saves its result, torch's node for matrix_exp does not: the result
        # written before the backward raised here; a copy of it is returned instead
        R = R.clone()
    # torch's node saves self
    return keep_saved(rename_grad_fn(R, "LinalgMatrixExpBackward0"), input)


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    """Draws of N(mean, std): tensor means and stds broadcast (the draw has their shape), float
    ones need `size`. Not differentiable in mean or std (torch.normal is not either)."""
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got (float, float), but "
                            "expected (float mean, float std, tuple of ints size, ...)")
        if std < 0:               # (tracegrad drew with the negated deviation)
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        z = randn(*((size,) if isinstance(size, int) else (tuple(size),)), generator=generator, dtype=dtype)
        return (z * float(std) + float(mean)).requires_grad_(requires_grad)
    m = mean.detach() if mt else mean
    s = std.detach() if st else std
    if not st and s < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {s:g}")
    if st and bool((s < 0).any()):
        raise RuntimeError(f"normal expects all elements of std >= 0.0")
    shape = O.broadcast_shapes(tuple(m.shape) if mt else (), tuple(s.shape) if st else ())
    ref = m if mt else s
    z = randn(tuple(shape), generator=generator, dtype=ref.dtype)
    return z * s + m


def _index_mask(input, d, index, op):
    """A bool mask of input's dim d, true at `index`, shaped to broadcast against input.

    As torch: index_fill takes negative indices (from the end), index_copy none."""
    n = input.shape[d] if input.ndim else 1
    if op == "index_fill":
        if index.ndim > 1:
            raise RuntimeError("Index has to be a vector/scalar")
        lo, prefix = -n, ""
    else:
        if index.ndim > 1:
            raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
        lo, prefix = 0, "index_copy_(): "
    if index._data is not None:
        bad = index._data.reshape(-1)
        bad = bad[(bad < lo) | (bad >= n)]
        if bad.size:
            raise IndexError(f"{prefix}index {int(bad[0])} is out of bounds for dimension {d} with size {n}")
    index = index.reshape(-1)
    if lo < 0:
        index = O.where(index < 0, index + n, index)
    hit = O.scatter(zeros(n, device=index.device if index.is_cuda else None), 0, index, value=1.0) > 0
    shape = [1] * max(input.ndim, 1)
    shape[d] = n
    return hit.reshape(*shape) if input.ndim else hit.reshape(())


def index_fill(input, dim, index, value):
    """input with its slices at `index` along dim set to value (a number or a 0-dim tensor)."""
    O._check_tensor(input, "index_fill")
    if index.dtype is not D.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    d = S.normalize_dim(dim, max(input.ndim, 1))
    if not isinstance(value, Tensor):
        # a number: masked_fill's checked conversion, as torch's (index_fill(x16, 0, i, 70000) raises
        # "value cannot be converted to type c10::Half without overflow"; a full() of it gave inf,
        # and -1 into uint8 is 255, where a compiled full() raised OverflowError)
        out = O.masked_fill(input, _index_mask(input, d, index, "index_fill"), value)
    else:
        O.check_scalar_value(value, input.dtype, "index_fill")
        out = O.where(_index_mask(input, d, index, "index_fill"), value.to(input.dtype), input)
    if out.__class__ is Proxy:
        return out
    return rename_grad_fn(out, "IndexFillBackward1" if isinstance(value, Tensor) else "IndexFillBackward0")


def index_copy(input, dim, index, source):
    """input with source's slices written at `index` along dim (index_add into a zeroed copy)."""
    O._check_tensor(input, "index_copy")
    if index.dtype is not D.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {D.SCALAR_NAME[index.dtype]}")
    if isinstance(source, Tensor) and source.dtype is not input.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{D.SCALAR_NAME[input.dtype]} and (source) {D.SCALAR_NAME[source.dtype]}")
    d = S.normalize_dim(dim, max(input.ndim, 1))
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    if source.ndim and index.numel() != source.shape[d]:
        raise RuntimeError(f"index_copy_(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim) ({source.shape[d]})")
    if input.dtype is D.bool_:
        # (index_add has no bool kernel: the copy is made in uint8, exact for 0 and 1)
        return O.convert(index_copy(O.convert(input, D.uint8), dim, index, O.convert(source, D.uint8)), D.bool_)
    # (-0.0 where the slices go: -0.0 + s is s for every s, where 0.0 + -0.0 lost the sign of a copied -0.0)
    hole = -0.0 if input.dtype.is_floating_point else 0
    kept = O.where(_index_mask(input, d, index, "index_copy"), hole, input)
    return M.index_add(kept, d, index.reshape(-1), source)


def take(input, index):
    """input read as 1-D at `index` (the result has index's shape)."""
    O._check_tensor(input, "take")
    if index.dtype is not D.int64:
        # (a uint8 or bool index would be read as a mask by the indexing below)
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {D.SCALAR_NAME[index.dtype]}")
    # torch's node saves self and index: self written before the backward raises, named as itself
    # (C-contiguous, as torch's, whatever the index's layout)
    return keep_saved(rename_grad_fn(O.contiguous(O.reshape(input, -1)[index]), "TakeBackward0"), input, (index,))


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """src's values reduced ("sum", "prod", "mean", "amax", "amin") into input at `index` along
    dim: each output position against a mask of the src positions scattered to it, so the
    gradient is the reductions' (amax/amin share it among ties, as torch)."""
    O._check_tensor(input, "scatter_reduce")
    if index.dtype is not D.int64 and index.dtype is not D.int32:
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    d = S.normalize_dim(dim, max(input.ndim, 1))
    if tuple(index.shape) != tuple(src.shape) or tuple(input.shape[:d]) + tuple(input.shape[d + 1:]) != \
            tuple(index.shape[:d]) + tuple(index.shape[d + 1:]):
        raise NotImplementedError("scatter_reduce: index and src must have one shape, equal to input's off `dim` "
                                  "(the other shapes torch allows are not implemented yet)")
    # the masks below would drop an index out of range silently: a concrete index is checked
    # here, a traced one through gather, whose kernel checks (it returns the index unchanged)
    O._index_range_check(input, d, index)
    if index._data is None and index.numel():
        n_d = input.shape[d] if input.ndim else 1
        base = arange(n_d, device=index.device).reshape(tuple(n_d if k == d else 1 for k in range(index.ndim)))
        index = O.gather(O.expand(base, *(n_d if k == d else s for k, s in enumerate(index.shape))), d, index)
    x, idx, sv = movedim(input, d, -1), movedim(index, d, -1), movedim(src, d, -1)
    if x.dtype in (D.float16, D.bfloat16) and reduce in ("sum", "prod"):
        # torch accumulates a float16/bfloat16 sum or product in float32 and rounds once: the product
        # of float16 [6e-8, -0.33, -65504] is 0.00129 there, where float16 steps underflow to 0
        x, sv = x.float(), sv.float()
    n = x.shape[-1]
    mask = O.unsqueeze(idx, -2) == arange(n, device=idx.device).reshape(n, 1)   # (..., n, m)
    se = O.unsqueeze(sv, -2)
    hit = O.any(mask, -1)
    count = O.sum(mask, -1)
    if reduce in ("sum", "mean"):
        r = O.sum(O.where(mask, se, O.full((), 0, dtype=se.dtype)), -1)
        if reduce == "sum":
            out = x + r if include_self else O.where(hit, r, x)
        elif include_self:
            out = (x + r) / (count + 1).to(x.dtype)
        else:
            out = O.where(hit, r / O.clamp_min(count, 1).to(x.dtype), x)
        if reduce == "mean" and not x.dtype.is_floating_point:
            out = O.floor_divide(x + r, count + 1) if include_self else O.where(
                hit, O.floor_divide(r, O.clamp_min(count, 1)), x)
    elif reduce == "prod":
        r = O.prod(O.where(mask, se, O.full((), 1, dtype=se.dtype)), -1)
        out = x * r if include_self else O.where(hit, r, x)
    else:
        big = float("-inf") if reduce == "amax" else float("inf")
        if not x.dtype.is_floating_point:
            info = D.integer_bounds(x.dtype)
            big = info[0] if reduce == "amax" else info[1]
        both = O.where(mask, se, O.full((), big, dtype=se.dtype))
        if include_self:
            both = O.cat([both, O.unsqueeze(x, -1)], -1)
        elif x.dtype.is_floating_point:
            # torch shares the gradient among the src values equal to the result and counts self too
            # where it equals the result, though self took no part (its share is dropped): two
            # tied src maxima equal to self get a third each, not a half. self, detached, takes
            # part in the amax only where it equals the src result, which it does not change
            r0 = (O.amax if reduce == "amax" else O.amin)(both.detach(), -1)
            tie = O.where(x.detach() == r0, x.detach(), O.full((), big, dtype=x.dtype))
            both = O.cat([both, O.unsqueeze(tie, -1)], -1)
        r = (O.amax if reduce == "amax" else O.amin)(both, -1)
        out = r if include_self else O.where(hit, r, x)
    r = out.to(input.dtype)
    out = movedim(r, -1, d)
    # torch's result is C-contiguous, whatever the input's layout (the moved dims here made
    # x.scatter_reduce(1, ...).view(-1) raise where torch's works)
    c = O.contiguous(out)
    if c is not out:
        r = out = c
    if r.__class__ is Proxy or r._grad_fn is not None:
        # torch's node saves self, src, index and its result, whatever the reduction: one written
        # before the backward raises (amax, prod and mean gave a gradient here). The result's guard
        # is on the value the returned view is taken of: a write through the view goes on from there
        keep_saved(rename_grad_fn(r, "ScatterReduceBackward0"), input, (src, index), result=True)
        rename_grad_fn(out, "ScatterReduceBackward0")
    return out


# the public ops are one namespace: these join ops.functional's as this module is imported,
# so that ops.functional, which they are written in, need not import them back
for _name in __all__:
    setattr(O, _name, globals()[_name])
del _name
