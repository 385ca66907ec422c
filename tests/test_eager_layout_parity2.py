"""Result layouts against torch's, second round: ops whose kernels allocate their result by a rule
of their own (not TensorIterator's elementwise order).

torch's sort and index_put lay their results out dense in the input's order
(infer_dense_strides); roll, the pads and group_norm in the input's suggested memory format
(channels-last stays so); x[idx] in TensorIterator's order of the input's strides along the dims
not indexed and the index's along its own. Here all of them came out C-contiguous, so
`x.t().sort(0).values.view(-1)` worked where torch's raises, giving the elements in another order.
`x.to(memory_format=torch.channels_last)` returned the tensor as it was, and clone/contiguous
refused the channels-last formats. Compiled, a value the trace did not know the layout of (cat
of channels-last tensors) was left as numpy laid it out: `cat([a, a]) + b` came back C-contiguous
where eager and torch lay it out channels-last.
"""
import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn.functional as TF
import torch.nn.functional as F


def _ops(m, Fm):
    i2 = lambda: m.tensor([0, 1, 1])
    return {
        "sort_values": lambda x: x.sort(0)[0],
        "sort_indices_last": lambda x: x.sort(-1, descending=True)[1],
        "argsort": lambda x: x.argsort(0),
        "index_put": lambda x: x.index_put((m.tensor([0, 1]),), m.tensor(2.0, dtype=x.dtype)),
        "index_put_acc": lambda x: x.index_put((m.tensor([1, 1]),), m.tensor(2.0, dtype=x.dtype), accumulate=True),
        "roll": lambda x: x.roll(1, 0),
        "roll_two": lambda x: x.roll((1, -1), (0, 1)),
        "roll_flat": lambda x: x.roll(2),
        "pad": lambda x: Fm.pad(x, (1, 2)),
        "pad_crop": lambda x: Fm.pad(x, (-1, 0)),
        "pad_reflect": lambda x: Fm.pad(x, (1, 1), mode="reflect"),
        "pad_reflect_two": lambda x: Fm.pad(x, (1, 1, 1, 0), mode="reflect"),
        "pad_replicate": lambda x: Fm.pad(x, (1, 0), mode="replicate"),
        "pad_circular": lambda x: Fm.pad(x, (1, 0), mode="circular"),
        "index_first": lambda x: x[i2()],
        "index_second": lambda x: x[:, i2()],
        "index_last": lambda x: x[..., m.tensor([1, 0])],
        "index_2d": lambda x: x[m.tensor([[0, 1], [1, 0]])],
        "index_2d_t": lambda x: x[m.tensor([[0, 1, 1], [1, 0, 0]]).t()],
        "index_pair": lambda x: x[m.tensor([0, 1]), m.tensor([1, 0])],
        "index_apart": lambda x: x[m.tensor([0, 1]), :, m.tensor([1, 0])] if x.ndim >= 3 else x[:, m.tensor([1, 0])],
        "index_int_then": lambda x: x[1, m.tensor([0, 1, 1])] if x.ndim >= 3 else x[m.tensor([0, 1]), 1:],
        "mask": lambda x: x[:, m.tensor([True, False, True])] if x.shape[1] == 3 else x[m.tensor([True, False, True])],
        "cat": lambda x: m.cat([x, x], 0),
        "cat_last": lambda x: m.cat([x, x], -1),
        "stack": lambda x: m.stack([x, x], 0),
        "stack_three_mid": lambda x: m.stack([x, x, x], 1),
        "stack_third": lambda x: m.stack([x, x], 2),
        "stack_last": lambda x: m.stack([x, x], -1),
        "group_norm": lambda x: Fm.group_norm(x, 1) if x.ndim >= 3 else Fm.group_norm(x[None], 1)[0],
    }


A = np.random.default_rng(0).standard_normal((4, 3, 5))
B4 = np.random.default_rng(1).standard_normal((2, 3, 4, 5))
LAYOUTS = ["t", "permuted", "sliced", "expanded", "channels_last", "channels_last_n1"]


def _input(m, layout, dtype):
    if layout == "channels_last":
        return m.tensor(B4, dtype=dtype).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    if layout == "channels_last_n1":
        return m.tensor(B4[:1], dtype=dtype).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    t = m.tensor(A, dtype=dtype)
    return {"t": t[0].t(), "permuted": t.permute(2, 0, 1), "sliced": t[:, ::2, 1],
            "expanded": t[0, :1].expand(3, 5)}[layout]


