"""torch's out= on the functions that take it: `tracegrad.exp(x, out=y)`, `sum(x, 0, out=y)`,
`max(x, 1, out=(values, indices))` raised TypeError (an unexpected keyword). Each function of
ops.functional.OUT_FUNCTIONS is called with out= here, against torch's same call: the result
is the out tensor itself, holding torch's values in out's dtype; resizing, autograd and
overlap behave as torch's."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.ops.functional import OUT_FUNCTIONS


def _x(lib):
    return lib.tensor([[0.25, -1.5, 2.0], [3.0, 0.5, -0.75]], dtype=lib.float64)


def _p(lib):
    return lib.tensor([[0.25, 0.5, 0.75], [0.125, 0.9, 0.3]], dtype=lib.float64)


def _m(lib):
    return lib.tensor([[2.0, 1.0, 0.5], [0.5, 3.0, 1.0], [1.0, 0.25, 4.0]], dtype=lib.float64)


def _v(lib):
    return lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64)


UNARY = ("abs absolute acos acosh arccos arccosh asin asinh arcsin arcsinh atan atanh arctan arctanh bitwise_not "
         "ceil cos cosh deg2rad rad2deg digamma erf erfc erfinv exp exp2 expm1 fix floor frac lgamma log log10 "
         "log1p log2 logical_not logit nan_to_num neg negative reciprocal round rsqrt sgn sigmoid sign signbit sin "
         "sinc sinh sqrt square tan tanh trunc").split()
# arguments in each function's domain: (0, 1) for acos/asin/atanh/erfinv/logit/log..., above 1 for acosh
_DOMAIN = {"acos": _p, "arccos": _p, "asin": _p, "arcsin": _p, "atanh": _p, "arctanh": _p, "erfinv": _p,
           "logit": _p, "log": _p, "log10": _p, "log1p": _p, "log2": _p, "sqrt": _p, "rsqrt": _p, "digamma": _p,
           "lgamma": _p, "acosh": lambda lib: _p(lib) + 1, "arccosh": lambda lib: _p(lib) + 1}

CALLS = {n: (lambda n: lambda lib: ((_DOMAIN.get(n, _x)(lib) if n != "bitwise_not" else
                                     lib.tensor([[1, 2], [3, 4]]),), {}))(n) for n in UNARY}
CALLS.update({
    "clamp": lambda lib: ((_x(lib), -1.0, 1.0), {}),
    "clip": lambda lib: ((_x(lib),), {"min": -1.0, "max": 1.0}),
    "copysign": lambda lib: ((_x(lib), _v(lib)), {}),
    "atan2": lambda lib: ((_x(lib), _v(lib)), {}),
    "arctan2": lambda lib: ((_x(lib), _v(lib)), {}),
    "float_power": lambda lib: ((_p(lib), 2.5), {}),
    "fmax": lambda lib: ((_x(lib), _v(lib)), {}),
    "fmin": lambda lib: ((_x(lib), _v(lib)), {}),
    "fmod": lambda lib: ((_x(lib), 0.7), {}),
    "heaviside": lambda lib: ((_x(lib), _v(lib)), {}),
    "hypot": lambda lib: ((_x(lib), _v(lib)), {}),
    "igamma": lambda lib: ((_p(lib), _p(lib) * 3), {}),
    "igammac": lambda lib: ((_p(lib), _p(lib) * 3), {}),
    "ldexp": lambda lib: ((_x(lib), lib.tensor([1, 2, 3])), {}),
    "lerp": lambda lib: ((_x(lib), _v(lib), 0.3), {}),
    "logaddexp": lambda lib: ((_x(lib), _v(lib)), {}),
    "logaddexp2": lambda lib: ((_x(lib), _v(lib)), {}),
    "mvlgamma": lambda lib: ((_p(lib) + 2, 2), {}),
    "polygamma": lambda lib: ((1, _p(lib)), {}),
    "pow": lambda lib: ((_x(lib), 2), {}),
    "xlogy": lambda lib: ((_x(lib), _p(lib)), {}),
    "where": lambda lib: ((_x(lib) > 0, _x(lib), _p(lib)), {}),
    "all": lambda lib: ((_x(lib) > 0, 1), {}),
    "any": lambda lib: ((_x(lib) > 0, 1), {}),
    "amax": lambda lib: ((_x(lib), 1), {}),
    "amin": lambda lib: ((_x(lib), 0), {}),
    "aminmax": lambda lib: ((_x(lib),), {"dim": 1}),
    "sum": lambda lib: ((_x(lib), 0), {}),
    "prod": lambda lib: ((_x(lib), 1), {}),
    "mean": lambda lib: ((_x(lib), 1), {}),
    "nanmean": lambda lib: ((_x(lib), 1), {}),
    "nansum": lambda lib: ((_x(lib), 1), {}),
    "std": lambda lib: ((_x(lib), 1), {}),
    "var": lambda lib: ((_x(lib), 0), {}),
    "logsumexp": lambda lib: ((_x(lib), 1), {}),
    "norm": lambda lib: ((_x(lib),), {"dim": 1}),
    "median": lambda lib: ((_x(lib), 1), {}),
    "nanmedian": lambda lib: ((_x(lib), 1), {}),
    "quantile": lambda lib: ((_x(lib), 0.3), {"dim": 1}),
    "nanquantile": lambda lib: ((_x(lib), 0.3), {"dim": 1}),
    "argmax": lambda lib: ((_x(lib), 1), {}),
    "argmin": lambda lib: ((_x(lib), 0), {}),
    "max": lambda lib: ((_x(lib), 1), {}),
    "min": lambda lib: ((_x(lib), 0), {}),
    "kthvalue": lambda lib: ((_x(lib), 2, 1), {}),
    "mode": lambda lib: ((_x(lib), 1), {}),
    "sort": lambda lib: ((_x(lib), 1), {}),
    "msort": lambda lib: ((_x(lib),), {}),
    "topk": lambda lib: ((_x(lib), 2), {}),
    "cummax": lambda lib: ((_x(lib), 1), {}),
    "cummin": lambda lib: ((_x(lib), 1), {}),
    "cumprod": lambda lib: ((_x(lib), 1), {}),
    "cumsum": lambda lib: ((_x(lib), 0), {}),
    "logcumsumexp": lambda lib: ((_x(lib), 1), {}),
    "addbmm": lambda lib: ((_m(lib), _m(lib).expand(2, 3, 3), _m(lib).expand(2, 3, 3)), {}),
    "addcdiv": lambda lib: ((_x(lib), _x(lib), _p(lib)), {"value": 0.5}),
    "addcmul": lambda lib: ((_x(lib), _x(lib), _p(lib)), {"value": 0.5}),
    "addmm": lambda lib: ((_m(lib), _m(lib), _m(lib)), {}),
    "addmv": lambda lib: ((_v(lib), _m(lib), _v(lib)), {}),
    "addr": lambda lib: ((_m(lib), _v(lib), _v(lib)), {}),
    "baddbmm": lambda lib: ((_m(lib).expand(2, 3, 3), _m(lib).expand(2, 3, 3), _m(lib).expand(2, 3, 3)), {}),
    "dot": lambda lib: ((_v(lib), _v(lib) * 2), {}),
    "vdot": lambda lib: ((_v(lib), _v(lib) * 2), {}),
    "inner": lambda lib: ((_x(lib), _x(lib)), {}),
    "outer": lambda lib: ((_v(lib), _v(lib)), {}),
    "ger": lambda lib: ((_v(lib), _v(lib)), {}),
    "mv": lambda lib: ((_m(lib), _v(lib)), {}),
    "kron": lambda lib: ((_m(lib), _v(lib)), {}),
    "matrix_power": lambda lib: ((_m(lib), 3), {}),
    "inverse": lambda lib: ((_m(lib),), {}),
    "cross": lambda lib: ((_x(lib), _x(lib).flip(1)), {"dim": 1}),
    "bucketize": lambda lib: ((_x(lib), lib.tensor([-1.0, 0.0, 1.0], dtype=lib.float64)), {}),
    "searchsorted": lambda lib: ((lib.tensor([-1.0, 0.0, 1.0], dtype=lib.float64), _x(lib)), {}),
    "column_stack": lambda lib: (([_v(lib), _v(lib)],), {}),
    "dstack": lambda lib: (([_x(lib), _x(lib)],), {}),
    "hstack": lambda lib: (([_x(lib), _x(lib)],), {}),
    "vstack": lambda lib: (([_x(lib), _x(lib)],), {}),
    "row_stack": lambda lib: (([_x(lib), _x(lib)],), {}),
    "diag": lambda lib: ((_v(lib),), {}),
    "tril": lambda lib: ((_m(lib),), {}),
    "triu": lambda lib: ((_m(lib), 1), {}),
    "gather": lambda lib: ((_x(lib), 1, lib.tensor([[0, 2], [1, 1]])), {}),
    "index_select": lambda lib: ((_x(lib), 1, lib.tensor([2, 0])), {}),
    "masked_select": lambda lib: ((_x(lib), _x(lib) > 0), {}),
    "nonzero": lambda lib: ((_x(lib) > 0,), {}),
    "take_along_dim": lambda lib: ((_x(lib), lib.tensor([[0, 2], [1, 1]]), 1), {}),
    "renorm": lambda lib: ((_x(lib), 2, 0, 1.0), {}),
    "histc": lambda lib: ((_x(lib),), {"bins": 4}),
    "logspace": lambda lib: ((0.0, 2.0, 5), {"dtype": lib.float64}),
    "linspace": lambda lib: ((0.0, 2.0, 5), {"dtype": lib.float64}),
    "arange": lambda lib: ((0.0, 2.0, 0.5), {"dtype": lib.float64}),
})
_RANDOM = {"randperm", "multinomial"}


def test_every_out_function_has_a_case():
    assert sorted(set(OUT_FUNCTIONS) - _RANDOM) == sorted(CALLS), sorted(set(OUT_FUNCTIONS) ^ set(CALLS))


def _outs_like(lib, result, dtype=None):
    if isinstance(result, tuple):
        return tuple(lib.empty(0, dtype=r.dtype) for r in result)
    return lib.empty(0, dtype=dtype or result.dtype)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_out_matches_torch(name):
    tg_fn, torch_fn = getattr(tg, name), getattr(torch, name)
    args, kwargs = CALLS[name](tg)
    targs, tkwargs = CALLS[name](torch)
    want_plain = torch_fn(*targs, **tkwargs)
    tout = _outs_like(torch, want_plain)
    want = torch_fn(*targs, **tkwargs, out=tout)
    plain = tg_fn(*args, **kwargs)
    out = _outs_like(tg, plain)
    got = tg_fn(*args, **kwargs, out=out)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        assert all(g is o for g, o in zip(got, out))
        assert type(got).__name__ == type(want).__name__.removesuffix("_out")   # (torch: return_types.max_out)
        pairs = list(zip(got, want))
    else:
        assert got is out
        pairs = [(got, want)]
    # (torch's trigamma is good to ~1e-9 relative; tracegrad's to float64's precision:
    # polygamma(1, 0.25) = pi ** 2 + 8 * Catalan = 17.197329154507110, torch 17.19732915341456)
    rtol = 1e-8 if name == "polygamma" else 1e-12
    plains = plain if isinstance(plain, tuple) else (plain,)
    for k, (g, w) in enumerate(pairs):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64), rtol=rtol,
                                   atol=1e-14, err_msg=name)
        np.testing.assert_array_equal(g.numpy(), plains[k].numpy())      # the same as without out=


@pytest.mark.parametrize("name", ["exp", "sum", "max", "sort", "addmm", "where", "cumsum"])
def test_out_refuses_autograd_as_torch(name):
    errs = []
    for lib in (tg, torch):
        args, kwargs = CALLS[name](lib)
        args = tuple(a.requires_grad_() if isinstance(a, lib.Tensor) and a.dtype == lib.float64 else a for a in args)
        plain = getattr(lib, name)(*args, **kwargs)
        with pytest.raises(RuntimeError) as e:
            getattr(lib, name)(*args, **kwargs, out=_outs_like(lib, plain))
        errs.append(str(e.value))
    assert "don't support automatic differentiation" in errs[0] and "don't support automatic differentiation" in \
        errs[1]


def test_out_resize_warns_and_casts_as_torch():
    for lib in (tg, torch):
        out = lib.zeros(5, dtype=lib.float32)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = lib.exp(_x(lib), out=out)
        assert r is out and tuple(out.shape) == (2, 3) and out.dtype == lib.float32
        assert any("was resized" in str(w.message) for w in caught)
        np.testing.assert_allclose(out.numpy(), np.exp(_x(lib).numpy()).astype(np.float32), rtol=1e-6)
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            lib.exp(_x(lib), out=lib.empty(2, 3, dtype=lib.int64))


def test_out_written_in_place_bumps_the_version_and_keeps_the_object():
    for lib in (tg, torch):
        out = lib.empty(2, 3, dtype=lib.float64)
        v = out._version
        lib.sin(_x(lib), out=out)
        assert out._version > v
        view = out[0]
        lib.cos(_x(lib), out=out)
        np.testing.assert_allclose(view.numpy(), np.cos(_x(lib).numpy()[0]))


def test_out_of_random_functions_as_torch_shapes():
    for lib in (tg, torch):
        out = lib.empty(0, dtype=lib.int64)
        assert lib.randperm(6, out=out) is out and sorted(out.tolist()) == list(range(6))
        out = lib.empty(0, dtype=lib.int64)
        probs = lib.tensor([0.2, 0.3, 0.5], dtype=lib.float64)
        assert lib.multinomial(probs, 4, replacement=True, out=out) is out and tuple(out.shape) == (4,)


def test_tensor_methods_take_no_out():
    # torch's methods have no out= (x.exp(out=y) is a TypeError there too)
    for lib in (tg, torch):
        with pytest.raises(TypeError):
            _x(lib).exp(out=lib.empty(2, 3, dtype=lib.float64))


def _spd(lib):
    return lib.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]], dtype=lib.float64)


LINALG_CALLS = {
    "cholesky": lambda lib: ((_spd(lib),), {}), "cholesky_ex": lambda lib: ((_spd(lib),), {}),
    "cross": lambda lib: ((_x(lib), _x(lib).flip(1)), {}), "det": lambda lib: ((_m(lib),), {}),
    "eigh": lambda lib: ((_spd(lib),), {}), "eigvalsh": lambda lib: ((_spd(lib),), {}),
    "inv": lambda lib: ((_m(lib),), {}), "inv_ex": lambda lib: ((_m(lib),), {}),
    "matrix_norm": lambda lib: ((_m(lib),), {}), "matrix_power": lambda lib: ((_m(lib), 2), {}),
    "matrix_rank": lambda lib: ((_m(lib),), {}), "multi_dot": lambda lib: (([_m(lib), _m(lib), _v(lib)],), {}),
    "norm": lambda lib: ((_m(lib),), {}), "pinv": lambda lib: ((_x(lib),), {}), "qr": lambda lib: ((_m(lib),), {}),
    "slogdet": lambda lib: ((_m(lib),), {}), "solve": lambda lib: ((_m(lib), _v(lib)), {}),
    "svd": lambda lib: ((_m(lib),), {}), "svdvals": lambda lib: ((_x(lib),), {}),
    "vector_norm": lambda lib: ((_x(lib), 3), {"dim": 1}),
}
SPECIAL_CALLS = {n: (lambda n: lambda lib: ((_p(lib),), {}))(n) for n in
                 "digamma entr erf erfc erfinv exp2 expit expm1 gammaln logit ndtr sinc".split()}
SPECIAL_CALLS.update({"multigammaln": lambda lib: ((_p(lib) + 2, 2), {}), "polygamma": lambda lib: ((2, _p(lib)), {}),
                      "xlog1py": lambda lib: ((_x(lib), _p(lib)), {}), "xlogy": lambda lib: ((_x(lib), _p(lib)), {}),
                      "erfcx": lambda lib: ((_x(lib),), {}), "log_ndtr": lambda lib: ((_x(lib),), {}),
                      "ndtri": lambda lib: ((_p(lib),), {}), "zeta": lambda lib: ((_p(lib) + 1, _p(lib)), {}),
                      "gammainc": lambda lib: ((_p(lib), _p(lib)), {}),
                      "gammaincc": lambda lib: ((_p(lib), _p(lib)), {}),
                      "bessel_j0": lambda lib: ((_x(lib),), {}), "airy_ai": lambda lib: ((_x(lib),), {}),
                      "legendre_polynomial_p": lambda lib: ((_x(lib), 3), {})})


@pytest.mark.parametrize("space,name", [("linalg", n) for n in sorted(LINALG_CALLS)] +
                         [("special", n) for n in sorted(SPECIAL_CALLS)])
def test_linalg_and_special_out_match_torch(space, name):
    from tracegrad.ops.functional import OUT_FUNCTIONS_LINALG, OUT_FUNCTIONS_SPECIAL
    assert name in (OUT_FUNCTIONS_LINALG if space == "linalg" else OUT_FUNCTIONS_SPECIAL)
    calls = LINALG_CALLS if space == "linalg" else SPECIAL_CALLS
    got_fn, want_fn = getattr(getattr(tg, space), name), getattr(getattr(torch, space), name)
    args, kwargs = calls[name](tg)
    targs, tkwargs = calls[name](torch)
    plain = got_fn(*args, **kwargs)
    tplain = want_fn(*targs, **tkwargs)
    out, tout = _outs_like(tg, plain), _outs_like(torch, tplain)
    got, want = got_fn(*args, **kwargs, out=out), want_fn(*targs, **tkwargs, out=tout)
    gots, wants = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    outs = out if isinstance(out, tuple) else (out,)
    assert len(gots) == len(wants) and all(g is o for g, o in zip(gots, outs))
    # (polygamma: torch's own float64 series is good to ~1e-9 relative)
    rtol = 1e-8 if name == "polygamma" else 1e-10
    # (singular and eigen vectors and qr's factors are unique up to signs: their values and the
    # reconstruction are compared instead)
    unique = {"svd": (1,), "eigh": (0,), "qr": ()}.get(name)
    if name == "qr":
        np.testing.assert_allclose((gots[0] @ gots[1]).numpy(), _m(tg).numpy(), rtol=1e-12, atol=1e-12)
    for k, (g, w) in enumerate(zip(gots, wants)):
        assert tuple(g.shape) == tuple(w.shape)
        if unique is not None and k not in unique:
            continue
        np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64), rtol=rtol, atol=1e-12)
