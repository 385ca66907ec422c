"""Divergences from torch that earlier work noted and left, each against torch (CPU): the
direct call of a grad_fn node (`y.grad_fn(g)`, torch's Node.__call__), out= with Python numbers,
the *_like creators' device, jacobian's signed zeros, a compiled output's strides on a size-1 axis."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tracegrad as tg
import tracegrad.nn.functional as GF


def _lib(m):
    return TF if m is torch else GF


# -- 1. y.grad_fn(g): one gradient for each edge of torch's node, for each differentiable output --

NODE_CASES = {
    "where": lambda m, x, y: m.where(x > 0, x, y),
    "where_scalar_other": lambda m, x, y: m.where(x > 0, x, 0.),
    "where_scalar_self": lambda m, x, y: m.where(x > 0, 1., y),
    "clamp_numbers": lambda m, x, y: m.clamp(x, -0.5, 0.5),
    "clamp_min_number": lambda m, x, y: m.clamp(x, min=-0.5),
    "clamp_min_tensor": lambda m, x, y: m.clamp(x, min=y),
    "clamp_min_max_tensors": lambda m, x, y: m.clamp(x, min=y, max=y + 1),
    "pow_int": lambda m, x, y: m.pow(x, 3),
    "pow_float": lambda m, x, y: x ** 2.5,
    "rpow": lambda m, x, y: 2 ** x,
    "pow_tensor": lambda m, x, y: m.pow(x.abs(), y),
    "rsub_number": lambda m, x, y: 2 - x,
    "fmod_number": lambda m, x, y: m.fmod(x, 0.7),
    "xlogy_number": lambda m, x, y: m.xlogy(x, 2.),
    "add_number": lambda m, x, y: x + 2,
    "mul_number": lambda m, x, y: x * 3,
    "add_alpha": lambda m, x, y: m.add(x, y, alpha=2),
    "sub_alpha": lambda m, x, y: m.sub(x, y, alpha=3),
    "sub_alpha_number": lambda m, x, y: m.sub(x, 2, alpha=3),
    "rsub_alpha": lambda m, x, y: m.rsub(x, y, alpha=3),
    "index_select": lambda m, x, y: m.index_select(x, 0, m.tensor([0, 2])),
    "index_tensor": lambda m, x, y: x[m.tensor([0, 2])],
    "gather": lambda m, x, y: m.gather(x, 1, m.tensor([[0], [1], [2]])),
    "scatter": lambda m, x, y: m.scatter(x, 1, m.tensor([[0], [1], [2]]), y[:, :1]),
    "scatter_number": lambda m, x, y: m.scatter(x, 1, m.tensor([[0], [1], [2]]), 1.),
    "masked_fill_number": lambda m, x, y: x.masked_fill(y > 0, 1.),
    "masked_fill_tensor": lambda m, x, y: x.masked_fill(y > 0, y[0, 0]),
    "index_fill": lambda m, x, y: x.index_fill(1, m.tensor([0]), 2.),
    "nan_to_num": lambda m, x, y: m.nan_to_num(x),
    "hardtanh": lambda m, x, y: _lib(m).hardtanh(x),
    "relu6": lambda m, x, y: _lib(m).relu6(x),
    "leaky_relu": lambda m, x, y: _lib(m).leaky_relu(x, 0.1),
    "threshold": lambda m, x, y: _lib(m).threshold(x, 0.1, 20.),
    "sort": lambda m, x, y: x.sort(1)[0],
    "topk": lambda m, x, y: x.topk(2)[0],
    "max_dim": lambda m, x, y: x.max(1)[0],
    "fill_number": lambda m, x, y: (x * 1).fill_(2.),
    "fill_tensor": lambda m, x, y: (x * 1).fill_(y.detach()[0, 0]),
    "fill_tensor_grad": lambda m, x, y: (x * 1).fill_(y[0, 0]),
    "zero_": lambda m, x, y: (x * 1).zero_(),
    "copy_": lambda m, x, y: (x * 1).copy_(y),
    "copy_no_grad": lambda m, x, y: (x * 1).copy_(y.detach()),
    "bce_weight": lambda m, x, y: _lib(m).binary_cross_entropy(x.sigmoid(), y.sigmoid().detach(),
                                                               weight=y.abs().detach()),
    "bce_logits_weight": lambda m, x, y: _lib(m).binary_cross_entropy_with_logits(x, y.sigmoid(),
                                                                                  weight=y.abs().detach()),
    "bce_logits_pos_weight": lambda m, x, y: _lib(m).binary_cross_entropy_with_logits(
        x, y.sigmoid(), pos_weight=y[0].abs().detach()),
    "nll_weight": lambda m, x, y: _lib(m).nll_loss(x.log_softmax(1), m.tensor([0, 1, 2]), weight=y[0].abs().detach()),
    "cross_entropy_weight": lambda m, x, y: _lib(m).cross_entropy(x, m.tensor([0, 1, 2]), weight=y[0].abs().detach()),
    "multi_margin_weight": lambda m, x, y: _lib(m).multi_margin_loss(x, m.tensor([0, 1, 2]), weight=y[0].abs().detach()),
    "mse": lambda m, x, y: _lib(m).mse_loss(x, y),
    "layer_norm": lambda m, x, y: _lib(m).layer_norm(x, (3,), y[0], y[1]),
    "softplus": lambda m, x, y: _lib(m).softplus(x),
    "lerp_number": lambda m, x, y: m.lerp(x, y, 0.3),
    "cat": lambda m, x, y: m.cat([x, y]),
    "mm": lambda m, x, y: x @ y.T,
    "sum_dim": lambda m, x, y: x.sum(1),
    "softmax": lambda m, x, y: x.softmax(1),
}


def _node_call(m, case):
    r = np.random.RandomState(0)
    x = m.tensor(r.randn(3, 3), dtype=m.float64, requires_grad=True)
    y = m.tensor(r.randn(3, 3), dtype=m.float64, requires_grad=True)
    out = case(m, x, y)
    g = m.full(tuple(out.shape), 0.7, dtype=out.dtype)
    res = out.grad_fn(g)
    res = res if isinstance(res, tuple) else (res,)
    return type(out.grad_fn).__name__, [None if t is None else np.asarray(t.detach().tolist()) for t in res]


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_direct_node_call_matches_torch(name):
    tname, want = _node_call(torch, NODE_CASES[name])
    gname, got = _node_call(tg, NODE_CASES[name])
    assert gname == tname
    assert len(got) == len(want), (got, want)
    for k, (a, b) in enumerate(zip(want, got)):
        assert (a is None) == (b is None), (k, a, b)
        if a is not None:
            assert a.shape == b.shape, (k, a.shape, b.shape)
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=f"gradient {k}")


def test_direct_node_call_takes_a_gradient_per_floating_output():
    # max(x, 1)'s node takes its values' gradient alone (its indices are integers); slogdet's node
    # takes both (its sign is floating), as torch's
    for m in (torch, tg):
        x = m.tensor(np.random.RandomState(1).randn(3, 3), dtype=m.float64, requires_grad=True)
        v = x.max(1)[0]
        assert v.grad_fn(m.ones(3, dtype=m.float64)).shape == (3, 3)
        with pytest.raises(TypeError, match="expected 1 arguments, got 2"):
            v.grad_fn(m.ones(3, dtype=m.float64), m.ones(3, dtype=m.float64))
        sign, logabs = m.linalg.slogdet(x)
        gx = logabs.grad_fn(m.zeros((), dtype=m.float64), m.ones((), dtype=m.float64))
        np.testing.assert_allclose(np.asarray(gx.detach().tolist()), np.linalg.inv(x.detach().numpy()).T)
        with pytest.raises(TypeError, match="expected 2 arguments, got 1"):
            logabs.grad_fn(m.ones((), dtype=m.float64))


# -- 2. out= with a Python number where torch's out= overload takes a tensor --

OUT_CASES = [
    ("where", lambda m, x, c: (c, x, 0.)), ("where", lambda m, x, c: (c, 0., x)), ("where", lambda m, x, c: (c, 1., 0.)),
    ("where", lambda m, x, c: (c, x, 2)), ("where", lambda m, x, c: (c, x, x * 2)),
    ("maximum", lambda m, x, c: (x, 2.)), ("minimum", lambda m, x, c: (2, x)), ("maximum", lambda m, x, c: (x, x + 1)),
    ("logical_and", lambda m, x, c: (x, 2.)), ("logical_or", lambda m, x, c: (0, x)), ("logical_xor", lambda m, x, c: (x, 1)),
    ("atan2", lambda m, x, c: (x, 2.)), ("atan2", lambda m, x, c: (2., x)), ("fmax", lambda m, x, c: (2., x)),
    ("fmin", lambda m, x, c: (x, 2)), ("outer", lambda m, x, c: (x, 2.)), ("addcdiv", lambda m, x, c: (2., x, x)),
    ("addcmul", lambda m, x, c: (x, x, 2.)),
    ("eq", lambda m, x, c: (2., x)), ("eq", lambda m, x, c: (x, 2.)), ("lt", lambda m, x, c: (1, x)),
    ("remainder", lambda m, x, c: (2., x)), ("remainder", lambda m, x, c: (x, 2.)), ("fmod", lambda m, x, c: (2, x)),
    ("add", lambda m, x, c: (x, 2.)), ("mul", lambda m, x, c: (2., x)),
    ("lerp", lambda m, x, c: (x, 0.5, 0.5)), ("lerp", lambda m, x, c: (x, x * 2, 0.5)),
]


def _out_outcome(m, name, args):
    x = m.tensor([1.5, -2.0, 3.0, 0.25])
    a = args(m, x, x > 0)
    out = m.empty(4, dtype=m.bool if name in ("eq", "lt", "logical_and", "logical_or", "logical_xor") else m.float32)
    try:
        r = getattr(m, name)(*a, out=out)
    except Exception as e:              # noqa: BLE001 (the outcome compared with torch's)
        return type(e).__name__, str(e).split(" but expected")[0]
    assert r is out
    return "ok", out.tolist()


@pytest.mark.parametrize("k", range(len(OUT_CASES)))
def test_out_refuses_numbers_where_torch_does(k):
    name, args = OUT_CASES[k]
    want, got = _out_outcome(torch, name, args), _out_outcome(tg, name, args)
    if "invalid combination" in str(want[1]) and name == "lerp":
        # (torch words lerp's by its overloads, "lerp() received an invalid combination of arguments")
        want, got = want[0], got[0]
    assert got == want


# -- 3. what is made like a device tensor stays on its device --

_DEVICE_SCRIPT = r"""
import json
import tracegrad as tg, tracegrad.nn.functional as F
from tracegrad.ops import functional as O
x = tg.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [3.0, -2.0, 1.0], [0.1, 0.2, 0.3]], device="cuda",
              requires_grad=True)
