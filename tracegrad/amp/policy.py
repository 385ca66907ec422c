"""Which ops autocast casts, and to what: torch's CPU policy over tracegrad's public functions.

- LOWER: products and convolutions run in the autocast dtype (their floating inputs cast to it,
  float64 left as it is);
- FLOAT32: ops that need float32's range or precision (losses, linear algebra, a few reductions)
  run in float32;
- PROMOTE: cat, stack, index_copy run in float32 where any floating input is float32, else in the
  autocast dtype (float64 inputs left out; another low-precision dtype is torch's error);
- KEEP: ops torch runs in their inputs' dtype that tracegrad writes with a listed op inside (dot
  and outer as a product): the policy stops at them.
The recurrent layers apply it themselves (nn/modules/rnn.py): LSTM, RNN and RNNCell run in the
autocast dtype, weights included, as torch's; GRU, LSTMCell and GRUCell in their inputs' dtype.
A function applies the policy when it is the outermost listed function of a call; the functions
it calls run as it gives them (linear's matmul casts nothing more). `install()` wraps the
functions where the public namespaces hold them."""
import functools

from .. import _dtype as D
from .._autocast_state import STATE, shielded  # noqa: F401  (the engine shields its backward with it)
from ..tensor import Tensor
from ..tracing import TRACING
from ..ops import functional as O
from ..nn import functional as F


def is_enabled(device):
    return STATE.enabled[device]


def set_enabled(device, value):
    STATE.enabled[device] = bool(value)
    STATE.any = any(STATE.enabled.values())


def get_dtype(device):
    return STATE.dtype[device]


def set_dtype(device, dtype):
    STATE.dtype[device] = dtype


def autocast_key():
    """What a compiled program's casts depend on: None outside any autocast region."""
    if not STATE.any:
        return None
    return tuple((d, STATE.dtype[d]) for d in ("cpu", "cuda") if STATE.enabled[d]), STATE.depth > 0


_ELIGIBLE = (D.float32, D.float16, D.bfloat16)


def _cast(x, dtype):
    if isinstance(x, Tensor):
        if x.dtype not in _ELIGIBLE or x.dtype is dtype:
            return x
        if x.dtype is D.float32 and dtype is not D.float32 and x.requires_grad and x.grad_fn is None and \
                getattr(x, "_view", None) is None and not TRACING.stack:
            # a parameter is cast once per region (torch's cache): the gradients of its uses add up
            # in the cast's dtype, as torch's do (a trace casts at each use: it is a program of its
            # own, not a region's)
            hit = STATE.cache.get(id(x))
            if hit is None or hit[0] is not x or hit[1].dtype is not dtype:
                hit = STATE.cache[id(x)] = (x, x.to(dtype))
            return hit[1]
        return x.to(dtype)
    if isinstance(x, (list, tuple)) and any(isinstance(v, Tensor) for v in x):
        return type(x)(_cast(v, dtype) for v in x)
    return x


def cast_tree(tree, dtype):
    """Every eligible floating tensor of a tuple, list or dict (one level of nesting) cast to dtype."""
    if isinstance(tree, dict):
        return {k: _cast(v, dtype) for k, v in tree.items()}
    return type(tree)(_cast(v, dtype) for v in tree)


def _device(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):
            return "cuda" if a.is_cuda else "cpu"
        if isinstance(a, (list, tuple)):
            for v in a:
                if isinstance(v, Tensor):
                    return "cuda" if v.is_cuda else "cpu"
    return None


def lower_dtype(x):
    """The dtype autocast runs a listed product of x in now (None: the policy does not apply here):
    for the layers that cast their own weights (the recurrent ones)."""
    if not STATE.any or STATE.depth or not isinstance(x, Tensor):
        return None
    device = "cuda" if x.is_cuda else "cpu"
    return STATE.dtype[device] if STATE.enabled[device] else None


def _pad_kind(args, kwargs):
    mode = kwargs.get("mode", args[2] if len(args) > 2 else "constant")
    return "float32" if mode in ("reflect", "replicate") else "keep"


def _tensors(tree):
    for v in list(tree.values()) if isinstance(tree, dict) else tree:
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (t for t in v if isinstance(t, Tensor))


