"""What each op's backward node saves, checked by torch's "modified by an inplace operation"
error: an operand (or the result) written in place between the op and the backward raises in
tracegrad exactly where it raises in torch, with torch's message, and differentiates as torch's
where torch does not raise; eagerly and compiled.

Each table names the wrong answer it guards against."""
import numpy as np
import pytest
import torch

import tracegrad as tg
from test_autograd_inplace_adversary import _outcome, _same

F_ = lambda L: L.nn.functional  # noqa: E731


def _after(f):
    """f(L, x, w, a) on a = w * 1, with a written in place (a.mul_(2)) after the op."""
    return lambda L, x, w: (lambda a: (lambda r: (a.mul_(2), r)[1])(f(L, x, w, a)))(w * 1)


def _after_int(make, f):
    """f(L, x, w, i) on an integer tensor i = make(L), with i written in place (zero_) after."""
    return lambda L, x, w: (lambda i: (lambda r: (i.zero_(), r)[1])(f(L, x, w, i)))(make(L))


def _result_written(f):
    """f(L, x, w) with its result written in place (mul_(2)) after the op."""
    return lambda L, x, w: (lambda r: (r.mul_(2), r)[1])(f(L, x, w))


_I3 = lambda L: L.tensor([0, 2, 1])  # noqa: E731
_I2 = lambda L: L.tensor([0, 2])  # noqa: E731

