"""More of torch's functions (ops/composite_more.py) against torch: values and dtypes, input
gradients in float64 where torch has them, grad_fn names, torch's errors; tensor_split at
indices."""
import re
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

r = np.random.default_rng(0)
A = r.standard_normal((4, 3))
B = r.standard_normal((4, 3))
V = r.standard_normal(3)
M = r.standard_normal((3, 3))
Bt = r.standard_normal((2, 3, 4))
Ct = r.standard_normal((2, 4, 3))
X = np.array([[3., 1., 3., np.nan, 2., 5., 5.], [1., 1., 0., 2., 2., -1., 7.]])
CASES = {
    "cross": lambda m: m.cross(m.tensor(A), m.tensor(B), dim=1),
    "cross_default": lambda m: m.cross(m.tensor(A), m.tensor(B)),
    "linalg_cross": lambda m: m.linalg.cross(m.tensor(A), m.tensor(B[:1])),
    "inner": lambda m: m.inner(m.tensor(A), m.tensor(B)),
    "inner_3d": lambda m: m.inner(m.tensor(Bt), m.tensor(Bt)),
    "kron": lambda m: m.kron(m.tensor(A), m.tensor(M)),
    "kron_mixed": lambda m: m.kron(m.tensor(V), m.tensor(Bt)),
    "vdot": lambda m: m.vdot(m.tensor(V), m.tensor(A[0])),
    "addmv": lambda m: m.addmv(m.tensor(V), m.tensor(M), m.tensor(A[1]), beta=0.5, alpha=2),
    "addr": lambda m: m.addr(m.tensor(M), m.tensor(V), m.tensor(A[2]), alpha=3),
    "addbmm": lambda m: m.addbmm(m.tensor(M), m.tensor(Bt), m.tensor(Ct), beta=0.1),
    "dist": lambda m: m.dist(m.tensor(A), m.tensor(B)),
    "dist_p3": lambda m: m.dist(m.tensor(A), m.tensor(V), 3),
    "dist_inf": lambda m: m.dist(m.tensor(A), m.tensor(V), float("inf")),
    "cov": lambda m: m.cov(m.tensor(A)),
    "cov_1d": lambda m: m.cov(m.tensor(V), correction=0),
    "corrcoef": lambda m: m.corrcoef(m.tensor(A)),
    "trapezoid": lambda m: m.trapezoid(m.tensor(A)),
    "trapezoid_dx": lambda m: m.trapezoid(m.tensor(A), dx=0.3, dim=0),
    "trapezoid_x": lambda m: m.trapezoid(m.tensor(A), m.tensor(np.array([0., 0.5, 2.])), dim=1),
    "cumtrap": lambda m: m.cumulative_trapezoid(m.tensor(A), dim=0),
    "rot90": lambda m: m.rot90(m.tensor(Bt), 1, [1, 2]),
    "rot90_k3": lambda m: m.rot90(m.tensor(A), -1),
    "rot90_k2": lambda m: m.rot90(m.tensor(A), 2, [1, 0]),
    "take_along_dim": lambda m: m.take_along_dim(m.tensor(A), m.tensor(np.array([[0], [2], [1], [1]])), 1),
    "take_along_dim_none": lambda m: m.take_along_dim(m.tensor(A), m.tensor(np.array([0, 5, 11]))),
    "block_diag": lambda m: m.block_diag(m.tensor(A), m.tensor(V), m.tensor(2.0), m.tensor(M)),
    "column_stack": lambda m: m.column_stack([m.tensor(V), m.tensor(M)]),
    "dstack": lambda m: m.dstack([m.tensor(A), m.tensor(B)]),
    "row_stack": lambda m: m.row_stack([m.tensor(A), m.tensor(V)]),
    "atleast_3d": lambda m: m.atleast_3d(m.tensor(A)),
    "split_ws": lambda m: m.cat(m.split_with_sizes(m.tensor(A), [1, 3])),
    "hsplit": lambda m: m.hsplit(m.tensor(A), 3)[1],
    "vsplit": lambda m: m.vsplit(m.tensor(A), [1, 3])[2],
    "dsplit": lambda m: m.dsplit(m.tensor(Bt), 2)[1],
    "cummax": lambda m: m.cummax(m.tensor(X), 1).values,
    "cummax_i": lambda m: m.cummax(m.tensor(X), 1).indices,
    "cummin": lambda m: m.cummin(m.tensor(X), 1).values,
    "cummin_i": lambda m: m.cummin(m.tensor(X), 1).indices,
    "cummax_ties": lambda m: m.cummax(m.tensor(np.array([1., 1., 1., 0.])), 0).indices,
    "cummax_d0": lambda m: m.cummax(m.tensor(A), 0).values,
    "tril_indices": lambda m: m.tril_indices(4, 3, 1),
    "triu_indices": lambda m: m.triu_indices(3, 5, -1),
    "searchsorted": lambda m: m.searchsorted(m.tensor(np.array([1., 3., 5., 7.])), m.tensor(np.array([3., 6., 9., 0.]))),
    "searchsorted_right": lambda m: m.searchsorted(m.tensor(np.array([[1., 3., 5.], [2., 4., 6.]])), m.tensor(np.array([[3., 6.], [2., 4.]])), right=True),
    "bucketize": lambda m: m.bucketize(m.tensor(np.array([3., 6., 9.])), m.tensor(np.array([1., 3., 5., 7.]))),
    "cartesian": lambda m: m.cartesian_prod(m.tensor(V), m.tensor(A[0][:2])),
    "vander": lambda m: m.vander(m.tensor(V), 4),
    "vander_inc": lambda m: m.vander(m.tensor(V), increasing=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_dtypes_against_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # cross without dim: torch's deprecation warning
        want, got = CASES[name](torch), CASES[name](tg)
    assert str(got.dtype) == str(want.dtype) and got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12, equal_nan=True)


GRADS = {
    "cross": (lambda m, a, b: m.linalg.cross(a, b), "LinalgCrossBackward0"),
    "inner": (lambda m, a, b: m.inner(a, b), None),
    "kron": (lambda m, a, b: m.kron(a, b[:2]), None),
    "vdot": (lambda m, a, b: m.vdot(a[0], b[1]), "VdotBackward0"),
    "addmv": (lambda m, a, b: m.addmv(a[0], b[:3].T, a[1], beta=0.5, alpha=2), "AddmvBackward0"),
    "addr": (lambda m, a, b: m.addr(b, a[:, 0], a[0], alpha=3), "AddrBackward0"),
    "addbmm": (lambda m, a, b: m.addbmm(b[:3], a.reshape(2, 2, 3).transpose(1, 2), b.reshape(2, 2, 3), beta=0.2),
               "AddbmmBackward0"),
    "dist": (lambda m, a, b: m.dist(a, b, 3), "DistBackward0"),
    "cov": (lambda m, a, b: m.cov(a * b), None),
    "corrcoef": (lambda m, a, b: m.corrcoef(a + b), None),
    "trapezoid_x": (lambda m, a, b: m.trapezoid(a, b[0].cumsum(0), dim=1), None),
    "cumulative_trapezoid": (lambda m, a, b: m.cumulative_trapezoid(a * b, dx=0.5, dim=0), None),
    "rot90": (lambda m, a, b: m.rot90(a * b, 3), "Rot90Backward0"),
    "take_along_dim": (lambda m, a, b: m.take_along_dim(a, m.tensor([[0], [2], [1], [1]]), 1) * b, None),
    "block_diag": (lambda m, a, b: m.block_diag(a, b[0], b[1:3]), "BlockDiagBackward0"),
    "cummax": (lambda m, a, b: m.cummax(a * b, 0).values, "CummaxBackward0"),
    "cummin": (lambda m, a, b: m.cummin(a - b, 1).values, "CumminBackward0"),
    "dstack": (lambda m, a, b: m.dstack([a, b]), None),
    "column_stack": (lambda m, a, b: m.column_stack([a[:, 0], b]), None),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_against_torch(name):
    fn, node = GRADS[name]
    at, bt = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    ag, bg = tg.tensor(A, requires_grad=True), tg.tensor(B, requires_grad=True)
    want, got = fn(torch, at, bt), fn(tg, ag, bg)
    if node is not None:
        assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__ == node
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = np.cos(np.arange(want.numel())).reshape(tuple(want.shape))
    gt = torch.autograd.grad(want, (at, bt), torch.tensor(w), allow_unused=True, materialize_grads=True)
    gg = tg.autograd.grad(got, (ag, bg), tg.tensor(w), allow_unused=True, materialize_grads=True)
    for a, b in zip(gg, gt):
        np.testing.assert_allclose(a.numpy(), b.numpy(force=True), rtol=1e-10, atol=1e-12)


def test_errors_and_warnings_as_torchs():
    cases = [lambda m: m.linalg.cross(m.ones(2, 2), m.ones(2, 2)), lambda m: m.rot90(m.ones(3), 1),
             lambda m: m.rot90(m.ones(2, 2), 1, [0, 0]), lambda m: m.vdot(m.ones(2, 2), m.ones(2)),
             lambda m: m.split_with_sizes(m.ones(5), [2, 2]), lambda m: m.hsplit(m.ones(2, 5), 2),
             lambda m: m.vsplit(m.ones(5), 1), lambda m: m.block_diag(m.ones(1, 1, 1)),
             lambda m: m.inner(m.ones(2, 3), m.ones(3, 2)), lambda m: m.cov(m.ones(2, 2, 2))]
    for fn in cases:
        with pytest.raises(Exception) as want:
            fn(torch)
        with pytest.raises(type(want.value)) as got:
            fn(tg)
        assert str(got.value) == str(want.value)
    # torch warns once a process that cross() without dim is deprecated: tracegrad too, in torch's words
    import tracegrad.ops.composite_more as more
    more._WARNED["cross"] = False
    with warnings.catch_warnings(record=True) as wg:
        warnings.simplefilter("always")
        for _ in range(3):
            tg.cross(tg.ones(2, 3), tg.ones(2, 3))
    assert [str(w.message) for w in wg] == [more.CROSS_WARNING]
    assert more.CROSS_WARNING.startswith("Using torch.cross without specifying the dim arg is deprecated.")


@pytest.mark.parametrize("idx", [[1, 3], [0], [-1], [2, 1], [5, 10], (1,), 4, 6])
def test_tensor_split_at_indices_and_in_sections(idx):
    want = [t.tolist() for t in torch.tensor_split(torch.arange(6.0), idx)]
    assert [t.tolist() for t in tg.tensor_split(tg.arange(6.0), idx)] == want


def test_integer_results_of_values_that_require_grad_and_inside_compile():
    x = tg.tensor(np.array([0.5, 2.5, 9.0]), requires_grad=True)
    seq = tg.tensor(np.array([1.0, 3.0, 5.0]), requires_grad=True)
    assert tg.searchsorted(seq, x).tolist() == [0, 1, 3] and tg.bucketize(x, seq, right=True).tolist() == [0, 1, 3]
    assert tg.cummax(x, 0).indices.tolist() == [0, 1, 2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = tg.compile(lambda v: tg.cummax(v, 0).values.sum() + tg.searchsorted(seq, v).sum())
        out = f(x)
    assert float(out) == 0.5 + 2.5 + 9.0 + 4
    assert any("cannot be traced" in str(c.message) for c in caught)     # data-dependent: eager, with the reason


TD_A = r.standard_normal((3, 4, 5))
TD_B = r.standard_normal((4, 5, 6))


@pytest.mark.parametrize("dims", [2, 0, ([1, 2], [0, 1]), ([2, 1], [1, 0]), ([1], [0]), [[-2], [0]], "tensor",
                                  "tensor_lists"])
def test_tensordot_values_gradients_and_node(dims):
    res = []
    for m in (torch, tg):
        a, b = m.tensor(TD_A, requires_grad=True), m.tensor(TD_B, requires_grad=True)
        d = m.tensor(2) if dims == "tensor" else m.tensor([[1, 2], [0, 1]]) if dims == "tensor_lists" else dims
        o = m.tensordot(a, b, dims=d)
        o.pow(2).sum().backward()
        res.append((o.detach().numpy(), a.grad.numpy(), b.grad.numpy(), type(o.grad_fn).__name__))
    for u, v in zip(res[0][:3], res[1][:3]):
        np.testing.assert_allclose(v, u, rtol=1e-12, atol=1e-12)
    assert res[1][3] == res[0][3]


@pytest.mark.parametrize("dims", [-1, 4, 1, ([1], [1]), ([0, 1], [0])])
def test_tensordot_errors_as_torch(dims):
    with pytest.raises(RuntimeError) as want:
        torch.tensordot(torch.tensor(TD_A), torch.tensor(TD_B), dims=dims)
    with pytest.raises(RuntimeError, match=re.escape(str(want.value))):
        tg.tensordot(tg.tensor(TD_A), tg.tensor(TD_B), dims=dims)


def test_tensordot_compiles():
    f = tg.compile(lambda x, y: tg.tensordot(x, y, dims=([1, 2], [0, 1])), fullgraph=True)
    a, b = tg.tensor(TD_A), tg.tensor(TD_B)
    np.testing.assert_array_equal(f(a, b).numpy(), tg.tensordot(a, b, dims=([1, 2], [0, 1])).numpy())
