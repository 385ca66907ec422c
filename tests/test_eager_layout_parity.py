"""Result layouts against torch's, for inputs that are not C-contiguous.

A result laid out otherwise than torch's changes what a later `.view()` does: tracegrad's
`x.t().masked_fill(m, 0).view(-1)`, `x.topk(2, 1).values.view(-1)` and `layer_norm(x.t(), ...)
.view(-1)` raised "view size is not compatible" where torch's work, since torch's kernels write
these into C-contiguous tensors while the decompositions here followed the input's strides.
Kernels that build their result C-contiguous from a transposed operand (lgamma, erfinv, flip)
gave C where torch follows the operand. A compiled function must lay its results out as eager
does. `is_contiguous(memory_format=torch.channels_last)` answered the C question.
"""
import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn.functional as TF
import torch.nn.functional as F


def _ops(m, Fm):
    return {
        "masked_fill": lambda x: x.masked_fill(x > 0, 1.0),
        "layer_norm": lambda x: Fm.layer_norm(x, x.shape[-1:]),
        "topk_values": lambda x: x.topk(2, -1)[0],
        "topk_indices": lambda x: x.topk(2, 0)[1],
        "masked_scatter": lambda x: x.masked_scatter(x > 0, x * 2),
        "logsigmoid": lambda x: Fm.logsigmoid(x),
        "rms_norm": lambda x: Fm.rms_norm(x, x.shape[-1:]),
        "renorm": lambda x: x.renorm(2, 0, 1.0),
        "group_norm": lambda x: Fm.group_norm(x, 1) if x.ndim >= 3 else Fm.group_norm(x[None], 1)[0],
        "flip": lambda x: x.flip(0),
        "lgamma": lambda x: (x.abs() + 0.5).lgamma(),
        "erfinv": lambda x: (x * 0.1).erfinv(),
        "digamma": lambda x: (x.abs() + 0.5).digamma(),
        "batch_norm": lambda x: Fm.batch_norm(x, None, None, training=True),
        "batch_norm_eval": lambda x: Fm.batch_norm(x, m.zeros(x.shape[1], dtype=x.dtype),
                                                   m.ones(x.shape[1], dtype=x.dtype)),
        "rrelu_eval": lambda x: Fm.rrelu(x, training=False),
        "lerp_c_then_t": lambda x: m.lerp(x.contiguous(), x, 0.75),
        "fmax_t_then_c": lambda x: m.fmax(x, x.contiguous() * 0.5),
        "fmin_t_then_c": lambda x: m.fmin(x, x.contiguous() * 0.5),
    }


A = np.random.default_rng(0).standard_normal((4, 3, 5))
B4 = np.random.default_rng(1).standard_normal((2, 3, 4, 5))
LAYOUTS = ["t", "permuted", "sliced", "expanded", "channels_last"]


def _input(m, layout, dtype):
    if layout == "channels_last":
        return m.tensor(B4, dtype=dtype).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    t = m.tensor(A, dtype=dtype)
    return {"t": t[0].t(), "permuted": t.permute(2, 0, 1), "sliced": t[:, ::2, 1],
            "expanded": t[0, :1].expand(3, 5)}[layout]


def _strides_of(t):
    # strides along dimensions of size 1 say nothing about the layout
    return tuple(s for s, n in zip(t.stride(), t.shape) if n != 1)


CASES = [(op, layout) for op in sorted(_ops(tg, TF)) for layout in LAYOUTS]


@pytest.mark.parametrize("op,layout", CASES)
def test_eager_layout_is_torchs(op, layout):
    got = _ops(tg, TF)[op](_input(tg, layout, tg.float64))
    want = _ops(torch, F)[op](_input(torch, layout, torch.float64))
    assert tuple(got.shape) == tuple(want.shape)
    assert _strides_of(got) == _strides_of(want), f"{op} of a {layout} input: strides {got.stride()}, torch's " \
                                                  f"{want.stride()}"
    assert got.is_contiguous() == want.is_contiguous()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    # a view of the result works exactly where torch's does
    try:
        want.view(-1)
        torch_views = True
    except RuntimeError:
        torch_views = False
    if torch_views:
        assert got.view(-1).shape == (want.numel(),)
    else:
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            got.view(-1)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", sorted(_ops(tg, TF)))
def test_compiled_layout_is_eagers(op, layout):
    f = _ops(tg, TF)[op]
    x = _input(tg, layout, tg.float32)
    want = f(x)
    got = tg.compile(f)(x)
    assert got.stride() == want.stride(), f"{op} of a {layout} input: compiled {got.stride()}, eager {want.stride()}"
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


