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


# -- writes whose source overlaps the written-to tensor --------------------------------------------

_OVERLAPS = {
    # torch raises "unsupported operation: some elements of the input tensor and the written-to
    # tensor refer to a single memory location": tracegrad wrote, eager and compiled
    "copy_ shifted": lambda L, x: x[1:].copy_(x[:-1]),
    "copy_ same memory other strides": lambda L, x: x.view(2, 3).copy_(x.view(3, 2).t()),
    "setitem slice": lambda L, x: x.__setitem__(slice(0, 3), x[1:4]),
    "setitem index": lambda L, x: x.__setitem__(L.tensor([0, 1, 2]), x[1:4]),
    "setitem index, the same elements": lambda L, x: x.__setitem__(L.tensor([0, 1]), x[0:2]),
    "setitem mask": lambda L, x: x.__setitem__(x > 3, x[:2]),
    "setitem index, 0-dim value": lambda L, x: x.__setitem__(L.tensor([1, 2]), x[0]),
    "index_put_": lambda L, x: x.index_put_((L.tensor([0, 1]),), x[2:4], accumulate=True),
    "index_put_ of itself": lambda L, x: x.index_put_((L.arange(6),), x),
    "index_copy_": lambda L, x: x.index_copy_(0, L.tensor([0, 1]), x[2:4]),
    "index_add_": lambda L, x: x.index_add_(0, L.tensor([0, 1]), x[2:4]),
    "scatter_": lambda L, x: x.scatter_(0, L.tensor([0, 1]), x[2:4]),
    "put_": lambda L, x: x.put_(L.tensor([0, 1]), x[2:4]),
    "add_": lambda L, x: x[1:].add_(x[:-1], alpha=2),
    "mul_ by an element": lambda L, x: x[0:2].mul_(x[1]),
    "addcmul_": lambda L, x: x[1:].addcmul_(x[:-1], x[1:]),
    "clamp_ with a tensor bound": lambda L, x: x[1:].clamp_(min=x[:-1]),
    "add out=": lambda L, x: L.add(x[:-1], 1, out=x[1:]),
    "cat out=": lambda L, x: L.cat([x[:2], x[2:4]], out=x[1:5]),
    # torch writes: full overlap, no overlap, a value it expands or fills with, an unchecked op
    "copy_ of itself": lambda L, x: x[1:].copy_(x[1:]),
    "add_ of itself": lambda L, x: x.add_(x),
    "setitem whole": lambda L, x: x.__setitem__(slice(None), x),
    "setitem 0-dim value": lambda L, x: x.__setitem__(slice(0, 2), x[1]),
    "setitem expanded value": lambda L, x: x.__setitem__(slice(0, 2), x[1:2]),
    "setitem index, disjoint": lambda L, x: x[:3].__setitem__(L.tensor([0, 1]), x[4:6]),
    "copy_ disjoint": lambda L, x: x[:3].copy_(x[3:]),
    "copy_ flip": lambda L, x: x.copy_(x.flip(0)),
    "masked_scatter_": lambda L, x: x[:3].masked_scatter_(L.tensor([True] * 3), x[1:4]),
    "masked_fill_": lambda L, x: x.masked_fill_(L.tensor([True] * 6), x[2]),
    "index_fill_": lambda L, x: x.index_fill_(0, L.tensor([0, 1]), x[2]),
    "add out= of itself": lambda L, x: L.add(x, 1, out=x),
    "copy_ strided source": lambda L, x: x[:3].copy_(x[::2]),
}


@pytest.mark.parametrize("case", list(_OVERLAPS))
def test_write_whose_source_overlaps_the_destination_raises_or_writes_as_torch(case):
    """x[1:].copy_(x[:-1]), x[0:3] = x[1:4], index_put_/index_copy_/scatter_/put_ of a part of x,
    x[1:].add_(x[:-1]), add(x[:-1], 1, out=x[1:]): torch raises its RuntimeError (a partial
    overlap; for index_put_ and the scatters any overlap), tracegrad wrote a result that depends
    on the kernel's order ([0, 0, 1, 2, 3, 4] for the first), eagerly and compiled."""
    op = _OVERLAPS[case]

    def f(lib, x):
        op(lib, x)
        return x * 1
    _assert_same(f, lambda lib: (lib.arange(6.),))


def test_write_through_a_strided_view_from_an_overlapping_source_runs_eagerly():
    """x[::2].copy_(x[:3]): torch does not check a layout that is not dense and copies in its
    loop's order (x[4] gets the 1 just written to x[2]), as eager does: [0, 1, 1, 3, 1, 5]; the
    program read x[:3] before writing and gave [0, 1, 1, 3, 2, 5]. It runs eagerly now."""
    def f(lib, x):
        x[::2].copy_(x[:3])
        return x * 1
    _assert_same(f, lambda lib: (lib.arange(6.),))
