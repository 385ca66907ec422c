"""repr(tensor) against torch, character for character: every dtype, ranks 0 to 4, empty tensors,
int mode, scientific mode, nan/inf/-0., summarisation, line wrapping, suffixes, the default dtype
and print options."""
import numpy as np
import pytest
import torch

import tracegrad as tg

TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]


@pytest.fixture(autouse=True)
def _default_print_options():
    yield
    torch.set_printoptions(profile="default")
    tg.set_printoptions(profile="default")


def pair(a, name):
    """The same values as a torch tensor and a tracegrad tensor of dtype `name` (made from float64)."""
    with np.errstate(all="ignore"):
        r = torch.tensor(np.asarray(a, dtype=np.float64)).to(getattr(torch, name))
    g = tg.tensor(np.asarray(a, dtype=np.float64)).to(getattr(tg, name))
    return r, g


def same_repr(r, g):
    assert repr(g) == repr(r), f"\ntracegrad:\n{g!r}\ntorch:\n{r!r}"
    assert str(g) == str(r)


def sample(rng, shape, kind):
    n = int(np.prod(shape))
    if kind == "normal":
        a = rng.normal(size=n)
    elif kind == "wide":
        a = rng.normal(size=n) * 10.0 ** rng.integers(-8, 12, size=n)
    elif kind == "ints":
        a = rng.integers(-1000, 1000, size=n).astype(float)
    elif kind == "special":
        a = rng.choice([0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, 1e10, 1e-10, 3.0], size=n)
    elif kind == "big_ints":
        a = rng.integers(-10, 10, size=n) * 10.0 ** rng.integers(0, 10)
    elif kind == "tiny":
        a = rng.normal(size=n) * 1e-5
    elif kind == "zeros":
        a = rng.choice([0.0, -0.0], size=n)
    else:
        a = rng.normal(size=n) * 1e5
    return a.reshape(shape)


KINDS = ["normal", "wide", "ints", "special", "big_ints", "tiny", "zeros", "large"]


def integer_safe(a, name):
    a = np.nan_to_num(a, nan=0, posinf=100, neginf=-100)
    info = np.iinfo(getattr(np, name)) if name != "bool" else None
    return np.clip(a, info.min, info.max) if info is not None else a


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_random_tensors(name):
    rng = np.random.default_rng(TORCH_DTYPES.index(name))
    for _ in range(150):
        shape = tuple(int(s) for s in rng.integers(0, 5, size=rng.integers(0, 5)))
        a = sample(rng, shape, KINDS[rng.integers(0, len(KINDS))])
        if name not in ("float32", "float64", "float16", "bfloat16"):
            a = integer_safe(a, name)
        same_repr(*pair(a, name))


def test_special_values():
    cases = [[0.0, -0.0], [-0.0], [np.nan], [np.inf, -np.inf], [np.nan, 1.0, -np.inf], [1.0, 2.0, 3.0],
             [1.0, -2.0, 1e8], [1.0, 1e9], [0.5, 1e-5], [1e-4, 1.0], [1e-4], [123456.0], [1e8], [1.5, 1000.0],
             [1.5, 1500.0], [2.0 ** 60], [-1e-30, 1e30], [0.1, 0.25, -0.0], [100.0, 0.001], [65504.0, -65504.0]]
    for a in cases:
        for name in ("float32", "float64", "float16", "bfloat16"):
            same_repr(*pair(a, name))
            same_repr(*pair(a[0], name))
            same_repr(*pair([a, a], name))


def test_empty_tensors():
    for shape in [(0,), (2, 0), (0, 3), (0, 2, 0), (1, 0, 1, 1)]:
        for name in TORCH_DTYPES:
            same_repr(torch.zeros(shape, dtype=getattr(torch, name)), tg.zeros(shape, dtype=getattr(tg, name)))
    same_repr(torch.zeros(0, requires_grad=True), tg.zeros(0, requires_grad=True))
    same_repr(torch.zeros(0, 2, dtype=torch.float64, requires_grad=True),
              tg.zeros(0, 2, dtype=tg.float64, requires_grad=True))