def _strides_of(t):
    # strides along dimensions of size 1 say nothing about the layout
    return tuple(s for s, n in zip(t.stride(), t.shape) if n != 1)


def _torch_result(op, layout):
    try:
        return _ops(torch, F)[op](_input(torch, layout, torch.float64))
    except (RuntimeError, IndexError, NotImplementedError):
        return None


CASES = [(op, layout) for op in sorted(_ops(tg, TF)) for layout in LAYOUTS]


@pytest.mark.parametrize("op,layout", CASES)
def test_eager_layout_is_torchs(op, layout):
    want = _torch_result(op, layout)
    if want is None:
        with pytest.raises((RuntimeError, IndexError, NotImplementedError)):
            _ops(tg, TF)[op](_input(tg, layout, tg.float64))
        return
    got = _ops(tg, TF)[op](_input(tg, layout, tg.float64))
    assert tuple(got.shape) == tuple(want.shape)
    assert _strides_of(got) == _strides_of(want), f"{op} of a {layout} input: strides {got.stride()}, torch's " \
                                                  f"{want.stride()}"
    assert got.is_contiguous() == want.is_contiguous()
    for fmt in ("channels_last", "channels_last_3d"):
        assert got.is_contiguous(memory_format=getattr(tg, fmt)) == \
            want.is_contiguous(memory_format=getattr(torch, fmt))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)     # (group_norm: ulps)
    # a view of the result works exactly where torch's does, and gives torch's elements in torch's order
    try:
        flat = want.view(-1)
    except RuntimeError:
        flat = None
    if flat is not None:
        np.testing.assert_allclose(got.view(-1).numpy(), flat.numpy(), rtol=1e-12, atol=1e-12)
    else:
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            got.view(-1)


@pytest.mark.parametrize("op,layout", CASES)
def test_compiled_layout_is_eagers(op, layout):
    if _torch_result(op, layout) is None:
        return
    f = _ops(tg, TF)[op]
    x = _input(tg, layout, tg.float32)
    want = f(x)
    got = tg.compile(f)(x)
    assert got.stride() == want.stride(), f"{op} of a {layout} input: compiled {got.stride()}, eager {want.stride()}"
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def _cl(m, *shape):
    x = m.tensor(np.random.default_rng(2).standard_normal(shape))
    return x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)


UNKNOWN = {
    # values whose layout the trace took as unknown (a cat of channels-last tensors), then an op of
    # them with a C-contiguous operand or one that lays its result out by its input's strides
    "cat_plus_c": lambda m, a, b: m.cat([a, a], 0) + b,
    "cat_sort": lambda m, a, b: m.cat([a, a], 0).sort(1)[0] * b,
    "cat_roll": lambda m, a, b: m.cat([a, a], 0).roll(1, 2) - b,
    "stack_then_index": lambda m, a, b: m.stack([a[0], a[0]], 0)[:, m.tensor([1, 0])] + 1,
    "cat_view": lambda m, a, b: (m.cat([a, a], 0) + b).view(2, -1),
}


@pytest.mark.parametrize("case", sorted(UNKNOWN))
def test_compiled_layout_of_values_the_trace_lays_out_by_rule(case):
    f = UNKNOWN[case]
    args_t = (_cl(torch, 1, 3, 4, 5), torch.ones(2, 3, 4, 5, dtype=torch.float64))
    args_g = (_cl(tg, 1, 3, 4, 5), tg.ones(2, 3, 4, 5, dtype=tg.float64))
    try:
        want = f(torch, *args_t)
    except RuntimeError:
        for g in (lambda: f(tg, *args_g), lambda: tg.compile(lambda a, b: f(tg, a, b))(*args_g)):
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                g()
        return
    eager = f(tg, *args_g)
    got = tg.compile(lambda a, b: f(tg, a, b))(*args_g)
    assert _strides_of(eager) == _strides_of(want)
    assert got.stride() == eager.stride(), f"compiled {got.stride()}, eager {eager.stride()}, torch {want.stride()}"
    np.testing.assert_array_equal(got.numpy(), eager.numpy())
    np.testing.assert_allclose(eager.numpy(), want.numpy(), rtol=1e-12)


