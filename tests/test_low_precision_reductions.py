"""Norms, batch statistics, cosine similarity and average pooling of float16 input, as torch
computes them: accumulated in float32, rounded once. Squared in float16 first, values of a few
hundred overflowed: `linalg.vector_norm` of a row of 300s was inf (torch: 1.7e3), `batch_norm`
gave 0 for every output (its variance inf), `cosine_similarity` NaN, `avg_pool` of large values
-inf, and a float16 running variance went to inf where torch's stays finite.

The same functions' float64 values, first and second derivatives are compared with torch's
at the corners that differed before (a zero row, a norm below eps)."""
import numpy as np
import pytest
import torch

import tracegrad as tg

RNG = np.random.default_rng(11)


def both(fn, *arrays, grad=False):
    out = []
    for lib in (torch, tg):
        ts = [lib.tensor(a, requires_grad=grad) for a in arrays]
        out.append((fn(lib, *ts), ts))
    return out


def ulps(got, ref64, dt=np.float16):
    """Distance of got from the exact value in ulps of dt."""
    return np.abs(got.astype(np.float64) - ref64) / np.spacing(np.abs(ref64).astype(dt)).astype(np.float64)


@pytest.mark.parametrize("ord, scale", [(2, 300), (1, 300), (3, 300), (0.5, 0.5), (float("inf"), 300)])
def test_vector_norm_of_float16_accumulates_in_float32(ord, scale):
    x = (RNG.standard_normal((6, 40)) * scale).astype(np.float16)
    (t, _), (g, _) = both(lambda lib, a: lib.linalg.vector_norm(a, ord, dim=1), x)
    exact = torch.linalg.vector_norm(torch.tensor(x, dtype=torch.float64), ord, dim=1).numpy()
    assert np.isfinite(g.numpy()).all() and g.dtype == tg.float16
    assert ulps(g.numpy(), exact).max() <= max(0.5, ulps(t.numpy(), exact).max())


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, 1.5, -1, -2.5, float("inf"), float("-inf")])
@pytest.mark.parametrize("rows", ["random", "zero_row", "one_zero"])
def test_vector_norm_derivatives_match_torch(ord, rows):
    a = {"random": RNG.standard_normal((3, 5)), "zero_row": np.array([[0.0, 0, 0], [1, -2, 0.5]]),
         "one_zero": np.array([[0.0, 3.0, -4.0]])}[rows]
    res = []
    for lib in (torch, tg):
        x = lib.tensor(a, requires_grad=True)
        y = lib.linalg.vector_norm(x, ord, dim=1)
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        (h,) = lib.autograd.grad((g * g).sum(), x, allow_unused=True)
        res.append((y.detach().numpy(), g.detach().numpy(), None if h is None else h.detach().numpy(**({'force': True} if lib is torch else {})),
                    type(y.grad_fn).__name__))
    (yt, gt_, ht, nt), (yg, gg, hg, ng) = res
    np.testing.assert_allclose(yg, yt, rtol=1e-12)
    np.testing.assert_allclose(gg, gt_, rtol=1e-12, atol=1e-15)
    assert (ht is None) == (hg is None)
    if ht is not None:
        np.testing.assert_allclose(hg, ht, rtol=1e-10, atol=1e-14)
    assert ng == nt == "LinalgVectorNormBackward0"


def test_batch_norm_of_float16_input_in_float32():
    x = (RNG.standard_normal((6, 4, 5)) * 300).astype(np.float16)
    exact = torch.tensor(x, dtype=torch.float64)
    exact = ((exact - exact.mean((0, 2), keepdim=True)) /
             torch.sqrt(exact.var((0, 2), unbiased=False, keepdim=True) + 1e-5)).numpy()
    for half_module in (False, True):
        res = []
        for lib in (torch, tg):
            bn = lib.nn.BatchNorm1d(4)
            if half_module:
                bn = bn.half()
            out = bn(lib.tensor(x)).detach().numpy()
            bn.eval()
            res.append((out, bn.running_mean.numpy(), bn.running_var.numpy(), bn(lib.tensor(x)).detach().numpy()))
        (ot, mt, vt, et), (og, mg, vg, eg) = res
        assert og.dtype == np.float16 and np.isfinite(og).all()
        assert ulps(og, exact).max() <= max(0.5, ulps(ot, exact).max())
        # the running statistics (a float16 variance of ~1e5 * momentum fits) and the eval output
        # (float32 statistics of a float32 module: within an ulp of torch's, whose variance sums otherwise)
        np.testing.assert_allclose(mg, mt, rtol=5e-7 if mt.dtype == np.float32 else 0)
        np.testing.assert_allclose(vg, vt, rtol=5e-7 if vt.dtype == np.float32 else 0)
        assert np.isfinite(vg).all()
        np.testing.assert_allclose(eg.astype(np.float64), et.astype(np.float64), rtol=2e-3, atol=2e-3)


