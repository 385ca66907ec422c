"""Memory layout, views and overlapping writes: torch against eager tracegrad against
`tracegrad.compile`. Each test names the wrong number (or the missing error) it was written for."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _outcome(fn, args):
    """(outputs, arguments after the call) as arrays, or the exception raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            outs = fn(*args)
        except Exception as e:  # noqa: BLE001
            return e
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [o.detach().numpy().copy() for o in outs], [a.detach().numpy().copy() for a in args]


def _three(f, make_args):
    """f(lib, *args) run by torch, eager tracegrad and compiled tracegrad on fresh arguments."""
    return (_outcome(lambda *a: f(torch, *a), make_args(torch)),
            _outcome(lambda *a: f(tg, *a), make_args(tg)),
            _outcome(tg.compile(lambda *a: f(tg, *a)), make_args(tg)))


def _assert_same(f, make_args):
    """Eager tracegrad gives torch's numbers (or raises torch's error type and message), and the
    compiled call gives eager's numbers bit for bit (or the same error)."""
    t, e, c = _three(f, make_args)
    if isinstance(t, Exception):
        for got in (e, c):
            assert isinstance(got, type(t)), f"{type(t).__name__}: {t} expected, got {got!r}"
            assert str(got).split("\n")[0] == str(t).split("\n")[0]
        return
    for got in (e, c):
        assert not isinstance(got, Exception), f"torch gives a result, tracegrad raised {got!r}"
    for a, b, cc in zip(t[0] + t[1], e[0] + e[1], c[0] + c[1]):
        np.testing.assert_allclose(b, a, rtol=1e-12)
        np.testing.assert_array_equal(cc, b)


# -- errors of the kernels' checks, compiled as eager ---------------------------------------------

@pytest.mark.parametrize("source_arg", [False, True])
def test_masked_scatter_with_too_few_source_elements_raises_torchs_error_compiled(source_arg):
    """The mask holds 3 ones, source 2 elements: torch and eager raise RuntimeError "Number of
    elements of source < number of ones in mask"; the compiled call raised numpy's IndexError
    "index 2 is out of bounds for axis 0 with size 2" from its gather."""
    if source_arg:
        def f(lib, x, s):
            return x.masked_scatter(x > 2, s)
        make = lambda lib: (lib.tensor(np.arange(6.)), lib.tensor([1., 2.], dtype=lib.float64))
    else:
        def f(lib, x):
            return x.masked_scatter(x > 2, lib.tensor([1., 2.], dtype=lib.float64))
        make = lambda lib: (lib.tensor(np.arange(6.)),)
    t, e, c = _three(f, make)
    assert isinstance(t, RuntimeError) and "Number of elements of source < number of ones in mask" in str(t)
    _assert_same(f, make)
    # one compiled function: a call with enough source elements, then one with too few
    cf = tg.compile(lambda x, s: x.masked_scatter(x > 2, s))
    x = np.arange(6.)
    want = torch.tensor(x).masked_scatter(torch.tensor(x) > 2, torch.tensor([1., 2., 3.], dtype=torch.float64))
    assert cf(tg.tensor(x), tg.tensor([1., 2., 3.], dtype=tg.float64)).tolist() == want.tolist()
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        cf(tg.tensor(x), tg.tensor([1., 2.], dtype=tg.float64))


@pytest.mark.parametrize("bound", [1000, -129, 127, 5])
def test_clamp_number_beside_a_0_dim_tensor_bound_converts_it_with_torchs_overflow_check(bound):
    """clamp(int8, min=-1, max=tensor(1000)): torch's parser takes the 0-dim tensor as a Number
    beside the Number -1 and raises "value cannot be converted to type int8_t without overflow";
    tracegrad cast it to int8, wrapping 1000 to -24, and clamped every element to -24. (With
    tensors alone torch wraps, as tracegrad does.)"""
    def f(lib, x):
        return lib.clamp(x, min=-1, max=lib.tensor(bound)), lib.clamp(x, min=lib.tensor(bound)), \
            x.clamp(min=lib.tensor(-bound), max=lib.tensor(bound))
    _assert_same(f, lambda lib: (lib.tensor([-100, 0, 100], dtype=lib.int8),))

    def g(lib, x, m):            # the bound an argument: its value is not known to the trace
        return lib.clamp(x, min=-1, max=m)
    _assert_same(g, lambda lib: (lib.tensor([-100, 0, 100], dtype=lib.int8), lib.tensor(bound)))

    def h(lib, x):
        x.clamp_(min=-1, max=lib.tensor(bound))
        return x
    _assert_same(h, lambda lib: (lib.tensor([-100, 0, 100], dtype=lib.int8),))


