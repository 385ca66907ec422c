"""Shape rules shared by the op table and the public ops: broadcasting, dims, reductions.

Errors carry torch's exception types and messages.
"""


def normalize_dim(dim, ndim, *, wrap_scalar=True):
    n = ndim if ndim > 0 or not wrap_scalar else 1
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if dim < -n or dim >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n if n else 0


def normalize_dims(dims, ndim):
    """dims may be None (all), an int or a sequence; returns a sorted tuple."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    out = []
    for d in dims:
        d = normalize_dim(d, ndim)
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return tuple(sorted(out))


def broadcast_shapes(*shapes):
    """torch's broadcasting (pairwise, from the last dimension), with its message when
    sizes disagree."""
    out = tuple(shapes[0])
    for s in shapes[1:]:
        s = tuple(s)
        if len(s) == len(out) and s == out:
            continue
        ndim = max(len(out), len(s))
        res = [1] * ndim
        for j in range(ndim - 1, -1, -1):
            a = out[j - ndim + len(out)] if j - ndim + len(out) >= 0 else 1
            b = s[j - ndim + len(s)] if j - ndim + len(s) >= 0 else 1
            if a != b and a != 1 and b != 1:
                raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b ({b}) "
                                   f"at non-singleton dimension {j}")
            res[j] = b if a == 1 else a
        out = tuple(res)
    return out


def reduced_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def infer_size(shape, numel_):
    """Resolve one -1 in a view/reshape shape, with torch's errors."""
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for i, s in enumerate(shape):
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape [{', '.join(map(str, shape))}]")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 and numel_ == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape [{', '.join(map(str, shape))}] "
                               f"because the unspecified dimension size -1 can be any value and is ambiguous")
        if known == 0 or numel_ % known:
            raise RuntimeError(f"shape '[{', '.join(map(str, shape))}]' is invalid for input of size {numel_}")
        shape[neg[0]] = numel_ // known
    elif known != numel_:
        raise RuntimeError(f"shape '[{', '.join(map(str, shape))}]' is invalid for input of size {numel_}")
    return tuple(shape)