FORMATS = ["channels_last", "channels_last_3d", "contiguous_format", "preserve_format"]
MAKERS = {
    "c4": lambda m: m.arange(120.0).reshape(2, 3, 4, 5),
    "cl4": lambda m: m.arange(120.0).reshape(2, 4, 5, 3).permute(0, 3, 1, 2),
    "t4": lambda m: m.arange(120.0).reshape(2, 3, 4, 5).transpose(1, 2),
    "c5": lambda m: m.arange(240.0).reshape(2, 3, 4, 5, 2),
    "c3": lambda m: m.arange(24.0).reshape(2, 3, 4),
}


@pytest.mark.parametrize("make", sorted(MAKERS))
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("how", ["clone", "contiguous", "to", "to_dtype"])
def test_memory_formats_as_torchs(how, fmt, make):
    out = []
    for m in (torch, tg):
        x = MAKERS[make](m)
        f = getattr(m, fmt)
        try:
            if how == "clone":
                r = x.clone(memory_format=f)
            elif how == "contiguous":
                r = x.contiguous(memory_format=f)
            elif how == "to":
                r = x.to(memory_format=f)
            else:
                r = x.to(m.float32, memory_format=f)
        except RuntimeError as e:
            out.append(("raises", str(e)))
            continue
        out.append((_strides_of(r), r is x, r.numpy().tolist(), str(r.dtype).split(".")[-1]))
    assert out[1] == out[0]


def test_channels_last_clone_compiled_and_its_gradient():
    f = lambda x: (x * 2).clone(memory_format=tg.channels_last)
    x = tg.tensor(B4, requires_grad=True)
    want = f(x)
    got = tg.compile(f)(x)
    assert got.stride() == want.stride() == torch.tensor(B4).clone(memory_format=torch.channels_last).stride()
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    got.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(B4.shape, 2.0))


@pytest.mark.parametrize("op", ["sort_values", "index_put", "roll_two", "pad", "pad_reflect_two", "index_second",
                                "group_norm", "cat"])
