"""What gives another value at every call (random draws of Python's random module and
numpy's, clocks, os.environ, next() on an outside iterator) would be baked into a trace as
its first value: such a function runs eagerly, with a warning naming the line. A numpy
array the function reads is compared whole at every call (up to 16 MiB), so a change in
place recompiles. Each case: compiled results equal torch eager's."""
import itertools
import os
import random
import time
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def runs(make, n=3):
    """make(lib, compile) -> f(x); n calls compiled by tracegrad equal the same calls run by
    torch eager with the same Python state, and the tracegrad warnings are returned."""
    out = {}
    for lib, comp in ((tg, tg.compile), (torch, lambda f: f)):
        random.seed(0)
        np.random.seed(0)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            f = make(lib, comp)
            out[lib.__name__] = [f(lib.ones(2)).numpy() for _ in range(n)]
        if lib is tg:
            msgs = [str(x.message) for x in w if "tracegrad.compile" in str(x.message)]
    for a, b in zip(out["tracegrad"], out["torch"]):
        np.testing.assert_array_equal(a, b)
    return msgs


@pytest.mark.parametrize("what", ["random.random", "np.random.rand", "rng.normal", "random.choice"])
def test_random_draws_in_python(what):
    def make(lib, comp):
        rng = np.random.default_rng(0)

        def f(x):
            if what == "random.random":
                return x * random.random()
            if what == "np.random.rand":
                return x * float(np.random.rand())
            if what == "rng.normal":
                return x * float(rng.normal())
            return x * random.choice([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        return comp(f)
    msgs = runs(make, n=4)
    assert any("another value at every call" in m for m in msgs)


def test_clock_and_environment():
    def make(lib, comp):
        os.environ["TG_PROBE_SCALE"] = "2"

        @comp
        def f(x):
            return x * float(os.environ.get("TG_PROBE_SCALE", "1")) + (time.perf_counter_ns() > 0)

        def call(x):
            y = f(x)
            os.environ["TG_PROBE_SCALE"] = str(float(os.environ["TG_PROBE_SCALE"]) + 1)
            return y
        return call
    try:
        msgs = runs(make)
    finally:
        os.environ.pop("TG_PROBE_SCALE", None)
    assert any("os.environ" in m or "time.perf_counter_ns" in m for m in msgs)


def test_next_on_an_outside_iterator():
    def make(lib, comp):
        it = iter(range(1, 100))
        count = itertools.count(5)
        return comp(lambda x: x * next(it) + next(count))
    msgs = runs(make)
    assert any("next(" in m for m in msgs)


def test_next_on_own_iterator_still_compiles():
    lin = tg.nn.Linear(2, 2)

    @tg.compile
    def f(x):
        w = next(iter(lin.parameters()))
        return x @ w.t()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = f(tg.ones(1, 2))
    np.testing.assert_allclose(y.detach().numpy(), (tg.ones(1, 2) @ lin.weight.t()).detach().numpy())


def test_big_numpy_array_changed_in_place():
    for n in (100, 10000, 1 << 20):
        for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
            mask = np.ones(n, np.float32)
            f = comp(lambda x, m: (x * lib.tensor(m)).sum())
            g = comp(lambda x: (x * lib.tensor(mask)).sum())
            x = lib.ones(n)
            assert float(f(x, mask)) == n and float(g(x)) == n
            mask[:] = 2
            assert float(f(x, mask)) == 2 * n, (lib.__name__, n)
            assert float(g(x)) == 2 * n, (lib.__name__, n)
