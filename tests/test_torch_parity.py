"""Behaviour checked against torch: layouts, indexing forms, warnings, second derivatives, erf."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad


LAYOUTS = [
    lambda m: m.arange(12., dtype=m.float64).reshape(3, 4).t(),
    lambda m: m.arange(12., dtype=m.float64).reshape(3, 4)[:, ::2],
    lambda m: m.arange(6., dtype=m.float64).reshape(1, 6).expand(3, 6),
    lambda m: m.arange(24., dtype=m.float64).reshape(2, 3, 4).permute(2, 0, 1),
    lambda m: m.zeros(3, 1, 4, dtype=m.float64).transpose(0, 1),
    lambda m: m.zeros(4, 1, dtype=m.float64)[::2],
    lambda m: m.arange(12., dtype=m.float64).reshape(3, 4),
]


@pytest.mark.parametrize("make", LAYOUTS)
def test_contiguous_as_torch(make):
    a, b = make(tracegrad), make(torch)
    assert a.is_contiguous() == b.is_contiguous()
    ac, bc = a.contiguous(), b.contiguous()
    assert ac.is_contiguous() and bc.is_contiguous()
    assert ac.stride() == bc.stride()
    assert (ac is a) == (bc is b)
    np.testing.assert_array_equal(ac.numpy(), bc.numpy())


VIEWS = [lambda a: a.t(), lambda a: a[:, ::2], lambda a: a[:1].expand(3, 4),
         lambda a: a.reshape(2, 3, 2).permute(2, 0, 1)]


@pytest.mark.parametrize("view", VIEWS)
def test_contiguous_copy_gradient(view):
    x = tracegrad.randn(3, 4, dtype=tracegrad.float64, requires_grad=True)
    xt = torch.from_numpy(x.detach().numpy().copy()).requires_grad_()
    y, yt = view(x).contiguous(), view(xt).contiguous()
    assert type(y.grad_fn).__name__ == type(yt.grad_fn).__name__
    assert y.is_contiguous() and y.stride() == yt.stride()
    w = np.arange(float(yt.numel())).reshape(tuple(yt.shape))
    (y * tracegrad.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    assert tracegrad.autograd.gradcheck(lambda a: view(a).contiguous().sin(), (x,))


def test_clone_layout_as_torch():
    for make in LAYOUTS[:4] + LAYOUTS[-1:]:
        assert make(tracegrad).clone().stride() == make(torch).clone().stride()


INDEXES = [
    "True", "False", "(..., None)", "None", "(None, ..., None)", "m.tensor(True)", "m.tensor(False)",
    "(0, True)", "(slice(None), False)", "(True, False)", "(None, True, 0)", "(0, 0, True)", "(True, 1, 2)",
    "(m.tensor(1),)", "m.tensor(1)", "(1, ..., None, 0)", "(Ellipsis,)", "()", "(slice(None, None, 2), None, 1)",
    "[0, 1]", "[True, False, True]", "(m.tensor([0, 2]), slice(1, 3))", "(slice(None), m.tensor([[0], [1]]))",
    "(None, m.tensor([0, 1]), None, m.tensor([1, 2]))", "(m.tensor([0, 1]), None, m.tensor([1, 2]))",
    "m.tensor([[True, False, True, True], [False] * 4, [True] * 4])", "(slice(-100, 100),)", "(-1, -1)",
    "(m.tensor([1, 0]), True)", "(0, 0, 0)", "5", "(0, 5)", "(1.5,)", "m.tensor(1.0)", "m.tensor([0., 1.])",
    "slice(None, None, -1)", "slice(None, None, 0)", "(m.tensor([0, 1]), m.tensor([0, 1, 2]))", "m.tensor([5])",
    "m.tensor([], dtype=m.int64)", "m.tensor([True, False])", "[[0, 1], [1, 2]]", "[[0, 1], slice(None)]",
]


def _index_outcome(m, s):
    x = m.arange(12., dtype=m.float64).reshape(3, 4).requires_grad_()
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = x[eval(s)]
        g = m.arange(float(y.numel()), dtype=m.float64).reshape(y.shape)
        y.backward(g)
        return ("ok", tuple(y.shape), y.detach().numpy().tolist(), x.grad.numpy().tolist(),
                type(y.grad_fn).__name__, [str(i.message).split(" (Triggered internally")[0] for i in w])
    except Exception as e:
        return ("error", type(e).__name__, str(e))


@pytest.mark.parametrize("s", INDEXES)
def test_basic_indexing_forms_as_torch(s):
    assert _index_outcome(tracegrad, s) == _index_outcome(torch, s)


@pytest.mark.parametrize("s", ["True", "False", "(slice(None), True, 1)", "(0, False)", "m.tensor(True)"])
def test_setitem_with_bool_index_as_torch(s):
    out = []
    for m in (torch, tracegrad):
        x = m.arange(12., dtype=m.float64).reshape(3, 4)
        x[eval(s)] = -1.0
        out.append(x.numpy().tolist())
    assert out[0] == out[1]


def test_bool_index_gradcheck():
    x = tracegrad.randn(3, 4, dtype=tracegrad.float64, requires_grad=True)
    assert tracegrad.autograd.gradcheck(lambda a: a[True, 1] * a[None, 1], (x,))
    assert tracegrad.autograd.gradgradcheck(lambda a: a[..., None, 2] ** 2, (x,))


NORM_PS = [2, 1, 3, 1.5, 0.5, float("inf")]


def _norm_derivatives(m, values, p, dim):
    x = m.tensor(values, dtype=m.float64, requires_grad=True)
    y = x.norm(p, dim=dim)
    g, = m.autograd.grad(y.sum(), x, create_graph=True)
    if not g.requires_grad:
        return y.detach().numpy(), g.detach().numpy(), np.zeros(x.shape)
    gg, = m.autograd.grad((g * m.arange(1., x.numel() + 1, dtype=m.float64).reshape(x.shape)).sum(), x,
                          allow_unused=True, materialize_grads=True)
    if m is torch:
        gg = torch.zeros_like(x) + gg
    return y.detach().numpy(), g.detach().numpy(), gg.detach().numpy()


@pytest.mark.parametrize("p", NORM_PS)
@pytest.mark.parametrize("values,dim", [([0., 0., 0.], None), ([[0., 0.], [1., -2.]], 1), ([[0., 3.], [1., 0.]], None)])
def test_norm_derivatives_at_zero_as_torch(p, values, dim):
    with np.errstate(all="ignore"):
        ours = _norm_derivatives(tracegrad, values, p, dim)
    ref = _norm_derivatives(torch, values, p, dim)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("p", [2, 1, 3, 1.5, 0.5, float("inf")])
def test_norm_gradgradcheck_away_from_zero(p):
    x = tracegrad.tensor([[0.3, -1.2, 2.0], [-0.7, 0.9, 1.4]], dtype=tracegrad.float64, requires_grad=True)
    assert tracegrad.autograd.gradcheck(lambda a: a.norm(p, dim=1), (x,))
    assert tracegrad.autograd.gradgradcheck(lambda a: a.norm(p), (x,))


VAR_CASES = [([1., 2.], {}), ([1., 1.], {}), ([1., 2.], {"correction": 2}), ([1., 1.5], {"correction": 3}),
             ([[1., 2., 3.], [1., 1., 1.]], {"dim": 1}), ([[1., 2., 3.], [1., 1., 1.]], {"dim": 1, "correction": 3}),
             ([[1., 2., 3.], [1., 1., 1.]], {"dim": 1, "correction": 4}),
             ([[1., 2., 3.], [1., 1., 1.]], {"dim": 0, "keepdim": True}), (2.0, {}), (2.0, {"correction": 0}),
             ([[1., 2.], [3., 4.]], {"keepdim": True, "correction": 5})]


def _var_derivatives(m, fn, values, kw):
    x = m.tensor(values, dtype=m.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = getattr(x, fn)(**kw)
    g, = m.autograd.grad(y.sum(), x, create_graph=True)
    if not g.requires_grad:
        return y.detach().numpy(), g.detach().numpy(), None
    w = m.arange(1., x.numel() + 1, dtype=m.float64).reshape(x.shape)
    gg, = m.autograd.grad((g * w).sum(), x, allow_unused=True, materialize_grads=True)
    return y.detach().numpy(), g.detach().numpy(), gg.detach().numpy()


@pytest.mark.parametrize("fn", ["var", "std"])
@pytest.mark.parametrize("values,kw", VAR_CASES)
def test_var_std_derivatives_as_torch(fn, values, kw):
    with np.errstate(all="ignore"):
        ours = _var_derivatives(tracegrad, fn, values, kw)
    ref = _var_derivatives(torch, fn, values, kw)
    for a, b in zip(ours, ref):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn()
    return [(i.category, str(i.message).split(" (Triggered internally")[0]) for i in w]


@pytest.mark.parametrize("call", [
    "m.tensor([1.]).var()", "m.tensor([1., 2.]).std(correction=2)", "m.ones(2, 3).var(dim=1, correction=3)",
    "m.var(m.tensor(1.))", "m.empty(2, 0).var(dim=0)", "m.ones(2, 3).std(dim=0)", "m.ones(2, 3).var(1, keepdim=True)",
    "x.grad", "x.detach().grad", "(x * 2).grad", "y.grad",
])
def test_user_warnings_as_torch(call):
    def run(m):
        x = m.ones(2, requires_grad=True)
        y = x * 2
        y.retain_grad()
        with np.errstate(all="ignore"):
            return _warnings_of(lambda: eval(call, {"m": m, "x": x, "y": y}))
    assert run(tracegrad) == run(torch)


@pytest.mark.parametrize("fn", ["var", "std"])
def test_var_std_gradgradcheck(fn):
    x = tracegrad.tensor([[0.3, -1.2, 2.0], [-0.7, 0.9, 1.4]], dtype=tracegrad.float64, requires_grad=True)
    for kw in ({}, {"dim": 1}, {"dim": 0, "correction": 0}, {"dim": 1, "keepdim": True}):
        assert tracegrad.autograd.gradcheck(lambda a: getattr(a, fn)(**kw), (x,))
        assert tracegrad.autograd.gradgradcheck(lambda a: getattr(a, fn)(**kw), (x,))


def _bn_dropout_model(m, seed):
    m.manual_seed(seed)
    return m.nn.Sequential(m.nn.Linear(3, 4), m.nn.BatchNorm1d(4), m.nn.ReLU(), m.nn.Dropout(0.3), m.nn.Linear(4, 2))


def test_compiled_batch_norm_and_dropout_fall_back_to_eager_with_one_warning():
    eager, model = _bn_dropout_model(tracegrad, 0), _bn_dropout_model(tracegrad, 0)
    compiled = tracegrad.compile(model)
    x = tracegrad.randn(6, 3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            tracegrad.manual_seed(1)
            a = eager(x)
            a.sum().backward()
            tracegrad.manual_seed(1)
            b = compiled(x)
            b.sum().backward()
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    msgs = [str(i.message) for i in w]
    assert len(msgs) == 1 and "not traced yet" in msgs[0] and "running it eagerly" in msgs[0], msgs
    for (name, p), q in zip(eager.named_parameters(), model.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    for (name, buf), other in zip(eager.named_buffers(), model.buffers()):
        np.testing.assert_array_equal(buf.numpy(), other.numpy())
    assert int(model[1].num_batches_tracked) == 3


def test_compiled_dropout_fullgraph_raises_clearly_and_batch_norm_training_compiles():
    F = tracegrad.nn.functional
    c = tracegrad.compile(lambda x: F.dropout(x, 0.5, training=True), fullgraph=True)
    with pytest.raises(Exception, match="not traced yet"):
        c(tracegrad.randn(4, 3))
    # batch_norm in training updates its running statistics: compiled, the update is written back
    x = np.random.default_rng(3).standard_normal((4, 3))
    outs = []
    for lib, comp in ((tracegrad, lambda f: tracegrad.compile(f, fullgraph=True)), (torch, lambda f: f)):
        rm, rv = lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64)
        f = comp(lambda x, rm, rv: lib.nn.functional.batch_norm(x, rm, rv, training=True))
        y = None
        for _ in range(2):
            y = f(lib.tensor(x), rm, rv)
        outs.append((y.numpy(), rm.numpy().copy(), rv.numpy().copy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def _erf_points(dtype):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(20000) * 2, rng.uniform(-7, 7, 20000), np.linspace(-6.5, 6.5, 4001),
                        rng.uniform(-1e-3, 1e-3, 2000),
                        [0., -0., np.inf, -np.inf, np.nan, 1e-300, -1e-310, 5e-324, 0.46875, 1.0, -1.0, 4.0, -4.0,
                         6.0, -5.999999, 26.0, 1e10]])
    return x.astype(dtype)


@pytest.mark.parametrize("dtype,max_ulp", [(np.float64, 2), (np.float32, 1)])
def test_erf_as_torch_to_rounding(dtype, max_ulp):
    x = _erf_points(dtype)
    ours = tracegrad.erf(tracegrad.from_numpy(x)).numpy()
    ref = torch.erf(torch.from_numpy(x)).numpy()
    assert ours.dtype == ref.dtype
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    ok = ~np.isnan(ref)
    assert np.array_equal(np.signbit(ours[ok]), np.signbit(ref[ok]))
    ulps = np.abs(ours[ok].astype(np.float64) - ref[ok]) / np.spacing(np.abs(ref[ok]))
    assert ulps.max() <= max_ulp, (x[ok][ulps.argmax()], ulps.max())


def test_erf_float64_against_math_erf():
    import math
    x = _erf_points(np.float64)
    ours = tracegrad.erf(tracegrad.from_numpy(x)).numpy()
    ref = np.array([math.erf(v) for v in x])
    ok = ~np.isnan(ref)
    assert (np.abs(ours[ok] - ref[ok]) / np.spacing(np.abs(ref[ok]))).max() <= 2


def test_erf_and_exact_gelu_derivatives():
    x = tracegrad.tensor([[-3.1, -0.4, 0.0], [0.7, 1.9, 4.5]], dtype=tracegrad.float64, requires_grad=True)
    assert tracegrad.autograd.gradcheck(tracegrad.erf, (x,))
    assert tracegrad.autograd.gradgradcheck(tracegrad.erf, (x,))
    gelu = tracegrad.nn.functional.gelu
    assert tracegrad.autograd.gradgradcheck(gelu, (x,))
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    # x (1 + erf(x / sqrt 2)) / 2 cancels for negative x: an erf good to an ulp gives the product to
    # an ulp times the conditioning |erf| / |1 + erf| of that sum
    xs = x.detach().numpy()
    e = np.vectorize(math.erf)(xs / math.sqrt(2))
    want = torch.nn.functional.gelu(xt).detach().numpy()
    bound = 4 * np.finfo(np.float64).eps * (1 + np.abs(e) / np.abs(1 + e)) * np.abs(want)
    assert np.all(np.abs(gelu(x).detach().numpy() - want) <= bound)


@pytest.mark.parametrize("call", ["x.max(dim=1)", "x.min(0)", "m.max(x, 1, keepdim=True)", "m.min(x, dim=-1)"])
def test_max_min_with_dim_return_torch_return_types(call):
    out = []
    for m in (torch, tracegrad):
        x = m.tensor([[1., 5.], [3., 2.]], requires_grad=True)
        r = eval(call)
        values, indices = r
        out.append((repr(r), type(r).__name__, repr(r.values), repr(indices), len(r)))
    assert out[0] == out[1]


class _Double:
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _inference_outcome(m):
    Double = type("Double", (m.autograd.Function,), dict(_Double.__dict__))
    log = []
    with m.inference_mode():
        a = m.ones(2, requires_grad=True)
        with m.enable_grad():
            b = a * 2
            c = Double.apply(a)
            log.append((m.is_grad_enabled(), a.requires_grad, a.is_inference(), b.requires_grad, b.grad_fn is None,
                        c.requires_grad, c.grad_fn is None))
    try:
        a.requires_grad_(True)
        log.append("ok")
    except RuntimeError as e:
        log.append(str(e))
    try:
        (a * 2).sum().backward()
        log.append(a.grad.tolist())
    except RuntimeError as e:
        log.append(str(e))
    return log


def test_inference_mode_with_enable_grad_records_nothing_as_torch():
    assert _inference_outcome(tracegrad) == _inference_outcome(torch)


MISUSE = [
    "m.ones(2, 3).scatter(1, m.tensor([[0]]), m.ones(1, 1, 1))",
    "m.einsum('ij,jk->ik', m.ones(2, 3), m.ones(2, 3))",
    "m.einsum('ij,jk->ik', m.ones(2, 1), m.ones(3, 2)).shape",
    "m.einsum('i,i->', m.ones(4), m.ones(1))",
    "m.nn.functional.max_pool2d(m.ones(1, 1, 1, 1), 2)",
    "m.nn.functional.max_pool2d(m.ones(2, 3, 3, 1), 2, stride=1)",
    "m.nn.functional.max_pool2d(m.ones(3, 1, 5), (2, 6))",
    "m.nn.functional.max_pool2d(m.ones(1, 2, 3, 3), 2, dilation=3)",
    "m.nn.functional.max_pool2d(m.ones(1, 2, 5, 5), 2, ceil_mode=True).shape",
    "m.nn.functional.avg_pool2d(m.ones(1, 1, 1, 1), 2)",
    "m.nn.functional.avg_pool2d(m.ones(1, 2, 5, 5), 3, 2, 1, ceil_mode=True).shape",
    "m.ones(2) + 'a'", "'a' + m.ones(2)", "m.ones(2) + None", "m.ones(2) - None", "None - m.ones(2)",
    "m.ones(2) * 'a'", "m.ones(2) / {}", "1 / m.ones(2)", "m.ones(2) ** 'a'", "'a' ** m.ones(2)", "m.ones(2) @ 'a'",
    "m.ones(2) < 'a'", "m.ones(2) >= None", "m.ones(2) == 'a'", "m.ones(2) != None", "m.ones(2) // 'a'",
    "m.ones(2) % None", "2 ** m.ones(2)", "3 % m.tensor([2.])", "7 // m.tensor([2.])",
]


@pytest.mark.parametrize("call", MISUSE)
def test_misuse_raises_torchs_error(call):
    def outcome(m):
        try:
            r = eval(call)
            return ("ok", r.tolist() if hasattr(r, "tolist") else r)
        except Exception as e:
            return (type(e).__name__, str(e))
    assert outcome(tracegrad) == outcome(torch)


_FP_WARNINGS_SCRIPT = """
import warnings
import numpy as np
import tracegrad
x = tracegrad.tensor([0., 1., -1.], requires_grad=True)
y = (x.log() + x.sqrt() + tracegrad.tensor([1.]) / 0 + tracegrad.tensor([1e30]) * 1e30).sum()
y.backward()
tracegrad.compile(lambda a: (a.log() * 2).sum())(x).backward()
np.log(np.zeros(1))
"""


def test_kernel_floating_point_warnings_are_silent_as_torch_but_users_numpy_warns():
    # a fresh interpreter: the filter tracegrad installs at import is what a user's script runs with
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(tracegrad.__file__))] +
                                                      os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    r = subprocess.run([sys.executable, "-W", "default", "-c", _FP_WARNINGS_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "RuntimeWarning" in ln]
    assert len(lines) == 1 and lines[0].startswith("<string>:9: RuntimeWarning: divide by zero encountered in log"), \
        r.stderr


AUTOGRAD_MISUSE = [
    "x = m.ones(2, requires_grad=True); (x * 2).sum().backward(inputs=[])",
    "x = m.ones(2, requires_grad=True); x.grad = m.ones(3)",
    "x = m.ones(2, requires_grad=True); x.grad = m.ones(2, 2)",
    "x = m.ones(2, requires_grad=True); x.grad = m.ones(2, dtype=m.float64)",
    "x = m.ones(2, dtype=m.float64, requires_grad=True); x.grad = m.ones(2, dtype=m.int64)",
    "x = m.ones(2, requires_grad=True); x.grad = m.ones(2) * 3; out.append(x.grad.tolist())",
    "out.append(m.is_anomaly_enabled())",
    "with m.autograd.set_detect_anomaly(True): out.append((m.is_anomaly_enabled(), m.is_anomaly_check_nan_enabled()))",
    "with m.autograd.detect_anomaly(check_nan=False): out.append(m.is_anomaly_check_nan_enabled())",
]


@pytest.mark.parametrize("code", AUTOGRAD_MISUSE)
def test_autograd_misuse_and_state_as_torch(code):
    def run(m):
        out = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(code, {"m": m, "out": out})
        except Exception as e:
            out.append((type(e).__name__, str(e)))
        return out
    assert run(tracegrad) == run(torch)


def test_compiled_code_with_infinite_and_nan_constants():
    def f(m, x):
        return (x + float("inf")).sum() + (x * float("-inf")).amax() + (x + float("nan")).sum() * 0 + \
            (x - x.detach() + float("inf")).clamp(max=1.0).sum()
    x = tracegrad.tensor([1., 2.], dtype=tracegrad.float64, requires_grad=True)
    xt = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
    y = tracegrad.compile(lambda a: f(tracegrad, a))(x)
    yt = f(torch, xt)
    y.backward()
    yt.backward()
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("kw", [{"dim": 0, "correction": 2}, {"correction": 3}, {"dim": 0}])
def test_compiled_var_std_without_degrees_of_freedom_as_torch(kw):
    for fn in ("var", "std"):
        x = tracegrad.tensor([[1., 2.], [1., 5.]], dtype=tracegrad.float64, requires_grad=True)
        xt = torch.tensor([[1., 2.], [1., 5.]], dtype=torch.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = tracegrad.compile(lambda a: getattr(a, fn)(**kw).sum())(x)
            yt = getattr(xt, fn)(**kw).sum()
        y.backward()
        yt.backward()
        np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_norm_p0_gradient_is_undefined_as_torch():
    def run(m):
        out = []
        x = m.tensor([1., 0., 2.], requires_grad=True)
        y = x.norm(0)
        for f in (lambda: m.autograd.grad(y, x, retain_graph=True),
                  lambda: m.autograd.grad(y, x, allow_unused=True, retain_graph=True),
                  lambda: m.autograd.grad(y, x, materialize_grads=True, retain_graph=True),
                  lambda: (y.backward(retain_graph=True), x.grad)[1],
                  lambda: m.autograd.grad(y + x.sum(), x)):
            try:
                r = f()
                out.append(None if r is None else [None if g is None else g.tolist() for g in r])
            except RuntimeError as e:
                out.append(str(e))
        return out
    assert run(tracegrad) == run(torch)


def test_bool_index_and_contiguous_under_compile():
    def f(x):
        return (x[True] * 2).sum() + x[..., None, 1].sum() + x[False].sum() + x.t().contiguous()[0].sum()
    x = tracegrad.arange(6., dtype=tracegrad.float64).reshape(2, 3).requires_grad_()
    xt = torch.arange(6., dtype=torch.float64).reshape(2, 3).requires_grad_()
    y = tracegrad.compile(f, fullgraph=True)(x)
    yt = f(xt)
    y.backward()
    yt.backward()
    assert y.item() == yt.item()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("call", [
    "m.finfo(m.float32)", "m.finfo(m.float64)", "m.finfo(m.float16)", "m.finfo(m.bfloat16)", "m.finfo()",
    "m.iinfo(m.int64)", "m.iinfo(m.int32)", "m.iinfo(m.uint8)", "m.iinfo(m.int8)", "m.finfo(m.int32)",
    "m.iinfo(m.float32)", "m.iinfo(m.bool)",
])
def test_finfo_iinfo_as_torch(call):
    def run(m):
        try:
            r = eval(call)
        except TypeError as e:
            return str(e)
        fields = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")
        return repr(r), [str(getattr(r, f)) for f in fields if hasattr(r, f)]
    assert run(tracegrad) == run(torch)


@pytest.mark.parametrize("make", [lambda m: m.zeros(2, 0, 3), lambda m: m.zeros(0), lambda m: m.zeros(3, 0)[1:],
                                  lambda m: m.zeros(0, 2, 2).reshape(2, 0, 2), lambda m: m.ones(4, 0, 1),
                                  lambda m: m.tensor([]), lambda m: m.zeros(2, 3, 0).contiguous()])
def test_empty_tensor_strides_as_torch(make):
    a, b = make(tracegrad), make(torch)
    assert a.stride() == b.stride() and a.is_contiguous() == b.is_contiguous()
    assert [a.stride(d) for d in range(-a.ndim, a.ndim)] == [b.stride(d) for d in range(-b.ndim, b.ndim)]


COMPARE_CASES = [
    ([1.0, 2.0, float("nan")], [1.0, 2.0 + 1e-9, float("nan")], {}),
    ([1.0, 2.0, float("nan")], [1.0, 2.0, float("nan")], {"equal_nan": True}),
    ([1.0, 2.0], [1.0, 2.1], {}),
    ([1.0, 2.0], [1.0, 2.1], {"atol": 0.2}),
    ([[1.0, 2.0], [1.0, 2.0]], [1.0, 2.0], {}),
    ([1.0, 2.0], [1.0, 2.0], {}),
]


@pytest.mark.parametrize("a, b, kw", COMPARE_CASES)
def test_allclose_isclose_equal_as_torch(a, b, kw):
    ga, gb = tracegrad.tensor(a), tracegrad.tensor(b)
    ta, tb = torch.tensor(a), torch.tensor(b)
    assert tracegrad.allclose(ga, gb, **kw) is torch.allclose(ta, tb, **kw)
    np.testing.assert_array_equal(tracegrad.isclose(ga, gb, **kw).numpy(), torch.isclose(ta, tb, **kw).numpy())
    assert tracegrad.equal(ga, gb) is torch.equal(ta, tb)


def test_several_ellipses_index_as_torch():
    """torch takes x[..., ...]: the first ellipsis stands for every unnamed dim, later ones for none."""
    x, y = torch.arange(24.).reshape(2, 3, 4), tracegrad.arange(24.).reshape(2, 3, 4)
    for k in [(Ellipsis, Ellipsis), (Ellipsis, 0, Ellipsis), (0, Ellipsis, Ellipsis), (Ellipsis, None, Ellipsis),
              (1, Ellipsis, 2, Ellipsis)]:
        a, b = x[k], y[k]
        assert tuple(a.shape) == tuple(b.shape), k
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    z, w = x.clone(), y.clone()
    z[..., 1, ...] = -1.0
    w[..., 1, ...] = -1.0
    np.testing.assert_array_equal(z.numpy(), w.numpy())