def test_summarisation_and_wrapping():
    shapes = [(1001,), (2000,), (40, 40), (3, 400), (400, 3), (11, 11, 11), (2, 3, 200), (6, 7, 8, 9), (1, 1001),
              (30,), (5, 30), (100,), (2, 1, 90)]
    rng = np.random.default_rng(7)
    for shape in shapes:
        for kind in ("normal", "ints", "wide", "special"):
            for name in ("float32", "float64", "int64", "bool", "float16"):
                a = sample(rng, shape, kind)
                if name in ("int64", "bool"):
                    a = integer_safe(a, name)
                same_repr(*pair(a, name))


def test_autograd_suffixes():
    x, y = torch.tensor([1.0, 2.0], requires_grad=True), tg.tensor([1.0, 2.0], requires_grad=True)
    same_repr(x, y)
    same_repr(x * 2, y * 2)
    same_repr(x + 1, y + 1)
    same_repr((x * x).sum(), (y * y).sum())
    same_repr(x.double() * 3, y.double() * 3)
    same_repr(x.detach(), y.detach())
    same_repr(torch.tensor(2.0, requires_grad=True), tg.tensor(2.0, requires_grad=True))
    same_repr(torch.ones(2, 3, dtype=torch.float16, requires_grad=True),
              tg.ones(2, 3, dtype=tg.float16, requires_grad=True))
    with torch.no_grad(), tg.no_grad():
        same_repr(x * 2, y * 2)
    same_repr(torch.arange(40.0, requires_grad=True) * 1e-3, tg.arange(40.0, requires_grad=True) * 1e-3)
    big_r = torch.arange(1200.0, dtype=torch.float64).reshape(30, 40).requires_grad_() * 2
    big_g = tg.arange(1200.0, dtype=tg.float64).reshape(30, 40).requires_grad_() * 2
    same_repr(big_r, big_g)


def test_default_dtype_changes_the_suffixes():
    torch.set_default_dtype(torch.float64)
    tg.set_default_dtype(tg.float64)
    for name in ("float32", "float64", "float16", "int64", "bool"):
        same_repr(*pair([1.5, 2.0], name))
        same_repr(*pair([], name))
        same_repr(*pair(2.0, name))
    same_repr(torch.tensor([1.5]), tg.tensor([1.5]))
    same_repr(torch.zeros(0), tg.zeros(0))
    same_repr(torch.zeros(0, dtype=torch.float32), tg.zeros(0, dtype=tg.float32))


@pytest.mark.parametrize("options", [
    dict(precision=2), dict(precision=0), dict(precision=8), dict(sci_mode=True), dict(sci_mode=False),
    dict(linewidth=40), dict(linewidth=200), dict(threshold=5), dict(threshold=5, edgeitems=1),
    dict(threshold=5, edgeitems=0), dict(edgeitems=0), dict(profile="short"), dict(profile="full"),
    dict(precision=6, sci_mode=True, linewidth=51), dict(precision=3, sci_mode=False),
])
def test_print_options(options):
    torch.set_printoptions(**options)
    tg.set_printoptions(**options)
    rng = np.random.default_rng(len(str(options)))
    for shape in [(), (4,), (3, 5), (2, 3, 4), (12,), (1200,), (8, 150)]:
        for kind in ("normal", "wide", "ints", "special", "tiny"):
            for name in ("float32", "float64", "bfloat16", "int32"):
                a = sample(rng, shape, kind)
                if name == "int32":
                    a = integer_safe(a, name)
                same_repr(*pair(a, name))


def test_dtype_strings():
    for name in TORCH_DTYPES:
        assert str(getattr(tg, name)) == str(getattr(torch, name)) == f"torch.{name}"
    assert str(tg.float) == "torch.float32" and str(tg.long) == "torch.int64" and str(tg.double) == "torch.float64"
