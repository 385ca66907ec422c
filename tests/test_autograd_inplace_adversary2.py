"""In-place ops against saved values, as a careless user writes them, second round: tracegrad
(eager and compiled) against torch.

Each test names the wrong answer it guards against."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
from test_autograd_inplace_adversary import _outcome, _same

STALE = "modified by an inplace operation"


def _grad_of(lib, fn, mode="plain"):
    """fn(a, w) on a fresh a (no grad) and w (float64, requires grad): a after the call and w's
    gradient of the two outputs, where fn writes a in place after reading it."""
    a = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64)
    w = lib.tensor([0.3, -0.7, 0.2], dtype=lib.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = fn(a, w)
    o1, o2 = outs
    if mode == "plain":
        g, = lib.autograd.grad((o1 * o1).sum() + o2, w)
    elif mode == "create_graph":
        g, = lib.autograd.grad((o1 * o1).sum(), w, create_graph=True)
        g, = lib.autograd.grad(g.sum(), w)
    else:                       # the gradient of one output alone
        g, = lib.autograd.grad(o2, w)
    return a.numpy().copy(), g.numpy().copy()


# -- a compiled call that writes an argument it also computed from --------------------------------
# The backward read the argument after the call had written it: a residual x[0] was a view of the
# argument (copied for the backward only after the write-back), and a backward that recomputes the
# forward (one output's gradient alone, create_graph) recomputed from the written values. Mutation
# fuzzer seed 7927: compiled gave w.grad [0.6225, 0.6225] (sigmoid(0.5)) where eager and torch give
# [0.5, 0.5].

WRITES_WHAT_IT_READ = {
    "element_then_element_written": lambda L, a, w: (lambda e: (e.sigmoid_(), (a[0] * 1) * w)[1])(a[0]),
    "view_kept_then_written": lambda L, a, w: (lambda e, r: (e.sigmoid_(), r * w)[1])(a[0], a[0] * 1),
    "whole_then_written": lambda L, a, w: (lambda r: (a.sigmoid_(), r * w)[1])(a * 1),
    "row_of_it": lambda L, a, w: (lambda r: (a[1:].exp_(), r * w)[1])(a[:2].sum() * 1),
}


@pytest.mark.parametrize("mode", ["plain", "create_graph", "one_output"])
@pytest.mark.parametrize("case", sorted(WRITES_WHAT_IT_READ))
def test_compiled_call_that_writes_what_its_backward_reads_gives_eagers_gradient(case, mode):
    body = WRITES_WHAT_IT_READ[case]

    def f(L, a, w):
        y = body(L, a, w)
        return y, (y * w).sum()
    t_after, t_grad = _grad_of(torch, lambda a, w: f(torch, a, w), mode)
    for fn in (lambda a, w: f(tg, a, w), tg.compile(lambda a, w: f(tg, a, w))):
        for _ in range(2):                        # the first call and a cached one
            after, grad = _grad_of(tg, fn, mode)
            np.testing.assert_array_equal(after, t_after)
            np.testing.assert_allclose(grad, t_grad, rtol=1e-14, atol=1e-15)


# -- what a composite op's torch node saves ------------------------------------------------------
# torch's node for lerp, sgn, fmax, dist, cdist, sinc, softplus, gelu, logsigmoid, nan_to_num and
# the regression losses saves operands (or its result) that tracegrad's decomposition does not
# read, and raises "modified by an inplace operation" when one was written before the backward;
# tracegrad gave a gradient: lerp(x, w, a) with a written after gave x.grad [1, -0.416, 0.616],
# y.lerp_(y, w) gave [3, 4, 1], mse_loss(a, w) with a written gave zeros.

def _after(f, which=0):
    """f(L, x, w, a) on a = w * 1, with a written in place (a.mul_(2)) after the op."""
    return lambda L, x, w: (lambda a: (lambda r: (a.mul_(2), r)[1])(f(L, x, w, a)))(w * 1)


F_ = lambda L: L.nn.functional  # noqa: E731

SAVED_BY_TORCHS_NODE = {
    "lerp_self_weight_requires_grad": _after(lambda L, x, w, a: L.lerp(a, w, x)),
    "lerp_end_weight_requires_grad": _after(lambda L, x, w, a: L.lerp(x, a, w)),
    "lerp_weight": _after(lambda L, x, w, a: L.lerp(x, w, a)),
    "lerp_in_place_end_is_self": lambda L, x, w: (lambda y: y.lerp_(y, w))(x * 1),
    "fmax": _after(lambda L, x, w, a: L.fmax(a, x)),
    "fmin_other": _after(lambda L, x, w, a: L.fmin(x, a)),
    "dist": _after(lambda L, x, w, a: L.dist(a, x) * x),
    "dist_p1": _after(lambda L, x, w, a: L.dist(x, a, 1) * x),
    "sinc": _after(lambda L, x, w, a: L.sinc(a)),
    "sgn": _after(lambda L, x, w, a: L.sgn(a) * x),
    "sgn_result": lambda L, x, w: (lambda r: (r.mul_(2), r * x)[1])(L.sgn(w * 1)),
    "sgn_in_place_then_written": lambda L, x, w: (lambda y: y.sgn_().mul_(2) * w)(x * 1),
    "softplus": _after(lambda L, x, w, a: F_(L).softplus(a)),
    "gelu": _after(lambda L, x, w, a: F_(L).gelu(a)),
    "logsigmoid": _after(lambda L, x, w, a: F_(L).logsigmoid(a)),
    "nan_to_num": _after(lambda L, x, w, a: L.nan_to_num(a)),
    "cdist": _after(lambda L, x, w, a: L.cdist(a, x)),
    "cdist_result": lambda L, x, w: (lambda r: (r.mul_(2), r)[1])(L.cdist(w, x)),
    "mse_target": _after(lambda L, x, w, a: F_(L).mse_loss(x, a) * x),
    "smooth_l1": _after(lambda L, x, w, a: F_(L).smooth_l1_loss(a, x) * x),
    "huber": _after(lambda L, x, w, a: F_(L).huber_loss(x, a, reduction="none")),
    "addcdiv_tensor2_only_self_requires_grad":
        lambda L, x, w: (lambda a: (lambda r: (a.mul_(2), r)[1])(L.addcdiv(x, x.detach(), a)))(w.detach() + 1),
    "bce_target_only_target_requires_grad":
        lambda L, x, w: (lambda t: (lambda r: (t.mul_(0.5), r)[1])(F_(L).binary_cross_entropy(w.detach() * 0.5, t)))(
            x * 0.25),
    "bce_with_logits_input": _after(lambda L, x, w, a: F_(L).binary_cross_entropy_with_logits(a, x.sigmoid())),
    "soft_margin_input": _after(lambda L, x, w, a: F_(L).soft_margin_loss(a, x.detach().sign())),
}

# and what torch's node does not save: these still differentiate
NOT_SAVED_BY_TORCHS_NODE = {
    "lerp_scalar_weight": _after(lambda L, x, w, a: L.lerp(a, x, 0.3)),
    "lerp_self_weight_without_grad": _after(lambda L, x, w, a: L.lerp(a, x, w.detach())),
    "lerp_in_place_self": lambda L, x, w: (lambda y: y.lerp_(w, x))(x * 1),
    "lerp_in_place_self_no_grad": lambda L, x, w: (lambda y: (y.lerp_(w, x.detach()), y * x)[1])(x.detach() * 1),
    "sgn_in_place_then_read": lambda L, x, w: (lambda y: y.sgn_() * w)(x * 1),
    "sinc_in_place": lambda L, x, w: (lambda y: y.sinc_())(x * 1),
    "nan_to_num_in_place": lambda L, x, w: (lambda y: y.nan_to_num_())(x * 1),
    "l1": _after(lambda L, x, w, a: F_(L).l1_loss(a, x) * x),
    "trunc": _after(lambda L, x, w, a: L.trunc(a) * x),
}


@pytest.mark.parametrize("case", sorted(SAVED_BY_TORCHS_NODE))
def test_operand_torchs_node_saves_written_before_backward_raises(case):
    f = SAVED_BY_TORCHS_NODE[case]
    t = _outcome(torch, f)
    assert t[0] == "backward" and STALE in t[2], t
    _same(t, _outcome(tg, f))
    c = _outcome(tg, f, compiled=True)
    assert c[0] == "backward" and STALE in c[2], c


@pytest.mark.parametrize("case", sorted(NOT_SAVED_BY_TORCHS_NODE))
def test_operand_torchs_node_does_not_save_written_before_backward_still_differentiates(case):
    f = NOT_SAVED_BY_TORCHS_NODE[case]
    t = _outcome(torch, f)
    assert t[0] == "ok", t
    _same(t, _outcome(tg, f))
    _same(t, _outcome(tg, f, compiled=True))


AFTER_THE_CALL = {
    "lerp_end": (lambda L, a, b, w: L.lerp(a, b, w), "b", True),
    "lerp_self": (lambda L, a, b, w: L.lerp(a, b, w), "a", True),
    "lerp_result": (lambda L, a, b, w: L.lerp(a, b, w), "out", False),
    "sgn_result": (lambda L, a, b, w: L.sgn(w * 1) * a, "sgn", True),
    "sgn_input": (lambda L, a, b, w: L.sgn(w) * a, "w", True),
    "fmax_other": (lambda L, a, b, w: L.fmax(w, b), "b", True),
    "dist_result": (lambda L, a, b, w: L.dist(w, b) * a, "dist", True),
    "mse_target": (lambda L, a, b, w: L.nn.functional.mse_loss(w, b), "b", True),
}


@pytest.mark.parametrize("case", sorted(AFTER_THE_CALL))
def test_compiled_call_whose_input_or_result_torchs_node_saves_is_written_after_it(case):
    """An argument or result of a compiled call written after it: the compiled backward raises as
    eager's and torch's, where torch's node saved it (not where it did not: lerp's result)."""
    f, which, raises = AFTER_THE_CALL[case]
    for lib, compiled in ((torch, False), (tg, False), (tg, True)):
        a = lib.tensor([0.5, 1.0], dtype=lib.float64)
        b = lib.tensor([1.5, -2.0], dtype=lib.float64)
        w = lib.tensor([0.3, 0.8], dtype=lib.float64, requires_grad=True)
        kept = {}

        def g(a, b, w):
            if which in ("sgn", "dist"):
                r = {"sgn": lambda: lib.sgn(w * 1), "dist": lambda: lib.dist(w, b)}[which]()
                return r, r * a
            return None, f(lib, a, b, w)
        fn = tg.compile(g) if compiled else g
        r, out = fn(a, b, w)
        with lib.no_grad():
            {"a": a, "b": b, "w": w, "out": out, "sgn": r, "dist": r}[which].mul_(2)
        if raises:
            with pytest.raises(RuntimeError, match=STALE):
                out.sum().backward()
        else:
            out.sum().backward()
            kept[lib] = w.grad.numpy().copy()


# -- in-place unary ops torch has no derivative for ------------------------------------------------
# derivatives.yaml: asinh_, acosh_, atanh_: not_implemented("inplace version of asinh"); the backward
# raises NotImplementedError. tracegrad differentiated them as the out-of-place ops (asinh_ of
# [0.3, 0.5, 0.7] gave a gradient [0.566, 0.861, 1.069]).

@pytest.mark.parametrize("name", ["asinh_", "acosh_", "atanh_", "arcsinh_", "arccosh_", "arctanh_"])
def test_in_place_inverse_hyperbolic_ops_raise_torchs_error_at_backward(name):
    x0 = [1.3, 1.5, 1.7] if "cosh" in name else [0.3, 0.5, 0.7]
    res = []
    for lib, compiled in ((torch, False), (tg, False), (tg, True)):
        x = lib.tensor(x0, dtype=lib.float64, requires_grad=True)
        f = (lambda x: getattr(x * 1, name)())
        fn = tg.compile(f) if compiled else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = fn(x)
        res.append((type(y.grad_fn).__name__, y.detach().numpy().copy()))
        with pytest.raises(NotImplementedError) as e:
            y.sum().backward()
        op = name.replace("arc", "a")[:-1]
        assert str(e.value) == f"the derivative for 'inplace version of {op}' is not implemented."
        # no gradient needed: the values, as the out-of-place op's
        z = getattr(lib.tensor(x0, dtype=lib.float64), name)()
        np.testing.assert_allclose(z.numpy(), getattr(np, name.replace("arc", "a").replace("a", "arc", 1)[:-1])(x0),
                                   rtol=1e-15)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-15)
    np.testing.assert_array_equal(res[2][1], res[1][1])
    assert res[1][0] == res[0][0] == name.replace('arc', 'a')[:-1].capitalize() + 'Backward1'


# -- a 0-dim tensor value that the destination's dtype cannot hold ---------------------------------
# torch reads masked_fill's and index_fill's 0-dim tensor value (and x[mask] = value's) as a number,
# converted to the input's dtype with its checked conversion: int8 masked_fill(mask, tensor(300))
# raised "value cannot be converted to type int8_t without overflow" in torch and gave 44 here, a
# float16 one with tensor(1e6) inf, uint8 with tensor(-1.0) 255; a Python 127.9 into int8 gave 127.
# Where the conversion fits, the values are torch's; compiled, such a value (which the check reads)
# runs eagerly.

FILLS = {
    "masked_fill": lambda L, x, v: x.masked_fill(L.tensor([True, False, True]), v),
    "masked_fill_": lambda L, x, v: x.masked_fill_(L.tensor([True, False, True]), v),
    "index_fill": lambda L, x, v: x.index_fill(0, L.tensor([1]), v),
    "index_fill_": lambda L, x, v: x.index_fill_(0, L.tensor([1]), v),
    "setitem_mask": lambda L, x, v: x.__setitem__(L.tensor([True, False, True]), v) or x,
}
FILL_DTYPES = ["int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "bool"]
FILL_VALUES = [("int64", 300), ("int64", -1), ("int64", -256), ("int64", 2 ** 31), ("int64", 2 ** 40),
               ("float64", 1e6), ("float64", 1e40), ("float64", -2.7), ("float64", -0.5), ("float64", 127.9),
               ("float64", 255.5), ("float64", 65519.0), ("float64", float("nan")), ("float64", float("inf")),
               ("float32", 3.4028235e38), ("bool", True), ("int16", -200), ("float16", 65504.0)]


def _fill(lib, op, dt, vdt, v, how):
    x = lib.tensor([1, 2, 3]).to(getattr(lib, dt))
    value = v if how == "number" else lib.tensor(v, dtype=getattr(lib, vdt))
    fn = lambda x: FILLS[op](lib, x, value)    # noqa: E731
    if how == "compiled":
        fn = tg.compile(lambda x, value: FILLS[op](tg, x, value))
        fn = (lambda f: lambda x: f(x, value))(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = fn(x)
        except RuntimeError as e:
            return ("raised", str(e))
    return ("ok", str(r.dtype).split(".")[-1], r.float().tolist() if dt == "bfloat16" else r.tolist())


@pytest.mark.parametrize("op", sorted(FILLS))
def test_zero_dim_value_the_destination_cannot_hold_raises_as_torch(op):
    raised = 0
    for dt in FILL_DTYPES:
        for vdt, v in FILL_VALUES:
            t = _fill(torch, op, dt, vdt, v, "tensor")
            raised += t[0] == "raised"
            for how in ("tensor", "compiled"):
                assert str(_fill(tg, op, dt, vdt, v, how)) == str(t), (op, dt, vdt, v, how)
    assert raised > 40


@pytest.mark.parametrize("dt", FILL_DTYPES)
def test_masked_fill_with_a_python_number_the_destination_cannot_hold_raises_as_torch(dt):
    """A Python float into an integer dtype: torch's checked conversion (127.9 into int8 overflows;
    NaN and inf too), where numpy's conversion raised its own errors or truncated."""
    for vdt, v in FILL_VALUES:
        t = _fill(torch, "masked_fill", dt, vdt, v, "number")
        g = _fill(tg, "masked_fill", dt, vdt, v, "number")
        assert str(g) == str(t), (dt, v)