def test_gradients_through_the_layouts(op):
    # float64 gradcheck of the ops on a channels-last and a permuted input, and torch's gradient
    for layout in ("channels_last", "permuted"):
        f = lambda x: _ops(tg, TF)[op](x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)) \
            if layout == "channels_last" else _ops(tg, TF)[op](x.permute(2, 0, 1))
        base = tg.tensor(B4 if layout == "channels_last" else A, requires_grad=True)
        assert tg.autograd.gradcheck(f, (base,))
        ft = lambda x: _ops(torch, F)[op](x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)) \
            if layout == "channels_last" else _ops(torch, F)[op](x.permute(2, 0, 1))
        bt = torch.tensor(B4 if layout == "channels_last" else A, requires_grad=True)
        w = np.random.default_rng(5).standard_normal(tuple(ft(bt).shape))
        (f(base) * tg.tensor(w)).sum().backward()
        (ft(bt) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(base.grad.numpy(), bt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_sort_of_a_transposed_matrix_flattens_as_torchs_reshape():
    # the everyday case: sorted columns of a transposed matrix, flattened (reshape copies, as torch's)
    x = np.random.default_rng(3).standard_normal((6, 7))
    got = tg.tensor(x).t().sort(1).values
    want = torch.tensor(x).t().sort(1).values
    np.testing.assert_array_equal(got.reshape(-1).numpy(), want.reshape(-1).numpy())
    assert got.stride() == want.stride()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        got.view(-1)


IMG = np.random.default_rng(6).standard_normal((2, 4, 6, 6))
KER = np.random.default_rng(7).standard_normal((3, 4, 3, 3))
SEQ = np.random.default_rng(8).standard_normal((2, 4, 6))


def _nn_ops(m, Fm):
    # torch's kernels of convolution, pooling and upsampling allocate their results in the input's
    # suggested memory format; those that stand in for a 1-d op or unfold's im2col do not
    w = lambda x: m.tensor(KER, dtype=x.dtype)
    return {
        "conv2d": lambda x: Fm.conv2d(x, w(x), padding=1),
        "conv2d_cl_weight": lambda x: Fm.conv2d(x, w(x).contiguous(memory_format=m.channels_last)),
        "conv_transpose2d": lambda x: Fm.conv_transpose2d(x, w(x).transpose(0, 1), stride=2),
        "max_pool2d": lambda x: Fm.max_pool2d(x, 2),
        "max_pool2d_indices": lambda x: Fm.max_pool2d(x, 3, 2, 1, return_indices=True)[1],
        "avg_pool2d": lambda x: Fm.avg_pool2d(x, 3, 2, 1),
        "adaptive_avg_pool2d": lambda x: Fm.adaptive_avg_pool2d(x, 3),
        "adaptive_avg_pool2d_odd": lambda x: Fm.adaptive_avg_pool2d(x, 4),
        "adaptive_max_pool2d_odd": lambda x: Fm.adaptive_max_pool2d(x, 4),
        "lp_pool2d": lambda x: Fm.lp_pool2d(x, 2, 2),
        "nearest": lambda x: Fm.interpolate(x, scale_factor=2),
        "bilinear": lambda x: Fm.interpolate(x, size=(7, 9), mode="bilinear"),
        "bicubic": lambda x: Fm.interpolate(x, size=(7, 9), mode="bicubic", align_corners=True),
        "pixel_unshuffle": lambda x: Fm.pixel_unshuffle(x, 2),
        "channel_shuffle": lambda x: Fm.channel_shuffle(x, 2),
        "unfold": lambda x: Fm.unfold(x, 2),
        "fold": lambda x: Fm.fold(Fm.unfold(x, 2), (6, 6), 2),
        "local_response_norm": lambda x: Fm.local_response_norm(x, 2),
        "scatter_reduce": lambda x: x.scatter_reduce(1, m.zeros(x.shape, dtype=m.long), x, "amax"),
        "scatter_reduce_sum": lambda x: x.scatter_reduce(3, m.zeros(x.shape, dtype=m.long), x, "sum"),
    }


def _seq_ops(m, Fm):
    return {
        "max_pool1d": lambda x: Fm.max_pool1d(x, 2),
        "max_pool1d_indices": lambda x: Fm.max_pool1d(x, 2, return_indices=True)[1],
        "max_pool1d_grad": lambda x: Fm.max_pool1d(x, 2),          # (of an input that requires grad)
        "avg_pool1d": lambda x: Fm.avg_pool1d(x, 2),
        "adaptive_avg_pool1d": lambda x: Fm.adaptive_avg_pool1d(x, 3),
        "adaptive_max_pool1d": lambda x: Fm.adaptive_max_pool1d(x, 3),
        "conv1d": lambda x: Fm.conv1d(x, m.tensor(KER[:, :, 0], dtype=x.dtype)),
        "conv_transpose1d": lambda x: Fm.conv_transpose1d(x, m.tensor(np.ascontiguousarray(KER.transpose(1, 0, 2, 3)[
            ..., 0]), dtype=x.dtype)),
        "interpolate_1d": lambda x: Fm.interpolate(x, scale_factor=2, mode="linear"),
    }


IMAGES = {
    "c": lambda m, dt: m.tensor(IMG, dtype=dt),
    "channels_last": lambda m, dt: m.tensor(IMG, dtype=dt).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    "hw_t": lambda m, dt: m.tensor(IMG, dtype=dt).transpose(2, 3),
    "channels_last_n1": lambda m, dt: m.tensor(IMG[:1], dtype=dt).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    "unbatched_cl": lambda m, dt: m.tensor(IMG, dtype=dt).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)[0],
}
SEQS = {
    "c": lambda m, dt: m.tensor(SEQ, dtype=dt),
    "lc": lambda m, dt: m.tensor(SEQ, dtype=dt).transpose(1, 2).contiguous().transpose(1, 2),
    "cn": lambda m, dt: m.tensor(SEQ, dtype=dt).permute(1, 0, 2).contiguous().permute(1, 0, 2),
}
NN_CASES = [(op, lay, "img") for op in sorted(_nn_ops(tg, TF)) for lay in sorted(IMAGES)] + \
    [(op, lay, "seq") for op in sorted(_seq_ops(tg, TF)) for lay in sorted(SEQS)]


def _nn_case(m, Fm, op, lay, kind, dt):
    ops, inputs = (_nn_ops, IMAGES) if kind == "img" else (_seq_ops, SEQS)
    x = inputs[lay](m, dt)
    return ops(m, Fm)[op], x.requires_grad_() if op.endswith("_grad") else x


@pytest.mark.parametrize("op,layout,kind", NN_CASES)
def test_nn_layout_is_torchs(op, layout, kind):
    f, x = _nn_case(torch, F, op, layout, kind, torch.float64)
    try:
        want = f(x)
    except (RuntimeError, NotImplementedError, ValueError, IndexError):
        return           # (unbatched inputs some of these refuse)
    f, x = _nn_case(tg, TF, op, layout, kind, tg.float64)
    got = f(x)
    assert tuple(got.shape) == tuple(want.shape)
    assert _strides_of(got) == _strides_of(want), f"{op} of a {layout} input: strides {got.stride()}, torch's " \
                                                  f"{want.stride()}"
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-10)
    try:
        flat = want.view(-1)
    except RuntimeError:
        flat = None
    if flat is not None:
        np.testing.assert_allclose(got.view(-1).detach().numpy(), flat.detach().numpy(), rtol=1e-10, atol=1e-10)
    else:
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            got.view(-1)


