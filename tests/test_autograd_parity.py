"""Autograd semantics against torch (issue 15): in-place ops on views, saved tensors and
version counters, freed graphs, inference_mode, anomaly mode, hooks, custom Function
corners, autograd.grad options, gradcheck, from_numpy/numpy and .grad/.data rules.

Each case is one function run with `m` = torch and `m` = tracegrad; the two must give
the same values, or raise the same exception type with the same message."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _plain(v):
    if isinstance(v, (torch.Tensor, tg.Tensor)):
        d = v.detach()
        return ("tensor", tuple(d.shape), str(d.dtype), np.asarray(d.tolist(), dtype=np.float64))
    if isinstance(v, np.ndarray):
        return ("ndarray", v.shape, str(v.dtype), v.astype(np.float64))
    if isinstance(v, (list, tuple)):
        return type(v).__name__, [_plain(x) for x in v]
    return v


def _assert_same(t, g, rtol, atol, where="result"):
    if isinstance(t, tuple) and t and t[0] in ("tensor", "ndarray") and len(t) == 4:
        assert isinstance(g, tuple) and g[:3] == t[:3], (where, g[:3], t[:3])
        np.testing.assert_allclose(g[3], t[3], rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
    elif isinstance(t, tuple) and len(t) == 2 and t[0] in ("list", "tuple"):
        assert isinstance(g, tuple) and g[0] == t[0] and len(g[1]) == len(t[1]), (where, g, t)
        for k, (a, b) in enumerate(zip(t[1], g[1])):
            _assert_same(a, b, rtol, atol, f"{where}[{k}]")
    else:
        assert g == t, (where, g, t)


def _outcome(m, fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", _plain(fn(m))
    except Exception as e:          # the exception is the result compared
        return "raised", type(e).__name__, str(e)


def same(fn, rtol=1e-6, atol=1e-7, expect="ok"):
    """fn(torch) and fn(tracegrad) give the same result or raise the same error; torch's
    outcome is `expect` ("ok", "raised", or None for either)."""
    t, g = _outcome(torch, fn), _outcome(tg, fn)
    assert expect is None or t[0] == expect, t
    assert g[0] == t[0], f"torch: {t}\ntracegrad: {g}"
    if t[0] == "raised":
        assert g[1:] == t[1:], f"torch: {t}\ntracegrad: {g}"
    else:
        _assert_same(t[1], g[1], rtol, atol)
    return t


def raises(fn):
    """As `same`, and torch raises here."""
    return same(fn, expect="raised")


def _name(x):
    return None if x is None else type(x).__name__


# == in-place ops on views ===============================================================================

def test_inplace_on_row_view_of_nonleaf_gives_base_the_right_gradient():
    def run(m):
        a = m.tensor([[1., 2.], [3., 4.]], dtype=m.float64, requires_grad=True)
        base = a * 1
        x = base[0]
        x.mul_(2)
        (base * base).sum().backward()
        return a.grad, _name(base.grad_fn), _name(x.grad_fn)
    same(run)


def test_view_of_view_and_intermediate_view_see_the_new_history():
    def run(m):
        a = m.arange(12., dtype=m.float64).reshape(3, 4).requires_grad_()
        b = (a * 2).t()                 # b is a view; its row is modified through another view
        v = b[1]
        v.mul_(a[0, :3])
        w = b[2:][:, 1:]
        w.add_(1)
        (b ** 2).sum().backward()
        return a.grad, _name(b.grad_fn), _name(v.grad_fn)
    same(run)


@pytest.mark.parametrize("layout", ["fortran", "from_numpy_fortran", "gapped"])
def test_inplace_on_view_of_non_contiguous_base(layout):
    def run(m):
        w = m.tensor([1., 2., 3.], dtype=m.float64, requires_grad=True)
        if layout == "fortran":
            a = m.arange(12., dtype=m.float64).reshape(3, 4).requires_grad_()
            c = a.t() * 2               # numpy keeps the transposed layout
            rows = (c, a)
        elif layout == "from_numpy_fortran":
            c = m.from_numpy(np.asfortranarray(np.arange(12.).reshape(4, 3)))
            rows = (c,)
        else:
            c = m.from_numpy(np.arange(48.).reshape(8, 6)[::2, ::2])
            rows = (c,)
        contiguous = c.is_contiguous()
        c[1].mul_(w)
        c.t()[2].copy_(w.sum() * m.ones(4, dtype=m.float64))
        (c ** 2).sum().backward()
        return contiguous, w.grad, c, *[r.grad for r in rows[1:]]
    same(run)


def test_view_of_leaf_inplace_errors():
    def leaf(m):
        a = m.ones(3, requires_grad=True)
        a[0].mul_(2)

    def leaf_view_made_in_no_grad(m):
        a = m.ones(3, requires_grad=True)
        with m.no_grad():
            v = a[0:2]
        v.mul_(2)
    raises(leaf)
    raises(leaf_view_made_in_no_grad)


def test_view_of_leaf_modified_in_no_grad_gets_as_strided_history():
    def run(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        v = a[:2]
        with m.no_grad():
            a.mul_(2)
        fn = v.grad_fn
        (v * v).sum().backward()
        return _name(fn), _name(fn.next_functions[0][0]), a.grad
    same(run)


def test_views_made_in_no_grad():
    def inplace_with_grad(m):
        a = m.ones(3, requires_grad=True)
        b = a * 2
        with m.no_grad():
            v = b[0:2]
        v.mul_(2)

    def inplace_in_no_grad(m):
        a = m.ones(3, requires_grad=True)
        b = a * 2
        with m.no_grad():
            v = b[0:2]
            v.mul_(2)
        b.sum().backward()
        return a.grad, b, _name(b.grad_fn)

    def attributes(m):
        a = m.ones(3, requires_grad=True)
        with m.no_grad():
            v = a[:2]
        return v.requires_grad, v.is_leaf, v.grad_fn, v._base is a

    def base_modified_later(m):
        a = m.ones(3, requires_grad=True)
        b = a * 2
        with m.no_grad():
            v = b[:2]
        b.mul_(2)
        return v.grad_fn

    def plain_base_copy_from_grad(m):
        c = m.ones(3)
        with m.no_grad():
            x = c[:2]
        x.copy_(m.ones(2, requires_grad=True))
    raises(inplace_with_grad)
    same(inplace_in_no_grad)
    same(attributes)
    raises(base_modified_later)
    raises(plain_base_copy_from_grad)


@pytest.mark.parametrize("op", ["unbind", "split", "chunk"])
def test_multi_output_views_refuse_inplace(op):
    def views_of(m, b):
        return {"unbind": lambda: b.unbind(0), "split": lambda: b.split(1), "chunk": lambda: b.chunk(2)}[op]()

    def direct(m):
        b = m.ones(2, 3, requires_grad=True) * 2
        views_of(m, b)[0].mul_(2)

    def view_of_it(m):
        b = m.ones(2, 3, requires_grad=True) * 2
        views_of(m, b)[1][:, :2].add_(1)

    def base_modified(m):
        b = m.ones(2, 3, requires_grad=True) * 2
        x = views_of(m, b)[0]
        b.mul_(2)
        return x.grad_fn

    def no_grad_is_fine(m):
        a = m.ones(2, 3, requires_grad=True)
        b = a * 2
        with m.no_grad():
            views_of(m, b)[0].mul_(2)
        b.sum().backward()
        return b, a.grad

    def plain_is_fine(m):
        b = m.ones(2, 3)
        views_of(m, b)[0].mul_(2)
        return b

    def plain_with_grad_other(m):
        b = m.ones(2, 3)
        views_of(m, b)[0].mul_(m.ones(3, requires_grad=True))
    raises(direct)
    raises(view_of_it)
    raises(base_modified)
    same(no_grad_is_fine)
    same(plain_is_fine)
    raises(plain_with_grad_other)


def test_base_modified_after_view_regenerates_its_grad_fn():
    def base_mul(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        b = a * 1
        v = b[:2]
        b.mul_(3)
        (v * v).sum().backward()
        return a.grad, _name(v.grad_fn)

    def base_exp(m):
        a = m.tensor([1., 2., 3.], dtype=m.float64, requires_grad=True)
        b = a * 1
        v = b.view(3)
        b.exp_()
        v.sum().backward()
        return a.grad, _name(v.grad_fn)

    def other_view(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        b = a * 1
        v1, v2 = b[:2], b[1:]
        v1.mul_(2)
        v2.sum().backward()
        return a.grad, _name(v2.grad_fn)

    def base_modified_in_no_grad(m):
        a = m.ones(3, requires_grad=True)
        b = a * 1
        v = b[:2]
        with m.no_grad():
            b.mul_(2)
        (v * v).sum().backward()
        return a.grad, _name(v.grad_fn)
    for f in (base_mul, base_exp, other_view, base_modified_in_no_grad):
        same(f)


def test_plain_base_gets_history_from_a_view_written_with_grad():
    def copy_into_view(m):
        a = m.zeros(3)
        v = a[1:]
        w = m.tensor([1., 2.], requires_grad=True)
        v.copy_(w * 2)
        (a * a).sum().backward()
        return w.grad, _name(a.grad_fn), a.requires_grad, _name(v.grad_fn)

    def setitem(m):
        a = m.zeros(3)
        w = m.tensor([1., 2.], requires_grad=True)
        a[1:] = w
        u = a[:2]                     # made before the next write, regenerated after it
        a[0] = w[1] * 3
        (u * a[1:]).sum().backward()
        return w.grad, _name(a.grad_fn), _name(u.grad_fn)
    same(copy_into_view)
    same(setitem)


def test_detached_alias_does_not_rewrite_history():
    def run(m):
        a = m.ones(3, requires_grad=True)
        b = a * 2
        d = b[:2].detach()
        d.mul_(3)
        (b * 1).sum().backward()
        return a.grad, _name(b.grad_fn), b, b._version, d._version
    same(run)


def test_views_share_the_version_counter():
    def run(m):
        a = m.ones(4)
        v = a[:2]
        w = v.view(2, 1)
        w.add_(1)
        return a._version, v._version, w._version
    same(run)


# == saved tensors, versions, freed graphs ==================================================================

def test_saved_tensor_modified_in_place_raises_with_versions():
    def nonleaf(m):
        a = m.ones(3, requires_grad=True)
        b = a * 2
        c = b * b
        b.add_(1)
        c.sum().backward()

    def through_detached_alias(m):
        a = m.ones(3, requires_grad=True)
        c = (a * a).sum()
        a.detach().add_(1)
        c.backward()

    def through_view(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        c = a * 1
        e = c.exp()
        with m.no_grad():
            e[:2].mul_(2)
        e.sum().backward()

    def saved_output_of_function(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, g):
                y, = ctx.saved_tensors
                return g * y
        a = m.tensor([1., 2.], requires_grad=True)
        y = F.apply(a)
        r = y.sum()
        y.add_(1)
        r.backward()
    for f in (nonleaf, through_detached_alias, through_view, saved_output_of_function):
        raises(f)


def test_data_alias_is_not_tracked():
    def run(m):
        a = m.ones(3, requires_grad=True)
        c = (a * a).sum()
        a.data.add_(1)
        c.backward()
        return a.grad
    same(run)


@pytest.mark.parametrize("expr,raises_in_torch", [
    ("a * 2", True), ("a + 2", False), ("a.relu()", True), ("a.view(3, 1)", False), ("a.exp()", True)])
def test_backward_through_freed_graph(expr, raises_in_torch):
    def run(m):
        a = m.ones(3, requires_grad=True)
        y = eval(expr, {"a": a}).sum()
        y.backward()
        y.backward()
        return a.grad
    same(run, expect="raised" if raises_in_torch else "ok")


def test_freed_graph_through_grad_and_through_a_later_subgraph():
    def grad_twice(m):
        a = m.ones(3, requires_grad=True)
        b = (a * 2).sum()
        m.autograd.grad(b, a)
        m.autograd.grad(b, a)

    def subgraph(m):
        a = m.ones(3, requires_grad=True)
        b = a * 2
        b.sum().backward()
        (b * 1).sum().backward()
    raises(grad_twice)
    raises(subgraph)


def test_custom_function_raises_on_freed_graph_only_when_it_reads_saved_tensors():
    def run(m, save):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                if save:
                    ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                if save:
                    ctx.saved_tensors
                return g * 2
        a = m.ones(2, requires_grad=True)
        y = F.apply(a).sum()
        y.backward()
        y.backward()
        return a.grad
    same(lambda m: run(m, False))
    raises(lambda m: run(m, True))


@pytest.mark.parametrize("where", ["leaf", "nonleaf", "node_prehook", "node_posthook"])
@pytest.mark.parametrize("retain", [False, True])
def test_retry_after_a_hook_raised_mid_backward(where, retain):
    """torch frees what ran before the hook raised; a retry must raise or be right, and
    with retain_graph=True it is right."""
    def run(m):
        a = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        b = a * a
        c = b.exp() * 3
        calls = [0]

        def h(*args):
            calls[0] += 1
            if calls[0] == 1:
                raise ValueError("boom")
        {"leaf": lambda: a.register_hook(h), "nonleaf": lambda: b.register_hook(h),
         "node_prehook": lambda: b.grad_fn.register_prehook(h),
         "node_posthook": lambda: b.grad_fn.register_hook(h)}[where]()
        with pytest.raises(ValueError):
            c.sum().backward(retain_graph=retain)
        c.sum().backward()
        return a.grad
    same(run, expect="ok" if retain else "raised")


def test_retry_after_a_hook_raised_in_a_compiled_backward_never_gives_a_wrong_gradient():
    @tg.compile
    def f(x, w):
        return (x @ w).tanh().sum()
    tg.manual_seed(0)
    x, w = tg.randn(16, 8), tg.randn(8, 4, requires_grad=True)
    xt, wt = torch.from_numpy(x.numpy().copy()), torch.from_numpy(w.detach().numpy().copy()).requires_grad_()
    (xt @ wt).tanh().sum().backward()
    for _ in range(6):                  # warm: the compiled backward then reuses saved buffers
        w.grad = None
        f(x, w).backward()
    w.grad = None
    calls = [0]

    def h(g):
        calls[0] += 1
        if calls[0] == 1:
            raise ValueError("boom")
    w.register_hook(h)
    out = f(x, w)
    with pytest.raises(ValueError):
        out.backward()
    try:
        out.backward()
    except RuntimeError as e:
        assert "backward through the graph a second time" in str(e)
    else:
        np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


# == inference_mode ==========================================================================================

def test_inference_tensors():
    def made_inside(m):
        with m.inference_mode():
            x = m.ones(3)
            y = x * 2
        return x.is_inference(), y.is_inference(), m.ones(3).is_inference(), x.requires_grad

    def views_and_detach(m):
        n = m.ones(3)
        with m.inference_mode():
            x = m.ones(3)
            v = n[:2]                 # a view of a normal tensor is normal
        return v.is_inference(), x[:2].is_inference(), x.detach().is_inference(), x.clone().is_inference()

    def data_setter(m):
        with m.inference_mode():
            x = m.ones(3)
        y = m.zeros(3)
        y.data = x
        return y.is_inference()

    def version(m):
        with m.inference_mode():
            x = m.ones(3)
        return x._version
    same(made_inside)
    same(views_and_detach)
    same(data_setter)
    raises(version)


def test_inference_tensors_in_autograd():
    def saved(m):
        with m.inference_mode():
            x = m.ones(3)
        return (m.ones(3, requires_grad=True) * x).sum()

    def not_saved(m):
        with m.inference_mode():
            x = m.ones(3)
        w = m.ones(3, requires_grad=True)
        (w + x).sum().backward()
        return w.grad

    def inplace_outside(m):
        with m.inference_mode():
            x = m.ones(3)
        x.add_(1)

    def setitem_outside(m):
        with m.inference_mode():
            x = m.ones(3)
        x[0] = 2

    def requires_grad_outside(m):
        with m.inference_mode():
            x = m.ones(3)
        x.requires_grad_()

    def view_made_inside_modified_outside(m):
        x = m.ones(3, requires_grad=True)
        with m.inference_mode():
            v = x.view(3)
        v.add_(1)

    def normal_modified_inside(m):
        x = m.ones(3)
        v = x[:2]
        with m.inference_mode():
            v.add_(1)
            x.mul_(2)
        return x, x._version

    def normal_plus_inference_outside(m):
        with m.inference_mode():
            x = m.ones(3)
        y = m.ones(3)
        y.add_(x)
        return y, y.is_inference(), (y + x).is_inference()
    raises(saved)
    same(not_saved)
    raises(inplace_outside)
    raises(setitem_outside)
    raises(requires_grad_outside)
    raises(view_made_inside_modified_outside)
    same(normal_modified_inside)
    same(normal_plus_inference_outside)


def test_inference_mode_as_decorator_and_with_mode_false():
    def run(m):
        @m.inference_mode()
        def f(x):
            return x * 2, m.is_inference_mode_enabled(), m.is_grad_enabled()

        @m.inference_mode
        def g(x):
            return x * 2

        @m.inference_mode(False)
        def h(x):
            return x * 2, m.is_inference_mode_enabled()
        y, e1, g1 = f(m.ones(2, requires_grad=True))
        with m.inference_mode(mode=False):
            z = m.ones(2) * 2
            e2 = m.is_inference_mode_enabled(), m.is_grad_enabled()
        with m.inference_mode():
            with m.inference_mode(False):
                u = m.ones(2)
                e3 = m.is_inference_mode_enabled(), m.is_grad_enabled()
        k, e4 = h(m.ones(2))
        return (y.is_inference(), y.requires_grad, e1, g1, g(m.ones(2)).is_inference(), z.is_inference(), e2,
                u.is_inference(), e3, k.is_inference(), e4)
    same(run)


# == anomaly mode ============================================================================================

def _anomaly(m, fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        err = None
        try:
            fn()
        except Exception as e:
            err = (type(e).__name__, str(e))
    return err, [(x.category.__name__, str(x.message).split("\n")[0]) for x in w
                 if not issubclass(x.category, DeprecationWarning)], [str(x.message) for x in w]


def _nan_function(m):
    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")
    return F


@pytest.mark.parametrize("create_graph", [False, True])
def test_anomaly_names_a_custom_function_that_returns_nan_and_prints_its_forward_traceback(create_graph):
    def run(m):
        a = m.tensor([0., 1.], requires_grad=True)

        def f():
            with m.autograd.detect_anomaly():
                y = _nan_function(m).apply(a)        # the forward line the traceback shows
                m.autograd.grad(y.sum(), a, create_graph=create_graph)
        err, ws, full = _anomaly(m, f)
        return err, ws, any("_nan_function(m).apply(a)" in x for x in full)
    r = same(run)
    assert r[1][1][0][0] == "tuple" and "FBackward" in str(r) and r[1][1][2] is True


@pytest.mark.parametrize("create_graph", [False, True])
def test_anomaly_names_a_builtin_op_that_returns_nan(create_graph):
    def run(m):
        a = m.tensor([0., 1.], requires_grad=True)

        def f():
            with m.autograd.detect_anomaly():
                b = a.sqrt()
                m.autograd.grad(b.sum() * 0, a, create_graph=create_graph)
        return _anomaly(m, f)[:2]
    same(run)


def test_anomaly_warns_where_a_backward_raised():
    def run(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                raise ValueError("bad backward")
        a = m.tensor([0., 1.], requires_grad=True)

        def f():
            with m.autograd.detect_anomaly():
                F.apply(a).sum().backward()
        return _anomaly(m, f)[:2]
    same(run)


def test_anomaly_check_nan_false_and_nesting():
    def run(m):
        a = m.tensor([0., 1.], requires_grad=True)

        def f():
            with m.autograd.detect_anomaly(check_nan=False):
                _nan_function(m).apply(a).sum().backward()
        err, ws, _ = _anomaly(m, f)
        r = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with m.autograd.detect_anomaly():
                r.append(m.is_anomaly_enabled())
                with m.autograd.set_detect_anomaly(False):
                    r.append(m.is_anomaly_enabled())
                with m.autograd.detect_anomaly(check_nan=False):
                    r.append(m.is_anomaly_check_nan_enabled())
                r.append(m.is_anomaly_check_nan_enabled())
        r.append(m.is_anomaly_enabled())
        return err, ws, bool(np.isnan(a.grad.numpy()).all()), r
    same(run)


# == hooks ===================================================================================================

def test_hook_order_tensor_prehooks_then_retain_grad_then_node_hooks():
    def run(m, order):
        log = []
        a = m.tensor([1., 2.], requires_grad=True)
        b = a * 2
        steps = {
            "retain": lambda: b.retain_grad(),
            "tensor": lambda: b.register_hook(lambda g: log.append(("tensor", g.tolist())) or g * 2),
            "pre": lambda: b.grad_fn.register_prehook(lambda go: log.append(("pre", go[0].tolist()))),
            "post": lambda: b.grad_fn.register_hook(
                lambda gi, go: log.append(("post", go[0].tolist(), [x.tolist() for x in gi if x is not None]))),
        }
        for s in order:
            steps[s]()
        b.sum().backward()
        return log, b.grad, a.grad
    same(lambda m: run(m, ["retain", "tensor", "pre", "post"]))
    same(lambda m: run(m, ["post", "pre", "tensor", "retain"]))


@pytest.mark.parametrize("op", ["unbind", "split"])
def test_hooks_on_multi_output_nodes_see_none_for_unused_outputs(op):
    def run(m):
        log = []
        a = m.arange(6., dtype=m.float64).reshape(3, 2).requires_grad_()
        x, y, z = (a * a).unbind(0) if op == "unbind" else (a * a).split(1)
        fn = x.grad_fn
        fn.register_prehook(lambda go: log.append(("pre", [None if g is None else g.tolist() for g in go])))
        fn.register_hook(lambda gi, go: log.append(("post", [None if g is None else g.tolist() for g in go])))
        (x * 2 + z).sum().backward(retain_graph=True)
        g, = m.autograd.grad((y * 3).sum(), a, create_graph=True)
        return log, a.grad, g
    same(run)


def test_prehook_replacing_grads_of_a_multi_output_node():
    def run(m):
        a = m.arange(6.).requires_grad_()
        x, y, z = (a * a).split(2)
        x.grad_fn.register_prehook(lambda go: tuple(None if g is None else g * 10 for g in go))
        (x * 2 + z).sum().backward()
        return a.grad
    same(run)


def test_retain_grad_follows_inplace_modification():
    def before(m):
        a = m.tensor([1., 2.], requires_grad=True)
        b = a * 2
        b.retain_grad()
        b.mul_(3)
        (b * b).sum().backward()
        return b.grad, a.grad

    def view(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        b = a * 1
        v = b[:2]
        v.retain_grad()
        b.mul_(2)
        (v * 3).sum().backward()
        return v.grad, a.grad

    def inplace_on_view(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        b = a * 1
        v = b[:2]
        v.retain_grad()
        v.mul_(2)
        (v * 3).sum().backward()
        return v.grad, a.grad
    for f in (before, view, inplace_on_view):
        same(f)


def test_tensor_hook_registered_before_inplace_stays_with_the_old_version():
    def run(m):
        log = []
        a = m.tensor([1., 2.], requires_grad=True)
        b = a * 2
        b.register_hook(lambda g: log.append(g.tolist()))
        b.mul_(3)
        (b * b).sum().backward()
        return log, a.grad
    same(run)


# == custom Function ========================================================================================

def test_function_on_python_numbers_just_runs_forward():
    def numbers(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x)        # a number: torch checks only when it records a node
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g, g
        return F.apply(3, 4)

    def tensor_made_inside(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return m.tensor(float(x)) * 2

            @staticmethod
            def backward(ctx, g):
                return g
        r = F.apply(3.0)
        return r, r.requires_grad, r.grad_fn is None

    def number_saved_with_grad(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                ctx.save_for_backward(x, k)
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g, None
        F.apply(m.tensor([1., 2.], requires_grad=True), 3)
    assert same(numbers)[1] == 12
    same(tensor_made_inside)
    raises(number_saved_with_grad)


def test_function_materialize_grads_and_non_tensor_outputs():
    def run(m, materialize):
        seen = []

        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, k, name):
                ctx.set_materialize_grads(materialize)
                ctx.k = k
                return x * k, x.clone(), 5, name

            @staticmethod
            def backward(ctx, g1, g2, g3, g4):
                seen.append((g1 is None, g2 is None, g3 is None, g4 is None))
                return g1 * ctx.k, None, None
        a = m.tensor([1., 2.], requires_grad=True)
        y1, y2, k, s = F.apply(a, 3, "x")
        y1.sum().backward()
        return seen, a.grad, k, s

    def returns_none(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return None

            @staticmethod
            def backward(ctx, g):
                return g
        return F.apply(m.tensor([1., 2.], requires_grad=True))
    same(lambda m: run(m, True))
    same(lambda m: run(m, False))
    same(returns_none)


def _dirty(m, ret=lambda x: x):
    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return ret(x)

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return F


def test_mark_dirty():
    def on_view(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        b = a * 1
        v = b[:2]
        y = _dirty(m).apply(v)
        (b * b).sum().backward()
        return y is v, _name(b.grad_fn), _name(v.grad_fn), a.grad, b

    def on_nonleaf(m):
        a = m.tensor([1., 2.], requires_grad=True)
        b = a * 1
        y = _dirty(m).apply(b)
        (y * y).sum().backward()
        return y is b, _name(b.grad_fn), a.grad, b._version

    def on_leaf(m):
        _dirty(m).apply(m.tensor([1., 2.], requires_grad=True))

    def on_view_of_leaf(m):
        _dirty(m).apply(m.tensor([1., 2., 3.], requires_grad=True)[:2])

    def on_multi_output_view(m):
        b = m.ones(2, 3, requires_grad=True) * 2
        _dirty(m).apply(b.unbind(0)[0])

    def on_plain_leaf(m):
        a = m.tensor([1., 2.])
        y = _dirty(m).apply(a)
        return y, y is a, a._version, y.requires_grad

    def not_returned(m):
        _dirty(m, lambda x: x.clone()).apply(m.tensor([1., 2.], requires_grad=True) * 1)

    def view_and_two_outputs(m):
        b = m.ones(3, requires_grad=True) * 1
        _dirty(m, lambda x: (x, x * 2)).apply(b[:2])
    same(on_view)
    same(on_nonleaf)
    same(on_plain_leaf)
    for f in (on_leaf, on_view_of_leaf, on_multi_output_view, not_returned, view_and_two_outputs):
        raises(f)


def test_mark_non_differentiable():
    def run(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y, z, i = x * 2, x * 3, x.argmax()
                ctx.mark_non_differentiable(z, i)
                return y, z, i

            @staticmethod
            def backward(ctx, g, gz, gi):
                return g * 2
        a = m.tensor([1., 2.], requires_grad=True)
        y, z, i = F.apply(a)
        y.sum().backward()
        return z.requires_grad, z.grad_fn is None, i.requires_grad, a.grad
    same(run)


def test_function_returning_views():
    def fn(m, body):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return body(x)

            @staticmethod
            def backward(ctx, g):
                return g.reshape(2) * 2
        return F

    def use(m, body):
        a = m.tensor([1., 2.], requires_grad=True)
        y = fn(m, body).apply(a)
        y.sum().backward()
        return a.grad, _name(y.grad_fn), y is a

    def modify(m, body, nonleaf):
        a = m.tensor([1., 2.], requires_grad=True)
        y = fn(m, body).apply(a * 1 if nonleaf else a)
        y.mul_(2)
    bodies = [lambda x: x, lambda x: x.view(2, 1), lambda x: (x * 2).view(2, 1)]
    for body in bodies:
        same(lambda m: use(m, body))
        for nonleaf in (False, True):
            raises(lambda m: modify(m, body, nonleaf))


# == autograd.grad ===========================================================================================

def test_grad_materialize_grads():
    def run(m, create_graph):
        a = m.tensor([1., 2.], requires_grad=True)
        b = m.tensor([1., 2.], requires_grad=True)
        g = m.autograd.grad((a * a).sum(), (a, b), materialize_grads=True, create_graph=create_graph)
        return g, [x.requires_grad for x in g]

    def allow_unused_false(m):
        a = m.tensor([1., 2.], requires_grad=True)
        m.autograd.grad((a * 2).sum(), (a,), materialize_grads=True, allow_unused=False)
    same(lambda m: run(m, False))
    same(lambda m: run(m, True))
    raises(allow_unused_false)


def test_grad_is_grads_batched():
    def jacobian(m):
        a = m.tensor([1., 2., 3.], dtype=m.float64, requires_grad=True)
        return m.autograd.grad(a ** 2, a, m.eye(3, dtype=m.float64), is_grads_batched=True)

    def two_outputs(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        b = m.tensor([1., 2.], requires_grad=True)
        y1, y2 = a ** 2, (b * a[:2]).sum()
        return m.autograd.grad((y1, y2), (a, b), (m.ones(4, 3), m.arange(4.)), is_grads_batched=True)

    def create_graph(m):
        a = m.tensor([1., 2., 3.], dtype=m.float64, requires_grad=True)
        g, = m.autograd.grad(a ** 3, a, m.eye(3, dtype=m.float64), is_grads_batched=True, create_graph=True)
        g.sum().backward()
        return g, a.grad

    def unused(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        b = m.tensor([1., 2.], requires_grad=True)
        r1 = m.autograd.grad(a ** 2, (a, b), m.eye(3), is_grads_batched=True, allow_unused=True, retain_graph=True)
        r2 = m.autograd.grad(a ** 2, (a, b), m.eye(3), is_grads_batched=True, materialize_grads=True)
        return r1, r2

    def not_batched(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        m.autograd.grad(a ** 2, a, m.ones(3), is_grads_batched=True)
    for f in (jacobian, two_outputs, create_graph, unused):
        same(f)
    raises(not_batched)


def test_grad_of_and_with_respect_to_views():
    def of_view(m):
        a = m.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        return m.autograd.grad((a * a)[0], a, m.ones(2))

    def wrt_view(m):
        a = m.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        b = a * 1
        v = b[0]
        return m.autograd.grad((v * 3).sum() + b.sum(), v)

    def of_view_modified(m):
        a = m.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        v = (a * a)[0]
        v.mul_(2)
        return m.autograd.grad(v.sum(), a)

    def wrt_view_after_base_modified(m):
        a = m.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        b = a * 1
        v = b[0]
        b.mul_(2)
        return m.autograd.grad((v * 3).sum(), v)
    for f in (of_view, wrt_view, of_view_modified, wrt_view_after_base_modified):
        same(f)


# == gradcheck ===============================================================================================

def test_gradcheck_fails_loudly_on_undefined_gradients():
    def none_grad(m, fast):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * 2 + y

            @staticmethod
            def backward(ctx, g):
                return g * 2, None
        a = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        b = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        return m.autograd.gradcheck(F.apply, (a, b), fast_mode=fast)

    def no_materialize(m, handles_none):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                if g is None and handles_none:
                    return None
                return g * 2
        a = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        return m.autograd.gradcheck(F.apply, (a,))

    def nonzero_for_none(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                ctx.x = x
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return m.ones_like(ctx.x) if g is None else g * 2
        a = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        return m.autograd.gradcheck(F.apply, (a,), raise_exception=False)
    raises(lambda m: none_grad(m, False))
    raises(lambda m: none_grad(m, True))
    raises(lambda m: no_materialize(m, False))
    assert same(lambda m: no_materialize(m, True))[1] is True
    assert same(nonzero_for_none)[1] is False


# == from_numpy, numpy(), .grad and .data =====================================================================

def test_from_numpy_and_numpy_share_memory():
    def run(m):
        n = np.array([1., 2.])
        t = m.from_numpy(n)
        n[0] = 5
        t[1] = 7
        back = t.numpy()
        back[0] = 9
        f = m.from_numpy(np.arange(6.).reshape(2, 3).T)
        return t, n, t.dtype == m.float64, f.stride(), f.is_contiguous()

    def requires_grad(m):
        return m.ones(2, requires_grad=True).numpy()

    def forced(m):
        return m.ones(2, requires_grad=True).numpy(force=True)

    def not_an_array(m):
        return m.from_numpy([1, 2])
    same(run)
    raises(requires_grad)
    same(forced)
    raises(not_an_array)


@pytest.mark.parametrize("value", ["shape", "dtype", "int", "list", "ok"])
def test_grad_assignment_checks(value):
    def run(m):
        a = m.ones(2, requires_grad=True)
        g = {"shape": lambda: m.ones(3), "dtype": lambda: m.ones(2, dtype=m.float64),
             "int": lambda: m.ones(2, dtype=m.int64), "list": lambda: [1., 2.], "ok": lambda: m.ones(2)}[value]()
        a.grad = g
        (a * 2).sum().backward()
        return a.grad, a.grad is g
    same(run, expect="ok" if value == "ok" else "raised")


def test_data_assignment_rules():
    def shape_and_dtype(m):
        a = m.ones(2, requires_grad=True)
        a.data = m.zeros(3, dtype=m.float64)
        return a, a.requires_grad, a.dtype == m.float64, a._version

    def integer_with_grad(m):
        a = m.ones(2, requires_grad=True)
        a.data = m.zeros(2, dtype=m.int64)

    def integer_without_grad(m):
        a = m.ones(2)
        a.data = m.zeros(2, dtype=m.int64)
        return a

    def not_a_tensor(m):
        a = m.ones(2, requires_grad=True)
        a.data = [1, 2]

    def saved_value_swapped(m):
        a = m.ones(2, requires_grad=True)
        c = (a * a).sum()
        a.data = m.full((2,), 3.)
        c.backward()
        return a.grad
    same(shape_and_dtype)
    raises(integer_with_grad)
    same(integer_without_grad)
    raises(not_a_tensor)
    same(saved_value_swapped)


# == torch's own in-place-on-view tests (test_autograd.py, TestAutogradDeviceType), on tracegrad ==========
# The expectations are torch's; `gradcheck`/`gradgradcheck` are tracegrad's.

def _f64(*shape, requires_grad=False):
    return tg.randn(*shape, dtype=tg.float64, requires_grad=requires_grad)


def test_torch_inplace_on_view_backprop_base_and_view_of_view():
    root = tg.randn(2, 2, requires_grad=True)
    x = root.clone()
    x.narrow(0, 0, 1).mul_(2)
    x.sum().backward()
    assert root.grad.tolist() == [[2, 2], [1, 1]]

    root = tg.randn(2, 2, requires_grad=True)
    x = root.clone()
    v1, v2 = x.narrow(0, 0, 1), x.narrow(0, 0, 1)
    v1.mul_(2)
    v2.sum().backward()
    assert root.grad.tolist() == [[2, 2], [0, 0]]

    root = tg.randn(2, 2, requires_grad=True)
    x = root.clone()
    x.narrow(0, 0, 1).narrow(1, 1, 1).mul_(2)
    x.sum().backward()
    assert root.grad.tolist() == [[1, 2], [1, 1]]


def test_torch_inplace_on_view_then_no_grad():
    a = tg.ones(3, 1, dtype=tg.float64, requires_grad=True)
    b = a * 2
    c = b.view_as(b)
    c[0][0] = 3
    with tg.no_grad():
        c.grad_fn                       # forces the graph update with grad disabled
    c.sum().backward()
    assert a.grad.tolist() == [[0.], [2.], [2.]]


def test_torch_inplace_on_view_gradcheck():
    a, b = _f64(4, 4, requires_grad=True), _f64(2, 2, requires_grad=True)

    def func(root, b):
        x = root.clone()
        x.narrow(1, 2, 2).narrow(0, 1, 2).mul_(b)
        x.narrow(1, 0, 2).narrow(0, 1, 2).mul_(b)
        return x
    assert tg.autograd.gradcheck(func, [a, b], raise_exception=True)
    assert tg.autograd.gradgradcheck(func, (a, b), (_f64(4, 4, requires_grad=True),))


def test_torch_inplace_on_multiple_output_views():
    x = tg.arange(9., dtype=tg.float64).reshape(3, 3).requires_grad_().clone()
    with pytest.raises(RuntimeError):
        x.unbind()[0].mul_(2)
    a = tg.rand(10, dtype=tg.float64, requires_grad=True).clone()
    b = a.unbind(0)
    with pytest.raises(RuntimeError):
        b[0].view_as(b[0]).mul_(2)
    a = tg.rand(10, dtype=tg.float64, requires_grad=True).clone()
    with pytest.raises(RuntimeError):
        a.view_as(a).unbind(0)[0].mul_(2)
    for f in (lambda t: t.split(1), lambda t: t.split([1, 1, 1]), lambda t: t.chunk(3)):
        a = tg.randn(3, 3, requires_grad=True)
        s1, s2, s3 = f(a + a)
        with pytest.raises(RuntimeError, match="This view is the output of a function that returns multiple views."):
            s1.mul_(s2)


def test_torch_inplace_on_view_makes_base_require_grad():
    a, b = _f64(4, 4), _f64(4, 2, requires_grad=True)

    def func(root, b):
        x = root.clone()
        assert not x.requires_grad
        x.narrow(1, 2, 2).mul_(b)
        assert x.requires_grad
        return x
    assert tg.autograd.gradcheck(func, [a, b], raise_exception=True)
    assert tg.autograd.gradgradcheck(func, (a, b), (_f64(4, 4, requires_grad=True),))


def test_torch_inplace_on_view_backprop_view():
    a = tg.tensor([2., 5.])
    b = tg.tensor([3.], requires_grad=True)
    res = a.narrow(0, 1, 1).mul_(b)
    res.sum().backward()
    assert b.grad.tolist() == [5]
    assert a.grad is None


def test_torch_inplace_on_view_modify_base():
    r = tg.ones(1, dtype=tg.float64, requires_grad=True)

    def fn(r):
        x = tg.ones(5, dtype=tg.float64)
        v = x.select(0, 1)
        assert not v.requires_grad and v.grad_fn is None
        x.add_(r)                       # v now depends on r through the in-place op on x
        assert v.requires_grad
        return v
    assert tg.autograd.gradcheck(fn, [r])
    assert tg.autograd.gradgradcheck(fn, [r])


def test_torch_inplace_on_view_python():
    a, b = _f64(4, 4, requires_grad=True), _f64(2, 2, requires_grad=True)

    class PyAdd(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.mark_dirty(x)
            x.add_(y)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    def func(root, b):
        x = root.clone()
        PyAdd.apply(x.narrow(1, 2, 2).narrow(0, 1, 2), b)
        PyAdd.apply(x.narrow(1, 0, 2).narrow(0, 1, 2), b)
        return x
    assert tg.autograd.gradcheck(func, [a, b], raise_exception=True)
    assert tg.autograd.gradgradcheck(func, (a, b), (_f64(4, 4, requires_grad=True),))


def test_torch_inplace_on_view_non_contig():
    root = tg.ones(2, 3, 2).select(2, 1).t().requires_grad_(True)
    x = root.clone()
    x.narrow(0, 0, 1).narrow(1, 1, 1).mul_(2)
    x.sum().backward()
    assert root.grad.tolist() == [[1, 2], [1, 1], [1, 1]]


def test_torch_grad_assignment():
    x = tg.randn(5, 5)
    with pytest.raises(RuntimeError):
        x.grad = tg.randn(2, 2)
    with pytest.raises(RuntimeError):
        x.grad = tg.randn(5, 5).long()
    with pytest.raises(RuntimeError):
        x.grad = x


# == torch's inference-mode tests (test/autograd/test_autograd_inference_mode.py's cases), on tracegrad =====

def _inplace_add(x):
    return x.add_(2)


def test_torch_inference_mode_context_manager_and_decorator():
    assert not tg.is_inference_mode_enabled()
    with tg.inference_mode():
        assert tg.is_inference_mode_enabled()
        with tg.inference_mode(False):
            assert not tg.is_inference_mode_enabled()
        assert tg.is_inference_mode_enabled()
    assert not tg.is_inference_mode_enabled()

    @tg.inference_mode()
    def func(x):
        assert tg.is_inference_mode_enabled()
        return x * x
    for requires_grad in (True, False):
        d = func(tg.ones(1, 2, 3, requires_grad=requires_grad))
        assert tg.is_inference(d) and not d.requires_grad


def test_torch_inference_mode_tensor_creation():
    with tg.inference_mode():
        c = tg.ones(1, 2, 3)
        assert not c.requires_grad and tg.is_inference(c)
        tmp = tg.ones(1, 2, 3, requires_grad=True)
        assert tmp.requires_grad and tg.is_inference(tmp)
        tmp = tg.ones(1, 2, 3).requires_grad_(False)
        assert not tmp.requires_grad and tg.is_inference(tmp)


def test_torch_inference_mode_existing_autograd_session():
    s = tg.ones(1, 2, 3, requires_grad=True)
    a = s.clone()
    out = a * a
    with tg.inference_mode():
        a.add_(2)
    assert not tg.is_inference(a)
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        out.backward(tg.ones_like(out))


def test_torch_inference_tensors_in_and_out_of_inference_mode():
    with tg.inference_mode():
        for requires_grad in (True, False):
            c = tg.ones(1, 2, 3, requires_grad=requires_grad)
            out = c * c
            assert tg.is_inference(out) and not out.requires_grad
            _inplace_add(c)
            assert tg.is_inference(c) and c.requires_grad == requires_grad
            v = c.view(-1)
            assert tg.is_inference(v) and not v.requires_grad
    for requires_grad in (True, False):
        with tg.inference_mode():
            c = tg.ones(1, 2, 3, requires_grad=requires_grad)
        if not requires_grad:
            out = c * c
            assert not tg.is_inference(out) and not out.requires_grad and out.is_leaf
        out = c.view(-1)
        assert tg.is_inference(out) and not out.requires_grad and not out._is_view() and out.is_leaf
        if not requires_grad:
            with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
                _inplace_add(c)


def test_torch_normal_tensor_inplace_and_view_in_inference_mode():
    for requires_grad in (True, False):
        a = tg.ones(1, 2, 3, requires_grad=requires_grad).clone()
        with tg.inference_mode():
            _inplace_add(a)
            assert not tg.is_inference(a) and a.requires_grad == requires_grad
            _inplace_add(a)
            view_out = a.view(-1)
            assert not tg.is_inference(view_out) and view_out.requires_grad == requires_grad
        _inplace_add(a)
        assert not tg.is_inference(a) and a.requires_grad == requires_grad
        view_out = a.view(-1)
        assert not tg.is_inference(view_out) and view_out.requires_grad == requires_grad


def test_torch_normal_tensor_view_output_in_inference_mode():
    for requires_grad in (True, False):
        a = tg.ones(1, 2, 3, requires_grad=requires_grad).clone()
        with tg.inference_mode():
            out = a.view(-1)
            assert not tg.is_inference(out) and out.requires_grad == requires_grad and out._is_view()
            tmp = out.view(-1)
            assert not tg.is_inference(tmp) and tmp.requires_grad == requires_grad and tmp._is_view() and tmp.is_leaf
            tmp.add_(2)
            assert not tg.is_inference(tmp) and tmp.requires_grad == requires_grad
            assert a._version == tmp._version


def test_torch_normal_tensor_view_output_in_normal_mode():
    for requires_grad in (True, False):
        a = tg.ones(1, 2, 3, requires_grad=requires_grad).clone()
        with tg.inference_mode():
            out = a.view(-1)
            assert not tg.is_inference(out) and out.requires_grad == requires_grad and out._is_view() and out.is_leaf
        tmp = out * out
        assert not tg.is_inference(tmp) and tmp.requires_grad == requires_grad
        if requires_grad:
            with pytest.raises(RuntimeError, match="A view was created in inference mode and is being modified inplace"):
                out.add_(2)
        else:
            out.add_(2)
        tmp = out.view(2, 3)
        assert not tg.is_inference(tmp) and tmp.requires_grad == requires_grad


def test_torch_mix_inference_and_normal_tensors():
    for requires_grad in (True, False):
        s = tg.ones(1, 2, 3, requires_grad=requires_grad)
        with tg.inference_mode():
            c = tg.ones(1, 2, 3, requires_grad=requires_grad)
        out = c.add(s)
        assert not tg.is_inference(out) and out.requires_grad == requires_grad
        if requires_grad:
            out.backward(tg.ones_like(out))
            assert c.grad.tolist() == tg.ones_like(c).tolist()
            with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
                c * s
            a = s.clone()
            with tg.inference_mode():
                c = tg.ones(1, 2, 3)
            with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
                a.mul_(c)
        tmp1 = c.view_as(s)
        assert tg.is_inference(tmp1) and not tmp1.requires_grad
        tmp2 = s.view_as(c)
        assert not tg.is_inference(tmp2) and tmp2.requires_grad == requires_grad


def test_torch_inference_mode_handle_view_on_rebase():
    for requires_grad in (True, False):
        a = tg.ones(1, 2, 3, requires_grad=requires_grad).clone()
        with tg.inference_mode():
            view_out = a.view_as(a)
        if requires_grad:
            with pytest.raises(RuntimeError, match="A view was created in inference mode and is being modified inplace"):
                _inplace_add(view_out)
        else:
            _inplace_add(view_out)
    for requires_grad in (True, False):
        a = tg.ones(1, 2, 3, requires_grad=requires_grad).clone()
        with tg.inference_mode():
            view_out = a.view(-1)
        _inplace_add(a)
        if requires_grad:
            with pytest.raises(RuntimeError, match="A view was created in inference mode and its base or another view "):
                view_out.grad_fn
        else:
            view_out.grad_fn


# == torch's retain_grad and tensor-hook tests (test_autograd.py, TestAutograd), on tracegrad ===============

def _double_mul():
    class DoubleMul(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3
    return DoubleMul


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a.tolist(), dtype=np.float64), np.asarray(b.tolist(), dtype=np.float64),
                               rtol=1e-6, atol=1e-7)


def test_torch_retain_grad():
    inp = tg.rand(1, 3, requires_grad=True)
    h1 = inp * 3
    out = (h1 * h1).sum()
    h1.retain_grad()
    h1.retain_grad()
    out.backward(retain_graph=True)
    _close(h1.grad, h1 * 2)
    out.backward(retain_graph=True)
    _close(h1.grad, h1 * 4)
    with tg.no_grad():
        inp.grad.zero_()
    inp.retain_grad()
    inp.retain_grad()
    out.backward()
    _close(inp.grad, inp * 18)


def test_torch_retain_grad_inplace():
    a = tg.tensor([1.0], requires_grad=True).clone()
    a.retain_grad()
    a.mul_(2)
    a.sum().backward()
    assert a.grad.tolist() == [1.0]
    a = tg.tensor([1.0], requires_grad=True).clone()
    a.retain_grad()
    a.mul_(2)
    a.mul_(2)
    a.sum().backward()
    assert a.grad.tolist() == [1.0]
    x = tg.tensor([1.0], requires_grad=True).clone()
    x.retain_grad()
    x_view = x[:]
    x_view *= 2
    x *= 2
    x.sum().backward()
    assert x.grad.tolist() == [1.0]      # the latest version of x
    x = tg.zeros(4)
    y = x.view(2, 2)
    y.add_(tg.randn(2, 2, requires_grad=True))


def test_torch_retains_grad_inplace_multiple_outputs():
    b = tg.rand(3, 3, requires_grad=True)
    var, mean = _double_mul().apply(b)
    var.retain_grad()
    mean.retain_grad()
    var.mul_(2)
    (var + mean).sum().backward()
    gvar, gmean = var.grad, mean.grad
    a = b.detach().requires_grad_(True)
    var, mean = _double_mul().apply(a)
    var.mul_(2)
    gvar_expected, gmean_expected = tg.autograd.grad((var + mean).sum(), inputs=(var, mean))
    _close(gvar, gvar_expected)
    _close(gmean, gmean_expected)


def test_torch_retain_grad_inplace_over_view():
    base = tg.tensor([1.0], requires_grad=True).clone()
    view, view2 = base[:], base[:]
    view.retain_grad()
    view2.retain_grad()
    view.mul_(2)
    (view + view2).sum().backward()
    assert view.grad.tolist() == view2.grad.tolist() == [1.0]


def test_torch_tensor_hooks_inplace():
    count = [0, 0, 0]

    def fn1(grad):
        count[0] += 1
        assert grad.tolist() == [4.0]
        return grad * 2

    def fn2(grad):
        count[1] += 1
        assert grad.tolist() == [1.0]
        return grad * 2
    a = tg.tensor([1.0], requires_grad=True)
    b = a.clone()
    b.register_hook(fn1)
    b.mul_(2)
    b.register_hook(fn2)
    b.sum().backward()
    assert count[:2] == [1, 1] and a.grad.tolist() == [8.0]

    def fn3(grad):
        count[2] += 1
        assert grad.tolist() == [4.0]
        return grad * 2
    a = tg.tensor([1.0], requires_grad=True)
    b = a.clone()
    b.register_hook(fn3)
    b.mul_(2)
    b.mul_(2)
    b.sum().backward()
    assert count[2] == 1 and a.grad.tolist() == [8.0]


def test_torch_tensor_hooks_inplace_multiple_outputs():
    counts = [0, 0, 0]
    b = tg.rand(3, 3, requires_grad=True)
    out1, out2 = _double_mul().apply(b)

    def fn0(grad):
        counts[0] += 1
        _close(grad, tg.ones_like(out1) * 2)

    def fn1(grad):
        counts[1] += 1
        _close(grad, tg.ones_like(out1) * 3)

    def fn2(grad):
        counts[2] += 1
        _close(grad, tg.ones_like(out1))
    out1.register_hook(fn0)
    out2.register_hook(fn1)
    out1.mul_(2)
    out1.register_hook(fn2)
    (out1 + out2 * 3).sum().backward()
    assert counts == [1, 1, 1]


def test_torch_tensor_hooks_inplace_over_view():
    count = [0]

    def fail(grad):
        raise AssertionError("a hook of the old version ran")

    def fn2(grad):
        count[0] += 1
        assert grad.tolist() == [1.0]
    base = tg.tensor([1.0], requires_grad=True).clone()
    view, view2 = base[:], base[:]
    view.register_hook(fail)
    view2.register_hook(fail)
    view.mul_(2)
    view2.grad_fn                         # the update that gives view2 its new grad_fn
    view2.register_hook(fn2)
    (view + view2).sum().backward()
    assert count[0] == 1


def test_torch_backward_with_nonleaf_inputs():
    x = tg.randn(2, 2, dtype=tg.float64, requires_grad=True)
    x_nonleaf = x * 1
    y = tg.randn(2, 2, dtype=tg.float64, requires_grad=True)
    z = tg.randn(2, 2, dtype=tg.float64, requires_grad=True)
    out = x_nonleaf ** 2 + y * x_nonleaf + y ** 2
    out.backward(tg.ones(2, 2, dtype=tg.float64), create_graph=True, inputs=[x, y, x_nonleaf])
    _close(y.grad, x + 2 * y)
    _close(x.grad, 2 * x + y)
    _close(x_nonleaf.grad, 2 * x_nonleaf + y)
    out.backward(tg.ones(2, 2, dtype=tg.float64), create_graph=True, inputs=[z])
    assert z.grad is None


def test_torch_save_output_nr():
    x = tg.randn(10, requires_grad=True)
    seen = []

    class MultiOutputFn(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:5], x[5:]

        @staticmethod
        def backward(ctx, *grad):
            return tg.cat(grad)

    a, b = MultiOutputFn.apply(x)
    assert b.output_nr == 1

    class TestFn(tg.autograd.Function):
        @staticmethod
        def forward(ctx, b):
            ctx.save_for_backward(b)
            return b * 2

        @staticmethod
        def backward(ctx, grad_b):
            b, = ctx.saved_tensors
            seen.append(b.output_nr)

    TestFn.apply(b).sum().backward()
    assert seen == [1]