# -- mutation fuzzer seeds 6500-8500, reduced ----------------------------------------------------

def test_setitem_of_a_view_with_itself_through_a_size_one_expand_writes_as_torch():
    """Seed 7615: v[:] += v on a.view(1, -1).expand(1, 1, 3) raised torch's overlap error: the
    in-place add gave v[:] a writeable alias whose size-1 dims are strided apart, which the check
    took for another layout of the same memory. torch writes [2, 4, 6]."""
    for lib in (torch, tg):
        a = lib.tensor([1., 2., 3.])
        v = a.view(1, -1).expand(1, 1, 3)
        v[:] += v
        np.testing.assert_array_equal(a.numpy(), [2., 4., 6.])
    out = []
    for fn in (lambda a: (a.view(1, -1).expand(1, 1, 3).__setitem__(slice(None), a.view(1, 1, 3) * 2), a * 1)[1],):
        for f in (fn, tg.compile(fn)):
            a = tg.tensor([1., 2., 3.])
            out.append(f(a).numpy().copy())
    np.testing.assert_array_equal(out[1], out[0])


def test_in_place_op_on_a_view_of_an_empty_tensor_that_requires_grad():
    """Seed 7549: copy_ into an empty view of an empty tensor with history raised NotImplementedError
    (its as_strided geometry was asked of a base with no elements); torch writes it, and the backward
    raises for exp's result written by fill_."""
    res = []
    for lib in (torch, tg):
        a = lib.ones(4, 4, requires_grad=True)
        y = (a.chunk(2, -1)[1].expand(3, 4, 2).narrow(0, 2, 0) * 0.3).exp()
        y.fill_(-1.5)
        v = y[:, :, 1]
        v.copy_(v)
        assert tuple(v.shape) == (0, 4) and type(v.grad_fn).__name__ == "AsStridedBackward0"
        with pytest.raises(RuntimeError, match=STALE) as e:
            (y.sum() + v.sum()).backward()
        res.append(str(e.value))
    assert res[1] == res[0]
    b = tg.zeros(0, 3, requires_grad=True) * 1
    b[:, 1].add_(1)                       # (no exp: the backward runs)
    b.sum().backward()