# -- the open list: tracegrad gave a gradient where torch raises ------------------------------
# pow(2.0, a): torch's PowBackward2 saves the exponent and result; the exponent written gave
# x.grad where torch raises (tracegrad saved it but checked only what the backward read).
# index_add's source, cummax's self, median()'s self, nll_loss's input, det's result, the pools'
# input: torch's node saves them, tracegrad's decomposition read none of them and gave a
# gradient. index_add's and nll_loss's written index named a tensor of another shape
# ([3, 2] where torch names [2]).
SAVED_BY_TORCHS_NODE = {
    "pow_scalar_base_exponent": _after(lambda L, x, w, a: L.pow(2.0, a) * x),
    "pow_scalar_base_result": _result_written(lambda L, x, w: L.pow(2.0, x)),
    "pow_tensor_exponent_base_without_grad": _after(lambda L, x, w, a: L.pow(a.detach(), x)),
    "pow_tensor_tensor_base": _after(lambda L, x, w, a: L.pow(a, x)),
    "pow_tensor_scalar_base": _after(lambda L, x, w, a: L.pow(a, 2.5)),
    "copysign_self": _after(lambda L, x, w, a: L.copysign(a, x)),
    "copysign_result": _result_written(lambda L, x, w: L.copysign(x, w)),
    "copysign_result_self_without_grad": _result_written(lambda L, x, w: L.copysign(x.detach() + 1, x)),
    "index_add_source": _after(lambda L, x, w, a: L.index_add(x, 1, L.tensor([0, 2]), a[:, :2])),
    "index_add_index": _after_int(_I2, lambda L, x, w, i: L.index_add(x, 1, i, w[:, :2])),
    "gather_index": _after_int(lambda L: L.tensor([[0, 1], [1, 2], [2, 0]]), lambda L, x, w, i: L.gather(x, 1, i)),
    "cummax": _after(lambda L, x, w, a: L.cummax(a, 1).values),
    "cummin": _after(lambda L, x, w, a: L.cummin(a, 0).values),
    "median_all": _after(lambda L, x, w, a: L.median(a) * x),
    "median_all_result": _result_written(lambda L, x, w: L.median(x)),
    "nanmedian_all": _after(lambda L, x, w, a: L.nanmedian(a) * x),
    "nll_loss_input": _after(lambda L, x, w, a: F_(L).nll_loss(a, _I3(L)) * x),
    "nll_loss_input_no_reduction": _after(lambda L, x, w, a: F_(L).nll_loss(a, _I3(L), reduction="none")),
    "nll_loss_unbatched_input": _after(lambda L, x, w, a: F_(L).nll_loss(a[0], L.tensor(1)) * x),
    "nll_loss_target": _after_int(_I3, lambda L, x, w, t: F_(L).nll_loss(x, t)),
    "nll_loss_weight": lambda L, x, w: (lambda c: (lambda r: (c.mul_(2), r)[1])(
        F_(L).nll_loss(x, _I3(L), weight=c)))(w.detach()[0] * 1),
    "det": _after(lambda L, x, w, a: L.linalg.det(a) * x),
    "det_result": _result_written(lambda L, x, w: L.linalg.det(x)),
    "torch_det_result": _result_written(lambda L, x, w: L.det(x)),
    "max_pool2d": _after(lambda L, x, w, a: F_(L).max_pool2d(a[None, None], 2)),
    "max_pool1d": _after(lambda L, x, w, a: F_(L).max_pool1d(a[None], 2)),
    "avg_pool2d": _after(lambda L, x, w, a: F_(L).avg_pool2d(a[None, None], 2, 1)),
    "avg_pool1d": _after(lambda L, x, w, a: F_(L).avg_pool1d(a[None], 2)),
    "adaptive_avg_pool2d": _after(lambda L, x, w, a: F_(L).adaptive_avg_pool2d(a[None, None], 2)),
    "adaptive_max_pool2d": _after(lambda L, x, w, a: F_(L).adaptive_max_pool2d(a[None, None], 2)),
    "conv1d_input": _after(lambda L, x, w, a: F_(L).conv1d(a[None], x[:, :, None])),         # (named [1, 3, 1, 3])
    "conv1d_input_without_grad": _after(lambda L, x, w, a: F_(L).conv1d(a.detach()[None], x[:, :, None])),
    "conv_transpose1d_weight": _after(lambda L, x, w, a: F_(L).conv_transpose1d(x[None], a[:, :, None])),
    "pairwise_distance_result": _result_written(lambda L, x, w: F_(L).pairwise_distance(x, w)),  # (NormBackward1)
    "conv2d_input": _after(lambda L, x, w, a: F_(L).conv2d(a[None, None], x[None, None, :2, :2])),
    "conv2d_weight": _after(lambda L, x, w, a: F_(L).conv2d(x[None, None], a[None, None, :2, :2])),
    "norm": _after(lambda L, x, w, a: L.norm(a) * x),
    # the sweep over the op table: torch's node saves these, tracegrad's decomposition did not
    # read them (a gradient where torch raises) or named another tensor in the error
    "nansum": _after(lambda L, x, w, a: L.nansum(a) * x),
    "nanmean_dim": _after(lambda L, x, w, a: L.nanmean(a, 0)),
    "logcumsumexp_self": _after(lambda L, x, w, a: L.logcumsumexp(a, 1)),     # (raised unbind's error)
    "logcumsumexp_result": _result_written(lambda L, x, w: L.logcumsumexp(x, 1)),
    "gather_self": _after(lambda L, x, w, a: L.gather(a, 1, L.tensor([[0, 1], [1, 2], [2, 0]]))),
    "take_along_dim_self": _after(lambda L, x, w, a: L.take_along_dim(a, L.tensor([[0], [1], [2]]), 1) * x),
    "take_self": _after(lambda L, x, w, a: L.take(a, L.tensor([0, 4])) * x[0, :2]),
    "put_source": _after(lambda L, x, w, a: x.put(L.tensor([0, 4]), a[0, :2])),
    "ldexp_result": _result_written(lambda L, x, w: L.ldexp(x, L.tensor([1, 2, 3]))),
    "linalg_cross_self": _after(lambda L, x, w, a: L.linalg.cross(a, x, dim=1)),        # (named a [3, 1] slice)
    "linalg_cross_other_without_grad": _after(lambda L, x, w, a: L.linalg.cross(x, a.detach(), dim=1)),
    "addr_vec1": _after(lambda L, x, w, a: L.addr(x, a[0], x[1])),                     # (named [3, 1])
    # the nn sweep: normalisations, reflection padding, glu, grid_sample, scatter_reduce
    "layer_norm_input": _after(lambda L, x, w, a: F_(L).layer_norm(a, (3,)) * x),
    "layer_norm_bias": _after(lambda L, x, w, a: F_(L).layer_norm(x, (3,), x[0], a[0])),
    "batch_norm_input": _after(lambda L, x, w, a: F_(L).batch_norm(a, None, None, training=True) * x),
    "batch_norm_weight": _after(lambda L, x, w, a: F_(L).batch_norm(x, None, None, a[0], training=True)),
    "group_norm_input": _after(lambda L, x, w, a: F_(L).group_norm(a[None], 3)),
    "instance_norm_input": _after(lambda L, x, w, a: F_(L).instance_norm(a[None])),
    "reflection_pad_input": _after(lambda L, x, w, a: F_(L).pad(a[None], (1, 1), mode="reflect") * 1),
    "replication_pad_input": _after(lambda L, x, w, a: F_(L).pad(a[None], (1, 1), mode="replicate") * 1),
    "glu_input": _after(lambda L, x, w, a: F_(L).glu(a[:2], 0) * x[0]),
    "grid_sample_input_without_grad": _after(lambda L, x, w, a: F_(L).grid_sample(
        a.detach()[None, None], x[None, :2, :2, None].expand(1, 2, 2, 2) * 0.3, align_corners=False)),
    "scatter_reduce_amax_self": _after(lambda L, x, w, a: a.scatter_reduce(1, L.tensor([[0, 0, 1]] * 3), x, "amax")),
    "scatter_reduce_prod_src": _after(lambda L, x, w, a: x.scatter_reduce(1, L.tensor([[0, 0, 1]] * 3), a, "prod")),
    "scatter_reduce_sum_result": _result_written(lambda L, x, w: x.scatter_reduce(0, L.tensor([[0, 0, 1]] * 3), w,
                                                                                   "sum")),
    "vector_norm": _after(lambda L, x, w, a: L.linalg.vector_norm(a, 3, dim=1)),
}

