"""torch.func.vmap (and torch.vmap): the function once per sample, the results stacked; against
torch's vmap: values, gradients through it, per-sample gradients with functional_call and grad,
nesting, in_dims/out_dims trees, randomness modes, an empty batch, torch's errors, and the cases
where looping would differ from mapping (they raise)."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(0)
X = R.standard_normal((3, 4))
Y = R.standard_normal((4, 4))
W = R.standard_normal((5, 4))


def _out(m, c):
    try:
        r = c(m)
    except Exception as e:    # noqa: BLE001
        return ("error", type(e).__name__, str(e))
    leaves = r if isinstance(r, (tuple, list)) else [r]
    return ("ok", [np.asarray(t.detach().numpy()) for t in leaves])


def check(c, rtol=1e-12):
    want, got = _out(torch, c), _out(tg, c)
    assert want[0] == got[0], (want, got)
    if want[0] == "error":
        assert got[1:] == want[1:]
        return
    assert len(got[1]) == len(want[1])
    for g, w in zip(got[1], want[1]):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-12)


VALUES = [
    lambda m: m.func.vmap(lambda a: a @ m.tensor(Y))(m.tensor(X)),
    lambda m: m.func.vmap(lambda a, b: a * b.sum(), in_dims=(1, None))(m.tensor(X), m.tensor(Y)),
    lambda m: m.func.vmap(lambda a: a.sum(), in_dims=-1)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a * 2, out_dims=-1)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: (a.max(), a.softmax(0)), out_dims=(0, 1))(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: {"k": a.exp()}, out_dims={"k": 1})(m.tensor(X))["k"],
    lambda m: m.func.vmap(lambda d: d["a"] + d["b"], in_dims=({"a": 0, "b": None},))(
        {"a": m.tensor(X), "b": m.tensor(Y[0])}),
    lambda m: m.func.vmap(lambda d: d[0] + d[1], in_dims=([0, None],))([m.tensor(X), m.tensor(Y[0])]),
    lambda m: m.func.vmap(lambda a: [a, (a, {"z": a})], out_dims=[0, (1, {"z": 0})])(m.tensor(X))[1][0],
    lambda m: m.func.vmap(lambda a: a)(m.zeros(0, 3)),
    lambda m: m.func.vmap(lambda a: (a @ m.tensor(Y)).relu(), out_dims=1)(m.zeros(0, 4)),
    lambda m: m.func.vmap(lambda a, b: a + b, in_dims=(0, None))(m.tensor(X), 2),
    lambda m: m.func.vmap(lambda a: m.zeros(2))(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: m.tensor(Y), out_dims=None)(m.tensor(X)),
    lambda m: m.func.vmap(m.func.vmap(lambda a: a.sum()))(m.tensor(X)),
    lambda m: m.func.vmap(m.func.vmap(lambda a, b: a * b, in_dims=(0, None)), in_dims=(None, 0))(
        m.tensor(X[0]), m.tensor(W)),
    lambda m: m.func.vmap(m.func.grad(lambda a: (a ** 3).sum()))(m.tensor(X)),
    lambda m: m.func.vmap(m.func.jacrev(lambda a: a.sin() * a.sum()))(m.tensor(X)),
    lambda m: m.vmap(lambda a: a @ a)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a.unsqueeze(0).expand(2, 4), in_dims=1, out_dims=2)(m.tensor(X.T.copy())),
]


@pytest.mark.parametrize("case", range(len(VALUES)))
def test_vmap_values_match_torch(case):
    check(VALUES[case])


ERRORS = [
    lambda m: m.func.vmap(lambda a, b: a + b)(m.tensor(X), m.tensor(Y)),
    lambda m: m.func.vmap(lambda a: a, in_dims=None)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a, in_dims=(0, 0))(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a, in_dims=2)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a, in_dims=1.5)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: 3)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a, out_dims=None)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: (a, a), out_dims=(0,))(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a, out_dims=3)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: m.rand(2))(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a, chunk_size=0)(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a, randomness="foo")(m.tensor(X)),
    lambda m: m.func.vmap(lambda a: a)(3.0),
    lambda m: m.func.vmap(lambda a: a)(m.tensor(3.0)),
    lambda m: m.func.vmap(lambda a: a, in_dims=(None,))(m.tensor(X)),
    lambda m: m.func.vmap(lambda d: d["a"], in_dims=({"a": 0, "c": 0},))({"a": m.tensor(X), "b": m.tensor(X)}),
    lambda m: m.func.vmap(lambda d: d, in_dims=([0],))({"a": m.tensor(X)}),
    lambda m: m.func.vmap(lambda d: d[0] + d[1], in_dims=((0, None),))([m.tensor(X), m.tensor(X[0])]),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_vmap_errors_as_torch(case):
    check(ERRORS[case])


def test_gradients_flow_through_vmap_as_torch():
    res = {}
    for L in (torch, tg):
        x = L.tensor(X, requires_grad=True)
        y = L.tensor(Y, requires_grad=True)
        out = L.func.vmap(lambda a, b: (a @ b).tanh() * a, in_dims=(0, None))(x, y)
        (out * L.tensor(X).cos()).sum().backward()
        res[L] = (out.detach().numpy(), x.grad.numpy(), y.grad.numpy())
    for g, w in zip(res[tg], res[torch]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


def test_per_sample_gradients_of_a_module_as_torch():
    """The recipe of torch.func's tutorial: vmap of grad of a functional_call over the batch."""
    xs = R.standard_normal((6, 4))
    ys = R.integers(0, 3, 6)
    res = {}
    for L in (torch, tg):
        L.manual_seed(0)
        model = L.nn.Sequential(L.nn.Linear(4, 5), L.nn.Tanh(), L.nn.Linear(5, 3)).double()
        with L.no_grad():
            for p, v in zip(model.parameters(), [R2 for R2 in _weights()]):
                p.copy_(L.tensor(v))
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, x, y):
            out = L.func.functional_call(model, p, (x.unsqueeze(0),))
            return L.nn.functional.cross_entropy(out, y.unsqueeze(0))
        g = L.func.vmap(L.func.grad(loss), in_dims=(None, 0, 0))(params, L.tensor(xs), L.tensor(ys))
        res[L] = {k: v.numpy() for k, v in g.items()}
    assert res[tg].keys() == res[torch].keys()
    for k in res[tg]:
        assert res[tg][k].shape[0] == 6
        np.testing.assert_allclose(res[tg][k], res[torch][k], rtol=1e-11, atol=1e-13)


