"""Views and in-place ops where tracegrad differed from torch, found by the view fuzzer
(tests/test_autograd_view_fuzz.py); each case run in both libraries and compared."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def outcome(fn, m):
    try:
        return fn(m)
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__, str(e)[:40]


# -- detach_() of a view ------------------------------------------------------------------------

DETACH_CASES = {
    "slice of a tensor without grad": lambda m: m.ones(3)[:2],
    "view of a leaf taken under no_grad": lambda m: _no_grad_view(m),
    "slice of a detached tensor": lambda m: m.ones(3).detach()[:2],
    "view()": lambda m: m.ones(3).view(3),
    "t()": lambda m: m.ones(3, 3).t(),
    "unbind": lambda m: m.ones(3, 3).unbind(0)[0],
    "slice of .data": lambda m: m.ones(3, requires_grad=True).data[:2],
    "inference_mode view": lambda m: _inference_view(m),
    "detach() (no view)": lambda m: m.ones(3, requires_grad=True).detach(),
}


def _no_grad_view(m):
    x = m.ones(3, requires_grad=True)
    with m.no_grad():
        return x[:2]


def _inference_view(m):
    with m.inference_mode():
        return m.ones(3)[:2]


@pytest.mark.parametrize("case", list(DETACH_CASES))
def test_detach_in_place_of_any_view_raises_as_torchs(case):
    """torch refuses detach_() of every view, also of one whose base needs no grad (tracegrad
    refused it only where the base required grad); an inference-mode view is no view to it."""
    def run(m):
        v = DETACH_CASES[case](m)
        v.detach_()
        return "ok", v.requires_grad, v.is_leaf
    assert outcome(run, tg) == outcome(run, torch)


# -- a view whose base was detached in place, then written --------------------------------------

def test_view_of_a_base_detached_in_place_then_written_keeps_a_node():
    """torch makes a view's node again after its base changed, also where the base no longer
    requires grad: AsStridedBackward0 to nowhere. tracegrad dropped the node, so the view became
    a leaf that requires grad, and a backward filled its .grad."""
    got = []
    for m in (tg, torch):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=m.float64, requires_grad=True)
        b = x.clone()
        v = b.unsqueeze(0).expand(2, 3, 2)
        w = b[1]
        b.detach_()
        b[0] = 0.3
        row = [v.requires_grad, v.is_leaf, v.grad_fn.name(), [f is None for f, _ in v.grad_fn.next_functions],
               w.is_leaf, w.grad_fn.name()]
        (w * 2).sum().backward()
        row += [x.grad is None, w._grad if m is tg else w._base.grad]     # (w.grad warns: no leaf)
        got.append(row)
    assert got[0] == got[1]
    assert got[1][1] is False and got[1][-1] is None


# -- hooks: the order after an in-place op through a view ----------------------------------------

@pytest.mark.parametrize("write", ["through a view", "into the tensor", "both"])
def test_hooks_run_in_torchs_order_after_an_in_place_op_through_a_view(write):
    """An in-place op on a view gives the base a CopySlices node; the op's node read a node made
    after it (the view's old value as_strided of the old base), so the backward ran the graph
    in walk order, not torch's: a tensor hook made earlier ran first."""
    logs = []
    for m in (tg, torch):
        x = m.ones(5, dtype=m.float64, requires_grad=True)
        y = m.ones(5, 5, dtype=m.float64, requires_grad=True)
        log = []
        p1 = y * 2
        p2 = x.sum(0)
        p2.register_hook(lambda g: log.append(("p2", g.item())))
        p3 = p1.flatten()
        if write != "through a view":
            p1[0] = 0.3
        if write != "into the tensor":
            p3.clamp_(0.6, 1.2)
        p1.register_hook(lambda g: log.append(("p1", g.sum().item())))
        loss = (p1 * 1).sin().sum() + (p2 * 2).sin().sum()
        loss.backward()
        logs.append((log, y.grad.tolist(), x.grad.tolist()))
    assert logs[0][0][0][0] == "p1"
    np.testing.assert_allclose(np.array([v for _, v in logs[0][0]]), np.array([v for _, v in logs[1][0]]), rtol=1e-12)
    assert [k for k, _ in logs[0][0]] == [k for k, _ in logs[1][0]]
    np.testing.assert_allclose(logs[0][1], logs[1][1], rtol=1e-12)
    np.testing.assert_allclose(logs[0][2], logs[1][2], rtol=1e-12)


# -- retain_grad(), then detach_() -------------------------------------------------------------

def test_retained_grad_of_a_tensor_detached_in_place_since_is_filled():
    """torch's retains_grad hook stays on the node the tensor had: a backward through it fills
    .grad after detach_(), and later gradients add to it."""
    got = []
    for m in (tg, torch):
        y = m.ones(3, requires_grad=True)
        p = y * 2
        p.retain_grad()
        q = p * 3
        p.detach_()
        row = [p.retains_grad, p.is_leaf, p.requires_grad]
        q.sum().backward()
        row.append(p.grad.tolist())
        p.requires_grad_()
        (p * 2).sum().backward()
        row.append(p.grad.tolist())
        got.append(row)
    assert got[0] == got[1] == [True, True, False, [3.0] * 3, [5.0] * 3]


# -- requires_grad_() of a view whose base changed ----------------------------------------------

def test_requires_grad_of_a_split_view_after_its_base_changed_raises_later_as_torchs():
    """torch's requires_grad_ reads the node as set: on an output of split whose base changed
    under no_grad, it does not raise; the graph that reads the view's node does."""
    got = []
    for m in (tg, torch):
        y = m.ones(6, requires_grad=True)
        b = y * 2
        c = b.chunk(2)[0]
        with m.no_grad():
            b.add_(1)
        c.requires_grad_()
        with pytest.raises(RuntimeError, match="Output 0 of Split is a view and its base"):
            c * 2
        got.append(c.requires_grad)
    assert got == [True, True]


# -- grad_fn names -------------------------------------------------------------------------------

RESHAPES = {
    "contiguous": lambda a: a.reshape(-1),
    "strided, viewable": lambda a: a[..., ::2].reshape(-1),
    "strided, same shape": lambda a: a[..., ::2].reshape(2, 3, 2),
    "transposed, copied": lambda a: a.transpose(0, 1).reshape(3, 8),
    "view of strided": lambda a: a[..., ::2].view(12),
    "flatten contiguous": lambda a: a.flatten(),
    "flatten strided": lambda a: a[..., ::2].flatten(),
    "flatten transposed": lambda a: a.transpose(0, 1).flatten(),
    "unflatten strided": lambda a: a[..., ::2].unflatten(0, (1, 2)),
    "reshape_as strided": lambda a: a[..., ::2].reshape_as(a[..., ::2]),
    "ravel strided": lambda a: a[..., ::2].ravel(),
    "size-1 column": lambda a: a[:, :1].reshape(2, 4),
    "one row": lambda a: a[:1].reshape(-1),
    "a column's elements": lambda a: a[..., 0].reshape(-1),
}


@pytest.mark.parametrize("case", list(RESHAPES))
def test_reshape_grad_fn_names_are_torchs(case):
    """torch's reshape views a strided tensor through _reshape_alias (ReshapeAliasBackward0);
    a contiguous one through view (ViewBackward0); one it must copy is UnsafeViewBackward0."""
    got = []
    for m in (tg, torch):
        x = m.tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
        r = RESHAPES[case](x * 1)
        r.sum().backward()
        got.append((r.grad_fn.name(), r._base is not None, tuple(r.shape), x.grad.tolist()))
    assert got[0] == got[1]


@pytest.mark.parametrize("key,shape", [(k, s) for k in ("...", "()", ":") for s in ((3, 4), (4,), ())
                                         if k != ":" or s])
@pytest.mark.parametrize("value", ["0.5", "2", "True", "tensor(0.5)", "float64 tensor(0.5)", "row"])
def test_setitem_of_the_whole_tensor_names_torchs_node(key, value, shape):
    """x[...] = v writes through torch's copy_to: fill_ from a 0-dim value (a number is one)
    where x has dims, else copy_: FillBackward3 or CopyBackwards (a 0-dim x's was FillBackward3,
    a 0-dim tensor value's CopyBackwards)."""
    got = []
    for m in (tg, torch):
        x = m.ones(3, 4, dtype=m.float64, requires_grad=True)
        t = (x * 2)[0] * 1 if shape == (4,) else (x * 2).sum() if shape == () else x * 2
        k = {"...": ..., "()": (), ":": slice(None)}[key]
        v = {"0.5": 0.5, "2": 2, "True": True, "tensor(0.5)": m.tensor(0.5), "float64 tensor(0.5)":
             m.tensor(0.5, dtype=m.float64, requires_grad=True), "row": m.full(shape[-1:], 0.25)}[value]
        t[k] = v
        t.sum().backward()
        got.append((t.grad_fn.name(), t._version, t.tolist(), x.grad.tolist(),
                    None if not isinstance(v, (tg.Tensor, torch.Tensor)) or v.grad is None else v.grad.tolist()))
    assert got[0] == got[1]
