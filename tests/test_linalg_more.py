"""torch.linalg functions that were missing: solve_triangular (a primitive: substitution, and
torch's derivative on the triangle), vecdot, matmul, diagonal and vander (composites), against
torch: values, gradients (float64, gradcheck and gradgradcheck), strides, grad_fn names, errors,
and compiled."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(0)


def tri(n, batch=(), lower=True):
    a = R.uniform(-1, 1, batch + (n, n)) + 3 * np.eye(n)        # well away from singular
    return np.tril(a) if lower else np.triu(a)


CASES = [
    dict(upper=True), dict(upper=False), dict(upper=True, unitriangular=True), dict(upper=False, unitriangular=True),
    dict(upper=True, left=False), dict(upper=False, left=False, unitriangular=True),
]


def _shapes(kw, batch_a, batch_b):
    n = 3
    a = R.uniform(-1, 1, batch_a + (n, n)) + 3 * np.eye(n)      # the other triangle is not read
    b = R.uniform(-1, 1, batch_b + ((n, 2) if kw.get("left", True) else (2, n)))
    return a, b


@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("batches", [((), ()), ((2,), ()), ((), (4,)), ((2, 1), (3,))])
def test_solve_triangular_matches_torch(kw, batches):
    a, b = _shapes(kw, *batches)
    res = {}
    for L in (torch, tg):
        A = L.tensor(a, dtype=L.float64, requires_grad=True)
        B = L.tensor(b, dtype=L.float64, requires_grad=True)
        X = L.linalg.solve_triangular(A, B, **kw)
        (X * X.detach().sin()).sum().backward()
        res[L] = (X.detach().numpy(), A.grad.numpy(), B.grad.numpy(), X.stride(), type(X.grad_fn).__name__)
    for got, want in zip(res[tg][:3], res[torch][:3]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert res[tg][3:] == res[torch][3:]


@pytest.mark.parametrize("kw", CASES)
def test_solve_triangular_gradcheck_and_gradgradcheck(kw):
    a, b = _shapes(kw, (2,), ())
    A = tg.tensor(a, dtype=tg.float64, requires_grad=True)
    B = tg.tensor(b, dtype=tg.float64, requires_grad=True)
    f = lambda A, B: tg.linalg.solve_triangular(A, B, **kw)        # noqa: E731
    assert tg.autograd.gradcheck(f, (A, B))
    assert tg.autograd.gradgradcheck(f, (A, B))


def test_solve_triangular_compiled_matches_eager():
    a, b = _shapes(dict(upper=False), (2,), ())
    f = lambda A, B: (tg.linalg.solve_triangular(A, B, upper=False) ** 2).sum()    # noqa: E731
    c = tg.compile(f)
    res = []
    for fn in (f, c, c):
        A = tg.tensor(a, dtype=tg.float64, requires_grad=True)
        B = tg.tensor(b, dtype=tg.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = fn(A, B)
        y.backward()
        res.append((float(y), A.grad.numpy(), B.grad.numpy()))
    for r in res[1:]:
        np.testing.assert_allclose(r[0], res[0][0], rtol=1e-12)
        np.testing.assert_allclose(r[1], res[0][1], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(r[2], res[0][2], rtol=1e-12, atol=1e-14)


def test_solve_triangular_zero_on_the_diagonal_gives_inf_as_torch():
    s = [[0.0, 1.0], [0.0, 3.0]]
    want = torch.linalg.solve_triangular(torch.tensor(s, dtype=torch.float64), torch.ones(2, 1, dtype=torch.float64),
                                         upper=True)
    got = tg.linalg.solve_triangular(tg.tensor(s, dtype=tg.float64), tg.ones(2, 1, dtype=tg.float64), upper=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_solve_triangular_dtypes_and_empty_as_torch():
    for da, db in (("float64", "int64"), ("float32", "float64"), ("float64", "float32")):
        want = torch.linalg.solve_triangular(torch.eye(2, dtype=getattr(torch, da)),
                                             torch.ones(2, 1, dtype=getattr(torch, db)), upper=True)
        got = tg.linalg.solve_triangular(tg.eye(2, dtype=getattr(tg, da)), tg.ones(2, 1, dtype=getattr(tg, db)),
                                         upper=True)
        assert str(got.dtype) == str(want.dtype)
    for shape in ((2, 0), (0, 3)):
        n = shape[0]
        want = torch.linalg.solve_triangular(torch.eye(n, dtype=torch.float64), torch.ones(shape, dtype=torch.float64),
                                             upper=True)
        got = tg.linalg.solve_triangular(tg.eye(n, dtype=tg.float64), tg.ones(shape, dtype=tg.float64), upper=True)
        assert tuple(got.shape) == tuple(want.shape)


def _error(f):
    try:
        f()
    except Exception as e:      # noqa: BLE001 - compared
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("case", range(6))
def test_solve_triangular_errors_as_torch(case):
    def call(L):
        f64 = dict(dtype=L.float64)
        return [lambda: L.linalg.solve_triangular(L.ones(2, 3, **f64), L.ones(2, 1, **f64), upper=True),
                lambda: L.linalg.solve_triangular(L.eye(2, **f64), L.ones(3, 1, **f64), upper=True),
                lambda: L.linalg.solve_triangular(L.ones(2, **f64), L.ones(2, **f64), upper=True),
                lambda: L.linalg.solve_triangular(L.eye(2, **f64), L.ones(2, **f64), upper=True),
                lambda: L.linalg.solve_triangular(L.eye(2, dtype=L.int64), L.ones(2, 1, dtype=L.int64), upper=True),
                lambda: L.linalg.solve_triangular(L.eye(2, **f64), L.ones(1, 3, **f64), upper=True, left=False),
                ][case]()
    want, got = _error(lambda: call(torch)), _error(lambda: call(tg))
    assert want is not None and got == want


def test_vecdot_matches_torch():
    x, y = R.uniform(-1, 1, (2, 3)), R.uniform(-1, 1, (3,))
    for args, kw in (((x, x), {}), ((x, y), {}), ((x, x), {"dim": 0}), ((y, y), {})):
        res = {}
        for L in (torch, tg):
            ts = [L.tensor(a, dtype=L.float64, requires_grad=True) for a in args]
            r = L.linalg.vecdot(*ts, **kw)
            r.sum().backward()
            res[L] = (r.detach().numpy(), [t.grad.numpy() for t in ts], type(r.grad_fn).__name__)
        np.testing.assert_allclose(res[tg][0], res[torch][0], rtol=1e-13)
        for g, w in zip(res[tg][1], res[torch][1]):
            np.testing.assert_allclose(g, w, rtol=1e-13)
        assert res[tg][2] == res[torch][2]
    for f in (lambda L: L.linalg.vecdot(L.ones(3, dtype=L.float64), L.ones(3)),
              lambda L: L.linalg.vecdot(L.ones(3, dtype=L.int64), L.ones(3, dtype=L.int64)),
              lambda L: L.linalg.vecdot(L.ones(2, 3), L.ones(4)),
              lambda L: L.linalg.vecdot(L.ones(2, 3), L.ones(2, 3), dim=2)):
        want = _error(lambda: f(torch))
        got = _error(lambda: f(tg))
        assert want is not None and got is not None and got[0] == want[0], (got, want)
        if "dtype" in want[1] or "floating" in want[1]:
            assert got == want


def test_vander_matches_torch():
    for a, kw in ((np.array([1.5, -2.0, 3.0]), {}), (np.array([[1.5, -2.0], [0.5, 4.0]]), {"N": 4}),
                  (np.array([0.0, 2.0]), {"N": 2})):
        res = {}
        for L in (torch, tg):
            x = L.tensor(a, dtype=L.float64, requires_grad=True)
            v = L.linalg.vander(x, **kw)
            (v * v).sum().backward()
            res[L] = (v.detach().numpy(), x.grad.numpy(), type(v.grad_fn).__name__)
        np.testing.assert_array_equal(res[tg][0], res[torch][0])
        np.testing.assert_allclose(res[tg][1], res[torch][1], rtol=1e-13)
        assert res[tg][2] == res[torch][2]
    np.testing.assert_array_equal(tg.linalg.vander(tg.tensor([1, 2, 3])).numpy(),
                                  torch.linalg.vander(torch.tensor([1, 2, 3])).numpy())
    assert tg.linalg.vander(tg.tensor([1, 2])).dtype == tg.int64
    for f in (lambda L: L.linalg.vander(L.tensor([1.0, 2.0]), N=1), lambda L: L.linalg.vander(L.tensor(2.0)),
              lambda L: L.linalg.vander(L.tensor([True, False])), lambda L: L.linalg.vander(L.zeros(2, 0))):
        want, got = _error(lambda: f(torch)), _error(lambda: f(tg))
        assert want is not None and got == want


def test_linalg_matmul_and_diagonal_are_torch_s():
    a = R.uniform(-1, 1, (2, 3, 3))
    for f in (lambda L, x: L.linalg.matmul(x, x), lambda L, x: L.linalg.diagonal(x),
              lambda L, x: L.linalg.diagonal(x, offset=1, dim1=0, dim2=2)):
        res = {}
        for L in (torch, tg):
            x = L.tensor(a, dtype=L.float64, requires_grad=True)
            r = f(L, x)
            r.sum().backward()
            res[L] = (r.detach().numpy(), x.grad.numpy(), type(r.grad_fn).__name__)
        np.testing.assert_allclose(res[tg][0], res[torch][0], rtol=1e-13)
        np.testing.assert_allclose(res[tg][1], res[torch][1], rtol=1e-13)
        assert res[tg][2] == res[torch][2]
