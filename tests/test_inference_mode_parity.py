"""inference_mode against torch: inference tensors outside the mode (saved for backward, written
in place, given requires_grad, made a Parameter), normal tensors inside it, views, nesting with
no_grad, enable_grad and inference_mode(False). Each case runs in both libraries; the outcomes
(values, flags, or the error's type and start) must be equal."""
import pytest
import torch

import tracegrad as tg

CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


def outcome(f, L):
    try:
        r = f(L)
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__ + ": " + str(e)[:70]
    if isinstance(r, tuple):
        return tuple(x.tolist() if hasattr(x, "tolist") else x for x in r)
    return r.tolist() if hasattr(r, "tolist") else r


@case
def save_inf_for_backward(L):
    with L.inference_mode():
        a = L.ones(3)
    w = L.ones(3, requires_grad=True)
    return (a * w).sum()


@case
def save_inf_for_backward_add(L):
    with L.inference_mode():
        a = L.ones(3)
    w = L.ones(3, requires_grad=True)
    (a + w).sum().backward()
    return w.grad


@case
def inplace_inf_outside(L):
    with L.inference_mode():
        a = L.ones(3)
    a.add_(1)
    return a


@case
def inplace_normal_inside(L):
    a = L.ones(3)
    with L.inference_mode():
        a.add_(1)
    return a, a._version, a.is_inference()


@case
def view_of_normal_inside(L):
    a = L.ones(3)
    with L.inference_mode():
        v = a[:2]
    return v.is_inference(), v.requires_grad


@case
def view_of_req_inside(L):
    a = L.ones(3, requires_grad=True)
    with L.inference_mode():
        v = a[:2] * 2
    return v.is_inference(), v.requires_grad


@case
def inplace_view_of_normal_inside_then_grad(L):
    a = L.ones(3, requires_grad=True)
    b = a * 2
    with L.inference_mode():
        v = b[:2]
        r = v.is_inference()
    v.add_(1)
    return r


@case
def inference_false_nested(L):
    with L.inference_mode():
        with L.inference_mode(False):
            a = L.ones(3, requires_grad=True)
            b = a * 2
        return b.is_inference(), b.requires_grad, L.is_inference_mode_enabled()


@case
def req_grad_on_inf(L):
    with L.inference_mode():
        a = L.ones(3)
    a.requires_grad_()
    return a.requires_grad


@case
def req_grad_on_inf_inside(L):
    with L.inference_mode():
        a = L.ones(3)
        a.requires_grad_()
        return a.requires_grad, (a * 2).requires_grad


@case
def inf_clone_outside(L):
    with L.inference_mode():
        a = L.ones(3)
    b = a.clone()
    return b.is_inference(), b.requires_grad


@case
def inf_detach(L):
    with L.inference_mode():
        a = L.ones(3)
    return a.detach().is_inference()


@case
def inf_version(L):
    with L.inference_mode():
        a = L.ones(3)
        a.add_(1)
    try:
        return a._version
    except Exception as e:
        return type(e).__name__ + str(e)[:50]


@case
def inf_decorator(L):
    @L.inference_mode()
    def f(x):
        return x * 2
    x = L.ones(2, requires_grad=True)
    y = f(x)
    return y.requires_grad, y.is_inference()


@case
def inf_set_data(L):
    with L.inference_mode():
        a = L.ones(3)
    b = L.zeros(3)
    b.data = a
    return b.is_inference()


@case
def inf_index_put_outside(L):
    with L.inference_mode():
        a = L.ones(3)
    a[0] = 5
    return a


@case
def normal_into_inf_copy(L):
    with L.inference_mode():
        a = L.ones(3)
    b = L.zeros(3, requires_grad=True)
    with L.no_grad():
        a.copy_(b)
    return a


@case
def inf_as_out(L):
    with L.inference_mode():
        a = L.ones(3)
    return L.add(L.ones(3), 1, out=a)


@case
def inf_grad_enabled_inside(L):
    with L.inference_mode():
        return L.is_grad_enabled()


@case
def inf_enable_grad_inside(L):
    with L.inference_mode():
        with L.enable_grad():
            a = L.ones(3, requires_grad=True)
            b = a * 2
            return b.requires_grad, b.is_inference(), L.is_grad_enabled()


@case
def inf_view_inplace_outside(L):
    with L.inference_mode():
        a = L.ones(3)
        v = a[:2]
    v.mul_(2)
    return a


@case
def inf_resize_outside(L):
    with L.inference_mode():
        a = L.ones(3)
    return a.reshape(3, 1).is_inference()


@case
def inf_in_cat_with_grad(L):
    with L.inference_mode():
        a = L.ones(3)
    w = L.ones(3, requires_grad=True)
    r = L.cat([a, w])
    r.sum().backward()
    return w.grad


@case
def inf_mm_with_grad(L):
    with L.inference_mode():
        a = L.ones(3, 3)
    w = L.ones(3, 3, requires_grad=True)
    return (a @ w).sum()


@case
def parameter_of_an_inference_tensor(L):
    with L.inference_mode():
        a = L.ones(3)
    p = L.nn.Parameter(a)
    return p.requires_grad, p.is_inference()


@case
def inf_module_forward_then_train(L):
    m = L.nn.Linear(2, 2)
    with L.inference_mode():
        y = m(L.ones(1, 2))
    return y.requires_grad, y.is_inference()


@case
def no_grad_inside_inference(L):
    with L.inference_mode():
        with L.no_grad():
            a = L.ones(2)
        return a.is_inference()


@case
def parameter_of_an_inference_tensor_inside(L):
    with L.inference_mode():
        a = L.ones(3)
        p = L.nn.Parameter(a)
        q = L.nn.Parameter(a, requires_grad=False)
    return p.requires_grad, p.is_inference(), q.is_inference(), q.requires_grad


@pytest.mark.parametrize("name", list(CASES))
def test_inference_mode_matches_torch(name):
    assert outcome(CASES[name], tg) == outcome(CASES[name], torch)