res = {"zeros_like": str(O.zeros_like(x).device), "ones_like": str(O.ones_like(x).device),
       "one_hot": str(F.one_hot(tg.tensor([0, 2], device="cuda"), 3).device)}
cases = {
    "multi_margin_loss": lambda: F.multi_margin_loss(x, tg.tensor([0, 1, 2, 0], device="cuda")),
    "hinge_embedding_loss": lambda: F.hinge_embedding_loss(x, tg.tensor([[1., -1., 1.]] * 4, device="cuda")),
    "cosine_embedding_loss": lambda: F.cosine_embedding_loss(x, x * 2 + 1, tg.tensor([1., -1., 1., -1.], device="cuda")),
    "index_fill": lambda: x.index_fill(1, tg.tensor([0], device="cuda"), 2.).sum(),
    "median": lambda: x.median(1)[0].sum(),
    "cummax": lambda: (x.cummax(1)[0] * x).sum(),
    "quantile": lambda: x.quantile(0.3, 1).sum(),
    "interpolate_nearest": lambda: (F.interpolate(x[None], scale_factor=2) ** 2).sum(),
    "interpolate_linear": lambda: (F.interpolate(x[None], size=5, mode="linear") ** 2).sum(),
    "pad_reflect": lambda: (F.pad(x[None], (2, 1), mode="reflect") ** 2).sum(),
    "repeat_interleave": lambda: (x.repeat_interleave(tg.tensor([1, 2, 0], device="cuda"), 1) ** 2).sum(),
}
for k, f in cases.items():
    try:
        x.grad = None
        y = f()
        y.backward()
        res[k] = [str(y.device), str(x.grad.device), float(y.item()), x.grad.cpu().tolist()]
    except Exception as e:
        res[k] = f"{type(e).__name__}: {e}"