# -- comparisons and logical ops written in place on a value that requires grad --------------------
# torch: eq_, lt_, ... give the value a node of their own (EqBackward0, LtBackward1, ...) whose
# gradient is zero for self and other; tracegrad kept self's old node, so the gradient flowed
# through the write as if nothing had been written: y = x * 2; y.eq_(0.5); (y * 3).sum() gave
# x.grad [6, 6, 6] where torch gives zeros. logical_and_ and the others keep self's node in torch
# too (the gradient flows on), which eager did; compiled, the result required no grad and
# backward raised.

IN_PLACE_COMPARISONS = [("eq_", 0.6), ("ne_", 0.6), ("lt_", 0.8), ("le_", 0.6), ("gt_", 0.8), ("ge_", 1.0),
                        ("greater_", 0.8), ("less_", 0.8), ("greater_equal_", 1.0), ("less_equal_", 1.0),
                        ("not_equal_", 0.6), ("eq_", "w"), ("lt_", "w"), ("ge_", "w_nograd"),
                        ("logical_not_", None), ("logical_and_", "self"), ("logical_or_", "w"),
                        ("logical_xor_", "self")]


@pytest.mark.parametrize("op,other", IN_PLACE_COMPARISONS)
def test_comparison_written_in_place_gives_torchs_node_and_gradient(op, other):
    res = []
    for lib, compiled in ((torch, False), (tg, False), (tg, True)):
        x = lib.tensor([0.3, 0.5, 0.7], requires_grad=True)
        w = lib.tensor([0.6, 0.1, 0.7], requires_grad=True)

        def f(x, w):
            y = x * 2
            a = {"self": (y,), "w": (w,), "w_nograd": (w.detach(),), None: ()}.get(other, (other,))
            getattr(y, op)(*a)
            return y
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = (tg.compile(f) if compiled else f)(x, w)
        (y * 3).sum().backward()
        res.append((None if compiled else type(y.grad_fn).__name__, y.detach().numpy().copy(),
                    x.grad.numpy().copy(), None if w.grad is None else w.grad.numpy().copy()))
    (tn, ty, tx, tw), (en, ey, ex, ew), (_, cy, cx, cw) = res
    assert en == tn
    for a, b, c in ((ty, ey, cy), (tx, ex, cx)):
        np.testing.assert_array_equal(b, a)
        np.testing.assert_array_equal(c, b)
    assert (tw is None) == (ew is None) == (cw is None)
    if tw is not None:
        np.testing.assert_array_equal(ew, tw)
        np.testing.assert_array_equal(cw, ew)


