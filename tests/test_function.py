"""Custom autograd.Function and grad_fn hooks, against torch."""
import pytest
import torch

import tracegrad as tg
from conftest import assert_close


def make_fns(m):
    F = m.autograd.Function

    class Exp(F):
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            result, = ctx.saved_tensors
            return grad_output * result

    class MulConst(F):
        @staticmethod
        def forward(ctx, x, k, flag):
            ctx.k = k
            ctx.flag = flag
            return x * k

        @staticmethod
        def backward(ctx, g):
            assert ctx.needs_input_grad == (True, False, False)
            return g * ctx.k, None, None

    class Split2(F):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y, x + y

        @staticmethod
        def backward(ctx, ga, gb):
            x, y = ctx.saved_tensors
            return ga * y + gb, ga * x + gb

    class Cube(F):                       # backward in tracegrad ops: differentiable again
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x * x

    class SortLike(F):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            ctx.mark_non_differentiable(idx)
            return x * 2, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            return g * 2

    class Double_(F):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class NoMaterialize(F):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x.clone(), x.clone()

        @staticmethod
        def backward(ctx, g1, g2):
            ctx.seen = (g1 is None, g2 is None)
            return g1 if g1 is not None else g2

    class WrongCount(F):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    class WrongShape(F):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return m.ones(3)

    class Once(F):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @m.autograd.function.once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x

    return dict(Exp=Exp, MulConst=MulConst, Split2=Split2, Cube=Cube, SortLike=SortLike, Double_=Double_,
                NoMaterialize=NoMaterialize, WrongCount=WrongCount, WrongShape=WrongShape, Once=Once)


def both(fn):
    return fn(torch, make_fns(torch)), fn(tg, make_fns(tg))


def test_exp_values_grads_and_names():
    def run(m, f):
        x = m.tensor([0.5, 1.0], dtype=m.float64, requires_grad=True)
        y = f["Exp"].apply(x)
        y.sum().backward()
        return y, x.grad, type(y.grad_fn).__name__, repr(y.grad_fn).split(" object")[0]
    (yt, gt, nt, rt), (yg, gg, ng, rg) = both(run)
    assert_close(yg, yt)
    assert_close(gg, gt)
    assert ng == nt == "ExpBackward"
    assert rg == "<ExpBackward"           # the contract's form (torch prefixes its module path)


def test_saved_tensors_freed_after_backward():
    def run(m, f):
        x = m.tensor([0.5], requires_grad=True)
        y = f["Exp"].apply(x)
        y.backward()
        try:
            y.grad_fn.saved_tensors
        except RuntimeError as e:
            return str(e)
    t, g = both(run)
    assert t == g


def test_non_tensor_arguments_and_needs_input_grad():
    def run(m, f):
        x = m.tensor([1., 2.], requires_grad=True)
        y = f["MulConst"].apply(x, 3.0, "flag")
        y.sum().backward()
        return x.grad
    t, g = both(run)
    assert_close(g, t)


def test_multiple_outputs_and_partial_use():
    def run(m, f):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        y = m.tensor([3., 4.], dtype=m.float64, requires_grad=True)
        a, b = f["Split2"].apply(x, y)
        (a * 2).sum().backward()           # b's gradient is undefined: materialized as zeros
        g1 = (x.grad.clone(), y.grad.clone())
        a, b = f["Split2"].apply(x, y)
        (a.sum() + b.sum() * 3).backward()
        return g1, x.grad, y.grad
    t, g = both(run)
    assert_close(g[0][0], t[0][0])
    assert_close(g[0][1], t[0][1])
    assert_close(g[1], t[1])
    assert_close(g[2], t[2])


def test_double_backward_through_custom_backward():
    def run(m, f):
        x = m.tensor([0.5, -2.0], dtype=m.float64, requires_grad=True)
        y = f["Cube"].apply(x)
        g, = m.autograd.grad(y.sum(), x, create_graph=True)
        g2, = m.autograd.grad(g.sum(), x)
        return g, g2
    t, g = both(run)
    assert_close(g[0], t[0])
    assert_close(g[1], t[1])


def test_mark_non_differentiable():
    def run(m, f):
        x = m.tensor([1., 3., 2.], requires_grad=True)
        y, idx = f["SortLike"].apply(x)
        y.sum().backward()
        return idx.requires_grad, idx.item(), x.grad
    t, g = both(run)
    assert t[0] == g[0] and t[1] == g[1]
    assert_close(g[2], t[2])


