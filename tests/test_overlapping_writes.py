"""Writes into tensors whose elements share memory (expanded tensors, overlapping unfold
windows): torch's result where it is defined, torch's error where it is not, eager and compiled.

torch applies an in-place op to an overlapping unfold window by window (`arange(6).unfold(0, 3,
1).mul_(2)` multiplies a shared element once per window: [0, 4, 16, 24, 16, 10]); such a result
depends on the order of the writes, so tracegrad raises torch's error for expanded tensors there
instead of a different number."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


def _both(fn):
    """fn(lib) under torch and tracegrad: (base list, None) or (None, the error's message)."""
    out = []
    for lib in (torch, tg):
        try:
            out.append((fn(lib), None))
        except RuntimeError as e:
            out.append((None, str(e)))
    return out


@pytest.mark.parametrize("write", ["fill_(2.5)", "zero_()", "fill_(-0.0)"])
@pytest.mark.parametrize("view", ["expand(3)", "expand(2, 3)"])
def test_a_number_filled_into_an_expanded_tensor_writes_the_base_as_torch(view, write):
    def fn(lib):
        x = lib.full((1,), -0.5, dtype=lib.float64)
        eval(f"x.{view}.{write}")
        return np.signbit(x.numpy()).tolist(), x.tolist()
    (t, _), (g, _) = _both(fn)
    assert g == t


@pytest.mark.parametrize("write", ["fill_(lib.tensor(7.))", "copy_(lib.ones(3))", "uniform_()", "add_(1)", "relu_()",
                                   "__setitem__(slice(None), 4.)", "exp_()"])
def test_other_writes_into_an_expanded_tensor_raise_torchs_error(write):
    def fn(lib):
        x = lib.full((1,), -0.5)
        eval(f"x.expand(3).{write}")
        return x.tolist()
    (_, te), (_, ge) = _both(fn)
    assert te is not None and OVERLAP in te
    assert ge is not None and OVERLAP in ge


@pytest.mark.parametrize("write", ["zero_()", "fill_(3.)", "__setitem__(0, 5.)", "__setitem__((slice(None), 1), 9.)",
                                   "__setitem__(slice(None), 1.)"])
@pytest.mark.parametrize("make", ["arange(6.)", "arange(12.).reshape(3, 4).t()"])
def test_writes_that_torch_defines_through_overlapping_windows(make, write):
    def fn(lib):
        x = eval(f"lib.{make}").clone() if "t()" not in make else eval(f"lib.{make}")
        eval(f"x.unfold(0, 2, 1).{write}")
        return x.tolist()
    (t, te), (g, ge) = _both(fn)
    assert te is None and ge is None and g == t


@pytest.mark.parametrize("write", ["mul_(2)", "add_(1)", "exp_()", "copy_(lib.ones(4, 3))",
                                   "__setitem__(slice(None), lib.arange(3.))"])
def test_order_dependent_writes_through_overlapping_windows_raise(write):
    x = tg.arange(6.)
    v = x.unfold(0, 3, 1)
    lib = tg  # noqa: F841  (read by the eval)
    with pytest.raises(RuntimeError, match=OVERLAP):
        eval(f"v.{write}")
    assert x.tolist() == [0, 1, 2, 3, 4, 5] and x._version == 0


@pytest.mark.parametrize("step", [2, 3])
def test_writes_through_windows_that_do_not_overlap_are_torchs(step):
    def fn(lib):
        x = lib.arange(7.)
        v = x.unfold(0, 2, step)
        v.mul_(3)
        v[..., 0].add_(1)
        return x.tolist()
    (t, _), (g, _) = _both(fn)
    assert g == t


def _unfold_mul(x):
    y = x * 1
    y.unfold(0, 3, 1).mul_(2)
    return y


def _expand_add(x):
    y = x * 1
    y.expand(2, 6).add_(1)
    return y


def _expand_row(x):
    y = x * 1
    y.expand(2, 6)[0].add_(1)
    return y


def _disjoint_windows(x):
    y = x * 1
    y.unfold(0, 2, 2).mul_(3)
    return y


@pytest.mark.parametrize("fn", [_unfold_mul, _expand_add, _expand_row, _disjoint_windows])
def test_compiled_writes_through_shared_memory_are_eagers(fn):
    """Inside a compiled function the write was rewritten out of place, as if every element
    were written once: a number where eager raises. It falls back now, so it is eager's."""
    x = tg.arange(6.)
    try:
        want, err = fn(x).tolist(), None
    except RuntimeError as e:
        want, err = None, str(e)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf = tg.compile(fn)
        for _ in range(2):
            if err is not None:
                with pytest.raises(RuntimeError, match=OVERLAP):
                    cf(x)
            else:
                assert cf(x).tolist() == want
    assert x.tolist() == list(range(6))
