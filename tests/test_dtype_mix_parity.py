"""Operands of mixed dtypes against torch: the same result dtype and values, or the same error.

Before, tracegrad promoted where torch refuses (linear with a float64 bias beside float32
weights, layer_norm's weight, prelu, einsum, cross, cdist, isclose/allclose, kl_div with
integer targets, binary_cross_entropy, take_along_dim with int32 indices, index_copy across
dtypes, addcmul of bools), refused where torch computes (mse_loss and huber_loss with a bool
target, index_copy of bools), and gave another dtype (huber_loss(float32, float64) is float32
in torch, an int64 mse_loss has no kernel there).
"""
import itertools
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"]


def _full(m, d, shape, val=2):
    return m.full(shape, val, dtype=getattr(m, d))


def _losses(name, reduction):
    return lambda m, a, b: getattr(m.nn.functional, name)(
        m.tensor([2.0, -1.5, 0.25]).to(getattr(m, a)), m.tensor([1.0, 0.5, 0.0]).to(getattr(m, b)),
        reduction=reduction)


OPS = {
    "einsum": lambda m, a, b: m.einsum("ij,jk->ik", _full(m, a, (2, 3)), _full(m, b, (3, 2))),
    "cross": lambda m, a, b: m.linalg.cross(_full(m, a, (3,)), _full(m, b, (3,))),
    "cdist": lambda m, a, b: m.cdist(_full(m, a, (2, 3)), _full(m, b, (2, 3))),
    "isclose": lambda m, a, b: m.isclose(_full(m, a, (3,)), _full(m, b, (3,))),
    "allclose": lambda m, a, b: m.tensor(m.allclose(_full(m, a, (3,)), _full(m, b, (3,)))),
    "linear_bias": lambda m, a, b: m.nn.functional.linear(_full(m, a, (2, 3)), _full(m, a, (4, 3)), _full(m, b, (4,))),
    "linear_3d_bias": lambda m, a, b: m.nn.functional.linear(_full(m, a, (1, 2, 3)), _full(m, a, (4, 3)),
                                                              _full(m, b, (4,))),
    "layer_norm_weight": lambda m, a, b: m.nn.functional.layer_norm(_full(m, a, (2, 3)), (3,), _full(m, b, (3,))),
    "layer_norm_bias": lambda m, a, b: m.nn.functional.layer_norm(_full(m, a, (2, 3)), (3,), None, _full(m, b, (3,))),
    "prelu": lambda m, a, b: m.nn.functional.prelu(_full(m, a, (2, 3)), _full(m, b, (1,))),
    "kl_div": lambda m, a, b: m.nn.functional.kl_div(_full(m, a, (3,)), _full(m, b, (3,)), reduction="sum"),
    "bce": lambda m, a, b: m.nn.functional.binary_cross_entropy(_full(m, a, (3,), 0.5), _full(m, b, (3,), 1)),
    "take_along_dim": lambda m, a, b: m.take_along_dim(_full(m, a, (3,)), _full(m, b, (2,), 0), 0),
    "index_copy": lambda m, a, b: m.index_copy(_full(m, a, (3,)), 0, _full(m, "int64", (1,), 0), _full(m, b, (1,), 1)),
    "searchsorted": lambda m, a, b: m.searchsorted(m.tensor([0.0, 1.0, 2.5]).to(getattr(m, a)),
                                                   m.tensor([1.0, 3.0]).to(getattr(m, b))),
    "bucketize": lambda m, a, b: m.bucketize(m.tensor([1.0, 3.0, -1.0]).to(getattr(m, a)),
                                             m.tensor([0.0, 1.0, 2.5]).to(getattr(m, b)), right=True),
    "addcmul": lambda m, a, b: m.addcmul(_full(m, a, (2,)), _full(m, b, (2,)), _full(m, b, (2,))),
    **{f"{n}_{r}": _losses(n, r) for n in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")
       for r in ("none", "mean")},
}


def _outcome(m, f, a, b):
    try:
        r = f(m, a, b)
    except Exception as e:           # the type and the words are part of the API
        return ("raises", type(e).__name__, str(e))
    v = r.double().numpy() if r.dtype != m.bool else r.numpy()
    return ("ok", str(r.dtype), tuple(r.shape), v.tolist())


@pytest.mark.parametrize("op", sorted(OPS))
def test_mixed_dtypes_as_torch(op):
    f = OPS[op]
    differ = []
    for a, b in itertools.product(DTYPES, repeat=2):
        if op == "einsum" and a == "bool" and b != "bool":
            # torch's einsum of bools computes where it needs no bmm ("i,j->ij") and raises
            # NotImplementedError where it does; beside another dtype both refuse, in other words
            continue
        want, got = _outcome(torch, f, a, b), _outcome(tg, f, a, b)
        if want != got:
            differ.append(f"{op}({a}, {b}): torch {want[:3]}, tracegrad {got[:3]}")
    assert not differ, "\n".join(differ[:10])