# -- writes whose source overlaps the written-to tensor --------------------------------------------

_OVERLAPS = {
    # torch raises "unsupported operation: some elements of the input tensor and the written-to
    # tensor refer to a single memory location": tracegrad wrote, eager and compiled
    "copy_ shifted": lambda L, x: x[1:].copy_(x[:-1]),
    "copy_ same memory other strides": lambda L, x: x.view(2, 3).copy_(x.view(3, 2).t()),
    "setitem slice": lambda L, x: x.__setitem__(slice(0, 3), x[1:4]),
    "setitem index": lambda L, x: x.__setitem__(L.tensor([0, 1, 2]), x[1:4]),
    "setitem index, the same elements": lambda L, x: x.__setitem__(L.tensor([0, 1]), x[0:2]),
    "setitem mask": lambda L, x: x.__setitem__(x > 3, x[:2]),
    "setitem index, 0-dim value": lambda L, x: x.__setitem__(L.tensor([1, 2]), x[0]),
    "index_put_": lambda L, x: x.index_put_((L.tensor([0, 1]),), x[2:4], accumulate=True),
    "index_put_ of itself": lambda L, x: x.index_put_((L.arange(6),), x),
    "index_copy_": lambda L, x: x.index_copy_(0, L.tensor([0, 1]), x[2:4]),
    "index_add_": lambda L, x: x.index_add_(0, L.tensor([0, 1]), x[2:4]),
    "scatter_": lambda L, x: x.scatter_(0, L.tensor([0, 1]), x[2:4]),
    "put_": lambda L, x: x.put_(L.tensor([0, 1]), x[2:4]),
    "add_": lambda L, x: x[1:].add_(x[:-1], alpha=2),
    "mul_ by an element": lambda L, x: x[0:2].mul_(x[1]),
    "addcmul_": lambda L, x: x[1:].addcmul_(x[:-1], x[1:]),
    "clamp_ with a tensor bound": lambda L, x: x[1:].clamp_(min=x[:-1]),
    "add out=": lambda L, x: L.add(x[:-1], 1, out=x[1:]),
    "cat out=": lambda L, x: L.cat([x[:2], x[2:4]], out=x[1:5]),
    # torch writes: full overlap, no overlap, a value it expands or fills with, an unchecked op
    "copy_ of itself": lambda L, x: x[1:].copy_(x[1:]),
    "add_ of itself": lambda L, x: x.add_(x),
    "setitem whole": lambda L, x: x.__setitem__(slice(None), x),
    "setitem 0-dim value": lambda L, x: x.__setitem__(slice(0, 2), x[1]),
    "setitem expanded value": lambda L, x: x.__setitem__(slice(0, 2), x[1:2]),
    "setitem index, disjoint": lambda L, x: x[:3].__setitem__(L.tensor([0, 1]), x[4:6]),
    "copy_ disjoint": lambda L, x: x[:3].copy_(x[3:]),
    "copy_ flip": lambda L, x: x.copy_(x.flip(0)),
    "masked_scatter_": lambda L, x: x[:3].masked_scatter_(L.tensor([True] * 3), x[1:4]),
    "masked_fill_": lambda L, x: x.masked_fill_(L.tensor([True] * 6), x[2]),
    "index_fill_": lambda L, x: x.index_fill_(0, L.tensor([0, 1]), x[2]),
    "add out= of itself": lambda L, x: L.add(x, 1, out=x),
    "copy_ strided source": lambda L, x: x[:3].copy_(x[::2]),
}


