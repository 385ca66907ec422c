"""Primitives for convolution and pooling, registered into the op table of primitives.py.

Each is one `Primitive(...)` entry: shape rule, numpy kernel, derivative rule in
tracegrad ops, torch's grad_fn name. The kernels are im2col on numpy: a strided view of
the (padded) input holds every window without copying, one reshape copies it into
columns, and one batched matmul does the arithmetic. Scattering columns back (col2im)
loops over the kernel's kh*kw offsets, never over pixels.

The three convolution primitives are closed under differentiation, so derivatives of
any order stay convolutions:

  conv2d(x, w)             d/dx: conv_transpose2d(g, w)     d/dw: conv2d_weight(x, g)
  conv_transpose2d(y, w)   d/dy: conv2d(g, w)               d/dw: conv2d_weight(g, y)
  conv2d_weight(x, g)      d/dx: conv_transpose2d(g, v)     d/dg: conv2d(x, v)

Pooling pairs each op with its backward op, and each is the other's adjoint (avg pool),
or a scatter whose adjoint is a gather (max pool).

Layouts are torch's: activations NCHW, conv weights (out, in/groups, kh, kw),
transposed-conv weights (in, out/groups, kh, kw). Parameters are tuples of ints:
`stride`, `padding`, `dilation` (and `output_padding`) as (h, w) pairs, `groups` an int.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _dtype as D
from . import lowering as T
from .primitives import F, FrontEnd, Primitive, PRIMITIVES, R, _no_kernel


def _apply(name, args, params):
    return FrontEnd.apply(PRIMITIVES[name], args, params)


def conv_out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def conv_transpose_out_size(n, k, s, p, d, op):
    return (n - 1) * s - 2 * p + d * (k - 1) + op + 1


# -- im2col / col2im ---------------------------------------------------------------------------

def _pad2d(x, ph, pw, value=0.0, extra_h=0, extra_w=0):
    """x padded by (ph, ph + extra_h) rows and (pw, pw + extra_w) columns of `value`."""
    if not (ph or pw or extra_h or extra_w):
        return np.ascontiguousarray(x)
    n, c, h, w = x.shape
    out = np.full((n, c, h + 2 * ph + extra_h, w + 2 * pw + extra_w), value, dtype=x.dtype)
    out[:, :, ph:ph + h, pw:pw + w] = x
    return out


def _windows(xp, kh, kw, ho, wo, stride, dilation):
    """A view (N, C, kh, kw, Ho, Wo) of every window of the padded input; no copy."""
    sn, sc, sh, sw = xp.strides
    return as_strided(xp, (xp.shape[0], xp.shape[1], kh, kw, ho, wo),
                      (sn, sc, sh * dilation[0], sw * dilation[1], sh * stride[0], sw * stride[1]),
                      writeable=False)


def _out_hw(h, w, kh, kw, stride, padding, dilation):
    return (conv_out_size(h, kh, stride[0], padding[0], dilation[0]),
            conv_out_size(w, kw, stride[1], padding[1], dilation[1]))


def _channels_last(c, kw, wo, stride, dilation, groups):
    """Which im2col layout copies longer contiguous runs: channels-first columns copy runs
    of Wo (stride 1), channels-last columns runs of kw*C (dilation 1). Small images with
    many channels (deeper layers) go channels-last."""
    run_first = wo if stride[1] == 1 else 1
    run_last = c * kw if dilation[1] == 1 else c
    return groups == 1 and run_last > run_first


def _im2col(x, kh, kw, ho, wo, stride, padding, dilation):
    """Channels-first columns (N, C*kh*kw, Ho*Wo) of the first Ho x Wo windows."""
    n, c = x.shape[:2]
    xp = _pad2d(x, padding[0], padding[1])
    return _windows(xp, kh, kw, ho, wo, stride, dilation).reshape(n, c * kh * kw, ho * wo)


def _im2col_last(x, kh, kw, ho, wo, stride, padding, dilation):
    """Channels-last columns (N*Ho*Wo, kh*kw*C) of the first Ho x Wo windows."""
    n, c, h, w = x.shape
    ph, pw = padding
    xp = np.zeros((n, h + 2 * ph, w + 2 * pw, c), dtype=x.dtype)
    xp[:, ph:ph + h, pw:pw + w, :] = x.transpose(0, 2, 3, 1)
    sn, sh, sw, sc = xp.strides
    win = as_strided(xp, (n, ho, wo, kh, kw, c), (sn, sh * stride[0], sw * stride[1], sh * dilation[0],
                                                   sw * dilation[1], sc), writeable=False)
    return win.reshape(n * ho * wo, kh * kw * c)


def _padded_size(h, w, kh, kw, ho, wo, stride, padding, dilation):
    # big enough for every window; rows past the last window stay zero
    return (max(h + 2 * padding[0], (ho - 1) * stride[0] + (kh - 1) * dilation[0] + 1),
            max(w + 2 * padding[1], (wo - 1) * stride[1] + (kw - 1) * dilation[1] + 1))


def _col2im(cols, n, c, h, w, kh, kw, ho, wo, stride, padding, dilation):
    """Sum channels-first columns (N, C*kh*kw, Ho*Wo) back into an (N, C, H, W) image:
    im2col's adjoint, one strided add per kernel offset."""
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    out = np.zeros((n, c) + _padded_size(h, w, kh, kw, ho, wo, stride, padding, dilation), dtype=cols.dtype)
    cols = cols.reshape(n, c, kh, kw, ho, wo)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw] += cols[:, :, i, j]
    return out[:, :, ph:ph + h, pw:pw + w]