def _promoted(args, kwargs, low):
    """torch's promote policy (cat, stack, index_copy): float32 where any floating argument is,
    else the autocast dtype; float64 arguments are left out; another low-precision dtype is
    torch's error."""
    current = low
    for t in list(_tensors(args)) + list(_tensors(kwargs)):
        if not t.dtype.is_floating_point or t.dtype is D.float64:
            continue
        if current is D.float32 or t.dtype is D.float32:
            current = D.float32
        elif not (current is low and t.dtype is low):
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return current


def wrap(fn, kind):
    """fn under the policy `kind` ("lower", "float32", "keep", or "pad": float32 for reflect and
    replicate padding, torch's reflection_pad and replication_pad)."""
    if getattr(fn, "_autocast_kind", None) is not None:
        return fn

    @functools.wraps(fn)
    def under_policy(*args, **kwargs):
        if not STATE.any or STATE.depth:
            return fn(*args, **kwargs)
        device = _device(args, kwargs)
        if device is None or not STATE.enabled[device]:
            return fn(*args, **kwargs)
        how = _pad_kind(args, kwargs) if kind == "pad" else kind
        if how == "promote":
            target = _promoted(args, kwargs, STATE.dtype[device])
            args, kwargs = cast_tree(args, target), cast_tree(kwargs, target)
        elif how == "lower":
            args, kwargs = cast_tree(args, STATE.dtype[device]), cast_tree(kwargs, STATE.dtype[device])
        elif how == "float32":
            args, kwargs = cast_tree(args, D.float32), cast_tree(kwargs, D.float32)
        STATE.depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            STATE.depth -= 1
    under_policy._autocast_kind = kind
    return under_policy


# torch's CPU autocast lists, as tracegrad's public functions name them (namespace, names)
LOWER = {
    "ops": "matmul mm bmm addmm baddbmm addbmm einsum tensordot inner chain_matmul",
    "nn": "linear conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d prelu "
          "scaled_dot_product_attention multi_head_attention_forward",
    "linalg": "vecdot multi_dot matmul",
    "tensor": "matmul __matmul__ __rmatmul__ mm bmm addmm baddbmm addbmm inner",
}
FLOAT32 = {
    "ops": "prod cdist trace quantile nanquantile cholesky_solve cholesky_inverse pinverse inverse",
    "nn": "cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy "
          "binary_cross_entropy_with_logits kl_div margin_ranking_loss cosine_embedding_loss poisson_nll_loss "
          "hinge_embedding_loss soft_margin_loss triplet_margin_loss multi_margin_loss multilabel_margin_loss "
          "ctc_loss grid_sample avg_pool3d max_pool3d adaptive_avg_pool3d adaptive_max_pool3d max_unpool2d max_unpool3d",
    "linalg": "inv inv_ex cholesky cholesky_ex svd svdvals qr eigh eigvalsh lstsq pinv solve solve_ex lu_solve "
              "lu_factor lu_factor_ex lu cond matrix_rank",
    "tensor": "prod trace cholesky_solve cholesky_inverse pinverse inverse",
}
KEEP = {
    "ops": "dot vdot mv outer ger addmv addr kron",
    "nn": "bilinear embedding_bag",
    "tensor": "dot vdot mv outer ger addmv addr kron",
}


PAD = {"nn": "pad"}
PROMOTE = {"ops": "cat stack index_copy concat concatenate", "tensor": "index_copy"}


def install(top, linalg):
    """Wrap the listed functions where the namespaces hold them (every alias of one function in
    a namespace gets the same wrapper). `top`: tracegrad's module, `linalg` tracegrad.linalg (this
    runs as tracegrad's __init__ finishes)."""
    spaces = {"ops": [O, top], "nn": [F], "linalg": [linalg], "tensor": [Tensor]}
    done = {}
    for kind, table in (("lower", LOWER), ("float32", FLOAT32), ("keep", KEEP), ("pad", PAD), ("promote", PROMOTE)):
        for space, names in table.items():
            for ns in spaces[space]:
                for name in names.split():
                    fn = getattr(ns, name, None)
                    if fn is None:
                        continue
                    if id(fn) not in done:
                        done[id(fn)] = (fn, wrap(fn, kind))
                    setattr(ns, name, done[id(fn)][1])