def test_mark_dirty():
    def run(m, f):
        x = m.tensor([1., 2.], requires_grad=True)
        a = x.clone()
        v0 = a._version
        b = f["Double_"].apply(a)
        b.sum().backward()
        return b is a, a._version - v0, type(a.grad_fn).__name__, x.grad
    t, g = both(run)
    assert t[:3] == g[:3]
    assert_close(g[3], t[3])


def test_set_materialize_grads_false():
    def run(m, f):
        x = m.tensor([1., 2.], requires_grad=True)
        a, b = f["NoMaterialize"].apply(x)
        node = a.grad_fn
        a.sum().backward()
        return node.seen, x.grad
    t, g = both(run)
    assert t[0] == g[0] == (False, True)
    assert_close(g[1], t[1])


@pytest.mark.parametrize("name", ["WrongCount", "WrongShape"])
def test_wrong_gradient_count_or_shape(name):
    def run(m, f):
        x = m.tensor([1., 2.], requires_grad=True)
        y = m.tensor([1., 2.], requires_grad=True)
        out = f[name].apply(x, y) if name == "WrongCount" else f[name].apply(x)
        try:
            out.sum().backward()
        except RuntimeError as e:
            return str(e)
    t, g = both(run)
    assert t == g


def test_once_differentiable():
    def run(m, f):
        x = m.tensor([1., 2.], requires_grad=True)
        y = f["Once"].apply(x)
        g, = m.autograd.grad(y.sum(), x, create_graph=True)
        first = g.detach().clone()
        try:
            g.sum().backward()
        except RuntimeError as e:
            return first, str(e)
        return first, None
    t, g = both(run)
    assert_close(g[0], t[0])
    assert g[1] == t[1] and t[1] is not None


def test_function_prints_with_its_class_name_in_ir():
    f = make_fns(tg)
    x = tg.tensor([1., 2.], requires_grad=True)
    y = f["Exp"].apply(x * 2)
    text = str(tg.ir.graph_of(y))
    assert "Exp.apply(" in text
    assert "function_backward" in str(tg.ir.backward_graph_of(y))


def test_hook_order_and_replacement():
    def run(m):
        log = []
        x = m.tensor([1., 2.], requires_grad=True)
        h = x * 3
        y = h.sin()
        h.register_hook(lambda g: log.append("tensor h") or g * 2)
        y.grad_fn.register_prehook(lambda go: log.append("pre sin") or None)
        y.grad_fn.register_hook(lambda gi, go: log.append("post sin") or None)
        h.grad_fn.register_prehook(lambda go: log.append("pre mul") or (go[0] + 1,))
        h.grad_fn.register_hook(lambda gi, go: log.append("post mul") or (gi[0] * 10, None))
        x.register_hook(lambda g: log.append("leaf x") or None)
        y.sum().backward()
        return log, x.grad
    (lt, gt), (lg, gg) = run(torch), run(tg)
    assert lg == lt
    assert_close(gg, gt)


def test_removable_handles():
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        h = x * 3
        hd = h.register_hook(lambda g: g * 100)
        hd.remove()
        nd = h.grad_fn.register_hook(lambda gi, go: (gi[0] * 5, None))
        nd.remove()
        h.sum().backward()
        return x.grad
    assert_close(run(tg), run(torch))


def test_accumulate_grad_node_hooks():
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        y = x * 3
        acc = y.grad_fn.next_functions[0][0]
        log = []
        acc.register_prehook(lambda g: log.append(("pre", g[0].tolist())) or (g[0] * 2,))
        acc.register_hook(lambda gi, go: log.append(("post", len(gi), go[0].tolist())))
        y.sum().backward()
        return log, x.grad.tolist()
    assert run(tg) == run(torch)


# -- inside @tracegrad.compile: forward traced into the graph, backward into the backward graph --

STE_CASES = {
    "Exp": lambda f, m, x: f["Exp"].apply(x * 0.5).sum(),
    "MulConst": lambda f, m, x: (f["MulConst"].apply(x, 3.0, True) ** 2).sum(),
    "Split2": lambda f, m, x: (lambda a, b: (a * b.sin()).sum())(*f["Split2"].apply(x, x.cos())),
    "Cube": lambda f, m, x: f["Cube"].apply(x.tanh()).sum(),
    "SortLike": lambda f, m, x: (f["SortLike"].apply(x)[0] ** 2).sum(),
    "Once": lambda f, m, x: f["Once"].apply(x + 1).sum(),
}