def _col2im_last(cols, n, c, h, w, kh, kw, ho, wo, stride, padding, dilation):
    """The adjoint of _im2col_last: (N*Ho*Wo, kh*kw*C) columns into an (N, C, H, W) image."""
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    hp, wp = _padded_size(h, w, kh, kw, ho, wo, stride, padding, dilation)
    out = np.zeros((n, hp, wp, c), dtype=cols.dtype)
    cols = cols.reshape(n, ho, wo, kh, kw, c)
    for i in range(kh):
        for j in range(kw):
            out[:, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw] += cols[:, :, :, i, j]
    return out[:, ph:ph + h, pw:pw + w].transpose(0, 3, 1, 2)


def _to_last(w):
    """Weights (O, C, kh, kw) as rows (O, kh*kw*C), matching channels-last columns."""
    return w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)


# -- convolution kernels -------------------------------------------------------------------------

def _conv2d_kernel(x, w, b=None, *, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho, wo = _out_hw(h, wd, kh, kw, stride, padding, dilation)
    if _channels_last(c, kw, wo, stride, dilation, groups):
        out = _im2col_last(x, kh, kw, ho, wo, stride, padding, dilation) @ _to_last(w).T     # (N*L, O)
        if b is not None:
            out += b
        return np.ascontiguousarray(out.reshape(n, ho, wo, o).transpose(0, 3, 1, 2))
    cols = _im2col(x, kh, kw, ho, wo, stride, padding, dilation)
    if groups == 1:
        out = np.matmul(w.reshape(o, cg * kh * kw), cols)                       # (N, O, L)
    else:
        cols = cols.reshape(n, groups, cg * kh * kw, ho * wo)
        out = np.matmul(w.reshape(groups, o // groups, cg * kh * kw), cols)     # (N, G, O/G, L)
    out = out.reshape(n, o, ho, wo)
    if b is not None:
        out += b.reshape(1, o, 1, 1)
    return out


def _conv_transpose2d_kernel(y, w, b=None, *, stride, padding, output_padding, dilation, groups):
    n, cin, h, wd = y.shape
    _, cg, kh, kw = w.shape
    cout = cg * groups
    ho = conv_transpose_out_size(h, kh, stride[0], padding[0], dilation[0], output_padding[0])
    wo = conv_transpose_out_size(wd, kw, stride[1], padding[1], dilation[1], output_padding[1])
    if _channels_last(cout, kw, wd, stride, dilation, groups):
        cols = y.transpose(0, 2, 3, 1).reshape(n * h * wd, cin) @ _to_last(w)   # (N*L, kh*kw*Cout)
        out = _col2im_last(cols, n, cout, ho, wo, kh, kw, h, wd, stride, padding, dilation)
    else:
        y2 = y.reshape(n, groups, cin // groups, h * wd)
        wt = w.reshape(groups, cin // groups, cg * kh * kw).transpose(0, 2, 1)  # (G, C/G*k*k, Cin/G)
        cols = np.matmul(wt, y2).reshape(n, cout * kh * kw, h * wd)
        out = _col2im(cols, n, cout, ho, wo, kh, kw, h, wd, stride, padding, dilation)
    out = np.ascontiguousarray(out)
    if b is not None:
        out += b.reshape(1, cout, 1, 1)
    return out


def _conv2d_weight_kernel(x, g, *, weight_shape, stride, padding, dilation, groups):
    n, c = x.shape[:2]
    o, cg, kh, kw = weight_shape
    ho, wo = g.shape[2], g.shape[3]
    if _channels_last(c, kw, wo, stride, dilation, groups):
        cols = _im2col_last(x, kh, kw, ho, wo, stride, padding, dilation)     # (N*L, kh*kw*C)
        gw = g.transpose(0, 2, 3, 1).reshape(n * ho * wo, o).T @ cols           # (O, kh*kw*C)
        return np.ascontiguousarray(gw.reshape(o, kh, kw, c).transpose(0, 3, 1, 2))
    k = cg * kh * kw
    cols = _im2col(x, kh, kw, ho, wo, stride, padding, dilation).reshape(n, groups, k, ho * wo)
    g2 = g.reshape(n, groups, o // groups, ho * wo)
    # one (O/G x L) @ (L x K) product per sample and group, summed over the batch
    gw = np.matmul(g2, cols.transpose(0, 1, 3, 2)).sum(axis=0)                # (G, O/G, K)
    return gw.reshape(weight_shape)


# -- shape rules ----------------------------------------------------------------------------------

def _conv2d_shape(x, w, b=None, *, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho = conv_out_size(h, kh, stride[0], padding[0], dilation[0])
    wo = conv_out_size(wd, kw, stride[1], padding[1], dilation[1])
    return (n, o, ho, wo)


def _conv_transpose2d_shape(y, w, b=None, *, stride, padding, output_padding, dilation, groups):
    n, cin, h, wd = y.shape
    _, cg, kh, kw = w.shape
    return (n, cg * groups, conv_transpose_out_size(h, kh, stride[0], padding[0], dilation[0], output_padding[0]),
            conv_transpose_out_size(wd, kw, stride[1], padding[1], dilation[1], output_padding[1]))


# -- derivative rules ---------------------------------------------------------------------------------

def _output_padding(in_hw, out_hw, kernel, stride, padding, dilation):
    """The output_padding that makes conv_transpose2d give back an input of size in_hw."""
    return tuple(i - conv_transpose_out_size(o, k, s, p, d, 0)
                 for i, o, k, s, p, d in zip(in_hw, out_hw, kernel, stride, padding, dilation))


def conv2d_input_grad(g, w, in_hw, stride, padding, dilation, groups):
    kh, kw = w.shape[2], w.shape[3]
    op = _output_padding(in_hw, tuple(g.shape[2:]), (kh, kw), stride, padding, dilation)
    return _apply("conv_transpose2d", (g, w, None), {"stride": stride, "padding": padding, "output_padding": op,
                                                      "dilation": dilation, "groups": groups})


def conv2d_weight_grad(x, g, weight_shape, stride, padding, dilation, groups):
    return _apply("conv2d_weight", (x, g), {"weight_shape": tuple(weight_shape), "stride": stride,
                                             "padding": padding, "dilation": dilation, "groups": groups})


def _conv2d_prim(x, w, stride, padding, dilation, groups):
    return _apply("conv2d", (x, w, None), {"stride": stride, "padding": padding, "dilation": dilation,
                                            "groups": groups})


def _bias_grad(g, b):
    return R("sum", g, (0, 2, 3)) if b is not None else None


def _conv2d_vjp(g, out, x, w, b=None, *, stride, padding, dilation, groups):
    return (conv2d_input_grad(g, w, tuple(x.shape[2:]), stride, padding, dilation, groups),
            conv2d_weight_grad(x, g, tuple(w.shape), stride, padding, dilation, groups),
            _bias_grad(g, b))


def _conv_cropped(x, w, like, stride, padding, dilation, groups):
    """conv2d(x, w) cut to the spatial size of `like`: a transposed convolution's
    output_padding (allowed up to the dilation) can add rows past the last window."""
    out = _conv2d_prim(x, w, stride, padding, dilation, groups)
    if tuple(out.shape[2:]) != tuple(like.shape[2:]):
        out = F.getitem(out, (slice(None), slice(None), slice(0, like.shape[2]), slice(0, like.shape[3])))
    return out


def _conv_transpose2d_vjp(g, out, y, w, b=None, *, stride, padding, output_padding, dilation, groups):
    return (_conv_cropped(g, w, y, stride, padding, dilation, groups),
            conv2d_weight_grad(g, y, tuple(w.shape), stride, padding, dilation, groups),
            _bias_grad(g, b))


def _conv2d_weight_vjp(v, out, x, g, *, weight_shape, stride, padding, dilation, groups):
    return (conv2d_input_grad(g, v, tuple(x.shape[2:]), stride, padding, dilation, groups),
            _conv_cropped(x, v, g, stride, padding, dilation, groups))


# -- Triton lowerings: decompositions ----------------------------------------------------------------
# Run when a graph is lowered to Triton (ops/lowering.py's Decompose): each rule applies other
# primitives to symbolic tensors. Padding is a copy into a filled buffer (full +
# as_strided_scatter), windows are as_strided views; the arithmetic is a reduction over the
# window, an elementwise chain over one view per window offset, an elementwise gather (max
# pooling's gradient where windows do not overlap) or a scatter-add (where they do).
# Convolutions are not decomposed: their slot is ConvDot, an implicit-GEMM kernel
# (codegen/triton_gpu.py's _emit_conv) that gathers its tiles by index arithmetic.

def _op(name, *args, **params):
    return _apply(name, args, params)


def _place(x, size, start, step, value):
    """A new (N, C) + size tensor filled with `value`, with x (N, C, h, w) copied in: x[..., a, b]
    lands at (start[0] + a * step[0], start[1] + b * step[1]); what falls outside is dropped."""
    n, c, h, w = x.shape
    H, W = size
    if (H, W) == (h, w) and tuple(start) == (0, 0) and tuple(step) == (1, 1):
        return x
    keep = []
    for length, s0, st, lim in ((h, start[0], step[0], H), (w, start[1], step[1], W)):
        lo = max(0, -(s0 // st))
        hi = min(length, (lim - 1 - s0) // st + 1)
        keep.append((lo, max(lo, hi)))
    (alo, ahi), (blo, bhi) = keep
    base = _op("full", shape=(n, c, H, W), value=value, dtype=x.dtype)
    if ahi == alo or bhi == blo or n * c == 0:
        return base
    if (alo, ahi, blo, bhi) != (0, h, 0, w):
        x = _op("as_strided", x, shape=(n, c, ahi - alo, bhi - blo), strides=(c * h * w, h * w, w, 1),
                offset=alo * w + blo)
    return _op("as_strided_scatter", base, x, shape=(n, c, ahi - alo, bhi - blo),
               strides=(c * H * W, H * W, step[0] * W, step[1]),
               offset=(start[0] + alo * step[0]) * W + start[1] + blo * step[1])


def _window_view(xp, ho, wo, kernel, stride, dilation):
    """The (N, C, Ho, Wo, kh, kw) view of every window of the padded input xp (N, C, Hp, Wp)."""
    n, c, hp, wp = xp.shape
    return _op("as_strided", xp, shape=(n, c, ho, wo, kernel[0], kernel[1]),
               strides=(c * hp * wp, hp * wp, stride[0] * wp, stride[1], dilation[0] * wp, dilation[1]), offset=0)


# Windows of at most this many elements are combined by an elementwise chain over one strided
# view per kernel offset (one fused pointwise kernel over the output); larger ones by a reduction
# over the window view (one program per output element).
POOL_CHAIN = 32


def _offset_views(xp, ho, wo, kernel, stride, dilation, start=(0, 0)):
    """For each kernel offset (i, j), row-major, the (N, C, Ho, Wo) view of xp (N, C, Hp, Wp) at
    (start + i * dilation, start + j * dilation), stepping by the stride."""
    n, c, hp, wp = xp.shape
    return [_op("as_strided", xp, shape=(n, c, ho, wo), strides=(c * hp * wp, hp * wp, stride[0] * wp, stride[1]),
                offset=(start[0] + i * dilation[0]) * wp + start[1] + j * dilation[1])
            for i in range(kernel[0]) for j in range(kernel[1])]


def _fold(name, xs):
    out = xs[0]
    for x in xs[1:]:
        out = _op(name, out, x)
    return out


_BIG = 2 ** 62


def _max_pool2d_triton(x, *, kernel, stride, padding, dilation, ceil_mode):
    """The input padded with the lowest value, seen through its windows; the maximum (NaN
    propagating) and, as index, the least input position holding it: positions come from a
    constant map of flat input positions (the padding's larger than any) seen through the same
    windows, and ordered as the windows' elements are. A window with a NaN gives its last NaN's."""
    n, c, h, w = x.shape
    ho, wo, eh, ew = _pool_geometry(h, w, kernel, stride, padding, dilation, ceil_mode)
    hp, wp = h + 2 * padding[0] + eh, w + 2 * padding[1] + ew
    fl = x.dtype.is_floating_point
    low = -np.inf if fl else int(np.iinfo(x.dtype.np).min)
    xp = _place(x, (hp, wp), padding, (1, 1), low)
    pos = FrontEnd.Tensor._make(np.arange(h * w, dtype=np.int64).reshape(1, 1, h, w), D.int64)
    pp = _place(pos, (hp, wp), padding, (1, 1), _BIG)
    if kernel[0] * kernel[1] <= POOL_CHAIN:
        vs = _offset_views(xp, ho, wo, kernel, stride, dilation)
        ps = _offset_views(pp, ho, wo, kernel, stride, dilation)
        m = _fold("maximum", vs)
        idx = _fold("minimum", [_op("where", _op("eq", v, m), q, _BIG) for v, q in zip(vs, ps)])
        last_nan = _fold("maximum", [_op("where", _op("isnan", v), q, -1) for v, q in zip(vs, ps)]) if fl else None
    else:
        win = _window_view(xp, ho, wo, kernel, stride, dilation)
        pwin = _window_view(pp, ho, wo, kernel, stride, dilation)
        m = R("amax", win, (4, 5), True)                                        # (N, C, Ho, Wo, 1, 1)
        idx = R("amin", _op("where", _op("eq", win, m), pwin, _BIG), (4, 5), True)
        last_nan = R("amax", _op("where", _op("isnan", win), pwin, -1), (4, 5), True) if fl else None
        if fl:
            m = _op("where", _op("ge", last_nan, 0), float("nan"), m)
    if fl:
        idx = _op("where", _op("ge", last_nan, 0), last_nan, idx)
    return _op("reshape", m, shape=(n, c, ho, wo)), _op("reshape", idx, shape=(n, c, ho, wo))


def _max_pool2d_backward_triton(g, idx, *, input_shape, overlap, window=None):
    """Windows that do not overlap (window: their (kernel, stride, padding, dilation)): each
    input element's gradient is its window's, where the window's index names the element,
    else 0 (`_pool_gather`). Windows that overlap: each output's gradient added (atomically)
    at the input position its index names, into zeros."""
    if not overlap and window is not None:
        return _pool_gather(g, idx, input_shape, window[1], window[2])
    n, c, h, w = input_shape
    l = g.shape[2] * g.shape[3]
    out = _op("scatter", _op("full", shape=(n, c, h * w), value=0, dtype=g.dtype),
              _op("reshape", idx, shape=(n, c, l)), _op("reshape", g, shape=(n, c, l)), dim=2, reduce="add")
    return _op("reshape", out, shape=tuple(input_shape))


def _pool_gather(g, idx, input_shape, stride, padding):
    """Max pooling's gradient when no two windows overlap, elementwise: window (y, x) starts at
    padded row y * sh, column x * sw, and no other window reaches rows y * sh .. y * sh + sh - 1
    or those columns, so the padded input seen as (N, C, Ho, sh, Wo, sw) holds in
    [:, :, y, i, x, j] the only element window (y, x) can have picked there. Each element is
    where(idx == its position, g, 0) over g and idx broadcast across (i, j) (stride-0 views)
    and a constant map of positions (-1 for padding): no zeros written first, no scatter, the
    element the forward picked (ties, NaN) gets the gradient. The (N, C, Ho * sh, Wo * sw)
    result cut to the input is a view; rows or columns no window reaches (the floor mode's
    dropped border) are a copy into zeros."""
    n, c, h, w = input_shape
    ho, wo = g.shape[2], g.shape[3]
    (sh, sw), (ph, pw) = stride, padding
    hb, wb = ho * sh, wo * sw
    rows = (np.arange(ho)[:, None] * sh + np.arange(sh)[None, :] - ph).reshape(ho, sh, 1, 1)
    cols = (np.arange(wo)[:, None] * sw + np.arange(sw)[None, :] - pw).reshape(1, 1, wo, sw)
    inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
    pos = np.where(inside, rows * w + cols, -1).astype(np.int64).reshape(1, 1, ho, sh, wo, sw)
    spread = dict(shape=(n, c, ho, sh, wo, sw), strides=(c * ho * wo, ho * wo, wo, 0, 1, 0), offset=0)
    hit = _op("eq", _op("as_strided", idx, **spread), FrontEnd.Tensor._make(pos, D.int64))
    out = _op("where", hit, _op("as_strided", g, **spread), 0)
    out = _op("reshape", out, shape=(n, c, hb, wb))
    if (hb, wb, ph, pw) == (h, w, 0, 0):
        return out
    if hb >= ph + h and wb >= pw + w:               # the input is a window of the result
        return _op("as_strided", out, shape=(n, c, h, w), strides=(c * hb * wb, hb * wb, wb, 1),
                   offset=ph * wb + pw)
    return _place(out, (h, w), (-ph, -pw), (1, 1), 0)


def _avg_divide(total, h, w, ho, wo, kernel, stride, padding, count_include_pad, divisor_override):
    """total / torch's divisor: a number, or a constant (1, 1, Ho, Wo) map of window sizes."""
    fl = total.dtype.is_floating_point
    if not fl:                      # as the numpy kernel: a float64 quotient, truncated back
        out_dtype = total.dtype
        total = _op("convert", total, dtype=D.float64)
    if divisor_override:
        out = _op("div", total, float(divisor_override))
    else:
        div = _avg_divisor(h, w, ho, wo, kernel, stride, padding, count_include_pad, None, total.dtype.np)
        div = np.broadcast_to(div, (ho, wo))
        if div.size and (div == div.flat[0]).all():
            out = _op("div", total, float(div.flat[0]))
        else:
            out = _op("div", total, FrontEnd.Tensor._make(np.ascontiguousarray(div).reshape(1, 1, ho, wo), total.dtype))
    return out if fl else _op("convert", out, dtype=out_dtype)


def _window_sum(xp, ho, wo, kernel, stride, start=(0, 0)):
    """The sums of the kernel-sized windows of xp (N, C, Hp, Wp), the first at `start`."""
    if kernel[0] * kernel[1] <= POOL_CHAIN:
        return _fold("add", _offset_views(xp, ho, wo, kernel, stride, (1, 1), start))
    n, c, hp, wp = xp.shape
    win = _op("as_strided", xp, shape=(n, c, ho, wo, kernel[0], kernel[1]),
              strides=(c * hp * wp, hp * wp, stride[0] * wp, stride[1], wp, 1), offset=start[0] * wp + start[1])
    total = R("sum", win, (4, 5))
    return total if total.dtype is xp.dtype else _op("convert", total, dtype=xp.dtype)


def _avg_pool2d_triton(x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """The sums over the windows of the zero-padded input, divided by the window sizes."""
    n, c, h, w = x.shape
    ho, wo, eh, ew = _pool_geometry(h, w, kernel, stride, padding, (1, 1), ceil_mode)
    xp = _place(x, (h + 2 * padding[0] + eh, w + 2 * padding[1] + ew), padding, (1, 1), 0)
    total = _window_sum(xp, ho, wo, kernel, stride)
    return _avg_divide(total, h, w, ho, wo, kernel, stride, padding, count_include_pad, divisor_override)


def _avg_pool2d_backward_triton(g, *, input_shape, kernel, stride, padding, ceil_mode, count_include_pad,
                                divisor_override):
    """col2im as a window sum: g / divisor spread out by the stride, padded by kernel - 1; each
    input element sums the kernel-sized window that starts at it (offset by the padding)."""
    n, c, h, w = input_shape
    ho, wo = g.shape[2], g.shape[3]
    kh, kw = kernel
    gd = _avg_divide(g, h, w, ho, wo, kernel, stride, padding, count_include_pad, divisor_override)
    z = _place(gd, (padding[0] + h + kh - 1, padding[1] + w + kw - 1), (kh - 1, kw - 1), stride, 0)
    return _window_sum(z, h, w, kernel, (1, 1), start=tuple(padding))


def _no_kernel_but_int64(op):
    """torch's CPU kernels `op` that exist for floats and int64 only."""
    return lambda d, args: None if d is D.int64 else _no_kernel(op)(d, args)


Primitive("conv2d", "x w b", _conv2d_kernel, shape=_conv2d_shape, dtype="same", vjp=_conv2d_vjp,
          saves="x w", needs={"x": "w", "w": "x"}, grad_fn="ConvolutionBackward0",
          edges=lambda a: (0, 1, 2),     # (torch's node has bias's edge, (None, 0) where there is none)
          refuse={0: _no_kernel("slow_conv2d_cpu")}, triton=T.ConvDot("forward"))
Primitive("conv_transpose2d", "y w b", _conv_transpose2d_kernel, shape=_conv_transpose2d_shape, dtype="same",
          vjp=_conv_transpose2d_vjp, saves="y w", needs={"y": "w", "w": "y"}, grad_fn="ConvolutionBackward0",
          edges=lambda a: (0, 1, 2),
          refuse={0: _no_kernel("slow_conv_transpose2d_out_cpu"),
                  1: _no_kernel_but_int64("slow_conv_transpose2d_out_cpu")},
          triton=T.ConvDot("input"))
Primitive("conv2d_weight", "x g", _conv2d_weight_kernel,
          shape=lambda x, g, *, weight_shape, **p: tuple(weight_shape), dtype="same", vjp=_conv2d_weight_vjp,
          saves="x g", needs={"x": "g", "g": "x"}, grad_fn="ConvolutionBackwardBackward0",
          triton=T.ConvDot("weight"))


# -- pooling --------------------------------------------------------------------------------------------

def pool_out_size(n, k, s, p, d, ceil_mode):
    """torch's pooling output size: with ceil_mode the last window must start inside the
    input or its left padding."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_geometry(h, w, kernel, stride, padding, dilation, ceil_mode):
    ho = pool_out_size(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode)
    wo = pool_out_size(w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode)
    # rows/columns the last windows reach past the padded input (ceil_mode)
    extra_h = max(0, (ho - 1) * stride[0] + dilation[0] * (kernel[0] - 1) + 1 - (h + 2 * padding[0]))
    extra_w = max(0, (wo - 1) * stride[1] + dilation[1] * (kernel[1] - 1) + 1 - (w + 2 * padding[1]))
    return ho, wo, extra_h, extra_w


def _max_pool2d_kernel(x, *, kernel, stride, padding, dilation, ceil_mode):
    n, c, h, w = x.shape
    kh, kw = kernel
    ho, wo, eh, ew = _pool_geometry(h, w, kernel, stride, padding, dilation, ceil_mode)
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = _pad2d(x, padding[0], padding[1], low, eh, ew)
    win = _windows(xp, kh, kw, ho, wo, stride, dilation)                       # (N, C, kh, kw, Ho, Wo)
    # one copy puts each kernel offset's elements together (K, N, C, Ho, Wo); then the maximum
    # (NaN propagates) and, scanning the offsets backwards, the first position holding it
    k = kh * kw
    win = np.ascontiguousarray(win.transpose(2, 3, 0, 1, 4, 5)).reshape(k, n, c, ho, wo)
    values = win.max(axis=0)
    offsets = [(i // kw) * dilation[0] * w + (i % kw) * dilation[1] for i in range(k)]
    real = None
    if padding != (0, 0) or eh or ew:
        # padding never counts as a maximum's position (matters only for all -inf windows)
        real = _windows(_pad2d(np.ones((1, 1, h, w), dtype=bool), padding[0], padding[1], False, eh, ew),
                        kh, kw, ho, wo, stride, dilation)
    idx = np.zeros(values.shape, dtype=np.int64)
    for i in range(k - 1, -1, -1):
        hit = win[i] == values
        if real is not None:
            hit &= real[:, :, i // kw, i % kw]
        idx = np.where(hit, offsets[i], idx)
    if x.dtype.kind == "f":
        nan = np.isnan(values)
        if nan.any():
            # torch keeps the last NaN of a window
            for i in range(k):
                idx = np.where(nan & np.isnan(win[i]), offsets[i], idx)
    base = ((np.arange(ho) * stride[0] - padding[0])[:, None] * w + (np.arange(wo) * stride[1] - padding[1])[None, :])
    if real is not None and not real.any(axis=(2, 3)).all():
        # a dilated window with no input element at all: torch keeps its starting index, the
        # window's start stepped by the dilation past the padding (-inf and that index; the
        # first tap, padding, gave a negative index, whose gradient went to another element)
        first = [np.where(st < 0, st + (-st + dl - 1) // dl * dl, st) for st, dl in
                 ((np.arange(ho) * stride[0] - padding[0], dilation[0]),
                  (np.arange(wo) * stride[1] - padding[1], dilation[1]))]
        idx = np.where(real.any(axis=(2, 3)), idx, (first[0][:, None] * w + first[1][None, :]) - base)
    idx += base
    if x.dtype.kind == "f" and (values == 0).any():
        # torch's scan keeps the first of equal values, so a window's 0.0 and -0.0 give the first
        # one's sign; numpy's max took either, by its vector lanes (max_pool1d of [0.0, -0.0] was
        # -0.0, torch's 0.0). The value at the index is torch's (one gather, where zeros are)
        values = np.take(x.reshape(-1), idx + (np.arange(n * c) * (h * w)).reshape(n, c, 1, 1))
    return np.ascontiguousarray(values), idx


def _max_pool2d_shape(x, *, kernel, stride, padding, dilation, ceil_mode):
    n, c, h, w = x.shape
    ho, wo, _, _ = _pool_geometry(h, w, kernel, stride, padding, dilation, ceil_mode)
    return [((n, c, ho, wo), x.dtype), ((n, c, ho, wo), D.int64)]


def _max_pool2d_backward_kernel(g, idx, *, input_shape, overlap, window=None):
    """Scatter each output's gradient to the input element it came from."""
    n, c, h, w = input_shape
    idx = idx.reshape(n * c, idx.shape[2] * idx.shape[3])                  # (n * c may be 0)
    g = g.reshape(idx.shape)
    outside = idx.size and (idx.min() < 0 or idx.max() >= h * w)
    if outside:
        # a dilated window with no input element has torch's index past its plane (torch's
        # backward writes out of bounds there): its gradient goes nowhere (added as a zero)
        inside = (idx >= 0) & (idx < h * w)
        idx, g = np.where(inside, idx, 0), np.where(inside, g, 0)
    flat = idx + (np.arange(n * c) * (h * w))[:, None]
    if overlap or outside:
        # windows overlap: several outputs may pick one input; add them up
        out = np.bincount(flat.ravel(), weights=g.ravel(), minlength=n * c * h * w).astype(g.dtype)
    else:
        out = np.zeros(n * c * h * w, dtype=g.dtype)
        out[flat.ravel()] = g.ravel()
    return out.reshape(input_shape)


def _gather_pooled(gg, idx):
    """The adjoint of the max-pool scatter: each output reads the input element it picked."""
    n, c = idx.shape[0], idx.shape[1]
    flat = F.gather(F.reshape(gg, (n, c, gg.shape[2] * gg.shape[3])), 2,
                    F.reshape(idx, (n, c, idx.shape[2] * idx.shape[3])))
    return F.reshape(flat, tuple(idx.shape))


def _max_pool2d_vjp(g, out, x, *, kernel, stride, padding, dilation, ceil_mode):
    overlap = stride[0] < dilation[0] * (kernel[0] - 1) + 1 or stride[1] < dilation[1] * (kernel[1] - 1) + 1
    return (_apply("max_pool2d_backward", (g[0], out[1]), {"input_shape": tuple(x.shape), "overlap": overlap,
                                                          "window": (kernel, stride, padding, dilation)}),)


Primitive("max_pool2d", "x", _max_pool2d_kernel, shape=_max_pool2d_shape, dtype="same", multi=True,
          nondiff_outputs=(1,), vjp=_max_pool2d_vjp, saves="out", grad_fn="MaxPool2DWithIndicesBackward0",
          torch_saved_outputs=(1,),
          refuse={0: _no_kernel("max_pool2d")}, triton=T.Decompose(_max_pool2d_triton))
Primitive("max_pool2d_backward", "g idx", _max_pool2d_backward_kernel,
          shape=lambda g, idx, *, input_shape, overlap, window=None: tuple(input_shape), dtype="same",
          vjp=lambda gg, out, g, idx, *, input_shape, overlap, window=None: (_gather_pooled(gg, idx), None),
          saves="idx",
          grad_fn="MaxPool2DWithIndicesBackwardBackward0", triton=T.Decompose(_max_pool2d_backward_triton))


def _avg_divisor(h, w, ho, wo, kernel, stride, padding, count_include_pad, divisor_override, dtype):
    """Per-output divisor (Ho, Wo), as torch counts it."""
    if divisor_override:
        return np.asarray(divisor_override, dtype=dtype)

    def span(n, o, k, s, p):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)          # windows never count the ceil_mode overhang
        size = end - start
        if not count_include_pad:
            size = np.minimum(end, n) - np.maximum(start, 0)
        return size

    return (span(h, ho, kernel[0], stride[0], padding[0])[:, None] *
            span(w, wo, kernel[1], stride[1], padding[1])[None, :]).astype(dtype)


def _avg_pool2d_kernel(x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    n, c, h, w = x.shape
    ho, wo, eh, ew = _pool_geometry(h, w, kernel, stride, padding, (1, 1), ceil_mode)
    xp = _pad2d(x, padding[0], padding[1], 0, eh, ew)
    acc = np.float32 if x.dtype == np.float16 else x.dtype     # float16 windows summed in float32, as torch's
    total = _windows(xp, kernel[0], kernel[1], ho, wo, stride, (1, 1)).sum(axis=(2, 3), dtype=acc)
    return (total / _avg_divisor(h, w, ho, wo, kernel, stride, padding, count_include_pad, divisor_override,
                                 acc)).astype(x.dtype, copy=False)


def _avg_pool2d_backward_kernel(g, *, input_shape, kernel, stride, padding, ceil_mode, count_include_pad,
                                divisor_override):
    n, c, h, w = input_shape
    ho, wo = g.shape[2], g.shape[3]
    gd = g / _avg_divisor(h, w, ho, wo, kernel, stride, padding, count_include_pad, divisor_override, g.dtype)
    cols = np.broadcast_to(gd[:, :, None, None], (n, c, kernel[0], kernel[1], ho, wo))
    return np.ascontiguousarray(_col2im(cols, n, c, h, w, kernel[0], kernel[1], ho, wo, stride, padding, (1, 1)))


def _avg_pool2d_shape(x, *, kernel, stride, padding, ceil_mode, **p):
    n, c, h, w = x.shape
    ho, wo, _, _ = _pool_geometry(h, w, kernel, stride, padding, (1, 1), ceil_mode)
    return (n, c, ho, wo)


Primitive("avg_pool2d", "x", _avg_pool2d_kernel, shape=_avg_pool2d_shape, dtype="same",
          vjp=lambda g, out, x, **p: (_apply("avg_pool2d_backward", (g,), dict(p, input_shape=tuple(x.shape))),),
          grad_fn="AvgPool2DBackward0",
          refuse={0: _no_kernel("avg_pool2d"), 1: _no_kernel_but_int64("avg_pool2d")},
          triton=T.Decompose(_avg_pool2d_triton))
Primitive("avg_pool2d_backward", "g", _avg_pool2d_backward_kernel,
          shape=lambda g, *, input_shape, **p: tuple(input_shape), dtype="same",
          vjp=lambda gg, out, g, *, input_shape, **p: (_apply("avg_pool2d", (gg,), p),),
          grad_fn="AvgPool2DBackwardBackward0", triton=T.Decompose(_avg_pool2d_backward_triton))


# == binary cross entropy (unreduced) ==============================================================
# torch clamps each log at -100 and divides the derivative by max(p (1 - p), 1e-12): at p exactly 0 or 1
# the loss is 100 and the gradient finite (a composite of clamp(log p) would give 0 * inf = NaN there).

_BCE_EPS = 1e-12


def _bce_kernel(p, t):
    # torch's check, here so that a compiled program makes it on every call's values
    if p.size and not ((p >= 0) & (p <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(divide="ignore"):
        lp = np.maximum(np.log(p), -100)
        lq = np.maximum(np.log1p(-p), -100)
    return (-(t * lp + (1 - t) * lq)).astype(p.dtype, copy=False)


# torch's binary_cross_entropy_backward: g * (p - t) / max((1 - p) * p, EPSILON), its EPSILON 1e-12 as a
# float (9.99999996e-13, float64 too); an op of its own whose derivatives are torch's double backward
# (eps = 1e-12 added to p and 1 - p: at p = 0 the second derivative is t / eps^2, the clamp's zero slope
# gave 1 / EPSILON)
_BCE_EPS32 = float(np.float32(1e-12))


def _bce_backward_kernel(g, p, t):
    with np.errstate(all="ignore"):
        dt = np.result_type(g, p, t)
        return (g * (p - t) / np.maximum((1 - p) * p, dt.type(_BCE_EPS32))).astype(dt, copy=False)


def _bce_double_backward(gg, out, g, p, t):
    eps = _BCE_EPS
    gp = (p * p - 2 * p * t + t) / ((p + eps) ** 2 * (1 - p + eps) ** 2) * (gg * g)
    gg_out = (p - t) / ((p + eps) * (1 - p + eps)) * gg
    gt = None
    if hasattr(t, "shape"):
        gt = -gg * g / F.clamp((1 - p) * p, min=eps).detach()
    return gg_out, gp, gt


def _bce_vjp(g, out, p, t):
    gp = _apply("binary_cross_entropy_backward", (g, p, t), {})
    gt = None
    if hasattr(t, "shape"):
        gt = g * (F.log1p(-p) - F.log(p))          # torch's target derivative is not clamped
    return gp, gt


def _bce_triton(p, t):
    return -(t * F.clamp(F.log(p), min=-100) + (1 - t) * F.clamp(F.log1p(-p), min=-100))


Primitive("binary_cross_entropy", "p t", _bce_kernel, shape=lambda p, t: tuple(p.shape), dtype="same",
          vjp=_bce_vjp, saves="p t", grad_fn="BinaryCrossEntropyBackward0", elementwise=True,
          triton=T.Decompose(_bce_triton))
Primitive("binary_cross_entropy_backward", "g p t", _bce_backward_kernel, shape=lambda g, p, t: tuple(p.shape),
          dtype="promote", vjp=_bce_double_backward, saves="g p t", grad_fn="BinaryCrossEntropyBackwardBackward0",
          elementwise=True, triton=T.Expr(lambda a, p, c: f"{a[0]} * ({a[1]} - {a[2]}) / tl.maximum((1.0 - {a[1]}) * "
                                                          f"{a[1]}, {_BCE_EPS32!r})", cast=True))


# == class-index targets ==========================================================================
# nll_loss and cross_entropy check their targets as torch does; eager tensors before anything is
# recorded, a traced target through this primitive, so that a compiled program checks each call's

def check_class_targets(t, classes, ignore_index):
    """t itself, where every entry is a class in [0, classes) or ignore_index; else torch's IndexError."""
    bad = (t != ignore_index) & ((t < 0) | (t >= classes))
    if bad.any():
        raise IndexError(f"Target {int(t[bad].ravel()[0])} is out of bounds.")
    return t


Primitive("class_target", "t", check_class_targets, shape=lambda t, **p: tuple(t.shape), dtype="same",
          triton=T.identity)
