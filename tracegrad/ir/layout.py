"""The memory order eager execution gives a traced value.

matmul's derivative picks its products by its operands' layouts, as torch's
mm_mat1_backward / mm_mat2_backward do: the gradient of a column-major operand (a transposed
contiguous matrix, as Linear's weight.T) is the transpose of the product that comes out of
BLAS in that layout. BLAS adds a product's terms in another order when its operands swap
roles, so eager and compiled gradients are equal bit for bit only where both choose alike.
Eager autograd derives its backward from the graph it recorded (engine.forward_graph) with
the same rules, so both ask a graph, and this module answers for both from the graph alone.

An order is the axes of size above 1 of a dense array (a permutation of a contiguous one),
outermost first; size-1 axes have no place in memory and are left out. None: not dense, or
not known. The inference follows the eager kernels (torch's strides, numpy's 'K' order):
views reorder or keep their operand's order (permute, detach, reshape/squeeze/unsqueeze
that only add or drop size-1 axes), an elementwise op keeps the order its full-size operands
share, clone keeps a dense operand's, and every other op is taken to make a C-contiguous
result (a slice of a transposed tensor keeps its layout eagerly: there the choice is not
torch's, in eager and compiled alike). An elementwise op whose full-size operands disagree
takes torch's TensorIterator order (the first operand that tells two axes apart decides), as
eager lays it out. These orders pick derivatives; the memory layout eager gives a value,
which decides whether its reshape copies, is torch's TensorIterator's (iterator_order below;
tracing.eager_layout, Proxy._eager_scratch). An input's order is the `order` attribute its
maker recorded (a compiled function's argument, an eager leaf, a forward value saved for
the backward), else the order of the tensor it holds where that requires grad, else C:
eager autograd's graph knows the layouts of its leaves, not of the other tensors it read.
"""


import numpy as np

from .graph import V


def _insertion_sort(perm, should_swap):
    """torch's TensorIterator reorder_dimensions: perm (innermost first) sorted in place by
    should_swap(d0, d1) (1: swap, -1: keep and stop, 0: undecided, look further)."""
    for i in range(1, len(perm)):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            c = should_swap(perm[dim0], perm[dim1])
            if c > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif c < 0:
                break


def array_order(shape, strides):
    """The order of a dense array of this shape and these strides (in elements), or None."""
    axes = [k for k, n in enumerate(shape) if n > 1]
    if any(n == 0 for n in shape):
        return tuple(axes)                    # no elements: every layout at once
    axes.sort(key=lambda k: -strides[k])
    expect = 1
    for k in reversed(axes):
        if strides[k] != expect:
            return None
        expect *= shape[k]
    return tuple(axes)


_ORDERS = {}            # tensor_order's answers by (shape, strides, itemsize): what it reads, and all of it