@pytest.mark.parametrize("op,layout,kind", [c for c in NN_CASES if c[1] in ("channels_last", "lc")])
def test_nn_compiled_layout_is_eagers(op, layout, kind):
    f, x = _nn_case(tg, TF, op, layout, kind, tg.float32)
    want = f(x)
    got = tg.compile(f)(x)
    assert got.stride() == want.stride(), f"{op} of a {layout} input: compiled {got.stride()}, eager {want.stride()}"
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_channels_last_conv_net_trains_as_torchs():
    # a channels-last batch through conv, pool and upsampling: the gradients are torch's, and the
    # layouts in between (a view of a channels-last activation raises, as torch's)
    ws = [np.random.default_rng(9).standard_normal((4, 4, 3, 3)) * 0.2, np.random.default_rng(10).standard_normal(4)]
    grads = []
    for m, Fm in ((torch, F), (tg, TF)):
        x = m.tensor(IMG).contiguous(memory_format=m.channels_last).requires_grad_()
        w, b = (m.tensor(a, requires_grad=True) for a in ws)
        h = Fm.max_pool2d(Fm.relu(Fm.conv2d(x, w, b, padding=1)), 2)
        h = Fm.interpolate(h, scale_factor=2, mode="bilinear")
        assert h.is_contiguous(memory_format=m.channels_last)
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            h.view(2, -1)
        (h.reshape(2, -1) ** 2).sum().backward()
        grads.append([t.grad.numpy() for t in (x, w, b)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10)


SELECTS = {
    # x[i] by a 0-dim index tensor: eager's select (a view) in the input's layout; traced, its
    # layout was not known and the program left numpy's
    "plus_c": lambda m, x, i, b: x.permute(2, 1, 0)[i] + b,
    "c_plus": lambda m, x, i, b: b + x.permute(2, 1, 0)[i],
    "sort": lambda m, x, i, b: x.permute(2, 1, 0)[i].sort(0)[0],
    "view": lambda m, x, i, b: (x.permute(2, 1, 0)[i] + b).view(-1),
    "sum": lambda m, x, i, b: (x.permute(2, 1, 0)[i] * b).sum(1),
    "roll": lambda m, x, i, b: x.permute(2, 1, 0)[i].roll(1, 1) + b,
    "write": lambda m, x, i, b: x.clone().permute(2, 1, 0)[i].mul_(b),
}


@pytest.mark.parametrize("case", sorted(SELECTS))
def test_compiled_select_by_a_0dim_index_is_laid_out_as_eager(case):
    f = SELECTS[case]
    args = lambda m: (m.tensor(A), m.tensor(1), m.tensor(np.arange(12.0).reshape(3, 4)))
    try:
        want = f(torch, *args(torch))
    except RuntimeError:
        for g in (lambda: f(tg, *args(tg)), lambda: tg.compile(lambda *a: f(tg, *a))(*args(tg))):
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                g()
        return
    eager = f(tg, *args(tg))
    got = tg.compile(lambda *a: f(tg, *a))(*args(tg))
    assert _strides_of(eager) == _strides_of(want)
    if case == "write":
        # a view of a value of the program comes back as a copy of its own: dense, in the view's order
        assert np.argsort(got.stride()).tolist() == np.argsort(eager.stride()).tolist()
        assert got.is_contiguous() == eager.is_contiguous()
    else:
        assert got.stride() == eager.stride(), f"compiled {got.stride()}, eager {eager.stride()}, torch " \
                                               f"{want.stride()}"
    np.testing.assert_array_equal(got.numpy(), eager.numpy())
    np.testing.assert_allclose(eager.numpy(), want.numpy(), rtol=1e-12)


EINSUMS = [("ij->ji", ((3, 4),)), ("ij->ij", ((3, 4),)), ("...ij->...ji", ((2, 3, 4),)), ("bij->jbi", ((2, 3, 4),)),
           ("ij,ij->ji", ((3, 4), (3, 4))), ("ij,k->kji", ((3, 4), (5,))), ("i,j->ji", ((3,), (4,))),
           ("bij,bij->bji", ((2, 3, 4), (2, 3, 4))), ("ij,ij->ij", ((3, 1), (3, 4))), ("ij,jk->ik", ((3, 4), (4, 5))),
           ("ii->i", ((3, 3),)), ("ijj->ji", ((2, 3, 3),)), ("ii,i->i", ((3, 3), (3,)))]


@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
@pytest.mark.parametrize("layout", ["c", "t"])
def test_einsum_without_sums_is_torchs_view_or_product(eq, shapes, layout):
    # torch takes diagonals, permutes the operands to the output's order and multiplies them: the
    # result is laid out by theirs, and of one operand it is a view (tracegrad made a C-contiguous
    # copy: a write to einsum("ij->ji", a) or einsum("ii->i", a) left a alone, where torch's writes a)
    arrays = [np.random.default_rng(11 + k).standard_normal(s) for k, s in enumerate(shapes)]

    def make(m):
        ts = [m.tensor(a) for a in arrays]
        return [t.transpose(-1, -2).contiguous().transpose(-1, -2) if layout == "t" and t.ndim > 1 else t for t in ts]

    out = {}
    for m in (torch, tg):
        ts = make(m)
        r = m.einsum(eq, *ts)
        try:
            flat = r.view(-1).numpy().tolist()
        except RuntimeError:
            flat = "raises"
        r.mul_(2)          # (reaches the operand where the result is a view of it)
        out[m.__name__] = (_strides_of(r), r.is_contiguous(), flat, r.numpy().tolist(), ts[0].numpy().tolist())
    assert out["tracegrad"] == out["torch"]
    got = tg.compile(lambda *a: tg.einsum(eq, *a) * 1)(*make(tg))
    want = tg.einsum(eq, *make(tg)) * 1
    assert got.stride() == want.stride()
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_einsum_product_gradient():
    a, b = (tg.tensor(np.random.default_rng(k).standard_normal((3, 4)), requires_grad=True) for k in (1, 2))
    assert tg.autograd.gradcheck(lambda x, y: tg.einsum("ij,ij->ji", x, y), (a, b))
    assert tg.autograd.gradcheck(lambda x: tg.einsum("ij->ji", x), (a,))


M = np.random.default_rng(12).standard_normal((4, 4))
SPD = M @ M.T + 4 * np.eye(4)
M3 = np.random.default_rng(13).standard_normal((2, 4, 4))
RECT = np.random.default_rng(14).standard_normal((4, 3))


def _more_ops(m):
    L = m.linalg
    t = lambda a: m.tensor(a)
    return {
        # torch's LAPACK-backed results are laid out column by column
        "inv": lambda: L.inv(t(M)), "inv_batched": lambda: L.inv(t(M3)), "inverse": lambda: m.inverse(t(M)),
        "inverse_method": lambda: t(M3).inverse(),
        "inv_ex": lambda: L.inv_ex(t(M))[0],
        "solve": lambda: L.solve(t(M), t(RECT)), "solve_batched": lambda: L.solve(t(M3), t(M3)),
        "solve_right": lambda: L.solve(t(M), t(RECT.T.copy()), left=False),
        "solve_vector": lambda: L.solve(t(M), t(M[0])),
        "solve_vectors": lambda: L.solve(t(M3), t(M3[:, 0])),
        "solve_vectors_4d": lambda: L.solve(t(np.stack([M3, M3])), t(np.stack([M3[:, 0], M3[:, 1]]))),
        "cholesky": lambda: L.cholesky(t(SPD)), "cholesky_upper": lambda: L.cholesky(t(SPD), upper=True),
        "cholesky_ex": lambda: L.cholesky_ex(t(SPD))[0],
        "eigh_vectors": lambda: L.eigh(t(SPD))[1].abs(), "qr_q": lambda: L.qr(t(RECT))[0].abs(),
        "qr_r": lambda: L.qr(t(RECT))[1].abs(), "svd_u": lambda: L.svd(t(RECT), full_matrices=False)[0].abs(),
        "svd_vh": lambda: L.svd(t(RECT), full_matrices=False)[2].abs(),
        # torch's nonzero is laid out column by column too
        "nonzero": lambda: m.nonzero(t(M).t() > 0), "argwhere": lambda: m.argwhere(t(M3) > 0),
        # C-contiguous whatever the operands' layouts
        "take": lambda: t(M).t().take(m.tensor([[0, 1, 2], [3, 4, 5]]).t()),
        "addmm": lambda: m.addmm(t(M).t(), t(M), t(M)), "addmm_beta": lambda: m.addmm(t(M).t(), t(M), t(M), beta=2),
        "baddbmm": lambda: m.baddbmm(t(M3).transpose(1, 2), t(M3), t(M3)),
        "addbmm": lambda: m.addbmm(t(M).t(), t(M3), t(M3)),
        "addr": lambda: m.addr(t(M).t(), t(M[0]), t(M[1])),
        # into the input's clone: its layout
        "put": lambda: t(M).t().put(m.tensor([0, 5]), m.tensor([1.0, 2.0], dtype=m.float64)),
        "select_scatter": lambda: m.select_scatter(t(M).t(), m.ones(4, dtype=m.float64), 0, 1),
        "slice_scatter": lambda: m.slice_scatter(t(M).t(), m.ones(2, 4, dtype=m.float64), 0, 0, 2),
        "diagonal_scatter": lambda: m.diagonal_scatter(t(M).t(), m.ones(4, dtype=m.float64)),
    }


@pytest.mark.parametrize("op", sorted(_more_ops(tg)))
def test_more_layouts_are_torchs(op):
    want = _more_ops(torch)[op]()
    got = _more_ops(tg)[op]()
    assert tuple(got.shape) == tuple(want.shape)
    assert _strides_of(got) == _strides_of(want), f"{op}: strides {got.stride()}, torch's {want.stride()}"
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)
    try:
        flat = want.view(-1)
    except RuntimeError:
        flat = None
    if flat is not None:
        np.testing.assert_allclose(got.view(-1).numpy(), flat.numpy(), rtol=1e-10, atol=1e-10)
    else:
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            got.view(-1)


