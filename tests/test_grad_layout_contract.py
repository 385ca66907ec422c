"""torch's gradient layout contract: a leaf's new .grad is laid out as the leaf where the leaf is
dense (a transposed or permuted parameter gets a transposed or permuted .grad), C-contiguous
where it is not (a slice, an expand); the gradient is taken as it is where it already obeys
that. The optimizers' state follows the parameter too. Eager, compiled and a compiled whole
training step, against torch: strides, contiguity, and that `.view(-1)` works or raises as
torch's does."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _transposed(lib):
    return (lib.arange(6, dtype=lib.float64).reshape(3, 2) / 10).t()


def _permuted(lib):
    # NHWC memory, NCHW shape: torch's channels-last layout
    return (lib.arange(48, dtype=lib.float64).reshape(2, 3, 4, 2) / 10).permute(0, 3, 1, 2)


def _sliced(lib):
    return (lib.arange(12, dtype=lib.float64).reshape(3, 4) / 10)[:, ::2]


def _expanded(lib):
    return (lib.arange(3, dtype=lib.float64).reshape(1, 3) / 10).expand(2, 3)


def _plain(lib):
    return lib.arange(6, dtype=lib.float64).reshape(2, 3) / 10


LEAVES = [_transposed, _permuted, _sliced, _expanded, _plain]
# (a leaf with dims of size 1, (3, 1).t(): torch's .grad may report other strides in those dims;
# they address no element, so no view or value depends on them)

OPS = {
    "mul": lambda lib, a: a * 2,
    "exp": lambda lib, a: a.exp(),
    "sum-dim": lambda lib, a: a.sum(-1),
    "contiguous": lambda lib, a: a.contiguous() * 3,
    "reshape": lambda lib, a: a.reshape(-1) * 2,
    "matmul": lambda lib, a: a.flatten(1) @ lib.ones(a.flatten(1).shape[1], 2, dtype=lib.float64),
}


def _leaf(make, lib):
    return make(lib).detach().requires_grad_()


def _record(g):
    try:
        g.view(-1)
        viewable = True
    except RuntimeError:
        viewable = False
    return tuple(g.stride()), g.is_contiguous(), viewable


def _check(got, want, what):
    g, t = got, want
    assert _record(g) == _record(t), (what, _record(g), _record(t))
    # (values to an ulp: exp is not correctly rounded in numpy or torch, and the two differ by a
    # last bit on some machines' vector units)
    np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=4 * np.finfo(np.float64).eps, atol=0,
                               err_msg=what)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("make", LEAVES, ids=lambda m: m.__name__.strip("_"))
def test_new_grad_is_laid_out_as_its_leaf(make, op, compiled):
    fn = OPS[op]
    a, ta = _leaf(make, tg), _leaf(make, torch)
    f = tg.compile(fn) if compiled else fn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(tg, a).sum().backward()
    fn(torch, ta).sum().backward()
    _check(a.grad, ta.grad, f"{make.__name__} {op}")
    # a second backward adds in place: the layout stays
    f(tg, a).sum().backward()
    fn(torch, ta).sum().backward()
    _check(a.grad, ta.grad, f"{make.__name__} {op}, accumulated")


@pytest.mark.parametrize("make", [_transposed, _permuted, _sliced], ids=lambda m: m.__name__.strip("_"))
def test_create_graph_grad_is_laid_out_as_its_leaf(make):
    got = []
    for lib in (tg, torch):
        a = _leaf(make, lib)
        (a * a).sum().backward(create_graph=True)
        got.append(a.grad)
        assert a.grad.requires_grad and a.grad.grad_fn is not None
    _check(got[0], got[1], make.__name__)
    assert got[0].grad_fn.name() == got[1].grad_fn.name()


def test_grad_kept_by_a_hook_is_copied_in_the_leaf_layout():
    out = []
    for lib in (tg, torch):
        a = _leaf(_transposed, lib)
        kept = []
        a.register_hook(lambda g: kept.append(g))
        (a * 2).sum().backward()
        out.append((a.grad, a.grad is kept[0]))
    _check(out[0][0], out[1][0], "hooked")
    assert out[0][1] == out[1][1] is False


def test_autograd_grad_result_keeps_the_gradient_layout():
    # autograd.grad returns the gradient as the backward made it (no layout contract there)
    got = []
    for lib in (tg, torch):
        a = _leaf(_transposed, lib)
        (g,) = lib.autograd.grad((a * 2).sum(), a)
        got.append(g)
    np.testing.assert_array_equal(got[0].numpy(), got[1].numpy())
    assert a.grad is None


OPTIMIZERS = [("SGD", dict(lr=0.1, momentum=0.9)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
              ("Adam", dict(lr=0.1, amsgrad=True)), ("AdamW", dict(lr=0.1)),
              ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)), ("Adagrad", dict(lr=0.1)),
              ("Adamax", dict(lr=0.1)), ("NAdam", dict(lr=0.1)), ("RAdam", dict(lr=0.1)), ("Adadelta", dict(lr=0.1)),
              ("Rprop", dict(lr=0.1)), ("ASGD", dict(lr=0.1))]


@pytest.mark.parametrize("mode", ["eager", "compiled loss", "compiled step"])
@pytest.mark.parametrize("name,options", OPTIMIZERS, ids=lambda v: v if isinstance(v, str) else "")
def test_training_step_grad_and_state_layout(name, options, mode):
    runs = []
    for lib in (tg, torch):
        w = _leaf(_transposed, lib)
        opt = getattr(lib.optim, name)([w], **options)
        loss_fn = (lambda x: (x @ w.t()).tanh().sum())
        if lib is tg and mode == "compiled loss":
            loss_fn = tg.compile(loss_fn)

        def step(x):
            opt.zero_grad()
            loss = loss_fn(x)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if lib is tg and mode == "compiled step" else step
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(3):
                f(lib.ones(4, 3, dtype=lib.float64) * (i + 1))
        state = {k: v for k, v in opt.state[w].items() if isinstance(v, lib.Tensor) and v.dim() > 0}
        runs.append((w, state))
    (w, st), (tw, tst) = runs
    assert _record(w.grad) == _record(tw.grad), (name, _record(w.grad), _record(tw.grad))
    # (tanh and the matmul's sums round as numpy's and torch's kernels do: float64 ulps apart)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert sorted(st) == sorted(tst)
    for k in st:
        assert tuple(st[k].stride()) == tuple(tst[k].stride()), (name, k, st[k].stride(), tst[k].stride())