def test_soft_margin_loss_refuses_a_target_that_requires_grad_as_torch():
    """torch's soft_margin_loss has no derivative for its target and refuses one that requires grad
    at the call; tracegrad gave the target a gradient."""
    msgs = []
    for lib in (torch, tg):
        a = lib.tensor([[0.7, 0.2], [0.3, 0.9]], dtype=lib.float64, requires_grad=True)
        s = lib.tensor([[1., -1.], [-1., 1.]], dtype=lib.float64, requires_grad=True)
        with pytest.raises(RuntimeError) as e:
            lib.nn.functional.soft_margin_loss(a, s)
        msgs.append(str(e.value))
        with lib.no_grad():
            lib.nn.functional.soft_margin_loss(a, s)
        lib.nn.functional.soft_margin_loss(a, s.detach()).backward()
    assert msgs[1] == msgs[0]


def test_calling_a_composites_grad_fn_checks_what_torchs_node_saved():
    """grad_fn(grad) runs the node alone: torch checks its saved values there too."""
    msgs = []
    for lib in (torch, tg):
        x = lib.tensor([0.3, -0.5], dtype=lib.float64, requires_grad=True)
        a = x * 1
        r = lib.sgn(a)
        a.mul_(2)
        with pytest.raises(RuntimeError, match=STALE) as e:
            r.grad_fn(lib.ones(2, dtype=lib.float64))
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]