def tensor_order(t):
    """The order of a concrete tensor (or numpy array), or None."""
    d = getattr(t, "_data", t)
    item = d.itemsize
    strides = d.strides
    key = (d.shape, strides, item)
    got = _ORDERS.get(key, key)
    if got is not key:
        return got
    if any(s % item for s in strides):
        got = None
    else:
        got = array_order(tuple(d.shape), tuple(s // item for s in strides))
    if len(_ORDERS) >= 1024:
        _ORDERS.clear()
    _ORDERS[key] = got
    return got


def is_column_major(shape, order):
    """A matrix laid out column by column: a transposed contiguous one (both sizes above 1;
    a row or a column is laid out both ways)."""
    return len(shape) == 2 and order == (1, 0)


def _c(shape):
    return tuple(k for k, n in enumerate(shape) if not isinstance(n, int) or n > 1)


_BROADCAST = "broadcast"       # an expand's: stride 0 along the broadcast axes, no order
# torch's channels-last memory formats: the orders of the axes in memory, outermost first (NHWC, NDHWC)
FORMAT_ORDERS = {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}


def value_order(graph, v, memo=None):
    """The order eager execution gives value v of graph, None, or _BROADCAST (an expand's).
    `memo` keeps the orders found, for further questions about a graph that has not changed
    since."""
    if memo is None:
        memo = {}
    stack = [v]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        a = graph[n]
        todo = [x for x in _deps(a) if x not in memo]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        memo[n] = _rule(graph, a, memo)
    return memo[v]


def _deps(a):
    """The operands whose orders decide value a's."""
    op, prim = a["op"], a["prim"]
    if prim is None:
        return ()
    if op == "permute" or prim.layout == "view_c" or prim.elementwise or \
            prim.result_layout(a["params"]) in ("operands", "order"):   # (flip: no elementwise op, laid out as one)
        return tuple(x for x in a["args"] if isinstance(x, V))
    return ()


def _rule(graph, a, memo):
    op, prim, shape = a["op"], a["prim"], tuple(a["shape"])
    if op == "proj":
        # an element of a multi-output op's result: split's and unbind's are views, not followed
        tup = graph[a["args"][0]]
        return None if tup["prim"] is not None and tup["prim"].view else _c(shape)
    if op == "input":
        if "order" in a:
            return a["order"]
        value = a.get("value")
        if getattr(value, "requires_grad", False):
            return tensor_order(value)
        return _c(shape)
    if prim is None:
        return None
    x = a["args"][0] if a["args"] else None
    inner = memo.get(x) if isinstance(x, V) else None
    if op == "permute":
        if inner is None or inner is _BROADCAST:
            return None
        pos = {d: i for i, d in enumerate(a["params"]["dims"])}    # operand axis d is result axis pos[d]
        return tuple(pos[d] for d in inner)
    if op == "expand" and _broadcasts(graph[x]["shape"] if isinstance(x, V) else (), shape):
        return _BROADCAST
    layout = prim.result_layout(a["params"])
    if layout == "order":
        return _rule_order(graph, a, memo, shape)
    if layout == "view_c" or op == "expand":
        # (detach, reshape, squeeze, unsqueeze; an expand that broadcasts no axis of size above 1
        # keeps its operand's strides)
        # size-1 axes added or taken away: a view of the same layout; else a C-contiguous view or copy
        src = tuple(graph[x]["shape"]) if isinstance(x, V) else ()
        big_src = [k for k, n in enumerate(src) if n != 1]
        big = [k for k, n in enumerate(shape) if n != 1]
        if [src[k] for k in big_src] != [shape[k] for k in big]:
            return _c(shape)
        if inner is None or inner is _BROADCAST:
            return inner
        rank = {k: i for i, k in enumerate(big_src)}
        return tuple(big[rank[k]] for k in inner)
    if layout == "operands":
        # (clone's preserve_format too: it keeps a dense operand's layout and lays any other out
        # C-contiguous)
        # 'K' order: the order of the full-size operands where they agree (a broadcast operand
        # has no say), else C's
        # (ranks first: a tuple compares its items before its length, and a symbolic size's
        # comparison is a guard of the program)
        full = [memo[y] for y in a["args"] if isinstance(y, V) and len(graph[y]["shape"]) == len(shape) and
                tuple(graph[y]["shape"]) == shape and
                memo[y] is not _BROADCAST]
        if full and full[0] is not None and all(o == full[0] for o in full):
            return full[0]
        if len(full) > 1 and all(o is not None for o in full):
            return _first_decides(len(shape), full)      # torch's TensorIterator, as eager lays it out
        return _c(shape)
    return _c(shape)


def _rule_order(graph, a, memo, shape):
    """The order of an op of layout "order" (Primitive.order), asked of int8 stand-ins of its
    operands in their orders: None where one is not known."""
    arrays = []
    for y in a["args"]:
        if not isinstance(y, V):
            arrays.append(y)
            continue
        ys = tuple(graph[y]["shape"])
        o = memo[y]
        if o is None or o is _BROADCAST or not all(isinstance(n, int) for n in ys):
            return None
        axes = dense_axes(ys, o)
        arrays.append(np.empty(tuple(ys[k] for k in axes), np.int8).transpose(np.argsort(axes)))
    order = a["prim"].order(arrays, a["params"])
    return _c(shape) if order is None else order


def _first_decides(nd, orders):
    """iterator_order for dense operands of one shape given by their orders: of two axes, the
    outer is the one the first operand that has both lays out outer (no size is compared, so a
    symbolic one is not guarded on)."""
    ranks = [{ax: len(o) - i for i, ax in enumerate(o)} for o in orders]
    perm = list(range(nd - 1, -1, -1))           # innermost first

    def should_swap(d0, d1):
        for r in ranks:
            s0, s1 = r.get(d0, 0), r.get(d1, 0)
            if s0 and s1:
                return -1 if s0 < s1 else 1
        return 0

    _insertion_sort(perm, should_swap)
    axes = set(orders[0])
    return tuple(k for k in reversed(perm) if k in axes)


def _broadcasts(src, shape):
    """Whether expanding src to shape gives some axis of size above 1 a stride of 0 (a new
    leading axis or a size-1 axis widened)."""
    src = tuple(src)
    lead = len(shape) - len(src)
    return any(n > 1 and (k < lead or src[k - lead] != n) for k, n in enumerate(shape))


def order_attr(order, shape):
    """The `order` attribute for a traced input holding a value of this order: none where it
    is C's (the order an input without the attribute is taken to have)."""
    return {} if order == _c(shape) else {"order": order}


def c_contiguous(graph, v):
    """Whether eager execution lays value v of graph out C-contiguous, where that is known
    (Tensor.contiguous() copies where it is not)."""
    order = value_order(graph, v)
    return order is not _BROADCAST and (order is None or order == _c(graph[v]["shape"]))


def column_major(graph, v, memo=None):
    """Whether eager execution lays value v of graph out column by column."""
    shape = graph[v]["shape"]
    if len(shape) != 2 or not all(isinstance(n, int) and n > 1 for n in shape):
        return False
    return is_column_major(shape, value_order(graph, v, memo))


def iterator_order(shape, operands):
    """The order torch's TensorIterator gives the result of an elementwise op of `shape` (and
    eager tracegrad's kernels, whose results are laid out as it says): `operands` are the
    (shape, strides) of the op's tensor operands, broadcast to `shape`. Axes are sorted by the
    operands' strides, the first operand that tells two axes apart deciding (a broadcast axis
    tells nothing); C's order where none does."""
    nd = len(shape)
    strides = []
    for oshape, ost in operands:
        lead = nd - len(oshape)
        st = [0] * lead + [abs(s) if n != 1 else 0 for n, s in zip(oshape, ost)]
        strides.append([0 if shape[k] == 1 else s for k, s in enumerate(st)])
    perm = iteration_perm(shape, strides)
    return tuple(k for k in reversed(perm) if shape[k] > 1)


def iteration_perm(shape, strides):
    """TensorIterator's reorder_dimensions: the axes of `shape`, fastest first, sorted by the
    operands' strides (one list per operand, all of `shape`'s rank): the first operand whose
    strides of two axes differ (neither zero) orders them, the smaller faster; equal strides put
    the smaller size faster; C's order where no operand tells two axes apart."""
    perm = list(range(len(shape) - 1, -1, -1))           # innermost first, as torch's perm_

    def should_swap(d0, d1):
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    _insertion_sort(perm, should_swap)
    return perm


def ufunc_order(shape, operands):
    """The order numpy's ufuncs (order 'K') give the result of an elementwise op of `shape`, from
    its operands' (shape, strides) broadcast to `shape`: nditer's stable insertion of each axis
    (innermost first) behind the axes it is faster than, where an operand holding both axes (no
    stride 0) tells them apart and every such operand agrees (C's order wins a conflict); a
    pair that no operand tells apart is stepped over. torch's iterator_order exchanges two axes
    where numpy moves one, so an axis broadcast in every operand can end up elsewhere (x of
    (4, 2) expanded from (1, 2), times y of (2, 1, 2) transposed: numpy's order (1, 2, 0),
    torch's (2, 1, 0)), with operands that never disagree (orders_disagree)."""
    nd = len(shape)
    strides = []
    for oshape, ost in operands:
        lead = nd - len(oshape)
        strides.append([0] * lead + [abs(s) if n != 1 else 0 for n, s in zip(oshape, ost)])
    perm = list(range(nd - 1, -1, -1))           # innermost first
    for i in range(1, nd):
        d0 = perm[i]
        at = i
        for j in range(i - 1, -1, -1):
            d1 = perm[j]
            told = [st[d1] > st[d0] for st in strides if st[d0] and st[d1]]
            if not told:
                continue                           # no operand tells: look further
            if not all(told):
                break
            at = j
        if at != i:
            del perm[i]
            perm.insert(at, d0)
    return tuple(k for k in reversed(perm) if shape[k] > 1)


def orders_disagree(shape, operands):
    """Whether two of an elementwise op's operands ((shape, strides), broadcast to `shape`) lay
    out two axes of size above 1 that both hold (no stride 0) in opposite orders: then numpy's
    kernels, which take C's order for such a pair, and torch's TensorIterator (iterator_order),
    which takes the first operand's, lay the result out differently."""
    nd = len(shape)
    seen = {}
    for oshape, ost in operands:
        lead = nd - len(oshape)
        st = {k + lead: abs(s) for k, (n, s) in enumerate(zip(oshape, ost)) if n > 1 and s != 0}
        axes = sorted(st)
        for i, d0 in enumerate(axes):
            for d1 in axes[i + 1:]:
                if st[d0] != st[d1]:
                    outer = st[d0] > st[d1]
                    if seen.setdefault((d0, d1), outer) != outer:
                        return True
    return False


def dense_axes(shape, order):
    """All axes of `shape`, outermost first, for a dense layout of `order` (size-1 axes first)."""
    return [k for k, n in enumerate(shape) if n <= 1] + list(order)


def dense_order(shape, strides, out_shape=None):
    """torch's infer_dense_strides: the order of the dense layout that follows a tensor's strides
    (an overlapping or sliced one too: the result of sort, index_put or clone's preserve_format of
    it). A stride of 0 tells nothing, so an expanded axis keeps C's place; of equal strides the
    smaller axis goes inside. `out_shape`: the result's shape, where its sizes differ (stack's)."""
    perm = list(range(len(shape) - 1, -1, -1))       # innermost first

    def should_swap(d0, d1):
        s0, s1 = abs(strides[d0]), abs(strides[d1])
        if s0 == 0 or s1 == 0:
            return 0
        if s0 != s1:
            return -1 if s0 < s1 else 1
        return 1 if shape[d0] > shape[d1] else 0

    _insertion_sort(perm, should_swap)
    out_shape = shape if out_shape is None else out_shape
    return tuple(k for k in reversed(perm) if out_shape[k] > 1)


def _strides_like_channels_last(shape, strides, dims):
    # torch's is_channels_last_strides_2d/3d (c10/core/MemoryFormat.h), strides in any unit
    if strides[1] == 0:
        return False
    low = 0
    for d in dims:
        if shape[d] == 0 or strides[d] < low:
            return False
        if d == 0 and low == strides[1]:
            return False                  # N111 and N11W: the ambiguous cases count as contiguous
        low = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def suggested_format(shape, strides):
    """torch's suggest_memory_format, by name: "channels_last" for a 4-d tensor whose strides are
    like channels-last ("channels_last_3d" for a 5-d one), else "contiguous"."""
    nd = len(shape)
    if nd == 4 and _strides_like_channels_last(shape, strides, (1, 3, 2, 0)):
        return "channels_last"
    if nd == 5 and _strides_like_channels_last(shape, strides, (1, 4, 3, 2, 0)):
        return "channels_last_3d"
    return "contiguous"


def suggested_order(shape, strides):
    """The order of suggested_format. Ops whose kernels allocate their result so (roll, constant
    and reflection pads, group_norm) lay it out in the returned order."""
    fmt = suggested_format(shape, strides)
    return _c(shape) if fmt == "contiguous" else memory_format_order(shape, fmt)


def memory_format_order(shape, fmt):
    """The order of torch's memory formats for this shape (channels before the other axes)."""
    axes = FORMAT_ORDERS.get(fmt)
    if axes is None or len(axes) != len(shape):
        return _c(shape)
    return tuple(k for k in axes if not isinstance(shape[k], int) or shape[k] > 1)