w = tg.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], device="cuda", requires_grad=True)
opt = tg.optim.Rprop([w], lr=0.01)
for _ in range(4):
    opt.zero_grad()
    ((x.detach() @ w.T) ** 2).sum().backward()
    opt.step()
res["rprop"] = [str(w.device), str(opt.state[w]["prev"].device), w.detach().cpu().tolist()]
print(json.dumps(res))
"""


def test_made_like_a_device_tensor_stays_on_its_device():
    import json
    import os
    import subprocess
    import sys
    pytest.importorskip("triton")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, PYTHONWARNINGS="ignore", TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", _DEVICE_SCRIPT], env=env, capture_output=True, text=True, timeout=300,
                       cwd=root)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for k in ("zeros_like", "ones_like", "one_hot"):
        assert got[k] == "cuda:0", (k, got[k])
    x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [3.0, -2.0, 1.0], [0.1, 0.2, 0.3]], requires_grad=True)
    want = {
        "multi_margin_loss": lambda: TF.multi_margin_loss(x, torch.tensor([0, 1, 2, 0])),
        "hinge_embedding_loss": lambda: TF.hinge_embedding_loss(x, torch.tensor([[1., -1., 1.]] * 4)),
        "cosine_embedding_loss": lambda: TF.cosine_embedding_loss(x, x * 2 + 1, torch.tensor([1., -1., 1., -1.])),
        "index_fill": lambda: x.index_fill(1, torch.tensor([0]), 2.).sum(),
        "median": lambda: x.median(1)[0].sum(),
        "cummax": lambda: (x.cummax(1)[0] * x).sum(),
        "quantile": lambda: x.quantile(0.3, 1).sum(),
        "interpolate_nearest": lambda: (TF.interpolate(x[None], scale_factor=2) ** 2).sum(),
        "interpolate_linear": lambda: (TF.interpolate(x[None], size=5, mode="linear") ** 2).sum(),
        "pad_reflect": lambda: (TF.pad(x[None], (2, 1), mode="reflect") ** 2).sum(),
        "repeat_interleave": lambda: (x.repeat_interleave(torch.tensor([1, 2, 0]), 1) ** 2).sum(),
    }
    # Rprop on the device: its numpy update of device arrays mixed host and device arrays
    w = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], requires_grad=True)
    opt = torch.optim.Rprop([w], lr=0.01)
    for _ in range(4):
        opt.zero_grad()
        ((x.detach() @ w.T) ** 2).sum().backward()
        opt.step()
    assert got["rprop"][:2] == ["cuda:0", "cuda:0"], got["rprop"]
    np.testing.assert_allclose(got["rprop"][2], w.tolist(), rtol=1e-6)
    for k, f in want.items():
        x.grad = None
        y = f()
        y.backward()
        assert isinstance(got[k], list), (k, got[k])
        assert got[k][:2] == ["cuda:0", "cuda:0"], (k, got[k])
        np.testing.assert_allclose(got[k][2], y.item(), rtol=1e-5, err_msg=k)
        np.testing.assert_allclose(got[k][3], x.grad.tolist(), rtol=1e-5, atol=1e-6, err_msg=k)


# -- 5. jacobian(vectorize=True) and hessian: torch's one batched backward of all outputs --

def _jac_fns(m):
    F = _lib(m)
    return {
        "two_outputs": lambda x, y: (x * 0, -y),
        "three_outputs": lambda x, y: (-x, y * -2, x @ y),
        "sum_and_transpose": lambda x, y: (x.sum(), (x * y).t()),
        "neg_mul": lambda x, y: -x * y,
        "softmax": lambda x, y: F.softmax(x * y, 1),
        "linear": lambda x, y: F.linear(x, y, -y[0]),
        "index": lambda x, y: x[[1, 0]] * -y,
    }


def _hess_fns(m):
    return {
        "neg_mul": lambda x, y: (-x * y).sum(),
        "exp_neg": lambda x, y: ((-x).exp() * y).sum(),
        "tanh": lambda x, y: (x * y).tanh().sum(),
        "softmax": lambda x, y: _lib(m).softmax(x * y, 1).sum(),
        "square": lambda x, y: ((x - y) ** 2).sum(),
    }


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [z for t in r for z in _flat(t)]
    return [np.array(r.detach().tolist(), dtype=np.float64)]


def _same_bits(want, got):
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(want, got)):
        assert a.shape == b.shape, (k, a.shape, b.shape)
        # (float64 roundoff apart: softmax's second derivatives hold terms of 1e-18)
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15, err_msg=f"entry {k}")
        zero = (a == 0) & (b == 0)
        assert np.array_equal(np.signbit(a[zero]), np.signbit(b[zero])), (k, a, b)   # -0.0 where torch has -0.0


@pytest.mark.parametrize("kind", ["jacobian", "hessian"])
@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_and_hessian_signed_zeros_match_torch(kind, vectorize):
    r = np.random.RandomState(0)
    X, Y = r.randn(2, 2), r.randn(2, 2)
    fns = _jac_fns if kind == "jacobian" else _hess_fns
    for (name, ft), fg in zip(fns(torch).items(), fns(tg).values()):
        want = getattr(torch.autograd.functional, kind)(ft, (torch.tensor(X), torch.tensor(Y)), vectorize=vectorize)
        got = getattr(tg.autograd.functional, kind)(fg, (tg.tensor(X), tg.tensor(Y)), vectorize=vectorize)
        _same_bits(_flat(want), _flat(got))


def test_jacobian_vectorized_shapes_and_unused_inputs_match_torch():
    # an input no output reads: zeros of torch's shape; create_graph keeps the graph as torch's
    for m in (torch, tg):
        x = m.tensor([[1.0, -2.0]], dtype=m.float64, requires_grad=True)
        y = m.tensor([3.0], dtype=m.float64, requires_grad=True)
        jx, jy = m.autograd.functional.jacobian(lambda a, b: a * 2, (x, y), vectorize=True)
        assert tuple(jx.shape) == (1, 2, 1, 2) and tuple(jy.shape) == (1, 2, 1)
        assert jy.tolist() == [[[0.0], [0.0]]]
        j = m.autograd.functional.jacobian(lambda a: (a ** 3).sum(), x, vectorize=True, create_graph=True)
        assert j.requires_grad
        g, = m.autograd.grad(j.sum(), x)
        assert g.tolist() == [[6.0, -12.0]]


# -- 4. one writer of out= results: the binary ops' out= as every other function's --

_OUT_WRITES = {
    "int_out": lambda m, x, y: (m.empty(3, dtype=m.int64), (x, y)),
    "bool_out": lambda m, x, y: (m.empty(3, dtype=m.bool), (x, y)),
    "float64_out": lambda m, x, y: (m.empty(3, dtype=m.float64), (x, y)),
    "resized": lambda m, x, y: (m.empty(5), (x, y)),
    "empty_resized": lambda m, x, y: (m.empty(0), (x, y)),
    "strided_view": lambda m, x, y: (m.zeros(6)[::2], (x, y)),
    "not_a_tensor": lambda m, x, y: ([1, 2, 3], (x, y)),
    "input_requires_grad": lambda m, x, y: (m.empty(3), (x.requires_grad_(), y)),
}


def _out_write(m, name, make):
    import warnings
    x, y = m.tensor([1.5, -2.0, 3.0]), m.tensor([0.5, 2.0, -1.0])
    out, args = make(m, x, y)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = getattr(m, name)(*args, out=out)
            res = ("ok", r is out, str(out.dtype).split(".")[-1], out.tolist())
        except Exception as e:          # noqa: BLE001 (the outcome compared with torch's)
            res = (type(e).__name__, str(e).split(" - got")[0].split(", not")[0])
    base = getattr(out, "_base", None)
    return res, [str(k.message)[:40] for k in w], None if base is None else base.tolist()


@pytest.mark.parametrize("case", sorted(_OUT_WRITES))
@pytest.mark.parametrize("name", ["maximum", "minimum", "remainder", "floor_divide", "eq", "logical_and",
                                  "bitwise_and"])
def test_binary_out_writes_as_torch(name, case):
    if name == "bitwise_and" and case not in ("resized", "not_a_tensor"):
        pytest.skip("bitwise ops take integers")
    if name == "floor_divide" and case == "input_requires_grad":
        pytest.skip("torch writes floor_divide's out= beside an input that requires grad; tracegrad refuses")
    make = _OUT_WRITES[case]
    if name == "bitwise_and":
        make = (lambda mk: lambda m, x, y: (mk(m, x, y)[0] if mk(m, x, y)[0].__class__ is list
                                            else m.empty(5, dtype=m.int64),
                                            (m.tensor([3, 5, 7]), m.tensor([1, 4, 6]))))(make)
    got, want = _out_write(tg, name, make), _out_write(torch, name, make)
    if case == "not_a_tensor":
        # (torch words it by its overloads: "eq() received an invalid combination of arguments")
        got, want = got[0][0], want[0][0]
    assert got == want


# -- 2b. functions of tensors alone refuse a Python number, with out= or without --

NUMBER_CASES = [
    ("maximum", (0, 2.)), ("maximum", (2., 0)), ("minimum", (0, True)), ("logical_and", (0, True)),
    ("logical_or", (1, 0)), ("logical_xor", (2., 0)), ("atan2", (0, 2.)), ("atan2", (2, 0)),
    ("fmax", (2., 0)), ("fmax", (0, 2.)), ("fmin", (0, 2)), ("outer", (0, 2.)), ("dist", (0, 2.)),
    ("dot", (0, 2.)), ("kron", (0, 2.)), ("inner", (0, 2.)), ("cross", (0, 2.)), ("heaviside", (0, 2.)),
    ("addcdiv", (2., 0, 0)), ("maximum", (0, 0)), ("atan2", (0, 0)), ("heaviside", (0, 0)),
]


def _number_outcome(m, name, spec):
    x = m.tensor([1.5, -2.0, 3.0])
    args = [x if a == 0 else a for a in spec]
    try:
        r = getattr(m, name)(*args)
    except Exception as e:              # noqa: BLE001 (the outcome compared with torch's)
        return type(e).__name__, str(e)
    return "ok", np.round(np.asarray(r.tolist(), dtype=np.float64), 6).tolist()   # (float32 atan2: 1 ulp apart)


@pytest.mark.parametrize("k", range(len(NUMBER_CASES)))
def test_tensor_functions_refuse_numbers_as_torch(k):
    name, spec = NUMBER_CASES[k]
    assert _number_outcome(tg, name, spec) == _number_outcome(torch, name, spec)


# -- repeat_interleave's node is torch's: ViewBackward0 of a clone (a number), IndexSelectBackward0 --

def test_repeat_interleave_nodes_values_and_layout_match_torch():
    X = np.random.RandomState(0).randn(3, 4)

    def run(m):
        x = m.tensor(X, requires_grad=True)
        outs = [x.repeat_interleave(2, 0), x.repeat_interleave(2), x.repeat_interleave(3, 1),
                x.repeat_interleave(m.tensor([1, 2, 0]), 0), x.repeat_interleave(0, 1)]
        loss = sum((o * m.arange(o.numel(), dtype=m.float64).reshape(o.shape)).sum() for o in outs)
        g, = m.autograd.grad(loss, x, retain_graph=True)
        direct = outs[0].grad_fn(m.ones(6, 4, dtype=m.float64))
        return ([type(o.grad_fn).__name__ for o in outs], [o.stride() for o in outs], [o.tolist() for o in outs],
                g.tolist(), type(outs[0].grad_fn.next_functions[0][0]).__name__, tuple(direct.shape))

    assert run(tg) == run(torch)
    f = lambda x: (x.repeat_interleave(2, 0) * tg.arange(24.).reshape(6, 4)).sum() + \
        x.repeat_interleave(tg.tensor([1, 2, 0]), 0).sum()
    x = tg.tensor(X, requires_grad=True)
    a, b = f(x), tg.compile(f)(x)
    assert a.item() == b.item()
    assert tg.autograd.grad(a, x)[0].tolist() == tg.autograd.grad(b, x)[0].tolist()