# and what torch's node does not save: these still differentiate, as torch's
NOT_SAVED_BY_TORCHS_NODE = {
    # copysign's node saves self and result, not other (tracegrad saved it, and would raise)
    "copysign_other": _after(lambda L, x, w, a: L.copysign(x, a)),
    "index_add_source_without_grad": _after(lambda L, x, w, a: L.index_add(x, 1, L.tensor([0, 2]),
                                                                          a.detach()[:, :2])),
    "index_add_index_source_without_grad": _after_int(_I2, lambda L, x, w, i: L.index_add(x, 1, i, w.detach()[:, :2])),
    "matrix_exp_result": _result_written(lambda L, x, w: L.linalg.matrix_exp(x * 0.1)),   # (raised)
    "hypot_other_without_grad": _after(lambda L, x, w, a: L.hypot(x, a.detach())),          # (raised)
    "copysign_self_without_grad": _after(lambda L, x, w, a: L.copysign(a.detach(), x)),     # (raised)
    "sort_self": _after(lambda L, x, w, a: L.sort(a, 1).values),
    "kthvalue_self": _after(lambda L, x, w, a: L.kthvalue(a, 2, 1).values * x[0]),
    # max(x, dim)'s node saves its indices, not its values (the engine's check of saved values
    # the backward does not read raised here)
    "max_dim_values_written": _result_written(lambda L, x, w: L.max(x, 1).values),
    "max_pool2d_values_written": _result_written(lambda L, x, w: F_(L).max_pool2d(x[None, None], 2)),
    "batch_norm_bias": _after(lambda L, x, w, a: F_(L).batch_norm(x, None, None, None, a[0], training=True)),
    "median_dim_self": _after(lambda L, x, w, a: L.median(a, 1).values * x),
    "scatter_add_index_src_without_grad": _after_int(lambda L: L.tensor([[0, 1], [1, 2], [2, 0]]),
                                                     lambda L, x, w, i: L.scatter_add(x, 1, i, w.detach()[:, :2])),
    "median_dim_values_written": _result_written(lambda L, x, w: L.median(x, 1).values),
    "cummax_values_written": _result_written(lambda L, x, w: L.cummax(x, 1).values),
    # kron multiplies _unsafe_views of its operands (a version counter of their own): torch
    # reads the data as written and raises nothing; tracegrad raised
    "kron_self": _after(lambda L, x, w, a: L.kron(a, x)),
    "kron_other": _after(lambda L, x, w, a: L.kron(x[:2], a)),
    "kron_vector": _after(lambda L, x, w, a: L.kron(a[0], x[1])),
    "kron_result": _result_written(lambda L, x, w: L.kron(x, w)),
    "adaptive_avg_pool2d_to_one": _after(lambda L, x, w, a: F_(L).adaptive_avg_pool2d(a[None, None], 1)),
}


@pytest.mark.parametrize("case", sorted(SAVED_BY_TORCHS_NODE))
def test_operand_torchs_node_saves_written_before_backward_raises_as_torch(case):
    f = SAVED_BY_TORCHS_NODE[case]
    t = _outcome(torch, f)
    assert t[0] == "backward", t                  # (the table's premise)
    _same(t, _outcome(tg, f))
    _same(t, _outcome(tg, f, compiled=True))


