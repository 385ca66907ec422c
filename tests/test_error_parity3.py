"""Errors and autograd corners where tracegrad answered otherwise than torch: the exception type of
wrong-dtype losses and in-place bitwise ops, binary_cross_entropy_with_logits' result dtype, the
entries of a direct call of a composite's node, compiled calls raising what eager raises."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tracegrad as tg
import tracegrad.nn.functional as TF


def _outcome(fn):
    try:
        r = fn()
    except Exception as e:          # noqa: BLE001 (the type is what is compared)
        return type(e), str(e)
    return "ok", r


def _same_error(case, torch_fn, tg_fn, compiled=None):
    """torch and tracegrad raise the same exception type; tracegrad's message is torch's (up to
    the first sentence); and, where given, the compiled call raises it too, at once."""
    t_type, t_msg = _outcome(torch_fn)
    g_type, g_msg = _outcome(tg_fn)
    assert t_type != "ok", f"{case}: torch computed"
    assert g_type is t_type, f"{case}: tracegrad {g_type} {g_msg!r}, torch {t_type} {t_msg!r}"
    if t_type is TypeError:            # (torch's lists its signatures; the op's name leads both)
        assert g_msg.split("(")[0] == t_msg.split("(")[0], case
    else:
        assert g_msg.split(". ")[0] == t_msg.split(". ")[0], case
    if compiled is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")            # no fallback warning: raised as itself
            c_type, c_msg = _outcome(compiled)
        assert c_type is t_type and c_msg == g_msg, f"{case}: compiled {c_type} {c_msg!r}"


# -- losses of wrong dtypes ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int64", "int32", "bool", "uint8"])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 3, 4)])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_nll_loss_of_an_integer_input_raises_torchs_error(dtype, shape, reduction):
    # tracegrad returned an int64 loss with reduction="none" (torch: NotImplementedError)
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]

    def run(lib, fn):
        return lambda: fn(lib.ones(*shape, dtype=getattr(lib, dtype)), lib.zeros(tshape, dtype=lib.int64),
                          reduction=reduction)
    f = tg.compile(lambda x, t, reduction: TF.nll_loss(x, t, reduction=reduction))
    _same_error("nll_loss", run(torch, F.nll_loss), run(tg, TF.nll_loss), run(tg, f))


@pytest.mark.parametrize("wdtype", ["float64", "int64", "float16"])
def test_nll_loss_weight_of_another_dtype_raises(wdtype):
    # tracegrad promoted: a float64 weight made a float64 loss of a float32 input
    def run(lib, fn):
        return lambda: fn(lib.ones(2, 3), lib.zeros(2, dtype=lib.int64), weight=lib.ones(3, dtype=getattr(lib, wdtype)))
    _same_error("nll_loss weight", run(torch, F.nll_loss), run(tg, TF.nll_loss))
    _same_error("cross_entropy weight", run(torch, F.cross_entropy), run(tg, TF.cross_entropy))


def test_cross_entropy_target_of_the_inputs_shape():
    # an int64 target of the input's shape is refused as class probabilities (tracegrad read (3,)
    # int64 beside a (3,) input as class indices), an ignore_index is refused there, a 0-dim input
    # raises IndexError, and a weight of the wrong length is named
    cases = [
        ((3,), (3,), "int64", {}), ((2, 3), (2, 3), "int64", {}), ((), (), "int64", {}), ((), (), "float32", {}),
        ((2, 3), (2, 3), "float32", {"ignore_index": 1}), ((2, 3), (2, 3), "float32", {"weight": 4}),
    ]
    for ishape, tshape, tdt, kw in cases:
        def run(lib, fn):
            extra = dict(kw)
            if "weight" in extra:
                extra["weight"] = lib.ones(extra["weight"])
            return lambda: fn(lib.ones(ishape), lib.zeros(tshape, dtype=getattr(lib, tdt)), **extra)
        _same_error(f"cross_entropy {ishape} {tdt} {kw}", run(torch, F.cross_entropy), run(tg, TF.cross_entropy))


@pytest.mark.parametrize("idt", ["float16", "float32", "float64", "int64", "bool"])
@pytest.mark.parametrize("tdt", ["float16", "float32", "float64", "int64", "bool"])
def test_bce_with_logits_dtypes(idt, tdt):
    # torch's loss is (1 - target) written in place: the target's dtype (tracegrad returned
    # float64 for float64 logits and a float32 target), an integer target cannot hold it and an
    # integer input has no log_sigmoid (tracegrad computed both)
    rs = np.random.RandomState(0)
    x, t = rs.randn(200) * 3, rs.rand(200)

    def run(lib, fn):
        return lambda: fn(lib.tensor(x).to(getattr(lib, idt)), lib.tensor(t).to(getattr(lib, tdt)))
    t_type, t_out = _outcome(run(torch, F.binary_cross_entropy_with_logits))
    if t_type != "ok":
        _same_error("bce_with_logits", run(torch, F.binary_cross_entropy_with_logits),
                    run(tg, TF.binary_cross_entropy_with_logits))
        return
    g = run(tg, TF.binary_cross_entropy_with_logits)()
    assert str(g.dtype) == str(t_out.dtype)
    # torch's steps, each rounded as torch rounds it: bit for bit where a 16-bit dtype takes part
    # (tracegrad's float16 loss, computed in float32 and rounded once, was up to 4% off torch's);
    # float32 and float64 logits run tracegrad's log-sigmoid, a few ulps from torch's
    dts = (idt, tdt)
    tol = 0 if "float16" in dts else 2e-6 if "float32" in dts else 1e-13
    np.testing.assert_allclose(g.double().numpy(), t_out.double().numpy(), rtol=tol, atol=0)


def test_bce_with_logits_gradients_and_compiled_of_mixed_dtypes():
    rs = np.random.RandomState(1)
    x, t, w = rs.randn(4, 3), rs.rand(4, 3), rs.rand(3)
    for tdt, wdt in (("float32", None), ("float32", "float64"), ("float64", "float32")):
        def run(lib, fn):
            xi = lib.tensor(x, requires_grad=True)
            kw = {} if wdt is None else {"weight": lib.tensor(w).to(getattr(lib, wdt))}
            out = fn(xi, lib.tensor(t).to(getattr(lib, tdt)), **kw)
            out.backward()
            return out, xi.grad
        (to, tgr), (go, ggr) = run(torch, F.binary_cross_entropy_with_logits), \
            run(tg, TF.binary_cross_entropy_with_logits)
        co, cgr = run(tg, tg.compile(TF.binary_cross_entropy_with_logits))
        assert str(go.dtype) == str(to.dtype) == str(co.dtype)
        assert ggr.dtype is tg.float64 and cgr.dtype is tg.float64
        np.testing.assert_allclose(go.detach().numpy(), to.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(ggr.numpy(), tgr.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(co.detach().numpy(), go.detach().numpy())
        np.testing.assert_array_equal(cgr.numpy(), ggr.numpy())


@pytest.mark.parametrize("kw", ["pos_weight", "weight"])
def test_bce_with_logits_weight_broadcasting_past_the_input_raises(kw):
    def run(lib, fn):
        return lambda: fn(lib.ones(3), lib.ones(3), **{kw: lib.ones(2, 3)})
    _same_error("bce_with_logits " + kw, run(torch, F.binary_cross_entropy_with_logits),
                run(tg, TF.binary_cross_entropy_with_logits))


# -- in-place bitwise ops --------------------------------------------------------------------------

_BITWISE_INPLACE = [
    ("bitwise_and_ float", lambda t: t.tensor([1, 2]).bitwise_and_(1.5)),
    ("bitwise_or_ float", lambda t: t.tensor([1, 2]).bitwise_or_(1.5)),
    ("bitwise_xor_ float tensor", lambda t: t.tensor([1, 2]).bitwise_xor_(t.tensor([1.0, 2.0]))),
    ("bitwise_left_shift_ float", lambda t: t.tensor([1, 2]).bitwise_left_shift_(1.5)),
    ("bitwise_right_shift_ 0-dim float", lambda t: t.tensor([1, 2]).bitwise_right_shift_(t.tensor(1.0))),
    ("&= float", lambda t: t.tensor([1, 2]).__iand__(t.tensor([1.0, 2.0]))),
    ("|= float", lambda t: t.tensor([1, 2]).__ior__(1.5)),
    ("^= int into bool", lambda t: t.tensor([True, False]).__ixor__(t.tensor([1, 2]))),
    ("|= 1 into bool", lambda t: t.tensor([True, False]).__ior__(1)),
    ("<<= float", lambda t: t.tensor([1, 2]).__ilshift__(1.0)),
    ("float &= float", lambda t: t.tensor([1.0, 2.0]).__iand__(t.tensor([1.0, 2.0]))),
]


@pytest.mark.parametrize("case,fn", _BITWISE_INPLACE, ids=[c for c, _ in _BITWISE_INPLACE])
def test_inplace_bitwise_with_a_float_other_raises_torchs_error(case, fn):
    # torch checks the cast to self's dtype before looking for a kernel (tracegrad raised the float
    # kernel's NotImplementedError; bool ^= int64 made a new int64 tensor)
    _same_error(case, lambda: fn(torch), lambda: fn(tg))


def test_ixor_writes_in_place():
    # without __ixor__, x ^= y rebound x to a new tensor: another name for x kept the old value
    for lib in (torch, tg):
        x = lib.tensor([True, False, True])
        alias, view = x, x[1:]
        x ^= lib.tensor([True, True, False])
        assert alias.tolist() == [False, True, True] and view.tolist() == [True, True]
        assert x._version == 1
        y = lib.tensor([3, 5])
        y ^= 1
        assert y.tolist() == [2, 4]


def test_compiled_inplace_bitwise_raises_at_once():
    def f(x, y):
        x = x * 1
        x &= y
        return x
    cf = tg.compile(f)
    _same_error("compiled &=", lambda: f(torch.tensor([1, 2]), torch.tensor([1.0, 2.0])),
                lambda: f(tg.tensor([1, 2]), tg.tensor([1.0, 2.0])),
                lambda: cf(tg.tensor([1, 2]), tg.tensor([1.0, 2.0])))

    def g(x, y):
        x = x.clone()
        x ^= y
        return x
    cg = tg.compile(g)
    a, b = np.array([True, False, True]), np.array([True, True, False])
    np.testing.assert_array_equal(cg(tg.tensor(a), tg.tensor(b)).numpy(), g(torch.tensor(a), torch.tensor(b)).numpy())


# -- a direct call of a composite's node -----------------------------------------------------------

_RS = np.random.RandomState(0)
_X, _V, _X3, _X4 = _RS.randn(2, 3), _RS.randn(3), _RS.randn(2, 3, 5), _RS.randn(2, 3, 2, 2)
_K1, _KT1 = _RS.randn(4, 3, 2), _RS.randn(3, 2, 2)


def _t(lib, a, rg=True):
    return lib.tensor(a, requires_grad=rg)


_NODE_CASES = {
    "layer_norm": lambda t, F, rg: F.layer_norm(_t(t, _X), (3,)),
    "layer_norm weight": lambda t, F, rg: F.layer_norm(_t(t, _X), (3,), _t(t, _V, rg)),
    "layer_norm bias": lambda t, F, rg: F.layer_norm(_t(t, _X), (3,), None, _t(t, _V, rg)),
    "layer_norm both": lambda t, F, rg: F.layer_norm(_t(t, _X), (3,), _t(t, _V, rg), _t(t, _V * 2, rg)),
    "batch_norm": lambda t, F, rg: F.batch_norm(_t(t, _X), None, None, training=True),
    "batch_norm weight": lambda t, F, rg: F.batch_norm(_t(t, _X), None, None, _t(t, _V, rg), training=True),
    "batch_norm eval": lambda t, F, rg: F.batch_norm(_t(t, _X4), t.zeros(3, dtype=t.float64),
                                                     t.ones(3, dtype=t.float64), None, _t(t, _V, rg)),
    "conv1d": lambda t, F, rg: F.conv1d(_t(t, _X3), _t(t, _K1, rg)),
    "conv1d bias": lambda t, F, rg: F.conv1d(_t(t, _X3), _t(t, _K1, rg), _t(t, _V[:2].repeat(2), rg), padding=1),
    "conv_transpose1d": lambda t, F, rg: F.conv_transpose1d(_t(t, _X3), _t(t, _KT1, rg), stride=2),
}


@pytest.mark.parametrize("rg", [True, False])
@pytest.mark.parametrize("name", list(_NODE_CASES))
def test_direct_call_of_a_composite_node_matches_torchs_entries(name, rg):
    # torch's node has an input for each optional weight and bias, given or not: its direct call
    # answers None there (tracegrad's layer_norm node answered the input's gradient alone, a bare
    # tensor; conv1d's answered the 4-d gradient of its internal squeeze)
    out = []
    for lib, Fm in ((torch, F), (tg, TF)):
        y = _NODE_CASES[name](lib, Fm, rg)
        g = lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)))
        r = y.grad_fn(g)
        out.append(r if isinstance(r, tuple) else (r,))
    assert len(out[0]) == len(out[1])
    for a, b in zip(*out):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-10, atol=1e-12)


# -- the sign of tied zeros ------------------------------------------------------------------------
# torch's max pooling scans each window and keeps the first of equal values (its CPU kernel, the
# same for every size): a window's 0.0 and -0.0 give the first one's sign, as matched here. Where
# torch's answer follows its vector lanes (maximum, minimum, clamp with tensor bounds, amax, amin
# and aminmax over a run of mixed zeros, the order sort and topk leave tied zeros in), it changes
# with the size and position, and tracegrad does not follow it.

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool_of_tied_zeros_keeps_the_first_sign(dtype):
    rs = np.random.RandomState(3)
    pool1 = tg.compile(lambda x, k, s: TF.max_pool1d(x, k, s, return_indices=True))
    for _ in range(12):
        n, k, s = rs.randint(4, 30), rs.randint(2, 4), rs.randint(1, 3)
        v = np.where(rs.rand(2, 3, n) < 0.5, 0.0, -0.0)
        a = F.max_pool1d(torch.tensor(v, dtype=getattr(torch, dtype)), k, s, return_indices=True)
        b = TF.max_pool1d(tg.tensor(v, dtype=getattr(tg, dtype)), k, s, return_indices=True)
        c = pool1(tg.tensor(v, dtype=getattr(tg, dtype)), k, s)
        np.testing.assert_array_equal(np.signbit(b[0].numpy()), np.signbit(a[0].numpy()))
        np.testing.assert_array_equal(b[1].numpy(), a[1].numpy())
        np.testing.assert_array_equal(np.signbit(c[0].numpy()), np.signbit(b[0].numpy()))
        h, w = rs.randint(2, 9), rs.randint(2, 9)
        v2 = np.where(rs.rand(1, 2, h, w) < 0.5, 0.0, -0.0)
        v2[0, 0, 0, 0] = 1.0                   # (a window with a positive value keeps it)
        kk = min(rs.randint(2, 4), h, w)
        for tf, gf in ((lambda x: F.max_pool2d(x, kk, padding=kk // 2), lambda x: TF.max_pool2d(x, kk, padding=kk // 2)),
                       (lambda x: F.adaptive_max_pool2d(x, (2, 2)), lambda x: TF.adaptive_max_pool2d(x, (2, 2)))):
            a = tf(torch.tensor(v2, dtype=getattr(torch, dtype)))
            b = gf(tg.tensor(v2, dtype=getattr(tg, dtype)))
            np.testing.assert_array_equal(b.numpy(), a.numpy())
            np.testing.assert_array_equal(np.signbit(b.numpy()), np.signbit(a.numpy()))


# -- ldexp: torch's node saves other and the result, not self ----------------------------------------

def _ldexp_written(lib, compiled=False):
    x0 = lib.tensor(np.linspace(-2, 2, 12).reshape(3, 4), requires_grad=True)
    w = lib.tensor(np.linspace(-1.5, 2.5, 4), requires_grad=True)

    def f(x0, w):
        x = x0 * 1
        y = lib.ldexp(x, w)
        x.mul_(3)                    # self written before the backward: torch's node never saved it
        return (y * y).sum() + x.sum()
    if compiled:
        f = tg.compile(f)
    out = f(x0, w)
    out.backward()
    return out, x0.grad, w.grad


def test_ldexp_with_self_written_in_place_differentiates():
    # tracegrad's ldexp was mul(x, 2 ** w), whose node saved x: the backward raised "modified by an
    # inplace operation" (and the compiled call fell back), where torch differentiates
    t = _ldexp_written(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for compiled in (False, True):
            g = _ldexp_written(tg, compiled)
            for a, b in zip(t, g):
                np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12)


def test_ldexp_result_written_raises_and_float64_gradcheck():
    x = tg.tensor(np.linspace(-2, 2, 6), requires_grad=True)
    w = tg.tensor(np.linspace(-1, 2, 6), requires_grad=True)
    y = tg.ldexp(x * 1, w)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="output 0 of Ldexp"):
        y.sum().backward()
    assert tg.autograd.gradcheck(tg.ldexp, (x, w))
    assert tg.autograd.gradgradcheck(tg.ldexp, (x, w))
    # the node's inputs are self and other, as torch's
    r = tg.ldexp(x, w)
    assert len(r.grad_fn.next_functions) == 2 and len(r.grad_fn(tg.ones(6, dtype=tg.float64))) == 2


_DTS = ["float16", "bfloat16", "float32", "float64", "int64", "int32", "bool"]


@pytest.mark.parametrize("xd", _DTS[:6])
def test_ldexp_dtypes_and_values(xd):
    # torch: an integer exponent of a floating x is std::ldexp in x's dtype (tracegrad's float16 *
    # 2 ** int64 was float32); the power of a float64 or 16-bit x is a 0-dim tensor of x's dtype
    # raised to y (float64 x beside a 0-dim float32 y: 2 ** y in float64, tracegrad's in float32)
    rs = np.random.RandomState(5)
    for yd in _DTS:
        for ys in ((7,), ()):
            x, y = rs.randn(7) * 3, rs.randn(*ys) * 4
            if yd.startswith("int") or yd == "bool":
                y = np.round(y) if yd != "bool" else y > 0
            def run(lib):
                return lambda: lib.ldexp(lib.tensor(x).to(getattr(lib, xd)), lib.tensor(y).to(getattr(lib, yd)))
            if _outcome(run(torch))[0] != "ok":
                _same_error(f"ldexp {xd} {yd}", run(torch), run(tg))
                continue
            a, b = run(torch)(), run(tg)()
            assert str(b.dtype) == str(a.dtype), (xd, yd, ys)
            # (2.0 ** y in float32 is numpy's powf, an ulp from torch's for about a fifth of values)
            tol = 0 if yd in ("int64", "int32", "bool") or "float32" not in (yd, str(a.dtype)[6:]) else 3e-7
            np.testing.assert_allclose(b.double().numpy(), a.double().numpy(), rtol=tol, atol=0,
                                       err_msg=f"{xd} {yd} {ys}")


# -- wrong arguments: tracegrad computed, or raised another type, where torch raises ----------------

def _a(lib, shape, dt="float32"):
    n = int(np.prod(shape)) if shape else 1
    return lib.tensor(np.arange(n, dtype=np.float64).reshape(shape) * 0.37 - 1).to(getattr(lib, dt))


_WRONG = {
    # tracegrad computed
    "outer of a 2-d tensor": lambda t, F: t.outer(_a(t, (2,)), _a(t, (2, 2))),
    "outer of a 0-d tensor": lambda t, F: t.outer(_a(t, ()), _a(t, (2,))),
    "adaptive_avg_pool2d of int64": lambda t, F: F.adaptive_avg_pool2d(_a(t, (1, 1, 4, 4), "int64"), 2),
    "adaptive_max_pool2d of int64": lambda t, F: F.adaptive_max_pool2d(_a(t, (1, 1, 5, 5), "int64"), 2),
    "embedding of a 1-d weight": lambda t, F: F.embedding(t.tensor([1]), _a(t, (4,))),
    "quantile with a float64 q": lambda t, F: _a(t, (2, 3)).quantile(t.tensor([0.5], dtype=t.float64)),
    "solve of two dtypes": lambda t, F: t.linalg.solve(t.eye(2), _a(t, (2,), "float64")),
    "bucketize into 2-d boundaries": lambda t, F: t.bucketize(_a(t, (2,)), _a(t, (2, 2))),
    "normal with a negative std": lambda t, F: t.normal(0.0, -1.0, (3,)),
    "normal of a tensor mean with a negative std": lambda t, F: t.normal(t.zeros(2), -1.0),
    "split with a negative size": lambda t, F: _a(t, (3,)).split([4, -1]),
    "split with a negative split_size": lambda t, F: t.split(_a(t, (3,)), -1),
    "cartesian_prod of a 2-d tensor": lambda t, F: t.cartesian_prod(_a(t, (2, 2))),
    "tril_indices of a negative size": lambda t, F: t.tril_indices(-1, 2),
    "triu_indices of a negative size": lambda t, F: t.triu_indices(2, -1),
    "batch_norm of a float64 weight": lambda t, F: F.batch_norm(_a(t, (2, 3)), None, None, _a(t, (3,), "float64"),
                                                                training=True),
    "batch_norm of float64 statistics": lambda t, F: F.batch_norm(_a(t, (2, 3)), t.zeros(3, dtype=t.float64),
                                                                  t.ones(3, dtype=t.float64)),
    "group_norm of a float64 weight": lambda t, F: F.group_norm(_a(t, (2, 4)), 2, _a(t, (4,), "float64")),
    "conv2d of a negative stride": lambda t, F: F.conv2d(_a(t, (1, 1, 4, 4)), _a(t, (1, 1, 2, 2)), stride=-1),
    "multinomial of a negative probability": lambda t, F: t.multinomial(t.tensor([-1.0, 2.0]), 1),
    "multinomial of too many draws": lambda t, F: t.multinomial(t.tensor([1.0, 2.0]), 3),
    # tracegrad raised another type
    "conv2d of stride 0": lambda t, F: F.conv2d(_a(t, (1, 1, 4, 4)), _a(t, (1, 1, 2, 2)), stride=0),
    "conv_transpose2d of stride 0": lambda t, F: F.conv_transpose2d(_a(t, (1, 1, 4, 4)), _a(t, (1, 1, 2, 2)),
                                                                    stride=0),
    "max_pool2d of kernel 0": lambda t, F: F.max_pool2d(_a(t, (1, 1, 4, 4)), 0, stride=1),
    "max_pool2d of stride 0": lambda t, F: F.max_pool2d(_a(t, (1, 1, 4, 4)), 2, stride=0),
    "avg_pool2d of stride 0": lambda t, F: F.avg_pool2d(_a(t, (1, 1, 4, 4)), 2, stride=0),
    "batch_norm of int64": lambda t, F: F.batch_norm(_a(t, (2, 3), "int64"), None, None, training=True),
    "group_norm of bool": lambda t, F: F.group_norm(_a(t, (2, 4), "bool"), 2),
    "dropout of int64": lambda t, F: F.dropout(_a(t, (2, 3), "int64"), 0.5),
    "svd of int64": lambda t, F: t.linalg.svd(_a(t, (2, 3), "int64")),
    "qr of an unknown mode": lambda t, F: t.linalg.qr(_a(t, (3, 3)), mode="x"),
    "vdot of two dtypes": lambda t, F: t.vdot(_a(t, (2,)), _a(t, (2,), "float64")),
    "hardshrink of int64": lambda t, F: F.hardshrink(_a(t, (2, 2), "int64")),
    "softshrink of int64": lambda t, F: F.softshrink(_a(t, (2, 2), "int64")),
    "rrelu of int64": lambda t, F: F.rrelu(_a(t, (2, 2), "int64")),
    "gumbel_softmax of int64": lambda t, F: F.gumbel_softmax(_a(t, (2, 2), "int64")),
    "interpolate of int64": lambda t, F: F.interpolate(_a(t, (1, 2, 4), "int64"), scale_factor=2),
    "unfold of int64": lambda t, F: F.unfold(_a(t, (1, 1, 3, 3), "int64"), 2),
    "std with unbiased and correction": lambda t, F: _a(t, (2, 3)).std(1, unbiased=False, correction=0),
    "var with a positional unbiased and correction": lambda t, F: _a(t, (2, 3)).var(True, correction=0),
    "grid_sample of a float64 grid": lambda t, F: F.grid_sample(_a(t, (1, 1, 2, 2)), _a(t, (1, 2, 2, 2), "float64") / 4,
                                                                align_corners=False),
}


@pytest.mark.parametrize("case", list(_WRONG))
def test_wrong_arguments_raise_torchs_error(case):
    fn = _WRONG[case]
    _same_error(case, lambda: fn(torch, F), lambda: fn(tg, TF))


def test_compiled_wrong_arguments_raise_at_once():
    # a compiled call raises eager's error as itself, without a fallback warning
    cases = {
        "outer": (lambda a, b: tg.outer(a, b), lambda a, b: torch.outer(a, b), [(2,), (2, 2)]),
        "bucketize": (lambda a, b: tg.bucketize(a, b), lambda a, b: torch.bucketize(a, b), [(2,), (2, 2)]),
        "embedding": (lambda i, w: TF.embedding(i, w), lambda i, w: F.embedding(i, w), None),
        "conv2d": (lambda a, b: TF.conv2d(a, b, stride=0), lambda a, b: F.conv2d(a, b, stride=0),
                   [(1, 1, 4, 4), (1, 1, 2, 2)]),
    }
    for name, (g, t, shapes) in cases.items():
        if shapes is None:
            ta, ga = (torch.tensor([1]), _a(torch, (4,))), (tg.tensor([1]), _a(tg, (4,)))
        else:
            ta, ga = [_a(torch, s) for s in shapes], [_a(tg, s) for s in shapes]
        _same_error(name, lambda: t(*ta), lambda: g(*ga), lambda: tg.compile(g)(*ga))


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")      # (torch's, for rms_norm)
def test_result_dtypes_and_integer_scalars_of_mixed_operands():
    # torch writes these into the input's dtype (tracegrad promoted to float64); an integer addmm
    # reads beta and alpha as integers (tracegrad's float scalars made a float result)
    for name, fn in {
        "rms_norm": lambda t, F: F.rms_norm(_a(t, (2, 3)), (3,), _a(t, (3,), "float64")),
        "soft_margin_loss": lambda t, F: F.soft_margin_loss(_a(t, (2, 3)), _a(t, (2, 3), "float64"), reduction="none"),
        "addmm int64": lambda t, F: t.addmm(_a(t, (2, 2), "int64"), _a(t, (2, 2), "int64"), _a(t, (2, 2), "int64"),
                                            beta=0.5, alpha=2.7),
        "addmm int64 beta 0": lambda t, F: t.addmm(_a(t, (2, 2), "int64"), _a(t, (2, 2), "int64"),
                                                   _a(t, (2, 2), "int64"), beta=0),
        "baddbmm int64": lambda t, F: t.baddbmm(_a(t, (1, 2, 2), "int64"), _a(t, (1, 2, 2), "int64"),
                                                _a(t, (1, 2, 2), "int64"), beta=1.5, alpha=0.5),
    }.items():
        a, b = fn(torch, F), fn(tg, TF)
        assert str(b.dtype) == str(a.dtype), name
        np.testing.assert_allclose(b.double().numpy(), a.double().numpy(), rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("idt,tdt", [("float16", "float16"), ("bfloat16", "bfloat16"), ("float16", "float32"),
                                     ("float32", "float16")])
def test_bce_with_logits_16_bit_compiled_equals_eager_and_torch(idt, tdt):
    # float16 logits: tracegrad computed in float32 and rounded once, up to 4% off torch's rounded steps
    rs = np.random.RandomState(2)
    x, t, pw = rs.randn(64) * 4, rs.rand(64), rs.rand(64) * 2
    f = tg.compile(lambda a, b, p: TF.binary_cross_entropy_with_logits(a, b, pos_weight=p, reduction="none"))

    def args(lib):
        return (lib.tensor(x).to(getattr(lib, idt)), lib.tensor(t).to(getattr(lib, tdt)),
                lib.tensor(pw).to(getattr(lib, tdt)))
    a = F.binary_cross_entropy_with_logits(*args(torch)[:2], pos_weight=args(torch)[2], reduction="none")
    e = TF.binary_cross_entropy_with_logits(*args(tg)[:2], pos_weight=args(tg)[2], reduction="none")
    c = f(*args(tg))
    np.testing.assert_array_equal(e.float().numpy(), a.float().numpy())
    np.testing.assert_array_equal(c.float().numpy(), e.float().numpy())