def test_huber_of_mixed_dtypes_keeps_inputs_dtype_and_gradient():
    # torch computes in the promoted dtype and writes into a tensor like input
    x = np.array([2.0, -1.5, 0.25, 3.0])
    t = np.array([1.0, 0.5, 0.0, -1.0])
    xg = tg.tensor(x, dtype=tg.float32, requires_grad=True)
    xt = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    lg = tg.nn.functional.huber_loss(xg, tg.tensor(t), delta=1.5)
    lt = torch.nn.functional.huber_loss(xt.detach(), torch.tensor(t), delta=1.5)
    assert lg.dtype is tg.float32 and lt.dtype is torch.float32
    np.testing.assert_array_equal(lg.detach().numpy(), lt.detach().numpy())
    # (torch's own backward of this mix raises "Found dtype Double but expected Float"; the gradient
    # of the mean huber loss is clip(x - t, -delta, delta) / n, exact in float32 for these values)
    lg.backward()
    np.testing.assert_array_equal(xg.grad.numpy(), (np.clip(x - t, -1.5, 1.5) / 4).astype(np.float32))


def test_index_copy_of_bools():
    for m in (tg, torch):
        out = m.index_copy(m.tensor([True, False, False]), 0, m.tensor([2]), m.tensor([True]))
        assert out.dtype == m.bool and out.tolist() == [True, False, True]


ACTIVATIONS = {
    "gelu": lambda m, x: m.nn.functional.gelu(x), "silu": lambda m, x: m.nn.functional.silu(x),
    "mish": lambda m, x: m.nn.functional.mish(x), "softplus": lambda m, x: m.nn.functional.softplus(x),
    "elu": lambda m, x: m.nn.functional.elu(x), "celu": lambda m, x: m.nn.functional.celu(x),
    "selu": lambda m, x: m.nn.functional.selu(x), "leaky_relu": lambda m, x: m.nn.functional.leaky_relu(x),
    "hardswish": lambda m, x: m.nn.functional.hardswish(x), "hardsigmoid": lambda m, x: m.nn.functional.hardsigmoid(x),
    "logsigmoid": lambda m, x: m.nn.functional.logsigmoid(x), "glu": lambda m, x: m.nn.functional.glu(x, 0),
    "hardtanh": lambda m, x: m.nn.functional.hardtanh(x), "relu6": lambda m, x: m.nn.functional.relu6(x),
    "hardtanh_wide": lambda m, x: m.nn.functional.hardtanh(x, -2.5, 2.5), "frac": lambda m, x: m.frac(x),
}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activations_of_every_dtype_as_torch(op):
    # gelu of an int64 tensor computed a float32 result where torch has no kernel; hardtanh and
    # relu6 of integers are integers in torch
    differ = []
    for d in DTYPES + ["int8"]:
        f = lambda m, a, b: ACTIVATIONS[op](m, m.tensor([1.5, -2.0, 0.0, 3.0, 7.0, -0.5]).to(getattr(m, a)))
        want, got = _outcome(torch, f, d, None), _outcome(tg, f, d, None)
        if want[:3] != got[:3] or want[0] == "ok" and not np.allclose(want[3], got[3], rtol=1e-2):
            differ.append(f"{op}({d}): torch {want[:3]}, tracegrad {got[:3]}")
    assert not differ, "\n".join(differ)


INDEX_DTYPES = ["int64", "int32", "int16", "int8", "uint8", "bool", "float32"]
INDEXED = {
    "scatter_reduce": lambda m, i: m.zeros(2, 3).scatter_reduce(1, i([[0, 1], [1, 0]]), m.ones(2, 2), "sum"),
    "index_add": lambda m, i: m.zeros(3).index_add(0, i([0, 1]), m.ones(2)),
    "index_fill": lambda m, i: m.zeros(3).index_fill(0, i([0, 1]), 2.0),
    "index_copy": lambda m, i: m.zeros(3).index_copy(0, i([0, 1]), m.ones(2)),
    "index_put": lambda m, i: m.zeros(3).index_put((i([0, 1]),), m.ones(2)),
    "getitem": lambda m, i: m.arange(6.)[i([0, 1])],
    "getitem_negative": lambda m, i: m.arange(6.)[i([-1, 1])],
    "setitem": lambda m, i: (lambda x: (x.__setitem__(i([0, 2]), 5.0), x)[1])(m.zeros(2)),
    "take": lambda m, i: m.take(m.arange(6.), i([0, 1])),
    # a uint8 or bool index of take's size would be read as a mask if it were not refused
    "take_mask_sized": lambda m, i: m.take(m.arange(6.), i([1, 0, 1, 0, 0, 1])),
    "nll_loss": lambda m, i: m.nn.functional.nll_loss(m.zeros(2, 3), i([0, 1])),
    "cross_entropy": lambda m, i: m.nn.functional.cross_entropy(m.zeros(2, 3), i([0, 1])),
    "masked_fill_mask": lambda m, i: m.arange(3.).masked_fill(i([1, 0, 1]), 0.0),
    "repeat_interleave": lambda m, i: m.arange(2.).repeat_interleave(i([1, 2])),
}