def test_cosine_similarity_of_float16_does_not_overflow():
    a, b = ((RNG.standard_normal((8, 40)) * 300).astype(np.float16) for _ in range(2))
    (t, _), (g, _) = both(lambda lib, x, y: lib.nn.functional.cosine_similarity(x, y), a, b)
    assert np.isfinite(g.numpy()).all()
    np.testing.assert_allclose(g.numpy().astype(np.float64), t.numpy().astype(np.float64), rtol=2e-3, atol=2e-3)


CASES = [((4, 6), (4, 6), 1, 1e-8, 1.0, 1.0), ((4, 6), (4, 6), 1, 1e-8, 1e-9, 1.0), ((3, 5), (3, 5), 1, 1e-8, 0.0, 1.0),
         ((4, 1, 6), (1, 3, 6), -1, 1e-8, 1.0, 1.0), ((4, 6), (4, 6), 0, 1e-3, 1e-5, 1e-5), ((5,), (5,), 0, 1e-8, 1, 1)]


@pytest.mark.parametrize("s1, s2, dim, eps, k1, k2", CASES)
def test_cosine_similarity_as_torch_computes_it(s1, s2, dim, eps, k1, k2):
    """torch divides each input by its norm clamped at eps (the clamp outside autograd): below eps
    its value and its first and second derivatives differ from the dot product over the clamped
    product of the norms that tracegrad computed before."""
    a, b = RNG.standard_normal(s1) * k1, RNG.standard_normal(s2) * k2
    res = []
    for lib in (torch, tg):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        o = lib.nn.functional.cosine_similarity(x, y, dim, eps)
        gx, gy = lib.autograd.grad(o.sum() + (o * o).sum(), (x, y), create_graph=True)
        (hx,) = lib.autograd.grad((gx * gx).sum() + gy.sum(), x)
        res.append([o.detach().numpy(), gx.detach().numpy(), gy.detach().numpy(), hx.numpy()])
    for u, v in zip(*res):
        np.testing.assert_allclose(v, u, rtol=1e-9, atol=1e-12)


def test_cosine_similarity_dtypes_as_torch():
    for lib in (torch, tg):
        with pytest.raises(RuntimeError, match="expected common dtype to be floating point, yet common dtype is Long"):
            lib.nn.functional.cosine_similarity(lib.tensor([1, 2]), lib.tensor([3, 4]), 0)
    t = torch.nn.functional.cosine_similarity(torch.tensor([1, 2]), torch.tensor([3.0, 4.0]), 0)
    g = tg.nn.functional.cosine_similarity(tg.tensor([1, 2]), tg.tensor([3.0, 4.0]), 0)
    assert g.dtype == tg.float32 and float(g) == float(t)


