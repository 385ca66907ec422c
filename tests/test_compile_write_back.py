"""The write-back of a compiled program's writes (functionalize.write_back_function): the
generated code for one plan does what functionalize.write_back does reading the plan, entry
kind by entry kind: the same arrays adopted or copied, the same values, .grad tensors,
optimizer state and version counters."""
import importlib

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import functionalize
from tracegrad.tensor import Tensor


def _setup(case):
    """(plan, outputs, input arrays, things to hold) for one case, built afresh each time."""
    f32 = np.float32
    t = Tensor._make(np.arange(4, dtype=f32), tg.float32)
    hold = []
    if case == "data donated":
        outs = [t._data]
        plan = [("data", t, None)]
    elif case == "data adopted":
        outs = [np.full(4, 7, f32)]
        plan = [("data", t, None)]
    elif case == "data held elsewhere":
        hold.append(t._data)                       # a .data alias: its values must change in place
        outs = [np.full(4, 7, f32)]
        plan = [("data", t, None)]
    elif case == "data view":
        outs = [np.full((2, 4), 7, f32)[1]]
        plan = [("data", t, None)]
    elif case == "data another layout":
        t = Tensor._make(np.zeros((2, 2), f32), tg.float32)
        outs = [np.asfortranarray(np.full((2, 2), 7, f32))]       # an array of its own, in Fortran order
        assert outs[0].base is None and not outs[0].flags.c_contiguous
        plan = [("data", t, None)]
    elif case == "data an input":
        outs = [np.full(4, 7, f32)]
        plan = [("data", t, None)]
        return plan, outs, [outs[0]], hold, [t]
    elif case == "data bfloat16":
        t = Tensor._make(np.zeros(3, f32), tg.bfloat16)
        outs = [np.array([1.00390625, 3.3, -2.7], f32)]
        plan = [("data", t, None)]
    elif case == "data other dtype":
        outs = [np.array([1.5, 2.5, 3.5, 4.5], np.float64)]
        plan = [("data", t, None)]
    elif case == "grads":
        u = Tensor._make(np.zeros(4, f32), tg.float32)
        w = Tensor._make(np.zeros(2, np.float64), tg.float64)
        w._grad = Tensor._make(np.ones(2), tg.float64)
        shared = np.full(4, 3, f32)
        outs = [shared, shared, np.full(2, 5.0)]
        plan = [("grad", t, False), ("grad", u, False), ("grad", w, True)]
        return plan, outs, [], hold, [t, u, w]
    elif case == "grad view and cast":
        outs = [np.full((2, 4), 2, np.float64)[0]]
        plan = [("grad", t, False)]
    elif case == "grad none set state":
        t._grad = Tensor._make(np.ones(4, f32), tg.float32)
        u = Tensor._make(np.zeros(4, f32), tg.float32)
        g = Tensor._make(np.full(4, 9, f32), tg.float32)
        opt = tg.optim.SGD([t, u], lr=0.1)
        buf = Tensor._make(np.zeros(4, f32), tg.float32)
        outs = []
        plan = [("grad_none", t, None), ("grad_set", u, g), ("state", (opt, u, "momentum_buffer"), buf)]
        return plan, outs, [], hold, [t, u, opt]
    elif case == "dtype changed since":
        u = Tensor._make(np.zeros(4, f32), tg.float32)
        outs = [np.full(4, 7, f32), np.full(4, 8, f32)]
        plan = [("data", t, None), ("grad", u, False)]
        return plan, outs, [], hold, [t, u]
    else:
        raise AssertionError(case)
    return plan, outs, [], hold, [t]


CASES = ["data donated", "data adopted", "data held elsewhere", "data view", "data another layout", "data an input",
         "data bfloat16", "data other dtype", "grads", "grad view and cast", "grad none set state",
         "dtype changed since"]


def _state(targets, outs):
    """What the write-back left: per tensor its values, version, whether its storage is one
    of the outputs, and its .grad's; an optimizer's state."""
    res = []
    for x in targets:
        if isinstance(x, Tensor):
            g = x._grad
            res.append((x._data.dtype, x._data.tolist(), x._vc[0], [o is x._data for o in outs],
                        None if g is None else (g._dtype, g._data.tolist(), g._vc[0], [o is g._data for o in outs])))
        else:
            ps = x.param_groups[0]["params"]
            res.append([sorted(x.state[p]) if p in x.state else None for p in ps])
    return res


