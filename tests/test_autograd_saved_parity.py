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
    "conv2d_input": _after(lambda L, x, w, a: F_(L).conv2d(a[None, None], x[None, None, :2, :2])),
    "conv2d_weight": _after(lambda L, x, w, a: F_(L).conv2d(x[None, None], a[None, None, :2, :2])),
    "norm": _after(lambda L, x, w, a: L.norm(a) * x),
    "vector_norm": _after(lambda L, x, w, a: L.linalg.vector_norm(a, 3, dim=1)),
}

# and what torch's node does not save: these still differentiate, as torch's
NOT_SAVED_BY_TORCHS_NODE = {
    # copysign's node saves self and result, not other (tracegrad saved it, and would raise)
    "copysign_other": _after(lambda L, x, w, a: L.copysign(x, a)),
    "index_add_source_without_grad": _after(lambda L, x, w, a: L.index_add(x, 1, L.tensor([0, 2]),
                                                                          a.detach()[:, :2])),
    "index_add_index_source_without_grad": _after_int(_I2, lambda L, x, w, i: L.index_add(x, 1, i, w.detach()[:, :2])),
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
        x = L.ones(2, 3, requires_grad=True)
        k = L.kron(x, x)
        assert type(k.grad_fn).__name__ == "UnsafeViewBackward0"
        assert [type(n).__name__ for n, _ in k.grad_fn.next_functions] == ["MulBackward0"]
        assert [type(n).__name__ for n, _ in k.grad_fn.next_functions[0][0].next_functions] == \
            ["UnsafeViewBackward0"] * 2
        assert type(L.index_add(x, 1, L.tensor([0, 2]), x[:, :2]).grad_fn).__name__ == "IndexAddBackward0"