@pytest.mark.parametrize("op", ["inv", "solve", "cholesky", "addmm", "select_scatter", "put"])
def test_more_layouts_keep_gradients_and_names(op):
    def grads(m):
        leaves = []

        def t(a):
            leaves.append(m.tensor(a, requires_grad=True))
            return leaves[-1]
        x = {"inv": lambda: m.linalg.inv(t(M)), "solve": lambda: m.linalg.solve(t(M), t(RECT)),
             "cholesky": lambda: m.linalg.cholesky(t(SPD) + t(SPD).mT),
             "addmm": lambda: m.addmm(t(M).t(), t(M), t(M)),
             "select_scatter": lambda: m.select_scatter(t(M).t(), t(M[0]), 0, 1),
             "put": lambda: t(M).t().put(m.tensor([0, 5]), t(M[0, :2]))}[op]()
        name = type(x.grad_fn).__name__
        (x * m.tensor(np.arange(x.numel(), dtype=np.float64).reshape(tuple(x.shape)))).sum().backward()
        return name, [v.grad.numpy() for v in leaves]
    (nt, gt), (ng, gg) = grads(torch), grads(tg)
    assert ng == nt
    for a, b in zip(gg, gt):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d", "pad_reflect_two", "group_norm"])
def test_channels_last_input_written_before_backward_raises_as_torchs(op):
    # the relayout keeps the node's saved input: written after the op, the backward raises
    f = {"max_pool2d": lambda Fm, x: Fm.max_pool2d(x, 2), "avg_pool2d": lambda Fm, x: Fm.avg_pool2d(x, 2),
         "pad_reflect_two": lambda Fm, x: Fm.pad(x, (1, 1, 1, 0), mode="reflect"),
         "group_norm": lambda Fm, x: Fm.group_norm(x, 2)}[op]
    raised = []
    for m, Fm in ((torch, F), (tg, TF)):
        leaf = m.tensor(IMG, requires_grad=True)
        x = leaf.contiguous(memory_format=m.channels_last) * 1
        y = f(Fm, x)
        assert y.is_contiguous(memory_format=m.channels_last)
        x.add_(1)
        try:
            y.sum().backward()
            raised.append(False)
        except RuntimeError as e:
            raised.append("modified by an inplace operation" in str(e))
    assert raised[1] == raised[0]