@pytest.mark.parametrize("op", ["mse_loss", "lerp", "fmax", "cdist"])
def test_inference_tensor_a_composites_torch_node_saves_is_refused_as_torch(op):
    """torch's node saves the inference tensor, which it refuses ("Inference tensors cannot be saved
    for backward"); tracegrad's decomposition saved none, and ran."""
    msgs = []
    for lib in (torch, tg):
        with lib.inference_mode():
            t = lib.tensor([[0.5, 0.2]])
        w = lib.tensor([[0.3, 0.4]], requires_grad=True)
        f = {"mse_loss": lambda: lib.nn.functional.mse_loss(w, t), "lerp": lambda: lib.lerp(t, w, w),
             "fmax": lambda: lib.fmax(w, t), "cdist": lambda: lib.cdist(w, t)}[op]
        with pytest.raises(RuntimeError) as e:
            f()
        msgs.append(str(e.value))
        with lib.no_grad():
            f()
    assert msgs[1] == msgs[0]


@pytest.mark.parametrize("shapes", [((3, 3), (3, 3), ()), ((3,), (3, 3), (3,)), ((3, 3), (3, 3), (3, 3)),
                                    ((3,), (3,), (3,)), ((3,), (3,), ()), ((2, 3), (2, 3), (2,))])
def test_cosine_embedding_loss_checks_its_shapes_as_torch(shapes):
    """A 2-D target, or 1-D inputs beside a 1-D target, gave a number where torch raises."""
    res = []
    for lib in (torch, tg):
        a, b, t = (lib.ones(s, dtype=lib.float64) for s in shapes)
        try:
            res.append(("ok", round(lib.nn.functional.cosine_embedding_loss(a, b * 2, t).item(), 12)))
        except RuntimeError as e:
            res.append(("raised", str(e)))
    assert res[1] == res[0]