@pytest.mark.parametrize("case", sorted(NOT_SAVED_BY_TORCHS_NODE))
def test_operand_torchs_node_does_not_save_written_before_backward_differentiates_as_torch(case):
    f = NOT_SAVED_BY_TORCHS_NODE[case]
    t = _outcome(torch, f)
    assert t[0] == "ok", t
    _same(t, _outcome(tg, f))
    _same(t, _outcome(tg, f, compiled=True))


def test_grad_fn_names_of_kron_and_index_add_are_torchs():
    for L in (torch, tg):
        c = L.ones(1, 2, 3, requires_grad=True)
        assert type(F_(L).conv1d(c, L.ones(2, 2, 1)).grad_fn).__name__ == "ConvolutionBackward0"
        assert type(F_(L).conv1d(c[0], L.ones(2, 2, 1)).grad_fn).__name__ == "SqueezeBackward1"
        assert type(F_(L).pairwise_distance(c, c * 2).grad_fn).__name__ == "NormBackward1"
        x = L.ones(2, 3, requires_grad=True)
        k = L.kron(x, x)
        assert type(k.grad_fn).__name__ == "UnsafeViewBackward0"
        assert [type(n).__name__ for n, _ in k.grad_fn.next_functions] == ["MulBackward0"]
        assert [type(n).__name__ for n, _ in k.grad_fn.next_functions[0][0].next_functions] == \
            ["UnsafeViewBackward0"] * 2
        assert type(L.index_add(x, 1, L.tensor([0, 2]), x[:, :2]).grad_fn).__name__ == "IndexAddBackward0"


# pow in each form, each operand requiring grad or not, each of base, exponent and result written:
# torch's PowBackward0 saves self; PowBackward1 self, exponent and result whichever requires grad
# (only the base requiring grad, its result written gave a gradient here); PowBackward2 exponent
# and result. A compiled call raises its own message for a write inside it (autodiff's
# _refuse_stale_reads), so there the error alone is compared.
POW_FORMS = {
    "tensor_tensor": lambda L, a, b: L.pow(a, b),
    "tensor_0dim": lambda L, a, b: L.pow(a, b[0, 0]),
    "tensor_int": lambda L, a, b: a ** 2,
    "tensor_float": lambda L, a, b: a ** 2.5,
    "scalar_tensor": lambda L, a, b: L.pow(2.0, b),
    "rpow": lambda L, a, b: 2.5 ** b,
    "float_power": lambda L, a, b: L.float_power(a, b),
    "in_place": lambda L, a, b: a.clone().pow_(b),
}


@pytest.mark.parametrize("form", sorted(POW_FORMS))
def test_pow_saves_what_torchs_node_saves(form):
    f = POW_FORMS[form]
    for ga in (True, False):
        for gb in (True, False):
            for what in ("base", "exponent", "result"):
                def g(L, x, w):
                    a = (x if ga else x.detach()) * 1
                    b = (w if gb else w.detach()) * 1
                    r = f(L, a, b)
                    if what != "result" or r.requires_grad:
                        {"base": a, "exponent": b, "result": r}[what].mul_(2)
                    return r * x
                t = _outcome(torch, g)
                _same(t, _outcome(tg, g))
                c = _outcome(tg, g, compiled=True)
                assert c[0] == t[0], (form, ga, gb, what, t, c)
                if t[0] == "ok":
                    _same(t, c)
                else:
                    assert c[1] == t[1] and "modified by an inplace operation" in c[2], c


# Every operand written: torch's node unpacks its saved values by name and names the first found
# written (mul's other before self, pow's exponent, clamp's max before min); tracegrad named the
# first argument. Operands of distinct shapes tell which was named.
ALL_WRITTEN = {
    "mul": (lambda L, a, b: a * b, [(3,), (1,)]),
    "div": (lambda L, a, b: a / b, [(3,), (1,)]),
    "pow": (lambda L, a, b: a ** b, [(3,), (1,)]),
    "atan2": (lambda L, a, b: L.atan2(a, b), [(3,), (1,)]),
    "hypot": (lambda L, a, b: L.hypot(a, b), [(3,), (1,)]),
    "maximum": (lambda L, a, b: L.maximum(a, b), [(3,), (1,)]),
    "fmax": (lambda L, a, b: L.fmax(a, b), [(3,), (1,)]),
    "clamp": (lambda L, a, b, c: L.clamp(a, b, c), [(3,), (1,), (2, 1)]),
    "lerp": (lambda L, a, b, c: L.lerp(a, b, c), [(3,), (1,), (2, 1)]),
    "addcmul": (lambda L, a, b, c: L.addcmul(a, b, c), [(3,), (1,), (2, 1)]),
    "addcdiv": (lambda L, a, b, c: L.addcdiv(a, b, c), [(3,), (1,), (2, 1)]),
    "mm": (lambda L, a, b: a @ b, [(2, 3), (3, 1)]),
    "linalg_cross": (lambda L, a, b: L.linalg.cross(a, b), [(1, 3), (2, 3)]),
    "dist": (lambda L, a, b: L.dist(a, b), [(3,), (1,)]),
    "prelu": (lambda L, a, b: F_(L).prelu(a, b), [(2, 3), (1,)]),
}


