"""Python effects a trace would run once, reached in ways the first side-effect reader missed.

- A generator the function makes itself, seeded from the operating system's entropy
  (np.random.default_rng(), random.Random(), numpy's bit generators), secrets, uuid4 and the
  local time give another value at every eager call, as under torch.compile (which runs such
  Python at every call). A trace would keep the first value.
- A user class made inside the function whose __init__ appends to a registry; a property
  getter that counts its reads; operator.setitem / operator.iadd on a list the call does not
  own; exec. Eagerly each runs at every call.

Each now runs eagerly, with the side-effect warning naming the line.
"""
import collections
import dataclasses
import operator
import random
import secrets
import time
import uuid
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _from_default_rng(x):
    return x * float(np.random.default_rng().random())


def _from_random_instance(x):
    return x * random.Random().random()


def _from_bit_generator(x):
    return x * float(np.random.Generator(np.random.PCG64()).random())


def _from_random_state(x):
    return x * float(np.random.RandomState().rand())


def _from_uuid4(x):
    return x + float(uuid.uuid4().int % 1000003)


def _from_secrets(x):
    return x + float(secrets.randbits(40))


def _from_system_random(x):
    return x * random.SystemRandom().random()


def four_calls(fn):
    """The distinct first elements of four calls of fn compiled, and the side-effect warnings."""
    f = tg.compile(fn)
    x = tg.ones(3, dtype=tg.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = {f(x)[0].item() for _ in range(4)}
    return values, [str(w.message) for w in caught if "side effect" in str(w.message)]


@pytest.mark.parametrize("fn", [_from_default_rng, _from_random_instance, _from_bit_generator, _from_random_state,
                                _from_uuid4, _from_secrets, _from_system_random])
def test_fresh_entropy_is_read_at_every_call(fn):
    values, texts = four_calls(fn)
    # four draws of 2**53 (or 2**40, 10**6) values: equal ones would mean a value kept from a trace
    assert len(values) >= 3, values
    assert texts and __file__.rstrip("c") in texts[0] and fn.__name__ in texts[0]


def test_local_time_read_at_every_call():
    # time.localtime() changes once a second: the compiled function reads it at every call
    f = tg.compile(lambda x: x + float(time.localtime().tm_sec + 60 * time.localtime().tm_min))
    x = tg.zeros(1, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = f(x).item()
        time.sleep(1.05)
        second = f(x).item()
        eager = float(time.localtime().tm_sec + 60 * time.localtime().tm_min)
    assert first != second
    assert abs(second - eager) <= 1 or abs(second - eager) >= 3598      # (a minute's or an hour's turn)


def test_seeded_generator_traces_with_eagers_values():
    # a generator given a seed gives the same numbers at every call: it traces (no warning; a
    # random program built from a seed inside a compiled function), with eager's values
    def fn(x):
        return x * float(np.random.default_rng(7).random()) + random.Random(3).random()
    f = tg.compile(fn)
    x = tg.ones(2, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [f(x)[0].item() for _ in range(2)]
    assert got == [fn(x)[0].item()] * 2


REGISTRY = []


class _Registered:
    def __init__(self, tag):
        REGISTRY.append(tag)
        self.tag = tag          # (the new object's own attribute: no effect)


class _Counting:
    def __init__(self):
        self._reads = 0

    @property
    def reads(self):
        self._reads += 1
        return self._reads


_COUNTER = _Counting()
_LOG = []
_QUEUE = collections.deque()


def _makes_registered(x):
    _Registered("made")
    return x * 2


def _reads_counting_property(x):
    return x * _COUNTER.reads


def _operator_setitem(x):
    operator.setitem(_LOG, slice(0, 0), ["item"])
    return x + 1


def _operator_iadd(x):
    operator.iadd(_LOG, ["iadd"])
    return x + 1


def _exec_appends(x):
    exec("_LOG.append('exec')")
    return x + 1


@pytest.mark.parametrize("fn,count", [
    (_makes_registered, lambda: len(REGISTRY)),
    (_reads_counting_property, lambda: _COUNTER._reads),
    (_operator_setitem, lambda: _LOG.count("item")),
    (_operator_iadd, lambda: _LOG.count("iadd")),
    (_exec_appends, lambda: _LOG.count("exec")),
])
def test_effect_runs_at_every_call_as_eagerly(fn, count):
    x = tg.ones(3, dtype=tg.float64)
    before = count()
    eager = [fn(x) for _ in range(3)]
    assert count() - before == 3
    f = tg.compile(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = count()
        got = [f(x) for _ in range(3)]
    assert count() - before == 3                  # once per call: not once (a trace), not twice
    if fn is _reads_counting_property:            # the value read changes: 4, 5, 6 as eager's were 1, 2, 3
        assert [g[0].item() for g in got] == [e[0].item() + 3 for e in eager]
    else:
        assert all(np.array_equal(g.numpy(), e.numpy()) for g, e in zip(got, eager))
    texts = [str(w.message) for w in caught if "side effect" in str(w.message)]
    assert len(texts) == 1 and __file__.rstrip("c") in texts[0]


class _Plain:
    def __init__(self, scale):
        self.scale = scale
        self.parts = [scale]        # its own list: no effect

    @property
    def double(self):
        return self.scale * 2


_PLAIN = _Plain(1.5)


def test_pure_class_and_property_still_trace():
    # making an object that writes only itself, and a getter that only reads, trace whole
    def fn(x):
        return x * _Plain(3.0).scale + _PLAIN.double
    f = tg.compile(fn)
    x = tg.ones(2, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = f(x)
        got = f(x)
    assert np.array_equal(got.numpy(), fn(x).numpy())     # (a fallback would have warned: an error here)


def test_a_new_objects_own_lists_are_no_effect():
    # a dataclass's __post_init__ appending to its own field, an __init__ calling a method of the
    # new object that appends to the object's own list: they write only the object the call made
    @dataclasses.dataclass
    class Cfg:
        a: float = 2.0
        b: list = dataclasses.field(default_factory=list)

        def __post_init__(self):
            self.b.append(self.a)

    class Acc:
        def __init__(self, s):
            self.items = []
            self.reset(s)

        def reset(self, s):
            self.s = s
            self.items.append(s)

    def fn(x):
        c = Cfg()
        a = Acc(c.b[0])
        return x * a.items[-1] + a.s
    f = tg.compile(fn)
    x = tg.ones(2, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [f(x), f(x)]
    assert all(np.array_equal(g.numpy(), fn(x).numpy()) for g in got)
