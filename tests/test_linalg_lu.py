"""torch.linalg's LU family and least squares: lu_factor (a primitive: getrf's partial pivoting,
torch's derivative), lu_factor_ex, lu, lu_unpack, lu_solve, solve_ex, lstsq, cond, tensorinv,
tensorsolve, and torch's older torch.lu / torch.lu_solve, against torch: values, pivots, strides,
grad_fn names, gradients (float64, gradcheck and gradgradcheck), errors, and compiled."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(0)
SHAPES = [(4, 4), (3, 5), (5, 3), (2, 4, 4), (2, 3, 6), (3, 1, 6, 2), (1, 1), (1, 3), (3, 1)]


def both(a, dtype="float64", grad=False):
    return (torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=grad),
            tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=grad))


def close(got, want, rtol=1e-12, atol=1e-13):
    np.testing.assert_allclose(np.asarray(got.detach().numpy()), want.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("shape", SHAPES)
def test_lu_factor_matches_torch(shape):
    a = R.standard_normal(shape)
    ta, ga = both(a)
    LU, piv = torch.linalg.lu_factor(ta)
    LU2, piv2 = tg.linalg.lu_factor(ga)
    close(LU2, LU)
    assert np.array_equal(piv2.numpy(), piv.numpy()) and piv2.dtype is tg.int32
    if 1 not in shape:                   # (a size-1 dimension's stride: tracegrad's layouts leave it free)
        assert LU2.stride() == LU.stride()
    P, L, U = torch.linalg.lu(ta)
    P2, L2, U2 = tg.linalg.lu(ga)
    assert np.array_equal(P2.numpy(), P.numpy())
    close(L2, L)
    close(U2, U)
    assert (P2.stride(), L2.stride(), U2.stride()) == (P.stride(), L.stride(), U.stride())
    for want, got in zip(torch.lu_unpack(LU, piv), tg.lu_unpack(LU2, piv2)):
        close(got, want)


def test_pivoting_takes_the_first_of_equal_magnitudes_and_reports_zero_pivots():
    # ties (|-2| = |2|), a zero column, exact zeros: getrf's choices and info
    for a in ([[1., 2.], [2., 4.]], [[0., 1.], [0., 2.]], [[-2., 1., 0.], [2., 3., 1.], [1., 1., 1.]],
              [[0., 0.], [0., 0.]], [[[1., 0.], [0., 1.]], [[0., 0.], [1., 0.]]]):
        ta, ga = both(np.array(a))
        want, got = torch.linalg.lu_factor_ex(ta), tg.linalg.lu_factor_ex(ga)
        close(got.LU, want.LU)
        assert np.array_equal(got.pivots.numpy(), want.pivots.numpy())
        assert np.array_equal(got.info.numpy(), want.info.numpy()) and got.info.dtype is tg.int32


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
def test_lu_gradients_match_torch(shape):
    a = R.standard_normal(shape)
    res = {}
    for L in (torch, tg):
        A = L.tensor(a, dtype=L.float64, requires_grad=True)
        P, Lo, U = L.linalg.lu(A)
        LU = L.linalg.lu_factor(A).LU
        (Lo.sin().sum() + (U * U).sum() + (LU * LU.detach().cos()).sum()).backward()
        res[L] = (A.grad.numpy(), type(Lo.grad_fn).__name__, type(LU.grad_fn).__name__, P.requires_grad)
    np.testing.assert_allclose(res[tg][0], res[torch][0], rtol=1e-10, atol=1e-12)
    assert res[tg][1:] == res[torch][1:]


@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2)])
def test_lu_gradcheck_and_gradgradcheck(shape):
    A = tg.tensor(R.standard_normal(shape), dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(lambda A: tuple(tg.linalg.lu(A))[1:], (A,))
    assert tg.autograd.gradgradcheck(lambda A: tuple(tg.linalg.lu(A))[1:], (A,))
    assert tg.autograd.gradcheck(lambda A: tg.linalg.lu_factor(A).LU, (A,))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("batches", [((), ()), ((2,), ()), ((), (3,)), ((2, 1), (3,))])
def test_lu_solve_matches_torch(left, adjoint, batches):
    n = 4
    a = R.standard_normal(batches[0] + (n, n)) + 2 * np.eye(n)
    b = R.standard_normal(batches[1] + ((n, 2) if left else (2, n)))
    res = {}
    for L in (torch, tg):
        A = L.tensor(a, dtype=L.float64, requires_grad=True)
        B = L.tensor(b, dtype=L.float64, requires_grad=True)
        LU, piv = L.linalg.lu_factor(A)
        X = L.linalg.lu_solve(LU, piv, B, left=left, adjoint=adjoint)
        (X * X.detach().sin()).sum().backward()
        res[L] = (X.detach().numpy(), A.grad.numpy(), B.grad.numpy(), X.stride(), type(X.grad_fn).__name__)
    for got, want in zip(res[tg][:3], res[torch][:3]):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert res[tg][3:] == res[torch][3:]


def test_lu_solve_gradcheck_and_gradgradcheck():
    a = R.standard_normal((3, 3)) + 2 * np.eye(3)
    A = tg.tensor(a, requires_grad=True)
    B = tg.tensor(R.standard_normal((3, 2)), requires_grad=True)
    f = lambda A, B: tg.linalg.lu_solve(*tg.linalg.lu_factor(A), B, adjoint=True)   # noqa: E731
    assert tg.autograd.gradcheck(f, (A, B))
    assert tg.autograd.gradgradcheck(f, (A, B))


def _error(f):
    try:
        f()
    except Exception as e:       # noqa: BLE001
        return type(e).__name__, str(e)
    return None


ERRORS = [
    lambda m: m.linalg.lu_factor(m.ones(2)),
    lambda m: m.linalg.lu_factor(m.zeros(2, 2, dtype=m.int64)),
    lambda m: m.linalg.lu(m.eye(2, dtype=m.float16)),
    lambda m: m.linalg.lu_factor(m.eye(2), pivot=False),
    lambda m: m.linalg.lu(m.eye(2), pivot=False),
    lambda m: m.linalg.lu_factor(m.tensor([[1., 2.], [2., 4.]])),
    lambda m: m.linalg.lu_factor(m.tensor([[[1., 0.], [0., 1.]], [[1., 2.], [2., 4.]]])),
    lambda m: m.linalg.lu_factor_ex(m.zeros(2, 2), check_errors=True),
    lambda m: m.linalg.lu_solve(m.eye(2), m.ones(2, dtype=m.int32), m.ones(3, 1)),
    lambda m: m.lu_unpack(m.eye(2), m.ones(2, dtype=m.int64)),
    lambda m: m.linalg.solve_ex(m.zeros(2, 2), m.ones(2, 1), check_errors=True),
    lambda m: m.linalg.tensorinv(m.ones(2, 3), ind=1),
    lambda m: m.linalg.tensorinv(m.ones(2, 2), ind=0),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_as_torch(case):
    want, got = _error(lambda: ERRORS[case](torch)), _error(lambda: ERRORS[case](tg))
    assert want is not None and got is not None
    assert got[1] == want[1]
    assert got[0] == want[0] or (got[0], want[0]) == ("LinAlgError", "_LinAlgError")


def test_singular_factor_is_a_result_where_torch_gives_one():
    """lu and lu_factor_ex factor a singular matrix (info > 0); solve_ex returns torch's inf/nan
    and info, not an error."""
    s = [[1., 2.], [2., 4.]]
    for f in (lambda m: tuple(m.linalg.lu(m.tensor(s))), lambda m: tuple(m.linalg.lu_factor_ex(m.tensor(s))),
              lambda m: tuple(m.linalg.solve_ex(m.zeros(2, 2), m.ones(2, 1)))):
        for want, got in zip(f(torch), f(tg)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_empty_matrices_as_torch():
    for shape in [(0, 0), (2, 0, 3), (3, 0), (0, 2)]:
        ta, ga = both(np.zeros(shape))
        for want, got in zip(torch.linalg.lu_factor_ex(ta), tg.linalg.lu_factor_ex(ga)):
            assert tuple(got.shape) == tuple(want.shape) and str(got.dtype)[-5:] == str(want.dtype)[-5:]
        for want, got in zip(torch.linalg.lu(ta), tg.linalg.lu(ga)):
            assert tuple(got.shape) == tuple(want.shape)


def test_solve_ex_matches_torch():
    a = R.standard_normal((2, 3, 3)) + 2 * np.eye(3)
    b = R.standard_normal((2, 3))
    for left in (True, False):
        want = torch.linalg.solve_ex(torch.tensor(a), torch.tensor(b if left else b[:, None, :]), left=left)
        got = tg.linalg.solve_ex(tg.tensor(a), tg.tensor(b if left else b[:, None, :]), left=left)
        close(got.result, want.result, 1e-10, 1e-12)
        assert np.array_equal(got.info.numpy(), want.info.numpy())


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 6, 3), (2, 6, 1)), ((5, 3), (5,)),
                                   ((4, 4), (4, 2))])
def test_lstsq_matches_torch(driver, shape):
    if driver == "gels" and shape[0][-2] < shape[0][-1]:
        pytest.skip("torch's gels assumes full column rank; a wide system has none")
    a, b = R.standard_normal(shape[0]), R.standard_normal(shape[1])
    res = {}
    for L in (torch, tg):
        A = L.tensor(a, requires_grad=True)
        B = L.tensor(b, requires_grad=True)
        out = L.linalg.lstsq(A, B, driver=driver)
        (out.solution * out.solution.detach().cos()).sum().backward()
        res[L] = (out, A.grad.numpy(), B.grad.numpy())
    for want, got in zip(res[torch][0], res[tg][0]):
        assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(res[tg][1], res[torch][1], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res[tg][2], res[torch][2], rtol=1e-8, atol=1e-10)


def test_lstsq_of_a_rank_deficient_matrix_is_the_minimum_norm_solution_as_torch():
    a = R.standard_normal((6, 3))
    a[:, 2] = a[:, 0] + a[:, 1]
    b = R.standard_normal((6, 2))
    for driver in ("gelsy", "gelsd", "gelss"):
        want = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        got = tg.linalg.lstsq(tg.tensor(a), tg.tensor(b), driver=driver)
        close(got.solution, want.solution, 1e-8, 1e-10)
        assert int(got.rank) == int(want.rank) == 2
        assert got.residuals.numel() == want.residuals.numel() == 0


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc"])
def test_cond_matches_torch(p):
    a = R.standard_normal((2, 4, 4))
    res = {}
    for L in (torch, tg):
        A = L.tensor(a, requires_grad=True)
        c = L.linalg.cond(A, p)
        if L is torch and p not in (None, 2, -2, "nuc"):
            # (torch's own backward of these raises: its inverse's output is written in place;
            # the gradient is that of its definition, norm(A) * norm(inv(A)))
            c = L.linalg.matrix_norm(A, p) * L.linalg.matrix_norm(L.linalg.inv(A), p)
        c.sum().backward()
        res[L] = (c.detach().numpy(), A.grad.numpy())
    np.testing.assert_allclose(res[tg][0], res[torch][0], rtol=1e-10)
    np.testing.assert_allclose(res[tg][1], res[torch][1], rtol=1e-8, atol=1e-10)


def test_tensorinv_and_tensorsolve_match_torch():
    a = R.standard_normal((4, 6, 24))
    want, got = torch.linalg.tensorinv(torch.tensor(a), ind=2), tg.linalg.tensorinv(tg.tensor(a), ind=2)
    close(got, want, 1e-9, 1e-11)
    a, b = R.standard_normal((6, 4, 4, 3, 2)), R.standard_normal((4, 3, 2))
    for dims in (None, (0, 2)):
        aa = a if dims else a.transpose(1, 3, 4, 0, 2)
        want = torch.linalg.tensorsolve(torch.tensor(aa), torch.tensor(b), dims=dims)
        got = tg.linalg.tensorsolve(tg.tensor(aa), tg.tensor(b), dims=dims)
        close(got, want, 1e-9, 1e-11)


def test_torch_lu_and_lu_solve_of_older_code():
    a = R.standard_normal((3, 3)) + 2 * np.eye(3)
    b = R.standard_normal((3, 2))
    res = {}
    for L in (torch, tg):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            LU, piv, info = L.lu(L.tensor(a), get_infos=True)
            x = L.lu_solve(L.tensor(b), LU, piv)
            x2 = L.tensor(b).lu_solve(LU, piv)
        res[L] = (LU.numpy(), piv.numpy(), info.numpy(), x.numpy(), x2.numpy(), len(L.tensor(a).lu()))
        res[L, "warn"] = sorted({str(m.message).split("\n")[0] for m in w})
    for got, want in zip(res[tg][:5], res[torch][:5]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    assert res[tg][5] == res[torch][5] == 2
    assert res[tg, "warn"] == res[torch, "warn"]


def test_compiled_lu_matches_eager_and_raises_as_eager():
    a = R.standard_normal((2, 4, 4))
    b = R.standard_normal((2, 4, 3))

    def f(A, B):
        LU, piv, info = tg.linalg.lu_factor_ex(A)
        P, L, U = tg.linalg.lu(A)
        return tg.linalg.lu_solve(LU, piv, B).sin().sum() + (L * U[..., :1]).sum(), info, P

    c = tg.compile(f)
    outs = []
    for fn in (f, c, c):
        A = tg.tensor(a, requires_grad=True)
        B = tg.tensor(b, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y, info, P = fn(A, B)
        y.backward()
        outs.append((float(y), info.numpy(), P.numpy(), A.grad.numpy(), B.grad.numpy()))
    for o in outs[1:]:
        for got, want in zip(o, outs[0]):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    # a singular matrix: info from the compiled program's factor, and lu_factor's error
    s = tg.tensor([[[1., 2.], [2., 4.]], [[1., 0.], [0., 1.]]])
    ex = tg.compile(lambda A: tg.linalg.lu_factor_ex(A).info)
    for _ in range(2):
        assert ex(s).tolist() == [2, 0]
    strict = tg.compile(lambda A: tg.linalg.lu_factor(A).LU * 2)
    strict(tg.eye(2).expand(2, 2, 2).contiguous())
    with pytest.raises(RuntimeError, match=r"\(Batch element 0\): U\[2,2\] is zero"):
        strict(s)