@pytest.mark.parametrize("name", list(STE_CASES))
def test_compiled_custom_function_matches_eager_and_torch(name):
    import warnings
    body = STE_CASES[name]

    def run(m, f, compiled):
        x = m.tensor([0.3, -1.2, 0.7, 2.0], dtype=m.float64, requires_grad=True)
        fn = (lambda x: body(f, m, x))
        if compiled:
            fn = tg.compile(fn, fullgraph=True)
        y = fn(x)
        y.backward()
        return y, x.grad
    ft, fg = make_fns(torch), make_fns(tg)
    yt, gt = run(torch, ft, False)
    ye, ge = run(tg, fg, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yc, gc = run(tg, fg, True)
    assert_close(yc, yt)
    assert_close(gc, gt)
    assert_close(yc, ye)
    assert_close(gc, ge)


def test_compiled_custom_backward_is_the_users_not_the_forwards_derivative():
    """A straight-through estimator: the compiled gradient is the user's backward (3 g),
    not the derivative of round (0)."""
    def make(m):
        class STE(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.round()

            @staticmethod
            def backward(ctx, g):
                return g * 3
        return STE

    def run(m, compiled):
        ste = make(m)
        x = m.tensor([0.2, 1.6, -0.7], dtype=m.float64, requires_grad=True)
        fn = lambda x: (ste.apply(x * 1.5) * x).sum()   # noqa: E731
        if compiled:
            fn = tg.compile(fn, fullgraph=True)
        fn(x).backward()
        return x.grad
    assert_close(run(tg, True), run(torch, False))


def test_compiled_double_backward_through_custom_backward():
    def run(m, f, compiled):
        x = m.tensor([0.3, -1.2, 0.7], dtype=m.float64, requires_grad=True)

        def fn(x):
            y = f["Cube"].apply(x).sum()
            g, = m.autograd.grad(y, x, create_graph=True)
            return (g * g).sum()
        if compiled:
            fn = tg.compile(fn, fullgraph=True)
        fn(x).backward()
        return x.grad
    assert_close(run(tg, make_fns(tg), True), run(torch, make_fns(torch), False))


def test_compiled_once_differentiable_refuses_double_backward():
    """As torch's: a @once_differentiable backward's result has no history of what it read;
    differentiating it through the incoming gradient raises, and where that gradient carries
    none (a seed of ones) the result requires no grad, and backward refuses it."""
    f = make_fns(tg)

    def inside(x):
        y = f["Once"].apply(x).sum()
        g, = tg.autograd.grad(y, x, create_graph=True)
        return g.sum()
    x = tg.tensor([0.3, -1.2], dtype=tg.float64, requires_grad=True)
    out = tg.compile(inside)(x)
    with pytest.raises(RuntimeError, match="does not require grad"):
        out.backward()
    fn = tg.compile(lambda x: f["Once"].apply(x).sum())
    g, = tg.autograd.grad(fn(x), x, create_graph=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        g.sum().backward()
    # a gradient that carries a gradient of its own (x, for (Once(x) * x).sum()): raises
    fn = tg.compile(lambda x: (f["Once"].apply(x) * x).sum())
    g, = tg.autograd.grad(fn(x), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()
    ft = make_fns(torch)
    xt = torch.tensor([0.3, -1.2], dtype=torch.float64, requires_grad=True)
    gt, = torch.autograd.grad(ft["Once"].apply(xt).sum(), xt, create_graph=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        gt.sum().backward()
    gt, = torch.autograd.grad((ft["Once"].apply(xt) * xt).sum(), xt, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gt.sum().backward()


def test_compiled_mark_dirty_and_no_grad_inputs():
    def run(m, f, compiled):
        x = m.tensor([0.3, -1.2], dtype=m.float64, requires_grad=True)
        c = m.tensor([1.0, 2.0], dtype=m.float64)

        def fn(x, c):
            y = x * 1.0
            z = f["Double_"].apply(y)          # marks y dirty: y itself now holds 2 y
            w = f["Exp"].apply(c)              # no input requires grad: just the forward
            return (y * z * w).sum()
        if compiled:
            fn = tg.compile(fn, fullgraph=True)
        out = fn(x, c)
        out.backward()
        return out, x.grad
    (ot, gt), (oc, gc) = run(torch, make_fns(torch), False), run(tg, make_fns(tg), True)
    assert_close(oc, ot)
    assert_close(gc, gt)