@pytest.mark.parametrize("op", sorted(INDEXED))
def test_index_dtypes_as_torch(op):
    # x[int8 index], index_fill with int32 indices, take with int32 indices computed where torch
    # refuses; index_add, index_copy and others refused with another op's words
    differ = []
    for d in INDEX_DTYPES:
        f = lambda m, a, b: INDEXED[op](m, lambda v: m.tensor(v).to(getattr(m, a)))
        want, got = _outcome(torch, f, d, None), _outcome(tg, f, d, None)
        if want != got:
            differ.append(f"{op}({d} index): torch {want[:3]}, tracegrad {got[:3]}")
    assert not differ, "\n".join(differ)


REDUCTIONS = {
    "mean": lambda m, x, k: x.mean(dtype=k), "nanmean": lambda m, x, k: x.nanmean(dtype=k),
    "vector_norm": lambda m, x, k: m.linalg.vector_norm(x, dtype=k), "sum": lambda m, x, k: x.sum(dtype=k),
    "cumsum": lambda m, x, k: x.cumsum(0, dtype=k), "softmax": lambda m, x, k: m.softmax(x, 0, dtype=k),
}


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_reduction_dtype_arguments_as_torch(op):
    # vector_norm(float32, dtype=float16) narrowed and nanmean(dtype=int64) computed where torch refuses
    differ = []
    for d, k in itertools.product(DTYPES, ["float32", "float64", "float16", "int64", "int32"]):
        f = lambda m, a, b: REDUCTIONS[op](m, m.tensor([1.5, -2.0, 0.0, 3.0]).to(getattr(m, a)), getattr(m, b))
        want, got = _outcome(torch, f, d, k), _outcome(tg, f, d, k)
        if want[:3] != got[:3] or want[0] == "ok" and not np.allclose(want[3], got[3], rtol=1e-2):
            differ.append(f"{op}({d}, dtype={k}): torch {want[:3]}, tracegrad {got[:3]}")
    assert not differ, "\n".join(differ)


def test_trapezoid_refuses_bools_as_torch():
    for m in (tg, torch):
        with pytest.raises(RuntimeError, match="bool is not supported"):
            m.trapezoid(m.tensor([True, False]))


def test_index_add_of_another_dtype_as_torch():
    for m in (tg, torch):
        for inplace in (False, True):
            x, src = m.zeros(3), m.ones(1, dtype=m.float64)
            with pytest.raises(RuntimeError, match=r"index_add_\(\): self \(Float\) and source \(Double\) must have "
                                                   r"the same scalar type"):
                x.index_add_(0, m.tensor([0]), src) if inplace else m.index_add(x, 0, m.tensor([0]), src)


@pytest.mark.parametrize("case", ["linear_bias", "addmm", "gelu_int", "take_uint8", "huber_mixed"])
def test_compiled_functions_check_dtypes_as_eager(case):
    # the checks run while tracing: the user's error raises at once, with eager's words, no fallback
    f = {"linear_bias": lambda x: tg.nn.functional.linear(x, tg.ones(4, 3), tg.ones(4, dtype=tg.float64)),
         "addmm": lambda x: tg.addmm(tg.ones(2, 2, dtype=tg.float16), x, tg.ones(3, 2)),
         "gelu_int": lambda x: tg.nn.functional.gelu(x.long()),
         "take_uint8": lambda x: tg.take(x, tg.ones(6, dtype=tg.uint8)),
         "huber_mixed": lambda x: tg.nn.functional.huber_loss(x, x.double())}[case]
    x = tg.ones(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outs = []
        for fn in (f, tg.compile(f)):
            try:
                r = fn(x)
                outs.append(("ok", str(r.dtype), tuple(r.shape)))
            except (RuntimeError, NotImplementedError) as e:
                outs.append((type(e).__name__, str(e)))
    assert outs[0] == outs[1]