ADDMM = {"addmm": ((2, 2), (2, 3), (3, 2)), "addmv": ((2,), (2, 3), (3,)), "addr": ((2, 3), (2,), (3,)),
         "baddbmm": ((1, 2, 2), (1, 2, 3), (1, 3, 2)), "addbmm": ((2, 2), (1, 2, 3), (1, 3, 2))}
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64"]


@pytest.mark.parametrize("op", sorted(ADDMM))
def test_addmm_family_dtypes_as_torchs(op):
    # addmm(float16, float32, float32) computed and returned float16 where torch raises; addr promotes
    import itertools
    for a, b, c in itertools.product(DTYPES, repeat=3):
        out = []
        for m in (torch, tg):
            args = [m.full(s, 2, dtype=getattr(m, d)) for s, d in zip(ADDMM[op], (a, b, c))]
            try:
                r = getattr(m, op)(*args)
                out.append((str(r.dtype), r.double().numpy().tolist()))
            except RuntimeError as e:
                out.append(("raises", str(e)))
        assert out[1] == out[0], f"{op}({a}, {b}, {c})"


def test_topk_view_of_a_plain_matrix():
    # the everyday case: the k largest of each row, flattened
    x = np.random.default_rng(2).standard_normal((6, 7))
    got = tg.tensor(x).topk(3, 1)
    want = torch.tensor(x).topk(3, 1)
    np.testing.assert_array_equal(got.values.view(-1).numpy(), want.values.view(-1).numpy())
    np.testing.assert_array_equal(got.indices.view(-1).numpy(), want.indices.view(-1).numpy())


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_topk_gradient_and_node(dim):
    x = np.random.default_rng(3).standard_normal((5, 4))
    xg = tg.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    vg, vt = xg.t().topk(2, dim)[0], xt.t().topk(2, dim)[0]
    assert type(vg.grad_fn).__name__ == type(vt.grad_fn).__name__ == "TopkBackward0"
    w = np.random.default_rng(4).standard_normal(tuple(vt.shape))
    (vg * tg.tensor(w)).sum().backward()
    (vt * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), xt.grad.numpy())
    assert tg.autograd.gradcheck(lambda a: a.t().topk(2, dim)[0], (tg.tensor(x, requires_grad=True),))


def test_topk_indices_written_in_place_raise_as_torchs():
    # torch's TopkBackward0 saves the indices it returns
    for m in (tg, torch):
        x = m.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        v, i = x.topk(2, 1)
        i.zero_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            v.sum().backward()


CHANNELS = [("contiguous_format", "contiguous_format"), ("channels_last", "channels_last"),
            ("channels_last_3d", "channels_last_3d"), ("preserve_format", "preserve_format")]


@pytest.mark.parametrize("make", [
    lambda m: m.ones(2, 3, 4, 5),
    lambda m: m.ones(2, 3, 4, 5).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    lambda m: m.ones(1, 3, 1, 1),
    lambda m: m.ones(2, 1, 4, 5).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    lambda m: m.ones(2, 3, 4, 5, 6).permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3),
    lambda m: m.ones(2, 3, 4, 5)[:, :, ::2],
    lambda m: m.ones(3, 4),
    lambda m: m.ones(3, 4).t(),
], ids=["c4", "cl4", "ones-c1", "cl4-c1", "cl5", "sliced", "2d", "2d-t"])
@pytest.mark.parametrize("fmt", [c[0] for c in CHANNELS])
def test_is_contiguous_in_a_memory_format(make, fmt):
    got = make(tg).is_contiguous(memory_format=getattr(tg, fmt))
    want = make(torch).is_contiguous(memory_format=getattr(torch, fmt))
    assert got == want


def test_is_contiguous_refuses_what_is_no_memory_format():
    with pytest.raises(TypeError, match="must be torch.memory_format, not int"):
        tg.ones(2).is_contiguous(memory_format=3)
    with pytest.raises(TypeError, match="must be torch.memory_format, not int"):
        torch.ones(2).is_contiguous(memory_format=3)


def test_channels_last_rms_norm_compiled_keeps_eagers_layout():
    # tracegrad's own code asks a traced value its channels-last layout (rms_norm keeps it, as torch)
    x = _input(tg, "channels_last", tg.float32)
    f = lambda x: TF.rms_norm(x, (5,)) * 2
    want = f(x)
    assert want.is_contiguous(memory_format=tg.channels_last)
    got = tg.compile(f)(x)
    assert got.stride() == want.stride()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
