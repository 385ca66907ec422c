"""autograd.gradcheck / gradgradcheck against torch's on the same functions.

Every function is written once as `make(L)` over a library L (tracegrad or torch), so
both libraries check the same mathematics; the boolean results, exception types and
messages (which print the Jacobians) must agree.
"""
import re
import warnings

import numpy as np
import pytest
import torch

import tracegrad

gradcheck = tracegrad.autograd.gradcheck
gradgradcheck = tracegrad.autograd.gradgradcheck
from tracegrad.autograd.gradcheck import GradcheckError  # noqa: E402
from torch.autograd.gradcheck import GradcheckError as TorchGradcheckError  # noqa: E402

RS = np.random.RandomState(1234)
A34 = RS.randn(3, 4)
B34 = RS.randn(3, 4)
C43 = RS.randn(4, 3)
P34 = RS.rand(3, 4) + 0.5            # positive, away from 0
V4 = RS.randn(4)
M234 = RS.randn(2, 3, 4)
N245 = RS.randn(2, 4, 5)


def f64(L, a, requires_grad=True):
    return L.tensor(a, dtype=L.float64, requires_grad=requires_grad)


def outcome(L, check, make_f, make_inputs, **kw):
    """What the check did: its result, or the exception's type and message; and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = getattr(L.autograd, check)(make_f(L), make_inputs(L), **kw)
        except Exception as e:  # noqa: BLE001  (compared with torch's below)
            res = (type(e).__name__, str(e))
    return res, [str(w.message) for w in caught if "gradient" in str(w.message)]


def assert_same_as_torch(check, make_f, make_inputs, **kw):
    tg_res = outcome(tracegrad, check, make_f, make_inputs, **kw)
    torch_res = outcome(torch, check, make_f, make_inputs, **kw)
    assert tg_res == torch_res
    return tg_res[0]


# -- correct functions: gradcheck (and gradgradcheck) pass, as in torch ---------------------

OPS = {
    "sin_mul": (lambda L: lambda x: x.sin() * x, lambda L: (f64(L, A34),)),
    "exp_log": (lambda L: lambda x: x.exp() + x.log(), lambda L: (f64(L, P34),)),
    "sqrt_rsqrt": (lambda L: lambda x: x.sqrt() * x.rsqrt().tanh(), lambda L: (f64(L, P34),)),
    "sigmoid_erf": (lambda L: lambda x: x.sigmoid() - x.erf(), lambda L: (f64(L, A34),)),
    "expm1_log1p": (lambda L: lambda x: x.expm1() * x.log1p(), lambda L: (f64(L, P34),)),
    "div_pow": (lambda L: lambda x, y: x / y + x ** 3 - y ** 0.5, lambda L: (f64(L, A34), f64(L, P34))),
    "pow_tensor": (lambda L: lambda x, y: x ** y, lambda L: (f64(L, P34), f64(L, A34))),
    "broadcast_sub": (lambda L: lambda x, v: (x - v) * v, lambda L: (f64(L, A34), f64(L, V4))),
    "maximum_clamp": (lambda L: lambda x, y: L.maximum(x, y) + x.clamp(-0.5, 0.5),
                      lambda L: (f64(L, A34), f64(L, B34))),
    "where_relu": (lambda L: lambda x, y: L.where(x > 0, x, y).relu() + y.abs(),
                   lambda L: (f64(L, A34), f64(L, B34))),
    "sum_mean_dims": (lambda L: lambda x: (x.sum(0), x.mean(1, keepdim=True), x.sum()),
                      lambda L: (f64(L, A34),)),
    "prod_amax": (lambda L: lambda x: (x.prod(1), x.amax(0)), lambda L: (f64(L, A34),)),
    "var_std_norm": (lambda L: lambda x: x.var(1) + x.std(1) + x.norm(dim=1), lambda L: (f64(L, A34),)),
    "logsumexp_softmax": (lambda L: lambda x: (x.logsumexp(1), x.softmax(0), x.log_softmax(1)),
                          lambda L: (f64(L, A34),)),
    "matmul": (lambda L: lambda x, y: x @ y, lambda L: (f64(L, A34), f64(L, C43))),
    "mv_outer": (lambda L: lambda x, v: (x @ v, L.outer(v, v)), lambda L: (f64(L, A34), f64(L, V4))),
    "bmm_einsum": (lambda L: lambda a, b: (L.bmm(a, b), L.einsum("bij,bjk->bik", a, b)),
                   lambda L: (f64(L, M234), f64(L, N245))),
    "views": (lambda L: lambda x: x.t().reshape(2, 6).unsqueeze(0).permute(2, 0, 1).squeeze(1).flip(0),
              lambda L: (f64(L, A34),)),
    "index_slice": (lambda L: lambda x: (x[1:, ::2] * x[0, 1], x[..., None].expand(3, 4, 2).sum(-1)),
                    lambda L: (f64(L, A34),)),
    "cat_stack_split": (lambda L: lambda x, y: (L.cat([x, y], 1), L.stack([x, y]).sum(0), *x.split(2, 1)),
                        lambda L: (f64(L, A34), f64(L, B34))),
    "gather_select_mask": (lambda L: lambda x: (x.gather(1, L.tensor([[0, 2], [1, 1], [3, 0]])),
                                                x.index_select(0, L.tensor([2, 0])),
                                                x.masked_fill(x > 0.5, 0.0)),
                           lambda L: (f64(L, A34),)),
    "tril_roll_repeat": (lambda L: lambda x: (x.tril(), x.triu(1), x.roll(1, 0), x.repeat(2, 1)),
                         lambda L: (f64(L, A34),)),
    "int_and_float_args": (lambda L: lambda x, n, s: (x * s) ** n, lambda L: (f64(L, A34), 3, 0.5)),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_gradcheck_passes_on_correct_functions(name):
    make_f, make_inputs = OPS[name]
    assert assert_same_as_torch("gradcheck", make_f, make_inputs) is True


@pytest.mark.parametrize("name", ["sin_mul", "div_pow", "logsumexp_softmax", "matmul", "views", "var_std_norm"])
def test_gradgradcheck_passes_on_correct_functions(name):
    make_f, make_inputs = OPS[name]
    assert gradgradcheck(make_f(tracegrad), make_inputs(tracegrad)) is True
    assert torch.autograd.gradgradcheck(make_f(torch), make_inputs(torch)) is True


@pytest.mark.parametrize("name", ["sin_mul", "broadcast_sub", "sum_mean_dims", "cat_stack_split"])
def test_fast_mode_passes_on_correct_functions(name):
    make_f, make_inputs = OPS[name]
    assert assert_same_as_torch("gradcheck", make_f, make_inputs, fast_mode=True) is True


# -- wrong derivatives ---------------------------------------------------------------

def square_with_identity_grad(L):
    """Values x**2, but the gradient of x (the detached part carries no gradient)."""
    return lambda x: x + (x.detach() ** 2 - x.detach())


def doubled_by_hook(L):
    def f(x):
        y = x * 1
        y.register_hook(lambda g: g * 2)
        return y
    return f


def test_wrong_derivative_fails_with_torchs_message():
    res = assert_same_as_torch("gradcheck", square_with_identity_grad, lambda L: (f64(L, A34[0]),))
    assert res[0] == "GradcheckError"
    assert res[1].startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:tensor([[")
    assert "\nanalytical:tensor([[1., 0., 0., 0.],\n" in res[1]
    numerical = np.diag(2 * A34[0])
    with pytest.raises(GradcheckError) as info:
        gradcheck(square_with_identity_grad(tracegrad), (f64(tracegrad, A34[0]),))
    assert isinstance(info.value, RuntimeError)
    printed = re.search(r"numerical:(tensor\(.*?dtype=torch.float64\))", str(info.value), re.S).group(1)
    values = [float(v) for v in re.findall(r"-?\d+\.\d+", printed)]
    np.testing.assert_allclose(values, numerical.reshape(-1), atol=1e-4)


def test_hook_that_scales_the_gradient_is_caught():
    res = assert_same_as_torch("gradcheck", doubled_by_hook, lambda L: (f64(L, A34[0]),))
    assert res[0] == "GradcheckError" and "analytical:tensor([[2., 0., 0., 0.]," in res[1]


def test_mismatch_names_the_output_and_input():
    def make(L):
        return lambda x, y: (x.sin(), y + (y.detach() ** 2 - y.detach()), x.argmax())
    res = assert_same_as_torch("gradcheck", make, lambda L: (f64(L, A34[0]), f64(L, B34[0])))
    assert res[1].startswith("Jacobian mismatch for output 1 with respect to input 1,\n")


def test_raise_exception_false_returns_false():
    for make in (square_with_identity_grad, doubled_by_hook):
        assert assert_same_as_torch("gradcheck", make, lambda L: (f64(L, A34[0]),), raise_exception=False) is False
        assert gradcheck(make(tracegrad), (f64(tracegrad, A34[0]),), raise_exception=False) is False


def test_fast_mode_failure_matches_torch_up_to_rounding():
    tg_res, _ = outcome(tracegrad, "gradcheck", square_with_identity_grad, lambda L: (f64(L, A34),), fast_mode=True)
    to_res, _ = outcome(torch, "gradcheck", square_with_identity_grad, lambda L: (f64(L, A34),), fast_mode=True)
    assert tg_res[0] == to_res[0] == "GradcheckError"
    number = r"-?\d+\.\d+(?:e-?\d+)?"
    head = r"Jacobian mismatch for output 0 with respect to input 0,\nnumerical:(%s)\nanalytical:(%s)\n" % (number,
                                                                                                      number)
    tg_nums = [float(v) for v in re.match(head, tg_res[1]).groups()]
    to_nums = [float(v) for v in re.match(head, to_res[1]).groups()]
    np.testing.assert_allclose(tg_nums, to_nums, rtol=1e-10)
    # the slow-mode Jacobians that follow print the same
    def slow_part(msg):
        return msg.split("Numerical:\n")[1].split("The max per-element")[0]
    assert slow_part(tg_res[1]) == slow_part(to_res[1])
    assert assert_same_as_torch("gradcheck", square_with_identity_grad, lambda L: (f64(L, A34),), fast_mode=True,
                                raise_exception=False) is False


# -- input checks and the checks after the Jacobians ------------------------------------

def test_non_double_input_warns_like_torch():
    res = assert_same_as_torch("gradcheck", lambda L: lambda x: x * 3,
                               lambda L: (L.tensor(A34[0], dtype=L.float32, requires_grad=True),),
                               raise_exception=False)
    assert res is False
    _, warned = outcome(tracegrad, "gradcheck", lambda L: lambda x: x * 3,
                        lambda L: (L.tensor(A34[0], dtype=L.float32, requires_grad=True),), raise_exception=False)
    assert warned == ["Input #0 requires gradient and is not a double precision floating point or complex. This "
                      "check will likely fail if all the inputs are not of double precision floating point or "
                      "complex. "]


def test_no_input_requiring_grad_and_overlapping_inputs_raise_like_torch():
    res = assert_same_as_torch("gradcheck", lambda L: lambda x: x * 3, lambda L: (f64(L, A34, False),))
    assert res[0] == "ValueError"
    res = assert_same_as_torch("gradcheck", lambda L: lambda x: x * 3,
                               lambda L: (f64(L, A34[:1, :1], False).expand(3, 4).requires_grad_(),))
    assert res[0] == "RuntimeError" and "stride 0" in res[1]


def test_non_reentrant_backward_and_nondet_tol():
    def noisy(L):
        def f(x):
            y = x * 1
            y.register_hook(lambda g: None if g is None else g + 1e-9 * L.randn_like(g) * (g != 0))
            return y
        return f
    res = assert_same_as_torch("gradcheck", noisy, lambda L: (f64(L, A34[0]),))
    assert res[0] == "GradcheckError" and res[1].startswith("Backward is not reentrant")
    assert assert_same_as_torch("gradcheck", noisy, lambda L: (f64(L, A34[0]),), nondet_tol=1e-6) is True


def test_backward_not_multiplied_by_grad_output():
    def make(L):
        def f(x):
            y = x * 1
            y.register_hook(lambda g: g if bool((g != 0).any()) else g + 1)
            return y
        return f
    res = assert_same_as_torch("gradcheck", make, lambda L: (f64(L, A34[0]),))
    assert res == ("GradcheckError", "backward not multiplied by grad_output")
    assert assert_same_as_torch("gradcheck", make, lambda L: (f64(L, A34[0]),), raise_exception=False) is False


def test_function_without_differentiable_outputs():
    res = assert_same_as_torch("gradcheck", lambda L: lambda x: x.detach() * 2, lambda L: (f64(L, A34[0]),))
    assert res == ("GradcheckError", "Numerical gradient for function expected to be zero")
    assert assert_same_as_torch("gradcheck", lambda L: lambda x: (x.detach() > 5).double(),
                                lambda L: (f64(L, A34[0]),)) is True


def test_identity_and_noncontiguous_inputs():
    assert assert_same_as_torch("gradcheck", lambda L: lambda x: x, lambda L: (f64(L, A34[0]),)) is True
    assert assert_same_as_torch("gradcheck", lambda L: lambda x: x.exp(),
                                lambda L: (f64(L, A34, False).t().requires_grad_(),)) is True
    # storage numpy will not write to (a broadcast view) is perturbed through a private copy
    held = np.broadcast_to(A34[:1, :1], (1, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                   # torch's warning about non-writable arrays
        x = tracegrad.from_numpy(held).requires_grad_()
    assert gradcheck(lambda t: t.exp() * t, (x,)) is True and x._data is held
    assert gradcheck(lambda t: t.exp() * t, (x,), fast_mode=True) is True


def test_options_torch_has_and_tracegrad_cannot_honour_raise():
    x = f64(tracegrad, A34[0])
    with pytest.raises(NotImplementedError, match="vmap"):
        gradcheck(lambda t: t.sin(), (x,), check_batched_grad=True)
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        gradgradcheck(lambda t: t.sin(), (x,), check_fwd_over_rev=True)
    assert gradcheck(lambda t: t.sin(), (x,), check_undefined_grad=False, check_grad_dtypes=True) is True


# -- gradgradcheck --------------------------------------------------------------------

def cube_with_constant_second_derivative(L):
    """x**3 with the right first derivative (3 x**2) whose own derivative is lost (detached)."""
    return lambda x: x.detach() ** 3 + 3 * x.detach() ** 2 * (x - x.detach())


def test_gradgradcheck_catches_a_wrong_second_derivative():
    make_inputs = lambda L: (f64(L, A34[0]),)  # noqa: E731
    assert assert_same_as_torch("gradcheck", cube_with_constant_second_derivative, make_inputs) is True
    assert gradgradcheck(cube_with_constant_second_derivative(tracegrad), make_inputs(tracegrad),
                         raise_exception=False) is False
    assert torch.autograd.gradgradcheck(cube_with_constant_second_derivative(torch), make_inputs(torch),
                                        raise_exception=False) is False
    assert assert_same_as_torch("gradgradcheck", cube_with_constant_second_derivative, make_inputs,
                                raise_exception=False) is False
    # with the same grad_outputs, the message is torch's
    with pytest.raises(GradcheckError) as tg_info:
        gradgradcheck(cube_with_constant_second_derivative(tracegrad), make_inputs(tracegrad),
                      (f64(tracegrad, B34[0]),))
    with pytest.raises(TorchGradcheckError) as torch_info:
        torch.autograd.gradgradcheck(cube_with_constant_second_derivative(torch), make_inputs(torch),
                                     (f64(torch, B34[0]),))
    assert str(tg_info.value) == str(torch_info.value)
    assert str(tg_info.value).startswith("Jacobian mismatch for output 0 with respect to input 0,\n")


def test_gradgradcheck_fast_mode_and_noncontiguous_grad_outputs():
    make_f, make_inputs = OPS["sin_mul"]
    assert gradgradcheck(make_f(tracegrad), make_inputs(tracegrad), fast_mode=True) is True
    assert gradgradcheck(make_f(tracegrad), make_inputs(tracegrad), gen_non_contig_grad_outputs=True) is True


def test_gradcheck_is_the_function_whatever_is_imported_first():
    # torch users write `from torch.autograd.gradcheck import GradcheckError` before touching
    # torch.autograd.gradcheck; the package attribute must stay the function
    import subprocess
    import sys
    code = ("from tracegrad.autograd.gradcheck import GradcheckError\n"
            "import tracegrad\n"
            "assert callable(tracegrad.autograd.gradcheck), tracegrad.autograd.gradcheck\n"
            "assert issubclass(tracegrad.autograd.gradcheck.GradcheckError, RuntimeError)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
