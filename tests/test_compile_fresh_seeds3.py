"""Reduced repros of what the compile fuzzers found on seeds no run had tried before
(test_compile_call_sequence_fuzz.py 6500-8000, test_compile_step_fuzz.py 1600-2200,
test_compile_mutation_fuzz.py 11000-12500, test_compile_dtype_fuzz.py 22000-24999,
test_compile_random.py 43000-43600 in float32 and float64, triton_checks.py's programs
43300-43500 under the interpreter), each compared with torch and with eager tracegrad."""
import os
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ORDER = "depend on the order in which the elements are written"


def _run(fn, lib, make):
    try:
        return fn(lib, make(lib)).numpy().tolist()
    except RuntimeError as e:
        return e


def _eager_and_compiled(fn, make):
    """fn run eagerly and through tracegrad.compile, each on fresh tensors."""
    e = _run(fn, tg, make)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf = tg.compile(lambda x: fn(tg, x))
        try:
            c = cf(make(tg)).numpy().tolist()
        except RuntimeError as err:
            c = err
    return e, c


# -- in-place ops that read an element they already wrote (mutation fuzzer seed 12240) ---------------
# x.add_(x[:, :1], alpha=3) through a layout torch does not judge (x[:, :1] is not dense): torch's
# loop writes x[i, 0] and then reads it again for x[i, 1:], so its result is its loop's, and
# changes with the row's length (its vector loop reads x[i, 0] once per row): rows of ones gave
# [2, 3, 3] with 3 columns, [2, 2, 2] with 64. Eager tracegrad gave numpy's, which reads first
# ([12, 13, 14] where torch gave [12, 40, 41] for the seed's row [3, 4, 5]): a different number,
# now torch's overlap error, eager and compiled.

_ORDER_DEPENDENT = {
    "add_ of a column it broadcasts": lambda L, x: x.add_(x[:, 0:1], alpha=3),
    "mul_ of a column it broadcasts": lambda L, x: x.mul_(x[:, :1]),
    "add_ of the columns before": lambda L, x: x[:, 1:].add_(x[:, :2]),
    "copy_ of the columns before": lambda L, x: x[:, 1:].copy_(x[:, :2]),
    "setitem of the columns before": lambda L, x: x.__setitem__((slice(None), slice(1, None)), x[:, :2]),
    "mul_ of a transposed-back view": lambda L, x: x[:, 1:].mul_(x[:, :2].t().t()),
    "add_ of the strided rows before": lambda L, x: x[1:, ::2].add_(x[:-1, ::2]),
    "copy_ of a 1-d prefix into every other element": lambda L, x: x.view(-1)[::2].copy_(x.view(-1)[:6]),
    "the seed's split, fill_, setitem, add_t": None,
    # indexed writes read their source in the index's order: any element they share may be read
    # after it is written (x[:, 1:].index_put_(([0, 1],), x[:2, :2]) gave numpy's [0, 0, 1] row
    # where torch's loop gives [0, 0, 0])
    "index_put_ from the columns before": lambda L, x: x[:, 1:].index_put_((L.tensor([0, 1]),), x[:2, :2]),
    "index_add_ from the columns before": lambda L, x: x[:, 1:].index_add_(0, L.tensor([1, 2]), x[:2, :2]),
    "index_copy_ from the columns before": lambda L, x: x[:, 1:].index_copy_(0, L.tensor([1, 2]), x[:2, :2]),
    "scatter_ from the columns before": lambda L, x: x[:, 1:].scatter_(0, L.tensor([[1, 2], [2, 3]]), x[:2, :2]),
    "setitem by a tensor from the columns before":
        lambda L, x: x[:, 1:].__setitem__(L.tensor([1, 2]), x[:2, :2]),
}


def _seed_12240(L, x):
    v = x.split(1, -2)[0]
    x.fill_(-1.5)
    with L.no_grad():
        x[L.tensor([-2, -3])] = 0.5
    x.add_(v, alpha=3.0)
    return x


@pytest.mark.parametrize("case", sorted(_ORDER_DEPENDENT))
def test_in_place_op_reading_what_it_wrote_raises_torchs_error(case):
    op = _ORDER_DEPENDENT[case]
    if op is None:
        fn, make = (lambda L, x: _seed_12240(L, x)), (lambda L: L.zeros(4, 4, 3))
    else:
        fn, make = (lambda L, x: (op(L, x), x * 1)[1]), (lambda L: L.arange(1., 13.).reshape(4, 3))
    t = _run(fn, torch, make)
    assert not isinstance(t, Exception), t           # torch runs it: its loop's result
    e, c = _eager_and_compiled(fn, make)
    for got in (e, c):
        assert isinstance(got, RuntimeError) and ORDER in str(got), got
        assert "clone()" in str(got)


def test_torchs_result_of_such_a_write_depends_on_the_row_length():
    """Why tracegrad raises rather than computing torch's order: torch's own answer changes
    with its vector loop (3 columns against 64)."""
    rows = []
    for n in (3, 64):
        x = torch.ones(2, n)
        x.add_(x[:, :1])
        rows.append(x[0, :3].tolist())
    assert rows[0] != rows[1], rows


_READ_FIRST = {
    # each shared element is read before it is written, in torch's order and in numpy's: the
    # values of an op that read its operand first, torch's too
    "add_ of the columns after": (lambda L, x: x[:, :2].add_(x[:, 1:]), lambda L: L.arange(12.).reshape(4, 3)),
    "add_ of the last column": (lambda L, x: x.add_(x[:, 2:3]), lambda L: L.arange(12.).reshape(4, 3)),
    "mul_ of the same strided view": (lambda L, x: x[:, ::2].mul_(x[:, ::2]), lambda L: L.arange(12.).reshape(4, 3)),
    "copy_ between disjoint columns": (lambda L, x: x[:, 0].copy_(x[:, 1]), lambda L: L.arange(12.).reshape(4, 3)),
    "index_add_ from a column it does not write": (
        lambda L, x: x[:, 1:].index_add_(0, L.tensor([1, 2]), x[:2, :1].expand(2, 2)),
        lambda L: L.arange(12.).reshape(4, 3)),
    "index_add_ from rows it does not write": (lambda L, x: x[:2, 1:].index_add_(0, L.tensor([0, 1]), x[2:, :2]),
                                               lambda L: L.arange(12.).reshape(4, 3)),
    "add_ of the strided rows after": (lambda L, x: x[:-1, ::2].add_(x[1:, ::2]),
                                       lambda L: L.arange(12.).reshape(4, 3)),
}


@pytest.mark.parametrize("case", sorted(_READ_FIRST))
def test_in_place_op_reading_each_shared_element_first_gives_torchs_values(case):
    op, make = _READ_FIRST[case]
    fn = lambda L, x: (op(L, x), x * 1)[1]      # noqa: E731
    t = _run(fn, torch, make)
    e, c = _eager_and_compiled(fn, make)
    assert not isinstance(t, Exception), t
    assert e == t, (e, t)
    assert c == e, (c, e)