@pytest.mark.parametrize("case", list(_OVERLAPS))
def test_write_whose_source_overlaps_the_destination_raises_or_writes_as_torch(case):
    """x[1:].copy_(x[:-1]), x[0:3] = x[1:4], index_put_/index_copy_/scatter_/put_ of a part of x,
    x[1:].add_(x[:-1]), add(x[:-1], 1, out=x[1:]): torch raises its RuntimeError (a partial
    overlap; for index_put_ and the scatters any overlap), tracegrad wrote a result that depends
    on the kernel's order ([0, 0, 1, 2, 3, 4] for the first), eagerly and compiled."""
    op = _OVERLAPS[case]

    def f(lib, x):
        op(lib, x)
        return x * 1
    _assert_same(f, lambda lib: (lib.arange(6.),))


def test_write_through_a_strided_view_from_a_source_it_overwrites_raises_eager_and_compiled():
    """x[::2].copy_(x[:3]): torch does not check a layout that is not dense and copies in its
    loop's order (x[4] gets the 1 just written to x[2]): [0, 1, 1, 3, 1, 5]; numpy's kernel did
    the same here, and read the source first for x[:, 1:].copy_(x[:, :2]) (torch's loop order
    again there). Such a result is torch's loop's: x.add_(x[:, :1]) of ones gives rows
    [2, 3, 3] with 3 columns and [2, 2, 2] with 64 (its vector loop reads first). Eager and
    compiled raise torch's overlap error instead of a number that depends on the kernel."""
    def f(lib, x):
        x[::2].copy_(x[:3])
        return x * 1
    _, e, c = _three(f, lambda lib: (lib.arange(6.),))
    for got in (e, c):
        assert isinstance(got, RuntimeError) and "depend on the order" in str(got), got


# -- op results laid out as eager lays them out: reshape, view and contiguous of them ---------------

_X = lambda lib: (lib.tensor(np.arange(6.).reshape(2, 3)),)       # noqa: E731

def _written_then_added(L, x):
    y = L.exp(x.mT)
    y[0] = 7.
    w = y + 1                 # keeps y's order, which the write did not change
    w.reshape(-1).add_(1)
    return y, w


_LAYOUTS = {
    # y keeps x.mT's order (torch's TensorIterator, eager's kernels): reshape(-1) copies
    "exp(x.mT).reshape, write the copy": lambda L, x: (lambda y: (y, y.reshape(-1).add_(1)))(L.exp(x.mT)),
    "exp(x.mT).reshape, write y": lambda L, x: (lambda y, z: (y.add_(1), z))(*(lambda y: (y, y.reshape(-1)))(L.exp(x.mT))),
    "x.mT * 2, flatten, setitem": lambda L, x: (lambda y: (y, y.flatten().__setitem__(0, 100.) or y))(x.mT * 2),
    "x.mT.clone(), reshape, setitem": lambda L, x: (lambda y: (y, y.reshape(-1).__setitem__(0, 100.) or y))(x.mT.clone()),
    "x.mT.clone(contiguous_format), reshape": lambda L, x: (lambda y: (y, y.reshape(-1).__setitem__(0, 100.) or y))(
        x.mT.clone(memory_format=L.contiguous_format)),
    "x.mT + x.mT.mT.mT": lambda L, x: (lambda y: (y, y.reshape(-1).add_(1)))(x.mT + x.mT.mT.mT),
    "where of x.mT": lambda L, x: (lambda y: (y, y.reshape(-1).add_(1)))(L.where(x.mT > 2, x.mT, 0.)),
    "x.mT.float().double()": lambda L, x: (lambda y: (y, y.reshape(-1).add_(1)))(x.mT.float().double()),
    "x.mT plus a broadcast row": lambda L, x: (lambda y: (y, y.reshape(-1).add_(1)))(x.mT + x.mT.sum(0, keepdim=True)),
    "exp(x.mT).unsqueeze(0).reshape": lambda L, x: (lambda y: (y, y.unsqueeze(0).reshape(-1).add_(1)))(L.exp(x.mT)),
    # a write does not change the tensor's layout: y[0] = 7 keeps y transposed
    "exp(x.mT), setitem, reshape": lambda L, x: (lambda y: (y.__setitem__(0, 7.), y, y.reshape(-1).add_(1))[1:])(
        L.exp(x.mT)),
    "exp(x.mT), setitem, + 1, reshape": lambda L, x: _written_then_added(L, x),
    "copy_ into exp(x.mT), reshape": lambda L, x: (lambda y: (y.copy_(x.mT * 3), y.reshape(-1).add_(1), y)[1:])(
        L.exp(x.mT)),
    "zeros(3, 2).t() written, * 1, reshape": lambda L, x: (lambda y: (y.copy_(x), (y * 1), (y * 1).reshape(-1).add_(1))[1:])(
        L.zeros(3, 2).t()),
    # contiguous() of a strided view copies: a write to the copy does not reach x
    "x[:, ::2].contiguous()": lambda L, x: (x[:, ::2].contiguous().add_(1), x * 1),
    "x.t().contiguous()": lambda L, x: (x.t().contiguous().add_(1), x * 1),
    "exp(x.mT).contiguous()": lambda L, x: (lambda y: (y.contiguous().add_(1), y))(L.exp(x.mT)),
    # softmax of a transposed input is C-contiguous in torch: its reshape is a view, written through
    "softmax(x.mT, 0).reshape": lambda L, x: (lambda y: (y.reshape(-1).add_(1), y))(L.softmax(x.mT, 0)),
    "cumsum(x.mT, 0).reshape": lambda L, x: (lambda y: (y.reshape(-1).add_(1), y))(L.cumsum(x.mT, 0)),
    "cat of x.mT: C-contiguous, viewed and written": lambda L, x: (lambda y: (y.view(-1).add_(1), y))(
        L.cat([x.mT, x.mT], 0)),
}


