"""Automatic dynamic shapes under sizes that change call by call (0, 1, 2, large, and back to
the first): Python that branches on a size, sizes used as values, size-derived slices, views and
creations, broadcasting where a symbolic dim is 1 on some calls, reductions over a dim that
becomes empty, and the layers whose sizes follow the batch or the sequence. Each call's values
and gradients are compared with the eager function's and torch's; calls where eager raises must
raise the same error type. Each function is written once against the torch API and run with
tracegrad and with torch."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn.functional as F

SIZES = [5, 7, 0, 1, 2, 3, 64, 8, 5, 1, 0, 7]        # changing, edge sizes, and back to earlier ones
POSITIVE = [5, 7, 1, 2, 3, 64, 8, 5, 1, 7]
AT_LEAST_2 = [5, 7, 2, 3, 64, 8, 5, 2, 7]


def _np(t):
    return np.asarray(t.detach().numpy())


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in _flat(x)]
    return [o]


def _run(f, lib, arrays):
    """f(lib, *tensors) on fresh leaves -> (outputs, input grads) as numpy, or (error type,)."""
    xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = _flat(f(lib, *xs))
            loss = None
            for o in outs:
                if isinstance(o, (tg.Tensor, torch.Tensor)) and o.requires_grad:
                    s = (o * o).sum()
                    loss = s if loss is None else loss + s
            if loss is not None:
                loss.backward()
    except (RuntimeError, ValueError, IndexError, TypeError) as e:
        return (type(e).__name__,)
    vals = [_np(o) if isinstance(o, (tg.Tensor, torch.Tensor)) else o for o in outs]
    grads = [None if x.grad is None else _np(x.grad) for x in xs]
    return vals, grads


def _same(got, want, rtol, atol, what):
    if len(got) == 1 or len(want) == 1:
        assert got == want, f"{what}: {got} vs {want}"
        return
    for kind, g, w in (("value", got[0], want[0]), ("grad", got[1], want[1])):
        assert len(g) == len(w), (what, kind)
        for a, b in zip(g, w):
            if a is None or b is None:
                assert a is None and b is None, (what, kind)
            elif isinstance(a, np.ndarray):
                assert a.shape == b.shape and a.dtype == b.dtype, (what, kind, a.shape, b.shape, a.dtype, b.dtype)
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{what} {kind}")
            else:
                assert type(a) is type(b) and a == b, (what, kind, a, b)


def check(f, make, sizes, dynamic=None, rtol=1e-12, atol=1e-12, torch_rtol=1e-10):
    """Compiled f equals eager f (and torch) on every call of `sizes`, errors included."""
    cfn = tg.compile(lambda *xs: f(tg, *xs), dynamic=dynamic, cache_limit=64)
    for n in sizes:
        arrays = make(np.random.default_rng(n), n)
        got = _run(lambda lib, *xs: cfn(*xs), tg, arrays)
        eager = _run(f, tg, arrays)
        ref = _run(f, torch, arrays)
        _same(got, eager, rtol, atol, f"size {n}: compiled vs eager")
        _same(got, ref, torch_rtol, torch_rtol, f"size {n}: compiled vs torch")
    return cfn


def rows(cols=3):
    return lambda r, n: (r.standard_normal((n, cols)),)


def lastdim(lead=3):
    return lambda r, n: (r.standard_normal((lead, n)),)


def _range_loop(lib, x):
    s = x[:1] * 0
    for i in range(x.shape[0]):
        s = s + x[i:i + 1] * i
    return s


CASES = {
    # Python that branches on a size
    "if shape > 4": (lambda lib, x: x * 2 if x.shape[0] > 4 else x * 3, rows(), SIZES),
    "size % 2": (lambda lib, x: x * 2 if x.size(0) % 2 else x - 1, rows(), SIZES),
    "range(shape)": (_range_loop, rows(), POSITIVE),
    "len(x)": (lambda lib, x: x * len(x), rows(), SIZES),
    "numel == 0": (lambda lib, x: x.sum() + 1 if x.numel() == 0 else x.sum(), rows(), SIZES),
    "min(shape)": (lambda lib, x: x[:min(x.shape)], rows(), SIZES),
    # sizes used as values
    "x * n": (lambda lib, x: x * x.shape[0], rows(), SIZES),
    "x / len": (lambda lib, x: x / len(x), rows(), POSITIVE),
    "n / x": (lambda lib, x: x.shape[0] / x, rows(), POSITIVE),
    "float division": (lambda lib, x: x * (x.shape[0] / 3), rows(), SIZES),
    "attention scale": (lambda lib, x: x / math.sqrt(x.shape[-1]), lastdim(), POSITIVE),
    "x ** n": (lambda lib, x: x ** x.shape[0], rows(), [5, 7, 1, 2, 3, 8, 5, 1, 7]),
    "int(n / 3)": (lambda lib, x: x[: int(x.shape[0] / 3)], rows(), SIZES),
    "n // 3 * 3": (lambda lib, x: x[: x.shape[0] // 3 * 3].reshape(-1, 3, 3).sum(1), rows(), SIZES),
    "clamp(max=n)": (lambda lib, x: (x * 5).clamp(max=x.shape[0]), rows(), SIZES),
    "masked_fill n": (lambda lib, x: x.masked_fill(x > 0, x.shape[0]), rows(), SIZES),
    "where n": (lambda lib, x: lib.where(x > 0, x, x.shape[0] * 1.0), rows(), SIZES),
    "tensor(n)": (lambda lib, x: x * lib.tensor(x.shape[0]), rows(), SIZES),
    "tensor(shape)": (lambda lib, x: x * lib.tensor(x.shape).sum(), rows(), SIZES),
    "full fill n": (lambda lib, x: x * lib.full((3,), x.shape[0]), rows(), SIZES),
    "int tensor // n": (lambda lib, x: (x * 10).long() // x.shape[0], rows(), POSITIVE),
    "int tensor * n": (lambda lib, x: (x * 10).int() * x.shape[0], rows(), SIZES),
    "add alpha n": (lambda lib, x: x.add(x, alpha=x.shape[0]), rows(), SIZES),
    # views, reshapes and creations from sizes
    "view(n, -1)": (lambda lib, x: x.view(x.shape[0], -1), lambda r, n: (r.standard_normal((n, 3, 4)),), SIZES),
    "view(-1, n)": (lambda lib, x: x.view(-1, x.shape[1]), lambda r, n: (r.standard_normal((2, n, 4)),), SIZES),
    "reshape(2, -1)": (lambda lib, x: x.reshape(2, -1), rows(2), SIZES),
    "reshape(n // 2, -1)": (lambda lib, x: x.reshape(x.shape[0] // 2, -1), rows(), SIZES),
    "unflatten": (lambda lib, x: x.unflatten(1, (2, -1)), lambda r, n: (r.standard_normal((3, 2 * n)),), SIZES),
    "flatten": (lambda lib, x: x.flatten(), lambda r, n: (r.standard_normal((n, 3, 2)),), SIZES),
    "reshape(size[::-1])": (lambda lib, x: x.reshape(x.size()[::-1]), lambda r, n: (r.standard_normal((2, n, 3)),),
                            SIZES),
    "arange(n)": (lambda lib, x: x * lib.arange(x.shape[0]).reshape(-1, 1), rows(), SIZES),
    "linspace": (lambda lib, x: x * lib.linspace(0, 1, x.shape[0], dtype=lib.float64).reshape(-1, 1), rows(), SIZES),
    "zeros(shape)": (lambda lib, x: lib.zeros(x.shape, dtype=lib.float64) + x, rows(), SIZES),
    "new_zeros(n)": (lambda lib, x: x.new_zeros(x.shape[0]) + x.sum(1), rows(), SIZES),
    "new_ones(n + 1)": (lambda lib, x: x.new_ones(x.shape[0] + 1)[1:] * x.sum(1), rows(), SIZES),
    "ones(n, n).tril": (lambda lib, x: x @ lib.ones(x.shape[1], x.shape[1], dtype=lib.float64).tril(), lastdim(),
                        SIZES),
    "split([1, n - 1])": (lambda lib, x: x.split([1, x.shape[0] - 1]), rows(), POSITIVE),
    "split(2)": (lambda lib, x: x.split(2), rows(), SIZES),
    "chunk(3)": (lambda lib, x: x.chunk(3), rows(), SIZES),
    "chunk(n)": (lambda lib, x: x.chunk(x.shape[1]), lambda r, n: (r.standard_normal((7, n)),), POSITIVE),
    "unfold": (lambda lib, x: x.unfold(0, 3, 2), rows(), [5, 7, 3, 4, 64, 8, 5, 7]),
    "x[: n // 2]": (lambda lib, x: x[: x.shape[0] // 2], rows(), SIZES),
    "x[-2:]": (lambda lib, x: x[-2:], rows(), SIZES),
    "x[-(n // 2):]": (lambda lib, x: x[-(x.shape[0] // 2):], rows(), SIZES),
    "x[1:-1]": (lambda lib, x: x[1:-1], rows(), SIZES),
    "x[-5::3]": (lambda lib, x: x[-5::3], rows(), SIZES),
    "x[n - 1]": (lambda lib, x: x[x.shape[0] - 1], rows(), SIZES),
    "narrow(1, n - 1)": (lambda lib, x: x.narrow(0, 1, x.shape[0] - 1), rows(), POSITIVE),
    "narrow(-2, 2)": (lambda lib, x: x.narrow(0, -2, 2), rows(), [5, 7, 2, 3, 64, 8, 5, 2, 7]),
    "repeat(2, n)": (lambda lib, x: x.repeat(2, x.shape[0]), rows(), SIZES),
    "roll(n // 2)": (lambda lib, x: x.roll(x.shape[0] // 2, 0), rows(), SIZES),
    "pad(n, 0)": (lambda lib, x: F.pad(x, (x.shape[0], 0)) if lib is tg else torch.nn.functional.pad(x, (x.shape[0], 0)),
                  rows(), SIZES),
    "topk(n // 2)": (lambda lib, x: x.topk(x.shape[0] // 2, 0)[0], rows(), SIZES),
    "squeeze()": (lambda lib, x: x.squeeze() * 2, lambda r, n: (r.standard_normal((3, n, 1)),), SIZES),
    "squeeze(0)": (lambda lib, x: x.squeeze(0), rows(), SIZES),
    "expand(n, -1)": (lambda lib, x, y: x.expand(y.shape[0], -1) + y,
                      lambda r, n: (r.standard_normal((1, 3)), r.standard_normal((n, 3))), SIZES),
    "expand_as": (lambda lib, x, y: x.expand_as(y) * y, lambda r, n: (r.standard_normal((1, 3)), r.standard_normal((n, 3))),
                  SIZES),
    # broadcasting where a symbolic dim is 1 on some calls
    "n vs 1 broadcast": (lambda lib, x, y: x + y, lambda r, n: (r.standard_normal((n, 3)), r.standard_normal((4, 1, 3))),
                         [5, 7, 1, 2, 1, 3]),
    "two changing dims": (lambda lib, x, y: x * y, lambda r, n: (r.standard_normal((n, 3)),
                                                                r.standard_normal((n % 3 + 1, 1, 3))), [5, 7, 1, 2, 1, 3, 4, 8]),
    "n x 1 times 1 x n": (lambda lib, x: x.unsqueeze(1) * x.unsqueeze(0), lambda r, n: (r.standard_normal(n),), SIZES),
    "mean keepdim": (lambda lib, x: x - x.mean(0, keepdim=True), rows(), SIZES),
    "sum(-1, keepdim)": (lambda lib, x: x / x.sum(-1, keepdim=True), lastdim(), SIZES),
    # reductions over a dim that becomes empty (nan, or max's error)
    "mean over n": (lambda lib, x: x.mean(0), rows(), SIZES),
    "var over n": (lambda lib, x: x.var(0), rows(), SIZES),
    "max over n": (lambda lib, x: x.max(0)[0], rows(), SIZES),
    "amax over n": (lambda lib, x: x.amax(0), rows(), SIZES),
    "max()": (lambda lib, x: x.max(), rows(), SIZES),
    "logsumexp over n": (lambda lib, x: x.logsumexp(0), rows(), SIZES),
    "softmax over n": (lambda lib, x: x.softmax(0), rows(), SIZES),
    "norm over n": (lambda lib, x: x.norm(dim=0), rows(), POSITIVE),
    "cumsum": (lambda lib, x: x.cumsum(0), rows(), SIZES),
    # joins and products
    "cat of changing pieces": (lambda lib, x, y: lib.cat([x, y, x]), lambda r, n: (r.standard_normal((n, 3)),
                                                                                  r.standard_normal((n % 4, 3))), SIZES),
    "cat dim 1": (lambda lib, x, y: lib.cat([x, y], 1), lambda r, n: (r.standard_normal((3, n)),
                                                                       r.standard_normal((3, 2 * n))), SIZES),
    "stack": (lambda lib, x, y: lib.stack([x, y]), lambda r, n: (r.standard_normal((n, 3)), r.standard_normal((n, 3))),
              SIZES),
    "matmul inner n": (lambda lib, x, y: x @ y, lambda r, n: (r.standard_normal((3, n)), r.standard_normal((n, 4))), SIZES),
    "matmul outer n": (lambda lib, x, y: x @ y, lambda r, n: (r.standard_normal((n, 5)), r.standard_normal((5, n))), SIZES),
    "bmm": (lambda lib, x, y: x @ y, lambda r, n: (r.standard_normal((n, 2, 5)), r.standard_normal((n, 5, 3))), SIZES),
    "dot": (lambda lib, x, y: x @ y, lambda r, n: (r.standard_normal(n), r.standard_normal(n)), SIZES),
    "einsum": (lambda lib, a, b: lib.einsum("ij,jk->ik", a, b), lambda r, n: (r.standard_normal((3, n)),
                                                                             r.standard_normal((n, 2))), SIZES),
    "index_select": (lambda lib, x, i: x.index_select(0, i), lambda r, n: (r.standard_normal((6, 3)),
                                                                           r.integers(0, 6, n)), SIZES),
    "gather": (lambda lib, x, i: x.gather(1, i), lambda r, n: (r.standard_normal((n, 4)), r.integers(0, 4, (n, 2))), SIZES),
    "boolean mask": (lambda lib, x: x[x > 0], rows(), SIZES),
    "sort": (lambda lib, x: x.sort(0)[0], rows(), SIZES),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sizes_changing_call_by_call(name):
    f, make, sizes = CASES[name]
    check(f, make, sizes)


@pytest.mark.parametrize("name", ["if shape > 4", "x * n", "view(n, -1)", "mean over n", "max over n",
                                  "matmul inner n", "n vs 1 broadcast", "x[: n // 2]", "chunk(3)"])
def test_dynamic_true_from_the_first_call(name):
    f, make, sizes = CASES[name]
    check(f, make, sizes, dynamic=True)


def _tf(lib):
    return F if lib is tg else torch.nn.functional


NN = {
    "conv1d length": (lambda lib, x, w: _tf(lib).conv1d(x, w, padding=1),
                      lambda r, n: (r.standard_normal((2, 3, n)), r.standard_normal((4, 3, 3))), POSITIVE),
    "conv2d batch and height": (lambda lib, x, w: _tf(lib).conv2d(x, w, stride=2, padding=1),
                                lambda r, n: (r.standard_normal((n, 2, n + 2, 5)), r.standard_normal((3, 2, 3, 3))),
                                POSITIVE),
    "max_pool2d": (lambda lib, x: _tf(lib).max_pool2d(x, 2), lambda r, n: (r.standard_normal((2, 2, n + 1, 6)),), POSITIVE),
    "avg_pool1d ceil": (lambda lib, x: _tf(lib).avg_pool1d(x, 3, stride=2, ceil_mode=True),
                        lambda r, n: (r.standard_normal((2, 2, n + 2)),), POSITIVE),
    "adaptive_avg_pool1d": (lambda lib, x: _tf(lib).adaptive_avg_pool1d(x, 3),
                            lambda r, n: (r.standard_normal((2, 2, n + 2)),), POSITIVE),
    "interpolate nearest": (lambda lib, x: _tf(lib).interpolate(x, scale_factor=2),
                            lambda r, n: (r.standard_normal((2, 2, n)),), POSITIVE),
    "interpolate linear": (lambda lib, x: _tf(lib).interpolate(x, size=7, mode="linear"),
                           lambda r, n: (r.standard_normal((2, 2, n)),), POSITIVE),
    "pad reflect": (lambda lib, x: _tf(lib).pad(x, (1, 1), mode="reflect"),
                    lambda r, n: (r.standard_normal((1, 2, n + 2)),), POSITIVE),
    "cross_entropy batch": (lambda lib, x, y: _tf(lib).cross_entropy(x, y),
                            lambda r, n: (r.standard_normal((n, 4)), r.integers(0, 4, n)), SIZES),
    "cross_entropy sum": (lambda lib, x, y: _tf(lib).cross_entropy(x, y, reduction="sum"),
                          lambda r, n: (r.standard_normal((n, 4)), r.integers(0, 4, n)), SIZES),
    "cross_entropy ignore_index": (lambda lib, x, y: _tf(lib).cross_entropy(x, y, ignore_index=0),
                                   lambda r, n: (r.standard_normal((n, 4)), r.integers(0, 4, n)), SIZES),
    "cross_entropy sequence": (lambda lib, x, y: _tf(lib).cross_entropy(x, y, label_smoothing=0.1),
                               lambda r, n: (r.standard_normal((2, 4, n)), r.integers(0, 4, (2, n))), SIZES),
    "mse": (lambda lib, x, y: _tf(lib).mse_loss(x, y), lambda r, n: (r.standard_normal((n, 4)), r.standard_normal((n, 4))),
            SIZES),
    "layer_norm length": (lambda lib, x, w, b: _tf(lib).layer_norm(x, (x.shape[-1],), w, b),
                          lambda r, n: (r.standard_normal((3, n)), r.standard_normal(n), r.standard_normal(n)), POSITIVE),
    "layer_norm batch": (lambda lib, x, w, b: _tf(lib).layer_norm(x, (4,), w, b),
                         lambda r, n: (r.standard_normal((n, 4)), r.standard_normal(4), r.standard_normal(4)), SIZES),
    "batch_norm batch": (lambda lib, x, w, b: _tf(lib).batch_norm(x, None, None, w, b, training=True),
                         lambda r, n: (r.standard_normal((n, 3)), r.standard_normal(3), r.standard_normal(3)), AT_LEAST_2),
    "batch_norm length": (lambda lib, x, w, b: _tf(lib).batch_norm(x, None, None, w, b, training=True),
                          lambda r, n: (r.standard_normal((2, 3, n)), r.standard_normal(3), r.standard_normal(3)),
                          POSITIVE),
    "group_norm batch": (lambda lib, x: _tf(lib).group_norm(x, 2), lambda r, n: (r.standard_normal((n, 4, 3)),), POSITIVE),
    "group_norm length": (lambda lib, x: _tf(lib).group_norm(x, 2), lambda r, n: (r.standard_normal((2, 4, n)),),
                          POSITIVE),
    "attention": (lambda lib, q, k, v: (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v,
                  lambda r, n: tuple(r.standard_normal((2, n, 4)) for _ in range(3)), POSITIVE),
    "sdpa causal": (lambda lib, q, k, v: _tf(lib).scaled_dot_product_attention(q, k, v, is_causal=True),
                    lambda r, n: tuple(r.standard_normal((2, n, 4)) for _ in range(3)), POSITIVE),
    "causal mask from the length": (
        lambda lib, x: x.masked_fill(~lib.ones(x.shape[1], x.shape[1]).tril().bool(), float("-inf")).softmax(-1),
        lambda r, n: (r.standard_normal((2, n, n)),), POSITIVE),
    "padding to the longest": (
        lambda lib, a, b: lib.stack([_tf(lib).pad(s, (0, max(a.shape[0], b.shape[0]) - s.shape[0])) for s in (a, b)]),
        lambda r, n: (r.standard_normal(n), r.standard_normal(n % 3 + 2)), POSITIVE),
    "pad_sequence": (lambda lib, a, b: lib.nn.utils.rnn.pad_sequence([a, b], batch_first=True).sum(-1),
                     lambda r, n: (r.standard_normal((n, 2)), r.standard_normal((n % 3 + 1, 2))), SIZES),
    "mask from lengths": (
        lambda lib, x, lens: (x * (lib.arange(x.shape[1]).unsqueeze(0) < lens.unsqueeze(1))).sum(1) / lens,
        lambda r, n: (r.standard_normal((3, n)), r.integers(1, n + 1, 3).astype(np.float64)), POSITIVE),
    "positions over the length": (
        lambda lib, x: x + lib.arange(x.shape[1], dtype=lib.float64)[:, None] / x.shape[1] *
        lib.exp(-math.log(1e4) * lib.arange(0, x.shape[-1], 2, dtype=lib.float64) / x.shape[-1]).repeat(2),
        lambda r, n: (r.standard_normal((2, n, 4)),), POSITIVE),
}


@pytest.mark.parametrize("name", list(NN))
def test_layers_over_changing_batch_and_length(name):
    f, make, sizes = NN[name]
    check(f, make, sizes, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("calls", [
    [((5, 3), (5, 3)), ((7, 3), (7, 3)), ((7, 3), (6, 3)), ((8, 3), (8, 3)), ((5, 3), (5, 3))],
    [((5, 3), (5, 3)), ((7, 3), (7, 3)), ((7, 3), (1, 3)), ((2, 3), (3, 3)), ((7, 3), (7, 3))],
])
def test_a_mismatch_in_a_later_call_raises_as_eager(calls):
    f = lambda lib, x, y: x + y  # noqa: E731
    cfn = tg.compile(lambda x, y: f(tg, x, y))
    for sx, sy in calls:
        r = np.random.default_rng(sx[0])
        arrays = (r.standard_normal(sx), r.standard_normal(sy))
        _same(_run(lambda lib, *xs: cfn(*xs), tg, arrays), _run(f, tg, arrays), 1e-12, 1e-12, (sx, sy))
        _same(_run(lambda lib, *xs: cfn(*xs), tg, arrays), _run(f, torch, arrays), 1e-12, 1e-12, (sx, sy))



def _flat_view(x):
    return x.view(-1)


def _merge_view(x):
    return x.view(6, 4)


def _rows_view(x):
    return x.view(x.shape[0], -1)


_T = lambda x: x.t()  # noqa: E731
_T12 = lambda x: x.transpose(1, 2)  # noqa: E731
_ALL = lambda x: x  # noqa: E731


def _pick(*index):
    return lambda x: x[index]


@pytest.mark.parametrize("dynamic", [False, None, True])
def test_a_view_of_an_argument_not_in_c_order_raises_as_eager(dynamic):
    """x.view(...) of an argument passed transposed or sliced: eager raises where the strides
    cannot take the view; the trace checked a view of an argument as if it were in C order, so
    the compiled call returned a result, and a program traced for one layout served another of
    the same memory order whose strides cannot take the view."""
    calls = [
        (_flat_view, (5, 3), _ALL),
        (_flat_view, (7, 3), _ALL),
        (_flat_view, (3, 9), _T),                                                 # raises
        (_flat_view, (18, 3), _pick(slice(None, None, 2))),                       # raises
        (_flat_view, (9, 3), _ALL),
        (_merge_view, (2, 3, 8), _pick(slice(None), slice(None), slice(0, 4))),   # dims 0 and 1 merge
        (_merge_view, (2, 5, 4), _pick(slice(None), slice(0, 3), slice(None))),   # they do not: raises
        (_merge_view, (2, 3, 8), _pick(slice(None), slice(None), slice(2, 6))),
        (_rows_view, (9, 2, 3), _T12),                                            # raises
        (_rows_view, (9, 3, 2), _ALL),
        (_rows_view, (4, 2, 3), _T12),                                            # raises
    ]
    compiled = {f: tg.compile(f, dynamic=dynamic) for f in (_flat_view, _merge_view, _rows_view)}
    raised = 0
    for f, shape, arrange in calls:
        a = np.random.default_rng(len(shape)).standard_normal(shape)
        results = []
        for g, lib in ((compiled[f], tg), (f, tg), (f, torch)):
            try:
                results.append(_np(g(arrange(lib.tensor(a))) * 2))
            except RuntimeError as e:
                results.append(type(e).__name__)
        got, eager, ref = results
        if isinstance(ref, str):
            raised += 1
            assert got == eager == ref, (f.__name__, shape, got, eager, ref)
        else:
            np.testing.assert_array_equal(got, eager)
            np.testing.assert_array_equal(got, ref)
    assert raised == 5


OVERWRITES = {
    "fill_": lambda lib, x: (x * 1).fill_(x.shape[0] * 1.0),
    "zero_": lambda lib, x: (x * 2).zero_(),
    "copy_ of a constant": lambda lib, x: (x * 2).copy_(lib.ones(x.shape, dtype=lib.float64)),
    "fill_ of inf": lambda lib, x: (x / 0).fill_(1.0) + x,
    "fill_ of a column": lambda lib, x: (lambda z: (z[:, 0].fill_(3.0), z)[1])(x * 2),
}


@pytest.mark.parametrize("name", list(OVERWRITES))
def test_an_overwritten_value_keeps_requiring_grad(name):
    """(x * 1).fill_(v), zero_() and copy_(constant) inside a compiled function: eager's result
    requires grad, its history linked with a zero gradient (torch's FillBackward2, ZeroBackward0,
    CopyBackwards); the trace wrote the constant alone, so the compiled result required no grad
    and its backward() raised where eager's gives x.grad zeros."""
    f = OVERWRITES[name]
    cfn = tg.compile(lambda x: f(tg, x), cache_limit=64)
    for n in [5, 7, 1, 2, 9, 5]:
        a = np.random.default_rng(n).standard_normal((n, 3))
        outs = []
        for g, lib in ((lambda lib, x: cfn(x), tg), (f, tg), (f, torch)):
            x = lib.tensor(a, requires_grad=True)
            y = g(lib, x)
            assert y.requires_grad
            y.sum().backward()
            outs.append((_np(y), _np(x.grad)))
        for (y, gx), (wy, wgx) in zip(outs[:1] * 2, outs[1:]):
            np.testing.assert_array_equal(y, wy)
            np.testing.assert_array_equal(gx, wgx)
