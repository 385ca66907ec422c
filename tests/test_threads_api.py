"""torch.get_num_threads / set_num_threads (and the inter-op pair): scripts set them first
thing (`torch.set_num_threads(1)`), and they were AttributeErrors. They set the threads of
numpy's BLAS and of the generated code's fused groups; results do not depend on them."""
import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad import _threads


@pytest.fixture
def restore():
    before = tg.get_num_threads()
    yield
    tg.set_num_threads(before)


def test_set_num_threads_sets_the_blas_and_the_groups_threads(restore):
    assert isinstance(tg.get_num_threads(), int) and tg.get_num_threads() >= 1
    get = _threads._openblas()[0]
    for n in (1, 3, 2):
        tg.set_num_threads(n)
        assert tg.get_num_threads() == n
        if get is not None:                       # (numpy's BLAS is OpenBLAS on Linux wheels)
            assert get() == n


def test_results_do_not_depend_on_the_threads(restore):
    r = np.random.default_rng(0)
    a, b = r.standard_normal((300, 200)), r.standard_normal((200, 150))
    x = r.standard_normal((3000, 500)).astype(np.float32)
    f = tg.compile(lambda t: (t.exp() * t.sin() + 1).sum(1))    # fused groups in chunks of rows
    res = []
    for n in (1, 2, 4):
        tg.set_num_threads(n)
        res.append(((tg.tensor(a) @ tg.tensor(b)).numpy(), f(tg.tensor(x)).numpy()))
    for got in res[1:]:
        # the fused groups' chunks are tracegrad's own: the same bits at any count; OpenBLAS's
        # products are not (some machines' kernels split the sums by thread): to the rounding of a
        # 200-term sum
        np.testing.assert_allclose(got[0], res[0][0], rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(got[1], res[0][1])


@pytest.mark.parametrize("value", [0, -1, "a", 2.5, True])
@pytest.mark.parametrize("name", ["set_num_threads", "set_num_interop_threads"])
def test_bad_values_raise_as_torch(name, value, restore):
    res = []
    for L in (torch, tg):
        try:
            getattr(L, name)(value)
            res.append(None)
        except Exception as e:               # noqa: BLE001 - compared
            res.append((type(e).__name__, str(e)))
    assert res[0] is not None and res[1] == res[0]


def test_interop_threads():
    assert tg.get_num_interop_threads() >= 1
    tg.set_num_interop_threads(2)
    assert tg.get_num_interop_threads() == 2