@pytest.mark.parametrize("case", CASES)
def test_generated_write_back_does_what_the_plan_says(case):
    results = []
    for generated in (False, True):
        plan, outs, inputs, hold, targets = _setup(case)
        fn = functionalize.write_back_function(plan)
        if case == "dtype changed since":
            # the plan was made for float32; the tensors are float64 now: the plan is read as it is
            for x in targets:
                x._dtype, x._data = tg.float64, x._data.astype(np.float64)
        ids = [id(a) for a in inputs]
        if generated:
            fn(tuple(outs), ids)
        else:
            functionalize.write_back(plan, tuple(outs), ids)
        results.append(_state(targets, outs))
        if case == "grad none set state":
            assert targets[0]._grad is None and targets[1]._grad is plan[1][2]
            assert targets[2].state[targets[1]]["momentum_buffer"] is plan[2][2]
    assert results[0] == results[1]
    # and what each case is there for
    r = results[1][0]
    if case == "data donated":
        assert r[2] == 1 and r[3] == [True]
    if case == "data adopted":
        assert r[3] == [True] and r[1] == [7.0] * 4
    if case in ("data held elsewhere", "data view", "data another layout", "data an input"):
        assert r[3] == [False] and np.array(r[1]).ravel().tolist() == [7.0] * 4
    if case == "data bfloat16":
        assert r[1] == [1.0, 3.296875, -2.703125]
    if case == "grads":
        assert results[1][0][4][3] == [True, True, False]       # the first takes the array ...
        assert results[1][1][4][3] == [False, False, False]     # ... the second a copy of it
        assert results[1][2][4][1:3] == ([5.0, 5.0], 1)         # accumulated in place


def test_an_output_is_adopted_after_torch_compile_ran():
    # torch.compile's frame hook, left installed by a compiled call that raised, makes a
    # Python call count its arguments twice: whether nothing else holds the old storage is
    # counted without a Python call in between
    import torch
    with pytest.raises(RuntimeError):
        torch.compile(lambda a: a.exp() + torch.ones(4), backend="eager")(torch.zeros(3))
    for generated in (False, True):
        plan, outs, inputs, hold, targets = _setup("data adopted")
        if generated:
            functionalize.write_back_function(plan)(tuple(outs), [])
        else:
            functionalize.write_back(plan, tuple(outs), [])
        assert targets[0]._data is outs[0], "generated" if generated else "read from the plan"


def test_a_write_into_an_argument_goes_to_each_calls_own():
    # ("data", None, k): the plan was made on the first call's argument; every call writes
    # into the tensor passed then, as run_program hands the call's arguments over
    first = Tensor._make(np.zeros(3, np.float32), tg.float32)
    plan = [("data", None, 0)]
    fn = functionalize.write_back_function(plan, [first])
    for _ in range(2):
        arg = Tensor._make(np.zeros(3, np.float32), tg.float32)
        out = np.full(3, 4, np.float32)
        fn((out,), [], [arg])
        assert arg._data is out and arg._vc[0] == 1
        assert first._data.tolist() == [0.0, 0.0, 0.0] and first._vc[0] == 0
    # an argument of another dtype than the plan's: the plan is read as it is, resolved to it
    arg = Tensor._make(np.zeros(3, np.float64), tg.float64)
    fn((np.full(3, 5, np.float32),), [], [arg])
    assert arg._data.dtype == np.float64 and arg._data.tolist() == [5.0] * 3 and arg._vc[0] == 1


def test_donation_and_alias_checks_take_their_short_path_only_for_distinct_allocations():
    compile_mod = importlib.import_module("tracegrad.compile")
    may_donate, distinct = compile_mod.may_donate, compile_mod._distinct
    w, b, x = np.zeros((8, 4)), np.zeros(4), np.ones((3, 4))
    assert distinct([x, w, b]) and may_donate([x, w, b], (1, 2))
    assert not distinct([w, w, b]) and not may_donate([w, w, b], (1, 2))      # one array passed twice
    assert not distinct([w[:3], w, b]) and not may_donate([w[:3], w, b], (1, 2))
    ro = np.zeros(4)
    ro.flags.writeable = False
    assert distinct([x, w, ro]) and not may_donate([x, w, ro], (1, 2))      # a donor that is read-only
    assert may_donate([x, w, ro], (1,))
