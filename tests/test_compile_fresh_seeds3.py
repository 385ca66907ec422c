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
    # where torch's loop gives [0, 0, 0]; index_put_ now runs that loop, below)
    "index_add_ from the columns before": lambda L, x: x[:, 1:].index_add_(0, L.tensor([1, 2]), x[:2, :2]),
    "index_copy_ from the columns before": lambda L, x: x[:, 1:].index_copy_(0, L.tensor([1, 2]), x[:2, :2]),
    "scatter_ from the columns before": lambda L, x: x[:, 1:].scatter_(0, L.tensor([[1, 2], [2, 3]]), x[:2, :2]),
}

# index_put_ (and a setitem by index tensors, which is one) runs torch's own loop where its values
# view what it writes (functional.sequential_index_put: one thread, no vector loop below
# GRAIN_SIZE elements): torch's result, eager and compiled (which runs the write eagerly)
_INDEX_PUT_LOOP = {
    "index_put_ from the columns before": lambda L, x: x[:, 1:].index_put_((L.tensor([0, 1]),), x[:2, :2]),
    "setitem by a tensor from the columns before":
        lambda L, x: x[:, 1:].__setitem__(L.tensor([1, 2]), x[:2, :2]),
}


@pytest.mark.parametrize("case", sorted(_INDEX_PUT_LOOP))
def test_index_put_reading_what_it_wrote_gives_torchs_loop_result(case):
    op = _INDEX_PUT_LOOP[case]
    fn, make = (lambda L, x: (op(L, x), x * 1)[1]), (lambda L: L.arange(1., 13.).reshape(4, 3))
    t = _run(fn, torch, make)
    assert not isinstance(t, Exception), t
    e, c = _eager_and_compiled(fn, make)
    assert e == t and c == t, (e, c, t)


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


# -- index_put_ counts its indices before it checks overlap (mutation fuzzer seed 12647) ------------

def test_index_put_on_a_0_dim_view_with_an_index_raises_torchs_index_error_first():
    """x[1].index_put_((i,), x): torch counts the indices first (IndexError: too many indices
    for tensor of dimension 0); tracegrad checked the value's overlap with x first and raised
    RuntimeError."""
    errors = []
    for lib in (torch, tg):
        x = lib.arange(4.)
        with pytest.raises(IndexError) as e:
            x[1].index_put_((lib.tensor([0]),), x)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


# -- in-place writes under no_grad to a view taken under no_grad (mutation fuzzer seed 13707) -------

@pytest.mark.parametrize("write", ["copy_", "fill_", "zero_", "mul_", "setitem"])
def test_write_under_no_grad_to_a_no_grad_view_whose_base_was_written_runs_as_torch(write):
    """y = x * 2 + 0.5; v = y[0] under no_grad; y.masked_fill_(...) with grad; then v written
    under no_grad: torch runs it (the view's history is not asked under no_grad) and raises
    only when v's grad_fn is read; copy_ and fill_ read v.grad_fn first and raised."""
    got = []
    for lib in (torch, tg):
        x = lib.tensor([0.3, -0.2, 0.5], requires_grad=True)
        y = x * 2 + 0.5
        with lib.no_grad():
            v = y[0]
        y.masked_fill_(lib.tensor([False, True, True]), 0.5)
        with lib.no_grad():
            {"copy_": lambda: v.copy_(lib.tensor(4.0)), "fill_": lambda: v.fill_(4.0), "zero_": lambda: v.zero_(),
             "mul_": lambda: v.mul_(4.0), "setitem": lambda: v.__setitem__(Ellipsis, 4.0)}[write]()
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
            v.grad_fn
        got.append((y.detach().numpy().tolist(), v.requires_grad))
    assert got[0] == got[1]


# -- an output that is a view taken under no_grad of a value requiring grad (seed 14788) -------------

def test_output_viewed_under_no_grad_from_a_value_requiring_grad_is_eagers():
    """s = x * 3; v = s[0:1] under no_grad; return v: torch's and eager's v requires grad (its
    base does) with no grad_fn, and once s is written in place its grad_fn raises; the
    compiled call returned a detached copy (requires_grad False), so a loss built from it
    skipped it where eager's raised. It runs eagerly now, with compile's warning."""
    def f(L, x, write):
        s = x * 3
        with L.no_grad():
            v = s[0:1]
        if write:
            s.mul_(2)
        return v

    for write in (False, True):
        x = tg.tensor([0.3, -0.2], requires_grad=True)
        with pytest.warns(UserWarning, match="view taken under no_grad"):
            c = tg.compile(lambda x: f(tg, x, write))(x)
        t = f(torch, torch.tensor([0.3, -0.2], requires_grad=True), write)
        e = f(tg, tg.tensor([0.3, -0.2], requires_grad=True), write)
        assert c.requires_grad == e.requires_grad == t.requires_grad
        assert c.tolist() == e.tolist()
        if write:
            for v in (c, e, t):
                with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
                    v.grad_fn
        else:
            assert c.grad_fn is None and e.grad_fn is None and t.grad_fn is None