@pytest.mark.parametrize("case", list(_LAYOUTS))
def test_reshape_of_an_op_result_copies_or_views_as_eager_lays_the_result_out(case):
    """y = exp(x.mT); y.reshape(-1).add_(1): y keeps x.mT's column order (torch's TensorIterator,
    and eager's kernels), so the reshape copies and y is unchanged ([[1, 20.1], [2.7, 54.6], ...]);
    compiled code took every op's result for C-contiguous, made the reshape a view and added 1
    to y. Likewise for writes to y read through the reshape, flatten, contiguous() of a strided
    view (x[:, ::2].contiguous().add_(1) changed x compiled), a value written in place (y[0] = 7
    made y C-contiguous to the trace), and eager itself where torch lays a result out
    C-contiguous and numpy did not (softmax(x.mT, 0).reshape(-1) copied eagerly, torch's is a
    view)."""
    op = _LAYOUTS[case]
    _assert_same(lambda L, x: tuple(t for t in op(L, x) if t is not None), _X)


def test_view_of_an_op_result_in_another_order_raises_as_eager():
    """exp(x.mT).view(-1): torch and eager raise "view size is not compatible with input
    tensor's size and stride"; compiled code returned a view of its C-contiguous result."""
    _assert_same(lambda L, x: L.exp(x.mT).view(-1), _X)


@pytest.mark.parametrize("make", ["exp", "twice", "copy"])
def test_compiled_result_is_laid_out_as_eager_so_later_reshapes_match(make):
    """A compiled function returned C-contiguous arrays where eager's result keeps another order
    (zeros(3, 2).t() written and scaled: strides (1, 2) eagerly, (2, 1) compiled), so a reshape
    of the result outside the function was a view compiled and a copy eagerly: writing it
    changed the compiled result only."""
    def f(lib, x):
        if make == "exp":
            return lib.exp(x.mT)
        if make == "twice":
            return x.mT * 2 + x.mT
        y = lib.zeros(3, 2, dtype=x.dtype).t()
        y.copy_(x)
        return y * 1
    outs = []
    for lib, fn in ((torch, lambda x: f(torch, x)), (tg, lambda x: f(tg, x)), (tg, tg.compile(lambda x: f(tg, x)))):
        for _ in range(2):              # the second call runs the cached program
            y = fn(_X(lib)[0])
        strides = tuple(y.stride())
        y.reshape(-1).add_(1)
        outs.append((strides, y.tolist()))
    assert outs[1] == outs[0] and outs[2] == outs[1]


