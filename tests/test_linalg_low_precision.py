"""Linear algebra of float16 and bfloat16 tensors: refused as torch refuses it (its LAPACK kernels
take float and double alone), with torch's error type and message. (bfloat16 was computed in
float32 and float16 raised numpy's TypeError.) matrix_exp is computed in float32 and rounded:
torch 2.13's float16 and bfloat16 matrix_exp give NaN and inf even for diag(0.01, 0.02), so the
oracle is its float32 result in the dtype."""
import warnings

import pytest
import torch

import tracegrad as tg


def A(m, dt):
    return m.tensor([[4., 1., 0.5], [1., 3., 0.2], [0.5, 0.2, 2.]]).to(getattr(m, dt))


CALLS = {
 "inv": lambda m, a: m.linalg.inv(a), "inv_ex": lambda m, a: m.linalg.inv_ex(a), "det": lambda m, a: m.linalg.det(a),
 "slogdet": lambda m, a: m.linalg.slogdet(a), "logdet": lambda m, a: m.logdet(a), "torch.det": lambda m, a: m.det(a),
 "solve": lambda m, a: m.linalg.solve(a, a), "solve_ex": lambda m, a: m.linalg.solve_ex(a, a),
 "cholesky": lambda m, a: m.linalg.cholesky(a), "cholesky_ex": lambda m, a: m.linalg.cholesky_ex(a),
 "eigh": lambda m, a: m.linalg.eigh(a), "eigvalsh": lambda m, a: m.linalg.eigvalsh(a), "svd": lambda m, a: m.linalg.svd(a),
 "svdvals": lambda m, a: m.linalg.svdvals(a), "qr": lambda m, a: m.linalg.qr(a), "pinv": lambda m, a: m.linalg.pinv(a),
 "matrix_rank": lambda m, a: m.linalg.matrix_rank(a), "matrix_norm2": lambda m, a: m.linalg.matrix_norm(a, 2),
 "matrix_norm_fro": lambda m, a: m.linalg.matrix_norm(a), "matrix_norm_nuc": lambda m, a: m.linalg.matrix_norm(a, "nuc"),
 "cond": lambda m, a: m.linalg.cond(a), "matrix_exp": lambda m, a: m.linalg.matrix_exp(a), "matrix_power": lambda m, a: m.linalg.matrix_power(a, 3),
 "matrix_power-1": lambda m, a: m.linalg.matrix_power(a, -1),
 "lu_factor": lambda m, a: m.linalg.lu_factor(a), "lu": lambda m, a: m.linalg.lu(a), "lstsq": lambda m, a: m.linalg.lstsq(a, a),
 "solve_triangular": lambda m, a: m.linalg.solve_triangular(a, a, upper=True), "cholesky_solve": lambda m, a: m.cholesky_solve(a, a),
 "cholesky_inverse": lambda m, a: m.cholesky_inverse(a), "tensorinv": lambda m, a: m.linalg.tensorinv(a, 1),
 "householder": lambda m, a: m.linalg.householder_product(a, a[:, 0]), "torch.inverse": lambda m, a: m.inverse(a),
 "torch.svd": lambda m, a: m.svd(a), "torch.qr": lambda m, a: m.qr(a), "torch.cholesky": lambda m, a: m.cholesky(a),
 "pinverse": lambda m, a: m.pinverse(a), "multi_dot": lambda m, a: m.linalg.multi_dot([a, a]), "vander": lambda m, a: m.linalg.vander(a[0]),
 "cross": lambda m, a: m.linalg.cross(a, a), "vecdot": lambda m, a: m.linalg.vecdot(a, a), "vector_norm": lambda m, a: m.linalg.vector_norm(a),
 "norm": lambda m, a: m.linalg.norm(a), "diagonal": lambda m, a: m.linalg.diagonal(a), "triangular_solve": lambda m, a: m.triangular_solve(a, a),
 "lu_solve": lambda m, a: m.linalg.lu_solve(*m.linalg.lu_factor(a.double()), a.double()).to(a.dtype),
}


def outcome(m, name, dt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            CALLS[name](m, A(m, dt))
            return "computed"
        except Exception as e:           # noqa: BLE001  (the type and message are compared)
            return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_low_precision_linalg_as_torch(name, dt):
    assert outcome(tg, name, dt) == outcome(torch, name, dt)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_matrix_exp_in_low_precision(dt):
    a = [[0.3, -1.2, 0.5], [0.7, 0.1, -0.4], [-0.2, 0.9, 0.6]]
    x = tg.tensor(a, dtype=getattr(tg, dt), requires_grad=True)
    y = tg.linalg.matrix_exp(x)
    r = torch.linalg.matrix_exp(torch.tensor(a, dtype=torch.float32)).to(getattr(torch, dt))
    assert str(y.dtype) == str(r.dtype)
    tol = 2e-3 if dt == "float16" else 1.6e-2        # an ulp of the dtype on values near 1
    assert torch.allclose(torch.tensor(y.float().tolist()), r.float(), rtol=tol, atol=tol)
    y.sum().backward()
    assert x.grad is not None and x.grad.dtype is x.dtype


def test_autocast_runs_linalg_in_float32():
    x = tg.tensor([[4., 1.], [1., 3.]]).to(tg.bfloat16)
    with tg.autocast("cpu", dtype=tg.bfloat16):
        y = tg.linalg.inv(x)
    assert y.dtype is tg.float32