def test_cosine_similarity_compiled_equals_eager():
    a, b = (RNG.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
    a[2] = 0
    f = lambda x, y: tg.nn.functional.cosine_similarity(x, y).sum()     # noqa: E731
    c = tg.compile(f, fullgraph=True)
    res = []
    for fn in (f, c, c):
        x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        out = fn(x, y)
        out.backward()
        res.append((out.detach().numpy(), x.grad.numpy(), y.grad.numpy()))
    for r in res[1:]:
        for u, v in zip(res[0], r):
            np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("scale", [1, 100, 3000])
@pytest.mark.parametrize("k, st, pad, cip, ceil", [(2, 2, 0, True, False), (3, 1, 1, False, False),
                                                    (3, 2, 1, True, True), (4, 4, 0, True, False)])
def test_avg_pool_of_float16_sums_in_float32(scale, k, st, pad, cip, ceil):
    x = (RNG.standard_normal((2, 3, 9, 11)) * scale).astype(np.float16)
    t = torch.nn.functional.avg_pool2d(torch.tensor(x), k, st, pad, ceil, cip).numpy()
    g = tg.nn.functional.avg_pool2d(tg.tensor(x), k, st, pad, ceil, cip).numpy()
    np.testing.assert_array_equal(g, t)
    t1 = torch.nn.functional.avg_pool1d(torch.tensor(x[0]), k, st, pad, ceil, cip).numpy()
    g1 = tg.nn.functional.avg_pool1d(tg.tensor(x[0]), k, st, pad, ceil, cip).numpy()
    np.testing.assert_array_equal(g1, t1)


def spacing(ref64, dt):
    t = torch.tensor(np.abs(ref64)).to(dt)
    return (torch.nextafter(t, torch.tensor(float("inf"), dtype=dt)).double() - t.double()).numpy()


BLENDS = {
    "linear": lambda lib, a: lib.nn.functional.interpolate(a.reshape(1, 8, 40), scale_factor=2, mode="linear"),
    "linear_corners": lambda lib, a: lib.nn.functional.interpolate(a.reshape(1, 8, 40), size=67, mode="linear",
                                                                   align_corners=True),
    "bilinear": lambda lib, a: lib.nn.functional.interpolate(a.reshape(1, 2, 4, 40), scale_factor=2, mode="bilinear"),
    "bicubic": lambda lib, a: lib.nn.functional.interpolate(a.reshape(1, 2, 4, 40), scale_factor=2, mode="bicubic"),
    "addcmul": lambda lib, a: lib.addcmul(a, a, a.flip(0), value=0.001),
    "addmm": lambda lib, a: lib.addmm(a[:, :8], a, a.T[:, :8], beta=0.5, alpha=0.001),
    "baddbmm": lambda lib, a: lib.baddbmm(a.reshape(2, 4, 40)[:, :, :4], a.reshape(2, 4, 40),
                                          a.reshape(2, 4, 40).transpose(1, 2)[:, :, :4], alpha=0.001),
    "addmv": lambda lib, a: lib.addmv(a[:, 0], a, a[0], alpha=0.001),
    "addr": lambda lib, a: lib.addr(a[:, :5], a[:, 0], a[0, :5], alpha=0.001, beta=2),
    "addbmm": lambda lib, a: lib.addbmm(a[:4, :4], a.reshape(2, 4, 40), a.reshape(2, 4, 40).transpose(1, 2),
                                        alpha=0.001),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(BLENDS))
def test_16bit_blends_and_products_rounded_once(name, dtype):
    """Interpolation blends and the addmm family in float32, rounded once: weights and partial
    sums rounded to float16 put bicubic 6,000 ulps off, and a float16 product of 300s overflowed
    to inf before alpha scaled it (torch: within half an ulp)."""
    x = (np.random.default_rng(5).standard_normal((8, 40)) * 300).astype(np.float32)
    tdt = getattr(torch, dtype)
    xt = torch.tensor(x).to(tdt)
    exact = BLENDS[name](torch, xt.double()).numpy()
    got = BLENDS[name](tg, tg.tensor(x).to(getattr(tg, dtype)))
    assert got.dtype == getattr(tg, dtype)
    ref = BLENDS[name](torch, xt).double().numpy()
    err = np.abs(got.double().numpy() - exact) / spacing(exact, tdt)
    # (half an ulp, or torch's error where larger, plus what float32 accumulation adds: 0.02 ulp)
    assert err.max() <= max(0.5, (np.abs(ref - exact) / spacing(exact, tdt)).max()) + 0.02


@pytest.mark.parametrize("name", ["addmm", "baddbmm", "addmv", "addr", "addbmm"])
@pytest.mark.parametrize("beta", [0, 1, 0.5])
def test_addmm_family_beta_zero_ignores_input(name, beta):
    """beta = 0: input's NaN and inf are not propagated and its gradient is zeros (torch's
    documented rule); the node is torch's."""
    res = []
    for lib in (torch, tg):
        i = lib.tensor([[float("nan"), 1.0], [float("inf"), 2.0]], requires_grad=True)
        a = lib.tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
        o = {"addmm": lambda: lib.addmm(i, a, a, beta=beta, alpha=2),
             "baddbmm": lambda: lib.baddbmm(i[None], a[None], a[None], beta=beta),
             "addmv": lambda: lib.addmv(i[0], a, a[0], beta=beta),
             "addr": lambda: lib.addr(i, a[0], a[1], beta=beta),
             "addbmm": lambda: lib.addbmm(i, a[None], a[None], beta=beta)}[name]()
        o.sum().backward()
        res.append((o.detach().numpy(), i.grad.numpy(), a.grad.numpy(), type(o.grad_fn).__name__))
    (ot, it, at, nt), (og, ig, ag, ng) = res
    np.testing.assert_array_equal(og, ot)
    np.testing.assert_array_equal(ig, it)
    np.testing.assert_array_equal(ag, at)
    assert ng == nt


@pytest.mark.parametrize("scale", [1e19, 1e20, 1e30, 1.0, 1e-20])
def test_float32_var_and_std_accumulate_in_float64_as_torch(scale):
    """torch's CPU var and std of float32 accumulate in float64: a variance of ~1e38, whose squares
    overflow float32, is finite; a std of 1e30 values too. tracegrad squared in float32 (inf)."""
    a = (np.random.default_rng(1).standard_normal((7, 100)) * scale).astype(np.float32)
    fns = [lambda m, t: t.var(), lambda m, t: t.std(1), lambda m, t: m.var_mean(t, 0)[0],
           lambda m, t: m.std_mean(t, 1, correction=0)[0], lambda m, t: t.var(1, keepdim=True)]
    for f in fns:
        want = f(torch, torch.tensor(a)).numpy()
        got = f(tg, tg.tensor(a)).numpy()
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    c = tg.compile(lambda t: t.std(1), fullgraph=True)
    np.testing.assert_array_equal(c(tg.tensor(a)).numpy(), torch.tensor(a).std(1).numpy())