def test_clone_takes_torchs_memory_formats():
    """clone(memory_format=...) raised TypeError; torch.contiguous_format lays the copy out
    C-contiguous, preserve_format (the default) keeps a dense operand's strides."""
    for lib in (torch, tg):
        x = lib.zeros(2, 3).t()
        assert x.clone().stride() == (1, 3)
        assert x.clone(memory_format=lib.preserve_format).stride() == (1, 3)
        assert lib.clone(x, memory_format=lib.contiguous_format).stride() == (2, 1)
        assert x.contiguous(memory_format=lib.contiguous_format).stride() == (2, 1)
        with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
            x.contiguous(memory_format=lib.preserve_format)
        with pytest.raises(TypeError, match="must be torch.memory_format"):
            x.clone(memory_format=3)
    assert repr(tg.contiguous_format) == repr(torch.contiguous_format)


def test_copy_into_an_expanded_view_that_repeats_no_element_writes_as_torch():
    """x[:1].expand(3, 4).narrow(0, 0, 1) has a zero stride on a size-1 dim only: torch's copy_
    writes it (x[0] becomes [0, 3, 6, 9]); tracegrad's copy_ refused any read-only array with
    "more than one element of the written-to tensor refers to a single memory location"."""
    def f(lib, x):
        n = x[:1].expand(3, 4).narrow(0, 0, 1)
        n.copy_(n * 3)
        return x * 1
    _assert_same(f, lambda lib: (lib.tensor(np.arange(8.).reshape(2, 4)),))

    def g(lib, x):                  # the whole expand repeats rows: torch's error, kept
        n = x[:1].expand(3, 4)
        n.copy_(n * 3)
        return x * 1
    t, e, c = _three(g, lambda lib: (lib.tensor(np.arange(8.).reshape(2, 4)),))
    assert isinstance(t, RuntimeError)
    _assert_same(g, lambda lib: (lib.tensor(np.arange(8.).reshape(2, 4)),))


@pytest.mark.parametrize("case", ["mul", "div", "pow"])
def test_in_place_op_whose_other_operand_is_self_raises_at_backward_as_torch(case):
    """x.mul_(x): torch saves the other operand, which is x, and the write changes it: backward
    raises "one of the variables needed for gradient computation has been modified by an
    inplace operation". Eager tracegrad saved a copy of x's old value for both operands and
    gave the gradient of x * x ([2, 4, 6, 8])."""
    for lib, compiled in ((torch, False), (tg, False), (tg, True)):
        def f(w):
            x = w * 1
            getattr(x, case + "_")(x)
            return x
        fn = tg.compile(f) if compiled else f
        w = lib.tensor([1., 2., 3., 4.], requires_grad=True)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            fn(w).sum().backward()


_ALIASED_ARGS = {
    # b is a view of a, passed as another argument: the trace takes them for distinct values
    "a[1:].copy_(b), b = a[:-1]": (lambda L, a, b: a[1:].copy_(b), lambda x: (x, x[:-1])),
    "a[0:3] = b, b = a[1:4]": (lambda L, a, b: a.__setitem__(slice(0, 3), b), lambda x: (x, x[1:4])),
    "a.index_put_(b), b = a[2:4]": (lambda L, a, b: a.index_put_((L.tensor([0, 1]),), b), lambda x: (x, x[2:4])),
    "a.add_(1), then b = a[1:] read": (lambda L, a, b: (a.add_(1), b * 1)[1], lambda x: (x, x[1:])),
}


@pytest.mark.parametrize("case", list(_ALIASED_ARGS))
def test_write_from_an_argument_that_is_a_view_of_the_written_one_as_eager(case):
    """f(a, b) with b = a[:-1] and a[1:].copy_(b) inside: torch and eager raise the overlap
    error; the program counted the write as starting after the copy read b (its first write was
    noted at the commit, not where the op began), so it took the call for safe, ran, and wrote
    [0, 0, 1, 2, 3, 4] ('a[0:3] = b' crashed with AttributeError). Such a call runs eagerly."""
    op, views = _ALIASED_ARGS[case]

    def f(lib, a, b):
        op(lib, a, b)
        return a * 1
    _assert_same(f, lambda lib: views(lib.arange(6.)))
