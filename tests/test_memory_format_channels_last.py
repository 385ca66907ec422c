"""torch.channels_last and channels_last_3d: `to(memory_format=...)` returned the tensor as it was
(C-contiguous, so a later `.view(-1)` worked where torch's raises, and `is_contiguous()` said
True where torch says False), `empty_like`/`empty` ignored the format and `clone`/`contiguous`
refused it. Each now lays its result out NHWC (NDHWC) in memory as torch does, eager and
compiled; strides, contiguity, aliasing, errors, grad_fn names and gradients against torch."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

SHAPES = [(2, 3, 4, 2), (1, 2, 2, 4), (2, 3, 1, 1), (2, 1, 3, 3), (1, 3, 1, 1), (3, 1, 1, 2)]


def _fmt(lib, name):
    return getattr(lib, name)


def _x(lib, shape, requires_grad=False):
    n = int(np.prod(shape))
    return (lib.arange(n, dtype=lib.float64).reshape(*shape) / 7).requires_grad_(requires_grad)


MAKERS = {
    "to": lambda lib, x, f: x.to(memory_format=f),
    "to-dtype": lambda lib, x, f: x.to(lib.float32, memory_format=f),
    "contiguous": lambda lib, x, f: x.contiguous(memory_format=f),
    "clone": lambda lib, x, f: x.clone(memory_format=f),
    "clone-fn": lambda lib, x, f: lib.clone(x, memory_format=f),
    "empty_like": lambda lib, x, f: lib.empty_like(x, memory_format=f),
    "zeros_like": lambda lib, x, f: lib.zeros_like(x, memory_format=f),
    "ones_like": lambda lib, x, f: lib.ones_like(x, memory_format=f),
    "full_like": lambda lib, x, f: lib.full_like(x, 2.5, memory_format=f),
    "empty": lambda lib, x, f: lib.empty(*x.shape, memory_format=f),
}


def _layout(t):
    try:
        t.view(-1)
        view = True
    except RuntimeError:
        view = False
    return (tuple(t.stride()), t.is_contiguous(), t.is_contiguous(memory_format=_fmt(tg if isinstance(t, tg.Tensor)
                                                                                       else torch, "channels_last")),
            view)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("maker", list(MAKERS))
def test_channels_last_layout_as_torch(maker, shape):
    make = MAKERS[maker]
    got = make(tg, _x(tg, shape), tg.channels_last)
    want = make(torch, _x(torch, shape), torch.channels_last)
    assert _layout(got) == _layout(want), (_layout(got), _layout(want))
    if maker not in ("empty_like", "empty"):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("maker", ["to", "clone", "contiguous", "empty_like", "empty"])
def test_channels_last_3d_layout_as_torch(maker):
    make = MAKERS[maker]
    got = make(tg, _x(tg, (2, 3, 2, 4, 2)), tg.channels_last_3d)
    want = make(torch, _x(torch, (2, 3, 2, 4, 2)), torch.channels_last_3d)
    assert tuple(got.stride()) == tuple(want.stride())


@pytest.mark.parametrize("maker", ["to", "contiguous", "clone", "empty_like", "empty"])
@pytest.mark.parametrize("rank,name", [(3, "channels_last"), (5, "channels_last"), (4, "channels_last_3d")])
def test_wrong_rank_raises_as_torch(maker, rank, name):
    shape = (2, 3, 4, 2, 2)[:rank]
    errs = []
    for lib in (tg, torch):
        with pytest.raises(Exception) as e:
            MAKERS[maker](lib, _x(lib, shape), _fmt(lib, name))
        errs.append((type(e.value), str(e.value)))
    assert errs[0][0] is errs[1][0] is RuntimeError
    assert errs[0][1] == errs[1][1]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_aliasing_as_torch(shape):
    # to() and contiguous() give the tensor itself where it is laid out so already
    for lib in (tg, torch):
        x = _x(lib, shape)
        y = x.to(memory_format=lib.channels_last)
        assert (y.to(memory_format=lib.channels_last) is y) is True
        assert (y.contiguous(memory_format=lib.channels_last) is y) is True
        assert (y.clone(memory_format=lib.channels_last) is y) is False
    outs = []
    for lib in (tg, torch):
        x = _x(lib, shape)
        outs.append((x.to(memory_format=lib.channels_last) is x, x.contiguous(memory_format=lib.channels_last) is x,
                     x.to(memory_format=lib.contiguous_format) is x,
                     x.to(memory_format=lib.channels_last).to(memory_format=lib.contiguous_format).is_contiguous()))
    assert outs[0] == outs[1]


def test_write_through_alias_and_not_through_copy():
    for lib in (tg, torch):
        x = _x(lib, (2, 3, 4, 2))
        y = x.to(memory_format=lib.channels_last)      # a copy
        y.add_(1)
        assert float(x.sum()) != float(y.sum())
        z = y.to(memory_format=lib.channels_last)      # y itself
        z.mul_(0)
        assert float(y.abs().sum()) == 0.0


@pytest.mark.parametrize("maker,name", [("to", "ToCopyBackward0"), ("to-dtype", "ToCopyBackward0"),
                                        ("clone", "CloneBackward0"), ("contiguous", "CloneBackward0")])
def test_grad_fn_names_and_gradients(maker, name):
    grads = []
    for lib in (tg, torch):
        x = _x(lib, (2, 3, 4, 2), requires_grad=True)
        y = MAKERS[maker](lib, x, lib.channels_last)
        assert y.grad_fn.name() == name
        (y * y.detach().double().exp()).sum().backward()
        grads.append(x.grad)
    assert tuple(grads[0].stride()) == tuple(grads[1].stride())
    np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy(), rtol=1e-6)


def test_gradcheck_through_channels_last_copies():
    x = _x(tg, (2, 3, 2, 2), requires_grad=True)
    assert tg.autograd.gradcheck(lambda x: (x.to(memory_format=tg.channels_last) * x.clone(
        memory_format=tg.channels_last).sin()).permute(0, 2, 3, 1), (x,))
    assert tg.autograd.gradgradcheck(lambda x: x.contiguous(memory_format=tg.channels_last).tanh() ** 2, (x,))


def _program(lib, x):
    y = x.to(memory_format=lib.channels_last)
    z = (y * 2).relu()
    w = z.to(memory_format=lib.channels_last) + 1
    flat = x.clone(memory_format=lib.channels_last).permute(0, 2, 3, 1).reshape(-1)
    return z, y.sum((2, 3)), w, z.contiguous(), flat


def test_compiled_equals_eager_and_torch():
    runs = []
    for lib, comp in ((tg, True), (tg, False), (torch, False)):
        fn = (lambda x, lib=lib: _program(lib, x))
        f = tg.compile(fn) if comp else fn
        out = []
        for i in range(3):
            x = (_x(lib, (2, 3, 4, 2)) + i).requires_grad_()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                res = f(x)
            sum(r.sum() * (k + 1) for k, r in enumerate(res)).backward()
            out.append([(_layout(r), r.detach().numpy()) for r in res] + [(tuple(x.grad.stride()), x.grad.numpy())])
        runs.append(out)
    for step, (comp, eager, ref) in enumerate(zip(*runs)):
        for k, ((lc, c), (le, e), (lt, t)) in enumerate(zip(comp, eager, ref)):
            assert lc == le == lt, (step, k, lc, le, lt)
            np.testing.assert_array_equal(c, e)
            # (a sum over H and W of NHWC memory: torch adds in another order, float64 ulps apart)
            np.testing.assert_allclose(e, t, rtol=1e-14, atol=0)


def test_module_to_channels_last():
    shapes = []
    for lib in (tg, torch):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4), lib.nn.Linear(2, 2))
        out = m.to(memory_format=lib.channels_last)
        assert out is m
        shapes.append([(n, tuple(p.stride()), isinstance(p, lib.nn.Parameter)) for n, p in m.named_parameters()])
        with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
            lib.nn.Conv2d(3, 4, 3).to(memory_format=lib.channels_last_3d)
    assert shapes[0] == shapes[1]


def test_suggest_memory_format_cases():
    # torch's is_channels_last_strides_2d, ambiguous size-1 cases included
    cases = [lambda lib: lib.ones(2, 3, 4, 5), lambda lib: lib.ones(2, 3, 4, 5).permute(0, 2, 3, 1),
             lambda lib: lib.ones(2, 4, 5, 3).permute(0, 3, 1, 2), lambda lib: lib.ones(4, 1, 1, 1),
             lambda lib: lib.ones(1, 1, 4, 1).permute(0, 2, 1, 3), lambda lib: lib.ones(2, 1, 3, 3),
             lambda lib: lib.ones(2, 5, 1, 1).transpose(2, 3), lambda lib: lib.ones(3, 4, 5, 2)[:, :, ::2]]
    for make in cases:
        got = [make(lib).to(memory_format=lib.channels_last) is None for lib in (tg, torch)]
        x, tx = make(tg), make(torch)
        assert (x.to(memory_format=tg.channels_last) is x) == (tx.to(memory_format=torch.channels_last) is tx), \
            tuple(tx.shape)
        assert got[0] == got[1]
