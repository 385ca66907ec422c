"""A compiled function that draws from a generator it makes itself, seeded from the operating
system's entropy (np.random.default_rng(), random.Random(), numpy's bit generators), or reads
secrets, uuid4 or the local time, gets another value at every call eagerly, as under
torch.compile (which runs such Python at every call). A trace would keep the first value; these
run eagerly, with a warning naming the line."""
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


@pytest.mark.parametrize("fn", [_from_default_rng, _from_random_instance, _from_bit_generator, _from_random_state,
                                _from_uuid4, _from_secrets, _from_system_random])
def test_fresh_entropy_is_read_at_every_call(fn):
    f = tg.compile(fn)
    x = tg.ones(3, dtype=tg.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = {f(x)[0].item() for _ in range(4)}
    # four draws of 2**53 (or 2**40, 10**6) values: equal ones would mean a value kept from a trace
    assert len(values) >= 3, values
    texts = [str(w.message) for w in caught if "side effect" in str(w.message)]
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


def test_seeded_generator_gives_eagers_values():
    # judged by what is read, a seeded generator runs eagerly too: the same numbers as eager
    def fn(x):
        return x * float(np.random.default_rng(7).random())
    f = tg.compile(fn)
    x = tg.ones(2, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [f(x)[0].item() for _ in range(2)]
    assert got == [fn(x)[0].item()] * 2
