"""A compiled function that returns a view of a value it made (y.diagonal(), y[:, 1], y[:, ::2],
y.narrow(...) of y = x * 2) returned a C-contiguous array where eager tracegrad and torch return
the view's strides into y: `.stride()`, `.is_contiguous()` and whether `.view(-1)` raises
differed. Compared with eager and torch, values and gradients too."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

CASES = {
    "diagonal": lambda a: (a * 1).diagonal(),
    "diagonal-offset": lambda a: (a * 1).diagonal(1),
    "select-column": lambda a: (a * 1)[:, 1],
    "step-slice": lambda a: (a * 1)[:, ::2],
    "narrow": lambda a: (a * 1).narrow(1, 1, 2),
    "unfold": lambda a: (a * 1).unfold(1, 2, 1),
    "view-then-column": lambda a: (a * 1).view(3, 2)[:, 0],
    "squeeze-of-slice": lambda a: (a * 1)[:, :1].squeeze(1),
    "transposed-column": lambda a: (a.exp()).t()[1],
    "two-outputs": lambda a: ((a * 2)[:, 1], (a + 1)[::1, ::2]),
    "slice-of-sum": lambda a: (a @ a.t())[:, 0],
}


def _desc(r):
    if isinstance(r, tuple):
        return [_desc(v) for v in r]
    try:
        r.view(-1)
        view = True
    except RuntimeError:
        view = False
    return tuple(r.stride()), r.is_contiguous(), view, r.requires_grad


def _values(r):
    return [v.detach().numpy().copy() for v in (r if isinstance(r, tuple) else (r,))]


def _sum(r):
    return sum(v.sum() for v in r) if isinstance(r, tuple) else r.sum()


@pytest.mark.parametrize("name", list(CASES))
def test_output_view_of_an_intermediate(name):
    fn = CASES[name]
    runs = []
    for lib, comp in ((tg, True), (tg, False), (torch, False)):
        f = tg.compile(fn) if comp else fn
        out = []
        for i in range(3):
            a = (lib.arange(6, dtype=lib.float64).reshape(2, 3) / 4 + i).requires_grad_()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                r = f(a)
            _sum(r).backward()
            out.append((_desc(r), _values(r), a.grad.numpy().copy()))
        runs.append(out)
    for (dc, vc, gc), (de, ve, ge), (dt, vt, gt) in zip(*runs):
        assert dc == de == dt, (dc, de, dt)
        assert len(vc) == len(ve) == len(vt)
        for c, e, t in zip(vc, ve, vt):
            np.testing.assert_array_equal(c, e)
            np.testing.assert_allclose(e, t, rtol=1e-15)
        np.testing.assert_array_equal(gc, ge)
        np.testing.assert_allclose(ge, gt, rtol=1e-15)


def test_output_view_written_in_place_after_the_call():
    # the returned view is the caller's to write: no other output or argument shares its memory
    f = tg.compile(lambda a: ((a * 2)[:, 1], a * 3))
    a = tg.arange(6, dtype=tg.float64).reshape(2, 3)
    col, other = f(a)
    col.mul_(0)
    np.testing.assert_array_equal(other.numpy(), (np.arange(6.0).reshape(2, 3) * 3))
    np.testing.assert_array_equal(a.numpy(), np.arange(6.0).reshape(2, 3))
    assert col.stride() == (3,) and float(col.sum()) == 0.0