def _weights():
    r = np.random.default_rng(5)
    return [r.standard_normal((5, 4)), r.standard_normal(5), r.standard_normal((3, 5)), r.standard_normal(3)]


def test_randomness_same_replays_the_draws_and_different_draws_afresh():
    tg.manual_seed(0)
    same = tg.func.vmap(lambda a: a + tg.rand(4), randomness="same")(tg.zeros(5, 4))
    assert np.all(same.numpy() == same.numpy()[0])
    diff = tg.func.vmap(lambda a: a + tg.rand(4), randomness="different")(tg.zeros(5, 4))
    assert len({tuple(r) for r in diff.numpy().tolist()}) == 5
    # dropout in eval draws nothing: allowed in "error" mode, as torch's
    drop = tg.nn.Dropout(0.5).eval()
    np.testing.assert_array_equal(tg.func.vmap(drop)(tg.tensor(X)).numpy(), X)


def test_looping_would_differ_from_mapping_so_it_raises():
    """An in-place write to an argument that is not mapped: torch writes it once; a loop would
    write it once per sample."""
    y = tg.zeros(4)
    with pytest.raises(RuntimeError, match="not mapped"):
        tg.func.vmap(lambda a, b: b.add_(1) + a, in_dims=(0, None))(tg.tensor(X), y)
    # a write to the mapped argument is a write through each sample's view, as torch's
    for L in (torch, tg):
        x = L.tensor(X)
        L.func.vmap(lambda a: a.mul_(2))(x)
        np.testing.assert_allclose(x.numpy(), 2 * X)


def test_vmap_of_a_compiled_function_and_compiled_vmap_match_eager():
    f = lambda a: (a @ tg.tensor(Y)).sin().sum()        # noqa: E731
    want = tg.func.vmap(f)(tg.tensor(X)).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(tg.func.vmap(tg.compile(f))(tg.tensor(X)).numpy(), want)
        c = tg.compile(lambda x: tg.func.vmap(f)(x))
        for _ in range(2):
            np.testing.assert_array_equal(c(tg.tensor(X)).numpy(), want)


def _linear_pair(n):
    """n torch Linear layers and tracegrad copies of them."""
    torch.manual_seed(3)
    ts = [torch.nn.Linear(3, 2) for _ in range(n)]
    gs = []
    for m in ts:
        g = tg.nn.Linear(3, 2)
        g.load_state_dict({k: tg.tensor(v.tolist()) for k, v in m.state_dict().items()})
        gs.append(g)
    return ts, gs


def test_stack_module_state_ensemble_as_torch():
    ts, gs = _linear_pair(4)
    for m in ts + gs:
        m.register_buffer("scale", (m.weight.detach() * 0 + 2).sum(0))
    pt, bt = torch.func.stack_module_state(ts)
    pg, bg = tg.func.stack_module_state(gs)
    assert {k: (tuple(v.shape), v.requires_grad, v.is_leaf) for k, v in pg.items()} == \
        {k: (tuple(v.shape), v.requires_grad, v.is_leaf) for k, v in pt.items()}
    assert {k: (tuple(v.shape), v.requires_grad) for k, v in bg.items()} == \
        {k: (tuple(v.shape), v.requires_grad) for k, v in bt.items()}
    x = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    base = ts[0]
    yt = torch.func.vmap(lambda p, b, x: torch.func.functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))(
        pt, bt, torch.tensor(x))
    yg = tg.func.vmap(lambda p, b, x: tg.func.functional_call(gs[0], (p, b), (x,)), in_dims=(0, 0, None))(
        pg, bg, tg.tensor(x))
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
    (yt ** 2).sum().backward()
    (yg ** 2).sum().backward()
    for k in pt:
        np.testing.assert_allclose(pg[k].grad.numpy(), pt[k].grad.numpy(), rtol=1e-5, atol=1e-6)
    assert gs[0].weight.grad is None            # the models' own parameters are not the stacked leaves


def test_stack_module_state_errors_as_torch():
    ts, gs = _linear_pair(2)
    ts[1].eval(), gs[1].eval()
    for args_t, args_g in (([], []), (ts, gs)):
        with pytest.raises(RuntimeError) as et:
            torch.func.stack_module_state(args_t)
        with pytest.raises(RuntimeError) as eg:
            tg.func.stack_module_state(args_g)
        assert str(eg.value) == str(et.value)
