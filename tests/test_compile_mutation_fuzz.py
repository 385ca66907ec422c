"""Views and in-place writes inside `tracegrad.compile`, against eager tracegrad and torch.

The regression tests below each name a bug that random programs of views and in-place ops
found; the random programs themselves follow them."""
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _eager_and_compiled(f, make_args):
    """f(lib, *args) run by torch, eager tracegrad and compiled tracegrad on fresh arguments:
    (torch's outputs and arguments after, eager's, compiled's, warnings of the compiled call)."""
    res = []
    for lib, run in ((torch, None), (tg, None), (tg, "compiled")):
        args = make_args(lib)
        fn = (lambda *a: f(lib, *a)) if run is None else tg.compile(lambda *a: f(tg, *a))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            outs = fn(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        res.append(([o.detach().numpy().copy() for o in outs], [a.detach().numpy().copy() for a in args],
                    [str(m.message) for m in w]))
    return res


def _assert_same(res):
    (t_outs, t_args, _), (e_outs, e_args, _), (c_outs, c_args, _) = res
    for a, b, c in zip(t_outs + t_args, e_outs + e_args, c_outs + c_args):
        np.testing.assert_allclose(b, a, rtol=1e-6)
        np.testing.assert_array_equal(c, b)


@pytest.mark.parametrize("piece", ["unbind", "split", "chunk", "split_sizes"])
def test_write_through_a_piece_of_split_or_unbind_reaches_its_base(piece):
    """split/chunk/unbind return several views; a write through one of them inside a compiled
    function was lost: the base and the argument kept their old values ([1, 2, 3, 4] where
    eager gives [1, 2, -4.5, 4])."""
    take = {"unbind": lambda x: x.unbind(0)[2], "split": lambda x: x.split(2)[1],
            "chunk": lambda x: x.chunk(2)[1], "split_sizes": lambda x: x.split([1, 2, 1])[1]}[piece]

    def f(lib, x, w):
        take(x).mul_(-1.5)                  # an argument, written through the piece
        y = w * 1
        p = take(y)
        p += 10                             # an intermediate
        with lib.no_grad():
            take(y.t().t()).clamp_(max=11.5)    # under no_grad: the pieces are detached views
        return x * 1, y, p
    make = lambda lib: (lib.tensor([1., 2., 3., 4.]), lib.tensor([1., 2., 3., 4.], dtype=lib.float64))
    _assert_same(_eager_and_compiled(f, make))


@pytest.mark.parametrize("case", ["written", "base_written"])
def test_piece_of_split_that_requires_grad_raises_as_eager(case):
    """An in-place op on an output of split that requires grad, or a read of one after its base
    was written in place, raises torch's error; compiled gave a number (it now runs eagerly,
    with a warning, and raises)."""
    def f(lib, x):
        y = x * 1
        a, b = y.split(2)
        (b if case == "written" else y).mul_(2)
        return b * 1
    for lib, fn in ((torch, lambda x: f(torch, x)), (tg, lambda x: f(tg, x)), (tg, tg.compile(lambda x: f(tg, x)))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="output of a function that returns multiple views"):
                fn(lib.tensor([1., 2., 3., 4.], requires_grad=True))


def test_view_of_a_view_of_a_view_sees_a_write_to_the_root():
    """A view re-taken from its written base got a new value but kept its generation, so the
    views taken of it were not taken again: c = y[0:2].t()[0] read after y.add_(1) gave the
    old [1, 3] in compiled code, eager [2, 4]. The same through a view taken under no_grad."""
    def f(lib, x):
        y = x * 1
        c = y[0:2].t()[0]
        v = x.unsqueeze(0)[0]
        with lib.no_grad():
            w = v.t()
        y.add_(1)
        v += 1
        w.mul_(10)
        return c * 1, y
    _assert_same(_eager_and_compiled(f, lambda lib: (lib.tensor([[1., 2.], [3., 4.]]),)))


def _saved_then_written_mul(lib, x):
    a = x * -1 + 0.5
    b = x * a                   # mul saves a for x's gradient
    a.mul_(-1.5)
    return b


def _saved_then_written_exp(lib, x):
    y = x.exp()                 # exp saves its result
    y.add_(1)
    return y


def _saved_then_written_through_a_view(lib, x):
    a = x * 2
    b = a.sin()                 # sin saves a
    a[0].zero_()                # a view of a, written: a's version moves
    return b


def _saved_then_written_param(lib, x, w):
    y = x * w                   # mul saves w for x's gradient
    with lib.no_grad():
        w.add_(1.0)
    return y


def _saved_then_written_by_a_write_that_reads_the_saving_op(lib, x):
    a = x * 1
    b = a * a                   # saves a; the write below reads b
    a.add_(b)
    return a


def _saved_then_written_by_setitem_add(lib, x):
    a = x * 1
    s = a.sin()                 # saves a
    a[:] += s                   # x[k] += y: a getitem, an add_, a setitem
    return s


@pytest.mark.parametrize("f", [_saved_then_written_mul, _saved_then_written_exp, _saved_then_written_through_a_view,
                               _saved_then_written_param, _saved_then_written_by_a_write_that_reads_the_saving_op,
                               _saved_then_written_by_setitem_add])
def test_backward_through_a_saved_value_written_in_place_raises_as_eager(f):
    """A value saved for the backward and then written in place makes eager's (and torch's)
    backward raise "modified by an inplace operation"; the trace, which keeps every value,
    gave a gradient from the old value instead (b = x * a; a.mul_(-1.5): x.grad was
    -x + 0.5 where torch raises). Such a call now runs eagerly, and its backward raises."""
    n = f.__code__.co_argcount - 1
    for lib, run in ((torch, lambda *a: f(torch, *a)), (tg, lambda *a: f(tg, *a)),
                     (tg, tg.compile(lambda *a: f(tg, *a)))):
        args = [lib.tensor([1., 2., 3.], requires_grad=True) for _ in range(n)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = run(*args)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


def test_a_saved_value_written_where_no_backward_goes_through_it_still_compiles():
    """Only a backward through the op that saved the value raises: in-place ops that save their
    own result (exp_), read their old value (clamp_), or write a value whose saving op the
    outputs do not reach, compile, with eager's gradients and no fallback."""
    def f(lib, x):
        y = x * 2
        y.exp_()
        z = x * 1
        z.clamp_(-1.5, 2.5)
        a = x * 2
        b = a * a               # not returned: its backward is never run
        a.add_(1)
        return y * 1, z * z, a * 3
    grads = []
    for lib, run in ((torch, None), (tg, None), (tg, "compiled")):
        fn = (lambda x: f(lib, x)) if run is None else tg.compile(lambda x: f(tg, x))
        x = lib.tensor([0.5, 1., 2.], requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            outs = fn(x)
        assert not w, [str(m.message) for m in w]
        sum(o.sum() for o in outs).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)
    np.testing.assert_allclose(grads[2], grads[1], rtol=1e-6)


def test_copy_from_a_tensor_that_broadcasts_to_a_larger_shape_raises_torchs_error():
    """x.copy_(src) where src and x broadcast only to a shape larger than x raised numpy's
    ValueError ("operands could not be broadcast together ...") where torch raises RuntimeError."""
    for lib in (torch, tg):
        for dst, src in (((1, 1), (2, 1)), ((2, 1, 1), (2, 2, 1))):
            with pytest.raises(RuntimeError, match=r"output with shape .* doesn't match the broadcast shape"):
                lib.zeros(dst).copy_(lib.ones(src))
        x = lib.zeros(2, 2, 1)
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            x[:, 0:1].copy_(x)


def test_setitem_on_a_0_dim_value_that_the_program_holds_as_a_numpy_scalar():
    """A 0-dim value (a sum, a sin of it) is a numpy scalar in the generated code, and the
    index_put kernel copied it with .copy(), which stays a scalar: `s[...] = 0.5` crashed the
    compiled call with "'numpy.float32' object does not support item assignment"."""
    def f(lib, x):
        s = x.sum().sin()
        s[...] = 0.5
        t = x.sum(0)
        with lib.no_grad():
            t[...] += 1.5
        return s * 2, t * 1
    _assert_same(_eager_and_compiled(f, lambda lib: (lib.tensor([1., 2.]),)))


def test_mT_of_a_0_dim_tensor_is_the_identity_view_as_torchs():
    """torch's 0-dim x.mT is x (a view, with a deprecation warning); tracegrad raised
    "only supported on matrices ... Got 1-D tensor"."""
    def f(lib, x):
        y = x * 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = y.mT
        v.add_(1)
        return y, v * 1
    _assert_same(_eager_and_compiled(f, lambda lib: (lib.tensor(3.0),)))


def test_detach_of_a_view_of_an_argument_requires_no_grad():
    """An output x[:, :1].detach() was taken again from the argument as if it were a view made
    under no_grad (which in torch requires grad): compiled gave requires_grad=True where eager
    and torch give False, and a backward from it ran silently where eager raises. It still
    shares the argument's memory."""
    def f(lib, x):
        with lib.no_grad():
            n = x[:, 0:1]
        return x[:, 0:1].detach(), x.t().detach()[0], n, x[:, 1:0].detach()
    got = []
    for lib, fn in ((torch, lambda x: f(torch, x)), (tg, lambda x: f(tg, x)), (tg, tg.compile(lambda x: f(tg, x)))):
        x = lib.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        outs = fn(x)
        with lib.no_grad():
            x.mul_(10)
        got.append([(o.requires_grad, o.detach().numpy().tolist()) for o in outs])
    assert got[1] == got[0]
    assert got[2] == got[1]


def test_result_of_an_index_tensor_is_contiguous_so_reshape_views_it():
    """x[:, idx] came out in numpy's layout (the indexed dim first in memory), not torch's
    contiguous one: is_contiguous() was False, strides (1, 3, 1) for torch's (3, 1, 1), and
    y.reshape(-1) copied, so y.fill_(0) left it at 9.0 where torch's sum is 0."""
    for lib in (torch, tg):
        x = lib.ones(3, 4, 1)
        y = x[:, lib.tensor([-4, 0, 3])]
        r = y.reshape(-1)
        y.fill_(0)
        assert y.is_contiguous() and y.stride() == (3, 1, 1)
        assert r.sum().item() == 0.0


def _result_saved_through_a_view_then_base_written(lib, x):
    y = x * 1
    y[0:1].exp_()               # exp_ saves its result: y[0:1], sharing y's version counter
    y.mul_(2)
    return y


def _result_saved_through_a_view_then_other_view_written(lib, x):
    y = x * 1
    y[0:1].sigmoid_()
    y[1:].tanh_()
    return y * 2


@pytest.mark.parametrize("f", [_result_saved_through_a_view_then_base_written,
                               _result_saved_through_a_view_then_other_view_written])
def test_result_of_an_in_place_op_on_a_view_is_saved_with_the_views_version(f):
    """exp_ (sigmoid_, tanh_) on a view saves its result; eager tracegrad saved it with the
    result's own version counter, which never moves, so a later write to the base or to
    another view of it went unnoticed: x.grad [5.44, 2, 2] where torch raises "modified by an
    inplace operation". Compiled ran it too (the write's result was not known to be the view's
    memory): now it runs eagerly and raises."""
    for lib, run in ((torch, lambda x: f(torch, x)), (tg, lambda x: f(tg, x)), (tg, tg.compile(lambda x: f(tg, x)))):
        x = lib.ones(3, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = run(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


# == random programs ===============================================================================
#
# Each seed draws a program over 1-3 float32/float64 arguments (some requiring grad): values made
# from them, views of them (slices with steps and negative or empty ranges, select, narrow,
# transpose, permute, t, mT, view, reshape, expand, unsqueeze, squeeze, diagonal, unfold, pieces
# of split, chunk and unbind, detach, x[idx] and x[mask] copies), in-place writes through those
# views (add_, mul_, div_, clamp_, copy_, fill_, zero_, masked_fill_, index_put_, index_add_,
# setitem, `x[k] += y`, relu_, exp_, sigmoid_, tanh_, neg_), some under no_grad; it returns
# several of them (views of intermediates and of arguments among them). The steps are checked
# on torch as they are drawn, at two sets of shapes; a step torch refuses now and then ends the
# program (torch's error is then what both must raise).
#
# Compared: eager tracegrad with torch (values to a float tolerance, errors by type, arguments
# after the call, gradients of a weighted sum of the outputs, and the outputs read again after
# the arguments are written: aliasing); compiled with eager tracegrad, bit for bit except the
# gradients (64 ulp of the largest: a compiled node sums its contributions before the engine
# adds another), on three calls: two with new values, one with other shapes (a recompile).
# Where eager raises (at the call or at backward), compiled must raise too, or run eagerly.
#
# TRACEGRAD_MUTATION_PROGRAMS programs run (default 300, about 30 s); seeds 0-3299 pass:
# TRACEGRAD_MUTATION_PROGRAMS=3000 python -m pytest -q tests/test_compile_mutation_fuzz.py
# TRACEGRAD_MUTATION_DTYPE=bfloat16 (or float16) makes every argument of that dtype: eager against
# torch within a few of its ulps, compiled against eager bit for bit as in float32.

import os

F32, F64 = np.float32, np.float64
LOW = os.environ.get("TRACEGRAD_MUTATION_DTYPE")       # "bfloat16" / "float16": every argument of it
N_PROGRAMS = int(os.environ.get("TRACEGRAD_MUTATION_PROGRAMS", "300"))


def _key(d, k):
    return (slice(None),) * d + (k,)


def view_of(lib, x, kind, p):
    if kind == "slice":
        d, a, b, s = p
        return x[_key(d, slice(a, b, s))]
    if kind == "select":
        return x.select(*p)
    if kind == "int":
        d, i = p
        return x[_key(d, i)]
    if kind == "narrow":
        return x.narrow(*p)
    if kind == "transpose":
        return x.transpose(*p)
    if kind == "permute":
        return x.permute(*p)
    if kind == "t":
        return x.t()
    if kind == "mT":
        return x.mT
    if kind == "view_flat":
        return x.view(-1)
    if kind == "reshape_flat":
        return x.reshape(-1)
    if kind == "view_split":
        d = p
        return x.view(*x.shape[:d], 1, -1, *x.shape[d + 1:])
    if kind == "expand_new":
        return x.expand(p, *x.shape)
    if kind == "expand_one":
        d, n = p
        s = list(x.shape)
        s[d] = n
        return x.expand(*s)
    if kind == "unsqueeze":
        return x.unsqueeze(p)
    if kind == "squeeze":
        return x.squeeze(p)
    if kind == "squeeze_all":
        return x.squeeze()
    if kind == "diagonal":
        o, d1, d2 = p
        return x.diagonal(o, d1, d2)
    if kind == "unfold":
        return x.unfold(*p)
    if kind == "split":
        d, n, k = p
        return x.split(n, d)[k]
    if kind == "chunk":
        d, n, k = p
        return x.chunk(n, d)[k]
    if kind == "unbind":
        d, k = p
        return x.unbind(d)[k]
    if kind == "index":
        d, idx = p
        return x[_key(d, lib.tensor(idx))]
    if kind == "bool_index":
        m = (lib.arange(x.numel()).reshape(x.shape) % p) == 0
        return x[m]
    if kind == "detach":
        return x.detach()
    if kind == "ellipsis":
        return x[..., p]
    if kind == "none":
        return x[None]
    raise KeyError(kind)


def make(lib, env, kind, i, j, c):
    x = env[i]
    if kind == "scale":
        return x * c + 0.5
    if kind == "sin":
        return (x.tanh() * 3).sin()      # (bounded: libm's sin of a huge float32 differs from torch's)
    if kind == "add":
        return x + env[j]
    if kind == "mul":
        return x * env[j]
    if kind == "clone":
        return x.clone()
    if kind == "sumdim":
        return x.sum(j % max(x.dim(), 1), keepdim=c > 0) if x.dim() else x * 1
    if kind == "zeros":
        return lib.zeros(x.shape, dtype=x.dtype)
    if kind == "ones_like":
        return lib.ones_like(x)
    if kind == "exp":
        return (x * 0.3).exp()
    raise KeyError(kind)


def write(lib, env, kind, i, j, p):
    x = env[i]
    if kind == "add_s":
        return x.add_(p)
    if kind == "add_t":
        return x.add_(env[j], alpha=p)
    if kind == "sub_t":
        return x.sub_(env[j])
    if kind == "mul_s":
        return x.mul_(p)
    if kind == "mul_t":
        return x.mul_(env[j])
    if kind == "div_s":
        return x.div_(p)
    if kind == "div_t":
        return x.div_(env[j].abs() + 1)
    if kind == "clamp_":
        return x.clamp_(-p, p)
    if kind == "clamp_min_":
        return x.clamp_(min=p)
    if kind == "copy_":
        return x.copy_(env[j])
    if kind == "fill_":
        return x.fill_(p)
    if kind == "zero_":
        return x.zero_()
    if kind == "masked_fill_":
        m, c = p
        mask = (lib.arange(x.numel()).reshape(x.shape) % m) == 0
        return x.masked_fill_(mask, c)
    if kind == "index_put_":
        idx, c, acc = p
        return x.index_put_((lib.tensor(idx),), lib.tensor(c, dtype=x.dtype), accumulate=acc)
    if kind == "index_put_t":
        idx, acc = p
        return x.index_put_((lib.tensor(idx),), env[j].to(x.dtype), accumulate=acc)
    if kind == "index_add_":
        d, idx, c = p
        s = list(x.shape)
        s[d] = len(idx)
        src = lib.arange(int(np.prod(s)), dtype=x.dtype).reshape(s) * c
        return x.index_add_(d, lib.tensor(idx), src)
    if kind == "setitem_s":
        key, c = p
        x[_mkkey(lib, key)] = c
        return x
    if kind == "setitem_t":
        key = p
        x[_mkkey(lib, key)] = env[j]
        return x
    if kind == "iadd_key":
        key = p
        x[_mkkey(lib, key)] += env[j]
        return x
    if kind == "iadd":
        x += env[j]
        return x
    if kind == "imul_s":
        x *= p
        return x
    if kind in ("relu_", "exp_", "sigmoid_", "tanh_", "neg_", "zero_"):
        return getattr(x, kind)()
    raise KeyError(kind)


def _mkkey(lib, key):
    out = []
    for k in key:
        if isinstance(k, tuple) and k and k[0] == "T":
            out.append(lib.tensor(list(k[1:])))
        elif isinstance(k, tuple) and k and k[0] == "S":
            out.append(slice(*k[1:]))
        else:
            out.append(k)
    return tuple(out)


def body(lib, prog, *args):
    env = list(args)
    outs = []
    for st in prog["steps"]:
        op = st[0]
        ng = st[-1]
        ctx = lib.no_grad() if ng else _Null()
        with ctx:
            if op == "view":
                env.append(view_of(lib, env[st[2]], st[1], st[3]))
            elif op == "make":
                env.append(make(lib, env, st[1], st[2], st[3], st[4]))
            elif op == "write":
                r = write(lib, env, st[1], st[2], st[3], st[4])
                env[st[2]] = r
    for i, how in prog["outs"]:
        x = env[i]
        if how == "self":
            outs.append(x)
        elif how == "mul2":
            outs.append(x * 2)
        elif how == "sum":
            outs.append(x.sum())
    return tuple(outs)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# -- drawing a program ---------------------------------------------------------------------------

VIEWS = ["slice", "select", "int", "narrow", "transpose", "permute", "t", "mT", "view_flat", "reshape_flat",
         "view_split", "expand_new", "expand_one", "unsqueeze", "squeeze", "squeeze_all", "diagonal", "unfold",
         "split", "chunk", "unbind", "index", "bool_index", "detach", "ellipsis", "none"]
MAKES = ["scale", "sin", "add", "mul", "clone", "sumdim", "zeros", "ones_like", "exp"]
WRITES = ["add_s", "add_t", "sub_t", "mul_s", "mul_t", "div_s", "div_t", "clamp_", "clamp_min_", "copy_", "fill_",
          "zero_", "masked_fill_", "index_put_", "index_put_t", "index_add_", "setitem_s", "setitem_t", "iadd_key",
          "iadd", "imul_s", "relu_", "exp_", "sigmoid_", "tanh_", "neg_"]


def _draw_key(r, shp):
    nd = len(shp)
    if nd == 0:
        return (Ellipsis,)
    key = []
    for d in range(int(r.integers(1, nd + 1))):
        n = shp[d]
        c = r.integers(0, 4) if n else 3
        if c == 0:
            key.append(int(r.integers(-n, n)) if n else 0)
        elif c == 1:
            key.append(("S", int(r.integers(-n - 1, n + 1)), int(r.integers(-n - 1, n + 2)), int(r.integers(1, 3))))
        elif c == 2:
            key.append(("T",) + tuple(int(v) for v in r.integers(-n, n, int(r.integers(1, 3)))))
        else:
            key.append(("S", None, None, None))
    return tuple(key)


def _draw_view(r, x):
    kind = VIEWS[int(r.integers(0, len(VIEWS)))]
    nd = x.dim()
    shp = tuple(x.shape)
    def dim():
        return int(r.integers(-nd, nd)) if nd else 0
    def ln(d):
        return shp[d] if nd else 1
    if kind == "slice":
        d = dim(); n = ln(d)
        p = (d, int(r.integers(-n - 1, n + 1)), int(r.integers(-n - 1, n + 2)), int(r.integers(1, 4)))
    elif kind in ("select", "int"):
        d = dim(); n = ln(d)
        p = (d, int(r.integers(-n, n)) if n else 0)
    elif kind == "narrow":
        d = dim(); n = ln(d)
        s = int(r.integers(0, n + 1)) if n else 0
        p = (d, s, int(r.integers(0, n - s + 1)))
    elif kind == "transpose":
        p = (dim(), dim())
    elif kind == "permute":
        p = tuple(int(v) for v in r.permutation(nd))
    elif kind == "view_split":
        p = dim() % max(nd, 1)
    elif kind == "expand_new":
        p = int(r.integers(1, 4))
    elif kind == "expand_one":
        ones = [d for d in range(nd) if shp[d] == 1]
        p = (ones[int(r.integers(0, len(ones)))] if ones else dim(), int(r.integers(1, 4)))
    elif kind == "unsqueeze":
        p = int(r.integers(-nd - 1, nd + 1))
    elif kind == "squeeze":
        p = dim()
    elif kind == "diagonal":
        p = (int(r.integers(-2, 3)), dim(), dim())
    elif kind == "unfold":
        d = dim(); n = ln(d)
        p = (d, int(r.integers(1, n + 1)) if n else 1, int(r.integers(1, 3)))
    elif kind in ("split", "chunk"):
        d = dim(); n = ln(d)
        p = (d, int(r.integers(1, 3)), int(r.integers(0, 3)))
    elif kind == "unbind":
        d = dim(); n = ln(d)
        p = (d, int(r.integers(0, max(n, 1))))
    elif kind == "index":
        d = dim(); n = ln(d)
        p = (d, [int(v) for v in r.integers(-n, max(n, 1), int(r.integers(1, 4)))])
    elif kind == "bool_index":
        p = int(r.integers(1, 4))
    elif kind == "ellipsis":
        p = int(r.integers(-1, 1))
    else:
        p = None
    return kind, p


def _draw_write(r, x, env):
    kind = WRITES[int(r.integers(0, len(WRITES)))]
    shp = tuple(x.shape)
    nd = len(shp)
    c = float(r.choice([0.5, -1.5, 2.0, 3.0, 0.0]))
    j = int(r.integers(0, len(env)))
    if kind in ("add_s", "mul_s", "div_s", "fill_", "imul_s"):
        p = c if kind != "div_s" or c else 2.0
    elif kind == "add_t":
        p = c
    elif kind in ("clamp_", "clamp_min_"):
        p = abs(c) + 0.25
    elif kind == "masked_fill_":
        p = (int(r.integers(1, 4)), c)
    elif kind == "index_put_":
        n = shp[0] if nd else 1
        p = ([int(v) for v in r.integers(-n, max(n, 1), int(r.integers(1, 4)))], c, bool(r.integers(0, 2)))
    elif kind == "index_put_t":
        n = shp[0] if nd else 1
        p = ([int(v) for v in r.integers(-n, max(n, 1), int(r.integers(1, 4)))], bool(r.integers(0, 2)))
    elif kind == "index_add_":
        d = int(r.integers(0, nd)) if nd else 0
        n = shp[d] if nd else 1
        p = (d, [int(v) for v in r.integers(0, max(n, 1), int(r.integers(1, 4)))], c)
    elif kind == "setitem_s":
        p = (_draw_key(r, shp), c)
    elif kind in ("setitem_t", "iadd_key"):
        p = _draw_key(r, shp)
    else:
        p = None
    return kind, j, p


def _shapes(r):
    n = int(r.integers(1, 4))
    A, B = [], []
    for _ in range(n):
        nd = int(r.integers(1, 4))
        a = [int(v) for v in r.integers(1, 5, nd)]
        b = [v + int(r.integers(0, 2)) for v in a]
        if a == b:
            b[int(r.integers(0, nd))] += 1
        A.append(tuple(a))
        B.append(tuple(b))
    return A, B


def _try(f):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return True, f()
    except Exception as e:  # noqa: BLE001
        return False, e


def draw(seed):
    r = np.random.default_rng(seed)
    A, B = _shapes(r)
    n = len(A)
    dts = [[F32, F64][int(r.integers(0, 2))] for _ in range(n)]
    if r.random() < 0.5:
        dts = [dts[0]] * n
    if LOW:
        dts = [LOW] * n
    req = [bool(r.integers(0, 2)) for _ in range(n)]
    envA = [torch.zeros(s, dtype=getattr(torch, _name(d))) for s, d in zip(A, dts)]
    envB = [torch.zeros(s, dtype=getattr(torch, _name(d))) for s, d in zip(B, dts)]
    steps = []
    n_steps = int(r.integers(3, 14))
    tries = 0
    while len(steps) < n_steps and tries < 200:
        tries += 1
        u = r.random()
        i = int(r.integers(0, len(envA)))
        ng = bool(r.random() < 0.12)
        if u < 0.2:
            kind = MAKES[int(r.integers(0, len(MAKES)))]
            j = int(r.integers(0, len(envA)))
            st = ("make", kind, i, j, float(r.choice([-1.0, 1.0, 2.0])), ng)
        elif u < 0.55:
            kind, p = _draw_view(r, envA[i])
            st = ("view", kind, i, p, ng)
        else:
            if r.random() < 0.3:
                i = len(envA) - 1   # the latest value, often a view
            kind, j, p = _draw_write(r, envA[i], envA)
            st = ("write", kind, i, j, p, ng)
        prog = {"steps": [st], "outs": []}
        okA, ea = _try(lambda: _step(torch, envA, st))
        okB, eb = _try(lambda: _step(torch, envB, st))
        if okA and okB:
            steps.append(st)
            _apply(envA, st, ea)
            _apply(envB, st, eb)
        elif not okA and not okB and r.random() < 0.1:
            steps.append(st)     # torch raises: the program stops here
            break
    nv = len(envA)
    outs = []
    for _ in range(int(r.integers(1, 5))):
        outs.append((int(r.integers(0, nv)), ["self", "self", "mul2", "sum"][int(r.integers(0, 4))]))
    if r.random() < 0.5:
        outs.append((nv - 1, "self"))
    return {"A": A, "B": B, "dts": dts, "req": req, "steps": steps, "outs": outs}


def _step(lib, env, st):
    env2 = list(env)
    op = st[0]
    if op == "view":
        return view_of(lib, env2[st[2]], st[1], st[3])
    if op == "make":
        return make(lib, env2, st[1], st[2], st[3], st[4])
    return write(lib, env2, st[1], st[2], st[3], st[4])


def _apply(env, st, res):
    if st[0] == "write":
        env[st[2]] = res
    else:
        env.append(res)


# -- running -------------------------------------------------------------------------------------

def _name(d):
    return d if isinstance(d, str) else np.dtype(d).name


def values(r, shapes, dts):
    # (a half dtype's values drawn in float32 and made tensors of it in run)
    return [(r.standard_normal(s) * 2).astype(np.float32 if isinstance(d, str) else d) for s, d in zip(shapes, dts)]


def _np(t):
    """A tensor's values as numpy: float16/bfloat16 as float32 (exact)."""
    t = t.detach()
    return (t.float() if str(t.dtype).endswith(("float16", "bfloat16")) else t).numpy().copy()


def run(lib, prog, arrays, req, fn=None, seed=0):
    """-> dict(err=, outs=, args=, grads=, berr=, after=)"""
    args = [lib.tensor(a.copy(), dtype=getattr(lib, LOW) if LOW else None, requires_grad=q)
            for a, q in zip(arrays, req)]
    res = {"err": None, "berr": None, "warn": []}
    f = fn if fn is not None else (lambda *a: body(lib, prog, *a))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            outs = f(*args)
        except Exception as e:  # noqa: BLE001
            res["err"] = e
            res["warn"] = [str(x.message) for x in w]
            return res
        res["warn"] = [str(x.message) for x in w]
    res["outs"] = [(_np(o), o.requires_grad, str(o.dtype)) for o in outs]
    res["args"] = [_np(a) for a in args]
    rg = np.random.default_rng(seed + 12345)
    loss = None
    try:
        for o in outs:
            wgt = rg.standard_normal(tuple(o.shape))
            if o.requires_grad:
                t = (o * lib.tensor(wgt, dtype=o.dtype)).sum()
                loss = t if loss is None else loss + t
        if loss is not None:
            loss.backward()
    except Exception as e:  # noqa: BLE001
        res["berr"] = e
    res["grads"] = [None if a.grad is None else _np(a.grad) for a in args]
    # outputs that alias arguments: write the arguments and read the outputs again
    with lib.no_grad():
        for a in args:
            a.add_(100.0)
    res["after"] = [_np(o) for o in outs]
    return res


def _tol(dt):  # eager tracegrad vs torch: numpy's and torch's kernels round apart
    if LOW:
        return (6e-2, 6e-2) if LOW == "bfloat16" else (8e-3, 8e-3)      # a few ulps, carried on
    return (2e-4, 1e-5) if dt == "float32" or "float32" in dt else (1e-9, 1e-11)


def _eps(dt):
    return {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}[LOW] if LOW else np.finfo(dt).eps


def cmp_arrays(a, b, exact, what, f32=False):
    if a is None or b is None:
        assert a is None and b is None, f"{what}: {a is None} vs {b is None}"
        return
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}"
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} vs {b.dtype}"
    if exact and a.ndim == 0 and not np.array_equal(a, b, equal_nan=True):
        # a sum: numpy's pairwise summation rounds by the layout it reads, which a compiled
        # program's arrays need not share with eager's (a copy where eager has an expanded view)
        eps = _eps(a.dtype)
        assert abs(float(a) - float(b)) <= 64 * eps * max(abs(float(b)), 1.0), f"{what} (a sum): {a} vs {b}"
    elif exact:
        ok = np.array_equal(a, b, equal_nan=True)
        assert ok, f"{what}: not bit-equal\n{a}\n{b}"
    else:
        rt, at = _tol("float32" if f32 else str(a.dtype))
        np.testing.assert_allclose(a, b, rtol=rt, atol=at, equal_nan=True, err_msg=what)


def compare(got, want, exact, label, check_after=True, no_grad_views=False, f32=False):
    """f32: the program reads a float32 argument, whose rounding (numpy's exp against torch's)
    float64 values computed from it carry"""
    if got["err"] is not None and not exact and ("more than one element of the written-to" in str(got["err"]) or
                                                 "depend on the order in which the elements are written" in
                                                 str(got["err"])):
        return      # tracegrad refuses an in-place op on overlapping unfold windows, or one that reads an
        #             element it wrote (through a layout torch does not judge), where torch's result
        #             depends on the order its loop visits them (whatever torch's program meets later:
        #             seed 47328's torch raised at a step after the refused one)
    if want["err"] is not None:
        assert got["err"] is not None, f"{label}: expected error {type(want['err']).__name__}: {want['err']}"
        if not exact:
            assert isinstance(got["err"], type(want["err"])) or type(got["err"]).__name__ == type(want["err"]).__name__, \
                f"{label}: error type {type(got['err']).__name__}: {got['err']} vs {type(want['err']).__name__}: {want['err']}"
        return
    if got["err"] is not None and want["berr"] is not None and exact:
        return      # compiled raised at the call where eager raises at backward
    assert got["err"] is None, f"{label}: unexpected error {type(got['err']).__name__}: {got['err']}"
    assert len(got["outs"]) == len(want["outs"])
    for k, ((a, ra, da), (b, rb, db)) in enumerate(zip(got["outs"], want["outs"])):
        assert da == db, f"{label}: out {k} dtype {da} vs {db}"
        # left: a value computed with grad enabled from a view taken under no_grad of one that
        # requires grad requires grad in torch and eager (no gradient reaches the inputs through
        # it); compiled says it does not
        assert ra == rb or (exact and no_grad_views and rb and not ra), f"{label}: out {k} requires_grad {ra} vs {rb}"
        cmp_arrays(a, b, exact, f"{label}: out {k}", f32)
    for k, (a, b) in enumerate(zip(got["args"], want["args"])):
        cmp_arrays(a, b, exact, f"{label}: arg {k} after call", f32)
    if want["berr"] is not None:
        assert got["berr"] is not None, f"{label}: expected backward error {type(want['berr']).__name__}: {want['berr']}"
        return
    assert got["berr"] is None, f"{label}: unexpected backward error {type(got['berr']).__name__}: {got['berr']}"
    for k, (a, b) in enumerate(zip(got["grads"], want["grads"])):
        if exact and a is not None and b is not None:
            # compiled: the contributions to a gradient may be summed in another order (the
            # compiled node's own sum, then the engine's), a few ulp of the largest
            assert a.shape == b.shape and a.dtype == b.dtype, f"{label}: grad {k} shape/dtype"
            eps = _eps(a.dtype)
            scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1.0)
            err = float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
            ok = err <= 64 * eps * scale or ((np.isnan(a) == np.isnan(b)).all()
                                             and np.allclose(a, b, equal_nan=True, rtol=64 * eps, atol=64 * eps * scale))
            assert ok, f"{label}: grad {k} not close ({err:.3g})\n{a}\n{b}"
            continue
        cmp_arrays(a, b, exact, f"{label}: grad {k}", f32)
    if check_after:
        for k, (a, b) in enumerate(zip(got["after"], want["after"])):
            cmp_arrays(a, b, exact, f"{label}: out {k} after the arguments were written", f32)


def _check_program(seed):
    prog = draw(seed)
    r = np.random.default_rng(seed)
    vals = [values(r, prog["A"], prog["dts"]), values(r, prog["A"], prog["dts"]), values(r, prog["B"], prog["dts"])]
    no_grad_views = any(st[0] == "view" and st[-1] for st in prog["steps"])
    with warnings.catch_warnings():
        # (torch's deprecations, .grad of an argument that a write gave history, the compiled
        # function's warning where it runs eagerly)
        warnings.simplefilter("ignore")
        want = run(torch, prog, vals[0], prog["req"], seed=seed)
        eager = [run(tg, prog, v, prog["req"], seed=seed) for v in vals]
        compare(eager[0], want, False, "eager vs torch", f32=F32 in prog["dts"])
        cf = tg.compile(lambda *a: body(tg, prog, *a))
        for k, v in enumerate(vals):
            got = run(tg, prog, v, prog["req"], fn=cf, seed=seed)
            compare(got, eager[k], True, f"compiled call {k} vs eager", no_grad_views=no_grad_views)


@pytest.mark.parametrize("seed", range(N_PROGRAMS))
def test_random_program_of_views_and_in_place_writes(seed):
    _check_program(seed)


def test_the_drawn_programs_write_through_views():
    """The programs are what the fuzzing is for: most write through a view (of an argument or
    of an intermediate), and many write an argument."""
    through = to_arg = 0
    for seed in range(300):
        p = draw(seed)
        kinds = ["arg"] * len(p["A"])
        wrote_view = wrote_arg = False
        for st in p["steps"]:
            if st[0] == "write":
                wrote_view |= kinds[st[2]] == "view"
                wrote_arg |= kinds[st[2]] == "arg"
            else:
                kinds.append(st[0])
        through += wrote_view
        to_arg += wrote_arg
    assert through > 150 and to_arg > 100, (through, to_arg)


def test_index_put_on_an_expand_that_repeats_nothing_writes_as_torch():
    """x.expand(1, 4, 4) has a zero stride only on a size-1 dim: no element is repeated, and
    torch's e[-1, idx] = 3.0 writes x; tracegrad raised its 'more than one element ... refers
    to a single memory location' for any index tensor on a read-only (expanded) array."""
    def f(lib, x):
        e = x.expand(1, 4, 4)
        e[-1, lib.tensor([0, 2])] = 3.0
        e[0, lib.tensor([1])] = lib.ones(4, dtype=x.dtype)
        return x * 1
    _assert_same(_eager_and_compiled(f, lambda lib: (lib.zeros(4, 4),)))


def test_permute_without_dims_raises_torchs_type_error():
    """x.permute() of a 0-dim tensor returned it; torch's binding requires dims (TypeError)."""
    for lib in (torch, tg):
        for x in (lib.zeros(()), lib.zeros(2, 3)):
            with pytest.raises(TypeError, match="missing 1 required positional arguments"):
                x.permute()
        assert lib.zeros(()).permute(()).shape == ()


def test_reshape_of_a_view_that_eager_copies_is_a_copy_in_compiled_code():
    """reshape of a non-contiguous view (x.t(), x[:, ::2], an unfold) copies in eager, as in
    torch; the trace took every reshape for a view, so writes through the result reached x:
    r = x.t().reshape(-1); r[0] = 100.0 changed x[0, 0] compiled (101 after the other writes)
    where eager and torch leave it 0."""
    def f(lib, x):
        r = x.t().reshape(-1)
        r[0] = 100.0
        v = x[:, ::2].reshape(-1)
        v.add_(1)
        w = x.reshape(-1)              # contiguous: a view, written through
        w[1] = -5.0
        u = x.unfold(0, 2, 1).reshape(-1)
        u.mul_(3)
        return x * 1, r * 1, v * 1, u * 1
    _assert_same(_eager_and_compiled(f, lambda lib: (lib.arange(6.).reshape(2, 3) * 1,)))


@pytest.mark.parametrize("shape,idx,src", [((3,), [5], (1,)), ((3,), [-1], (1,)), ((0,), [0], (1,)), ((0, 2), [0], (1, 2)),
                                           ((2, 2), [5], (1, 2)), ((), [0], ()), ((), [1], ()), ((), [0], (1,))])
def test_index_add_errors_of_a_vector_a_0_dim_and_an_empty_input_as_torchs(shape, idx, src):
    """torch's index_add_ kernel raises IndexError 'index out of range in self' for a vector
    or 0-dim input (tracegrad: RuntimeError 'index 5 is out of bounds ...'), writes nothing and
    checks nothing for an empty matrix (tracegrad raised), and adds a 0-dim source to a 0-dim
    input (tracegrad raised 'Index tensor must have the same number of dimensions')."""
    res = []
    for lib in (torch, tg):
        try:
            res.append(lib.zeros(shape).index_add_(0, lib.tensor(idx), lib.ones(src)).tolist())
        except Exception as e:  # noqa: BLE001
            res.append(type(e))
    assert res[1] == res[0]


def test_autograd_grad_inside_through_a_saved_value_written_in_place_raises_as_eager():
    """autograd.grad inside the compiled function, through sin's saved input written in place
    after: eager and torch raise "modified by an inplace operation"; compiled returned the
    gradient of the old value (cos(2x) * 2)."""
    def f(lib, x):
        a = x * 2
        b = a.sin()
        a.add_(1)
        g, = lib.autograd.grad(b.sum(), x)
        return g
    for lib, run in ((torch, lambda x: f(torch, x)), (tg, lambda x: f(tg, x)), (tg, tg.compile(lambda x: f(tg, x)))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                run(lib.tensor([1., 2.], requires_grad=True))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_random_programs_in_half_types(dtype, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "LOW", dtype)
    for seed in range(40):
        _check_program(seed)
