"""Memory layout, views and overlapping writes: torch against eager tracegrad against
`tracegrad.compile`. Each test names the wrong number (or the missing error) it was written for."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _outcome(fn, args):
    """(outputs, arguments after the call) as arrays, or the exception raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            outs = fn(*args)
        except Exception as e:  # noqa: BLE001
            return e
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [o.detach().numpy().copy() for o in outs], [a.detach().numpy().copy() for a in args]


def _three(f, make_args):
    """f(lib, *args) run by torch, eager tracegrad and compiled tracegrad on fresh arguments."""
    return (_outcome(lambda *a: f(torch, *a), make_args(torch)),
            _outcome(lambda *a: f(tg, *a), make_args(tg)),
            _outcome(tg.compile(lambda *a: f(tg, *a)), make_args(tg)))


def _assert_same(f, make_args):
    """Eager tracegrad gives torch's numbers (or raises torch's error type and message), and the
    compiled call gives eager's numbers bit for bit (or the same error)."""
    t, e, c = _three(f, make_args)
    if isinstance(t, Exception):
        for got in (e, c):
            assert isinstance(got, type(t)), f"{type(t).__name__}: {t} expected, got {got!r}"
            assert str(got).split("\n")[0] == str(t).split("\n")[0]
        return
    for got in (e, c):
        assert not isinstance(got, Exception), f"torch gives a result, tracegrad raised {got!r}"
    for a, b, cc in zip(t[0] + t[1], e[0] + e[1], c[0] + c[1]):
        np.testing.assert_allclose(b, a, rtol=1e-12)
        np.testing.assert_array_equal(cc, b)


# -- errors of the kernels' checks, compiled as eager ---------------------------------------------

@pytest.mark.parametrize("source_arg", [False, True])
def test_masked_scatter_with_too_few_source_elements_raises_torchs_error_compiled(source_arg):
    """The mask holds 3 ones, source 2 elements: torch and eager raise RuntimeError "Number of
    elements of source < number of ones in mask"; the compiled call raised numpy's IndexError
    "index 2 is out of bounds for axis 0 with size 2" from its gather."""
    if source_arg:
        def f(lib, x, s):
            return x.masked_scatter(x > 2, s)
        make = lambda lib: (lib.tensor(np.arange(6.)), lib.tensor([1., 2.], dtype=lib.float64))
    else:
        def f(lib, x):
            return x.masked_scatter(x > 2, lib.tensor([1., 2.], dtype=lib.float64))
        make = lambda lib: (lib.tensor(np.arange(6.)),)
    t, e, c = _three(f, make)
    assert isinstance(t, RuntimeError) and "Number of elements of source < number of ones in mask" in str(t)
    _assert_same(f, make)
    # one compiled function: a call with enough source elements, then one with too few
    cf = tg.compile(lambda x, s: x.masked_scatter(x > 2, s))
    x = np.arange(6.)
    want = torch.tensor(x).masked_scatter(torch.tensor(x) > 2, torch.tensor([1., 2., 3.], dtype=torch.float64))
    assert cf(tg.tensor(x), tg.tensor([1., 2., 3.], dtype=tg.float64)).tolist() == want.tolist()
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        cf(tg.tensor(x), tg.tensor([1., 2.], dtype=tg.float64))


@pytest.mark.parametrize("bound", [1000, -129, 127, 5])
def test_clamp_number_beside_a_0_dim_tensor_bound_converts_it_with_torchs_overflow_check(bound):
    """clamp(int8, min=-1, max=tensor(1000)): torch's parser takes the 0-dim tensor as a Number
    beside the Number -1 and raises "value cannot be converted to type int8_t without overflow";
    tracegrad cast it to int8, wrapping 1000 to -24, and clamped every element to -24. (With
    tensors alone torch wraps, as tracegrad does.)"""
    def f(lib, x):
        return lib.clamp(x, min=-1, max=lib.tensor(bound)), lib.clamp(x, min=lib.tensor(bound)), \
            x.clamp(min=lib.tensor(-bound), max=lib.tensor(bound))
    _assert_same(f, lambda lib: (lib.tensor([-100, 0, 100], dtype=lib.int8),))

    def g(lib, x, m):            # the bound an argument: its value is not known to the trace
        return lib.clamp(x, min=-1, max=m)
    _assert_same(g, lambda lib: (lib.tensor([-100, 0, 100], dtype=lib.int8), lib.tensor(bound)))

    def h(lib, x):
        x.clamp_(min=-1, max=lib.tensor(bound))
        return x
    _assert_same(h, lambda lib: (lib.tensor([-100, 0, 100], dtype=lib.int8),))
