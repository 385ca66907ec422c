"""autograd.functional (vjp, jvp, jacobian, hessian, hvp, vhp) against torch.autograd.functional.

Each function is written once over a library L; results must match torch's in nesting
(tuple or single tensor), shapes, dtypes, values and requires_grad, and errors in type
and message.
"""
import numpy as np
import pytest
import torch

import tracegrad

RS = np.random.RandomState(7)
X3 = RS.randn(3)
Y3 = RS.randn(3)
V3 = RS.randn(3)
W3 = RS.randn(3)
M23 = RS.randn(2, 3)
V23 = RS.randn(2, 3)
V22 = RS.randn(2, 2)
S = np.array(0.7)


def f64(L, a, requires_grad=False):
    return L.tensor(a, dtype=L.float64, requires_grad=requires_grad)


def assert_same(tg, ref, create_graph=None):
    """Same nesting, shapes, dtypes, values; and requires_grad as torch has it."""
    if isinstance(ref, torch.Tensor):
        assert isinstance(tg, tracegrad.Tensor), (type(tg), ref)
        assert tuple(tg.shape) == tuple(ref.shape)
        assert str(tg.dtype) == str(ref.dtype)
        assert tg.requires_grad == ref.requires_grad
        np.testing.assert_allclose(tg.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
        return
    assert isinstance(ref, (tuple, list)) and type(tg) is type(ref), (type(tg), type(ref))
    assert len(tg) == len(ref)
    for a, b in zip(tg, ref):
        assert_same(a, b)


def run_both(api, make_f, make_args, **kw):
    results = []
    for L in (tracegrad, torch):
        results.append(getattr(L.autograd.functional, api)(make_f(L), *make_args(L), **kw))
    assert_same(*results)
    return results


def errors_both(api, make_f, make_args, **kw):
    msgs = []
    for L in (tracegrad, torch):
        try:
            getattr(L.autograd.functional, api)(make_f(L), *make_args(L), **kw)
        except Exception as e:  # noqa: BLE001  (compared with torch's below)
            msgs.append((type(e), str(e)))
        else:
            msgs.append(None)
    tg, ref = msgs
    assert ref is not None and tg is not None, msgs
    assert tg[0].__name__ == ref[0].__name__ and tg[1] == ref[1]
    return tg[1]


# functions: single tensor in/out, tuple in/out, scalar out
def f_single(L):
    return lambda x: x.sin() * x.exp()


def f_tuple(L):
    return lambda x, y: (x * y, (x ** 2).sum() + y.tanh().sum())


def f_scalar(L):
    return lambda x: (x.exp() * x).sum() + x.prod()


def f_scalar2(L):
    return lambda x, y: (x * y).sum() * x.sum() + y.pow(3).sum()


def f_matrix(L):
    return lambda m: m @ m.t()


@pytest.mark.parametrize("create_graph", [False, True])
def test_vjp(create_graph):
    run_both("vjp", f_single, lambda L: (f64(L, X3), f64(L, V3)), create_graph=create_graph)
    run_both("vjp", f_tuple, lambda L: ((f64(L, X3), f64(L, Y3)), (f64(L, V3), f64(L, S))),
             create_graph=create_graph)
    run_both("vjp", f_scalar, lambda L: (f64(L, X3),), create_graph=create_graph)      # v=None: scalar output
    run_both("vjp", f_matrix, lambda L: (f64(L, M23), f64(L, V22)), create_graph=create_graph)


@pytest.mark.parametrize("create_graph", [False, True])
def test_jvp(create_graph):
    run_both("jvp", f_single, lambda L: (f64(L, X3), f64(L, V3)), create_graph=create_graph)
    run_both("jvp", f_tuple, lambda L: ((f64(L, X3), f64(L, Y3)), (f64(L, V3), f64(L, W3))),
             create_graph=create_graph)
    run_both("jvp", f_matrix, lambda L: (f64(L, M23), f64(L, V23)), create_graph=create_graph)
    run_both("jvp", lambda L: lambda x: x * 3, lambda L: (f64(L, S),), create_graph=create_graph)   # v=None


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian(vectorize):
    run_both("jacobian", f_single, lambda L: (f64(L, X3),), vectorize=vectorize)
    run_both("jacobian", f_tuple, lambda L: ((f64(L, X3), f64(L, Y3)),), vectorize=vectorize)
    run_both("jacobian", f_matrix, lambda L: (f64(L, M23),), vectorize=vectorize)
    run_both("jacobian", lambda L: lambda x, y: x * 2, lambda L: ((f64(L, X3), f64(L, Y3)),), vectorize=vectorize)
    run_both("jacobian", lambda L: lambda x: (x.sum(), x[1:]), lambda L: (f64(L, M23),), vectorize=vectorize)


def test_jacobian_create_graph_is_differentiable():
    tg_j, ref_j = run_both("jacobian", f_single, lambda L: (f64(L, X3, True),), create_graph=True)
    assert tg_j.requires_grad and tg_j.grad_fn is not None
    # the Jacobian depends on the input: differentiate it once more
    xs = {L: f64(L, X3, True) for L in (tracegrad, torch)}
    for L, x in xs.items():
        L.autograd.functional.jacobian(f_single(L), x, create_graph=True).sum().backward()
    assert_same(xs[tracegrad].grad, xs[torch].grad)


@pytest.mark.parametrize("create_graph", [False, True])
def test_hessian(create_graph):
    run_both("hessian", f_scalar, lambda L: (f64(L, X3),), create_graph=create_graph)
    run_both("hessian", f_scalar2, lambda L: ((f64(L, X3), f64(L, Y3)),), create_graph=create_graph)
    run_both("hessian", lambda L: lambda m: (m.sin() * m).sum(), lambda L: (f64(L, M23),),
             create_graph=create_graph)


@pytest.mark.parametrize("api", ["hvp", "vhp"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_hvp_vhp(api, create_graph):
    run_both(api, f_scalar, lambda L: (f64(L, X3), f64(L, V3)), create_graph=create_graph)
    run_both(api, f_scalar2, lambda L: ((f64(L, X3), f64(L, Y3)), (f64(L, V3), f64(L, W3))),
             create_graph=create_graph)
    run_both(api, lambda L: lambda s: s.exp() * s ** 3, lambda L: (f64(L, S),), create_graph=create_graph)


def test_hvp_of_symmetric_hessian_equals_vhp_and_hessian_times_v():
    h = tracegrad.autograd.functional.hessian(f_scalar(tracegrad), f64(tracegrad, X3))
    _, hv = tracegrad.autograd.functional.hvp(f_scalar(tracegrad), f64(tracegrad, X3), f64(tracegrad, V3))
    _, vh = tracegrad.autograd.functional.vhp(f_scalar(tracegrad), f64(tracegrad, X3), f64(tracegrad, V3))
    # two orders of summation: an entry that cancels is exact to the rounding of its terms, not its own size
    bound = 16 * np.finfo(np.float64).eps * V3.size * np.abs(h.numpy()).max() * np.abs(V3).max()
    np.testing.assert_allclose(hv.numpy(), h.numpy() @ V3, rtol=1e-12, atol=bound)
    np.testing.assert_allclose(vh.numpy(), V3 @ h.numpy(), rtol=1e-12, atol=bound)


def test_inputs_that_require_grad_keep_their_graph_with_create_graph():
    for L in (tracegrad, torch):
        x = f64(L, X3, True)
        _, vjp = L.autograd.functional.vjp(f_single(L), x, f64(L, V3), create_graph=True)
        assert vjp.requires_grad
        _, vjp = L.autograd.functional.vjp(f_single(L), x, f64(L, V3))
        assert not vjp.requires_grad and x.grad is None


# -- strict mode and argument errors, as torch raises them ----------------------------

def test_strict_errors():
    independent = lambda L: lambda x, y: x * 2  # noqa: E731
    two = lambda L: ((f64(L, X3), f64(L, Y3)),)  # noqa: E731
    msg = errors_both("vjp", independent, lambda L: (*two(L), f64(L, V3)), strict=True)
    assert msg.startswith("The output of the user-provided function is independent of input 1.")
    msg = errors_both("jacobian", independent, two, strict=True)
    assert msg.startswith("Output 0 of the user-provided function is independent of input 1.")
    msg = errors_both("jacobian", lambda L: lambda x: x.detach(), lambda L: (f64(L, X3),), strict=True)
    assert msg.startswith("Output 0 of the user-provided function does not require gradients.")
    msg = errors_both("jacobian", lambda L: lambda x: x * 2, lambda L: (f64(L, X3),), strict=True, create_graph=True)
    assert msg.endswith("This is not allowed in strict mode when create_graph=True.")
    msg = errors_both("hessian", lambda L: lambda x: x.sum() * 2, lambda L: (f64(L, X3),), strict=True)
    assert msg.startswith("While computing the hessian, found that the jacobian")
    msg = errors_both("jvp", independent, lambda L: (*two(L), (f64(L, V3), f64(L, W3))), strict=True)
    assert "independent" in msg
    msg = errors_both("hvp", lambda L: lambda x: x.sum() * 2, lambda L: (f64(L, X3), f64(L, V3)), strict=True)
    assert "independent of the input" in msg
    msg = errors_both("vhp", lambda L: lambda x: x.sum() * 2, lambda L: (f64(L, X3), f64(L, V3)), strict=True)
    assert "independent of the input" in msg
    msg = errors_both("jacobian", f_single, lambda L: (f64(L, X3),), strict=True, vectorize=True)
    assert "`strict=True` and `vectorized=True` are not supported together" in msg
    # without strict the same functions give zeros
    run_both("jacobian", independent, two)
    run_both("vjp", independent, lambda L: (*two(L), f64(L, V3)))


def test_argument_errors():
    errors_both("vjp", f_single, lambda L: (f64(L, X3),))                      # v needed
    errors_both("jvp", f_single, lambda L: (f64(L, X3), f64(L, V3[:2])))      # v of the wrong size
    errors_both("jvp", f_tuple, lambda L: ((f64(L, X3), f64(L, Y3)), (f64(L, V3),)))   # v of the wrong length
    errors_both("vjp", f_single, lambda L: ([f64(L, X3)], f64(L, V3)))        # a list is not a tuple
    errors_both("vjp", lambda L: lambda x: 3.0, lambda L: (f64(L, X3), f64(L, V3)))
    errors_both("hvp", f_single, lambda L: (f64(L, X3), f64(L, V3)))          # not a scalar function
    errors_both("vhp", f_tuple, lambda L: ((f64(L, X3), f64(L, Y3)), (f64(L, V3), f64(L, W3))))
    errors_both("hessian", f_single, lambda L: (f64(L, X3),))
    errors_both("jacobian", f_single, lambda L: (f64(L, X3),), strategy="sideways")


def test_forward_mode_jacobian_and_the_hessian_it_refuses():
    errors_both("jacobian", f_single, lambda L: (f64(L, X3),), strategy="forward-mode")      # torch: vectorize
    errors_both("jacobian", f_single, lambda L: (f64(L, X3),), strategy="forward-mode", create_graph=True)
    # one forward-mode pass (autograd.forward_ad) per input element, as torch's
    run_both("jacobian", f_single, lambda L: (f64(L, X3),), strategy="forward-mode", vectorize=True)
    run_both("jacobian", f_tuple, lambda L: ((f64(L, X3), f64(L, Y3)),), strategy="forward-mode", vectorize=True)
    # forward over reverse: a backward carries no tangents, so tracegrad refuses (torch computes it)
    with pytest.raises(NotImplementedError, match="forward-mode AD over a backward"):
        tracegrad.autograd.functional.hessian(f_scalar(tracegrad), f64(tracegrad, X3),
                                              outer_jacobian_strategy="forward-mode", vectorize=True)