@pytest.mark.parametrize("case", sorted(ALL_WRITTEN))
def test_every_operand_written_names_the_one_torchs_node_checks_first(case):
    f, shapes = ALL_WRITTEN[case]
    msgs = []
    for L in (torch, tg):
        leaves = [L.full(s, 0.5 + 0.25 * i, dtype=L.float64, requires_grad=True) for i, s in enumerate(shapes)]
        xs = [t * 1 for t in leaves]
        r = f(L, *xs)
        for x in xs:
            x.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as e:
            r.sum().backward()
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]


# -- grad_fn called directly --------------------------------------------------------------------
# A composite op's node called as y.grad_fn(g) ran only its decomposition's last primitive, and
# gave that primitive's gradients: softplus(x).grad_fn(g) gave (None, 0, g) for where's operands
# where torch gives sigmoid(x) * g, mse_loss's gave g / n where torch gives 2 (x - t) g / n.
DIRECT_CALLS = {
    "softplus": lambda L, x, w: F_(L).softplus(x),
    "gelu": lambda L, x, w: F_(L).gelu(x),
    "mse_loss": lambda L, x, w: F_(L).mse_loss(x, w.detach()),
    "mse_loss_both": lambda L, x, w: F_(L).mse_loss(x, w),
    "lerp": lambda L, x, w: L.lerp(x, w, 0.3),
    "linalg_cross": lambda L, x, w: L.linalg.cross(x, w, dim=1),
    "take": lambda L, x, w: L.take(x, L.tensor([0, 4])),
    "nll_loss": lambda L, x, w: F_(L).nll_loss(x, _I3(L)),
    "addmm": lambda L, x, w: L.addmm(x * 2, x, w),
    "mse_loss_target_made_of_input": lambda L, x, w: F_(L).mse_loss(x, x * 2),    # (no path through x * 2)
    "cdist": lambda L, x, w: L.cdist(x, w),
    "logcumsumexp": lambda L, x, w: L.logcumsumexp(x, 0),
    "kron": lambda L, x, w: L.kron(x, w),                  # (torch's node is an _unsafe_view alone)
    "sgn": lambda L, x, w: L.sgn(x) * 1,
}


def _direct(lib, f):
    x = lib.tensor([[1.5, -2.0, 0.5], [0.7, 3.0, -1.1], [0.2, 0.4, 0.9]], dtype=lib.float64, requires_grad=True)
    w = lib.tensor([[0.5, 1.2, 0.3], [0.3, -0.9, 0.6], [1.4, 0.8, 0.2]], dtype=lib.float64, requires_grad=True)
    y = f(lib, x, w)
    g = lib.linspace(0.5, 1.5, y.numel(), dtype=lib.float64).reshape(tuple(y.shape))
    r = y.grad_fn(g)
    return [None if v is None else v.detach().numpy().copy() for v in (r if isinstance(r, tuple) else (r,))]


@pytest.mark.parametrize("case", sorted(DIRECT_CALLS))
def test_composites_grad_fn_called_directly_gives_torchs_gradients(case):
    t, g = _direct(torch, DIRECT_CALLS[case]), _direct(tg, DIRECT_CALLS[case])
    assert len(g) == len(t)
    for a, b in zip(g, t):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_composites_grad_fn_given_one_tensor_twice_raises_rather_than_sum_both():
    x = tg.tensor([[1.5, -2.0], [0.7, 3.0]], dtype=tg.float64, requires_grad=True)
    y = tg.addmm(x, x, x)
    with pytest.raises(RuntimeError, match="one tensor as two of its inputs"):
        y.grad_fn(tg.ones(2, 2, dtype=tg.float64))
    (g,) = tg.autograd.grad(y.sum(), x)          # (the graph itself is whole)
    t = torch.tensor(x.detach().numpy(), requires_grad=True)
    np.testing.assert_allclose(g.numpy(), torch.autograd.grad(torch.addmm(t, t, t).sum(), t)[0].numpy(), rtol=1e-14)
