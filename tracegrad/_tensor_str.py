"""Tensor repr, formatted exactly as torch formats it (precision 4, linewidth 80,
summarised past 1000 elements with 3 edge items, int mode, scientific mode)."""
import math

import numpy as np

from . import _dtype as D
from .tensor import Above, _VALUE_READS, read_setting
from .cuda import to_host


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


PRINT_OPTS = _PrintOptions()


def _print_options():
    return tuple(vars(PRINT_OPTS).items())


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    if profile == "default":
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 4, 1000, 3, 80
    elif profile == "short":
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 2, 1000, 2, 80
    elif profile == "full":
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 4, math.inf, 3, 80
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


class _Formatter:
    def __init__(self, values, floating):
        self.floating_dtype = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = PRINT_OPTS.precision
        if not floating:
            for v in values.tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
        else:
            vals = values[np.isfinite(values) & (values != 0)]
            if vals.size == 0:
                return
            absv = np.abs(vals).astype(np.float64)
            mn, mx = float(absv.min()), float(absv.max())
            for v in vals:
                if v != np.ceil(v):
                    self.int_mode = False
                    break
            vlist = vals.astype(np.float64).tolist()
            if PRINT_OPTS.sci_mode is None:
                self.sci_mode = mx / mn > 1000.0 or mx > 1.0e8 or mn < 1.0e-4
            else:
                self.sci_mode = PRINT_OPTS.sci_mode
            for v in vlist:
                if self.sci_mode:
                    width = len(f"{v:.{p}e}")
                elif self.int_mode:
                    width = len(f"{v:.0f}") + 1
                else:
                    width = len(f"{v:.{p}f}")
                self.max_width = max(self.max_width, width)

    def width(self):
        return self.max_width

    def format(self, value):
        p = PRINT_OPTS.precision
        if self.floating_dtype:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{p}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{p}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


def _vector_str(a, indent, summarize, fmt):
    element_length = fmt.width() + 2
    elements_per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / element_length)))
    e = PRINT_OPTS.edgeitems
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = [fmt.format(v) for v in a[:e].tolist()] + [" ..."] + [fmt.format(v) for v in a[-e:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + elements_per_line]) for i in range(0, len(data), elements_per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(a, indent, summarize, fmt):
    dim = a.ndim
    if dim == 0:
        return fmt.format(a.item())
    if dim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        slices = ([_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."] +
                  [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(len(a) - e, len(a))])
    else:
        slices = [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(slices) + "]"


def _summarized(a):
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate([a[:e], a[len(a) - e:]]) if a.shape[0] > 2 * e else a
    if not e:
        return np.empty([0] * a.ndim, a.dtype)
    if a.shape[0] > 2 * e:
        parts = [_summarized(a[i]) for i in range(e)] + [_summarized(a[i]) for i in range(len(a) - e, len(a))]
    else:
        parts = [_summarized(x) for x in a]
    return np.stack(parts)


def tensor_str(data, dtype, indent):
    if data.size == 0:
        return "[]"
    summarize = data.size > PRINT_OPTS.threshold
    a = data
    if dtype in (D.float16, D.bfloat16):
        a = a.astype(np.float32)
    fmt = _Formatter((_summarized(a) if summarize else a).reshape(-1), dtype.is_floating_point)
    return _tensor_str_with_formatter(a, indent, summarize, fmt)


def _add_suffixes(tensor_str_, suffixes, indent, force_newline):
    parts = [tensor_str_]
    last_line_len = len(tensor_str_) - tensor_str_.rfind("\n") + 1
    for suffix in suffixes:
        n = len(suffix)
        if force_newline or last_line_len + n + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + n
            force_newline = False
        else:
            parts.append(", " + suffix)
            last_line_len += n + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t, prefix="tensor(", indent=None):
    if _VALUE_READS[0]:
        read_setting("the print options", _print_options)
    data, dtype = t._data, t._dtype
    indent = len(prefix) if indent is None else indent
    suffixes = []
    if data.__class__ is not np.ndarray and hasattr(data, "_tg_device"):
        data = to_host(data)
        suffixes.append(f"device='{t.device}'")
    has_default_dtype = dtype in (D.get_default_dtype(), D.int64, D.bool_)
    if data.size == 0:
        if data.ndim != 1:
            suffixes.append("size=" + str(tuple(data.shape)))
        if dtype is not D.get_default_dtype():
            suffixes.append("dtype=" + str(dtype))
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append("size=" + str(tuple(data.shape)))
        if not has_default_dtype:
            suffixes.append("dtype=" + str(dtype))
        body = tensor_str(data, dtype, indent)
    try:
        fn = t.grad_fn
    except RuntimeError:
        # a view made in no_grad whose base then changed in place: its grad_fn cannot be read
        suffixes.append("grad_fn=<Invalid>")
    else:
        if fn is not None:
            suffixes.append(f"grad_fn=<{type(fn).__name__}>")
        elif t.requires_grad:          # (a view taken under no_grad of a tensor that requires grad too)
            suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent, False)


Above.tensor_repr = tensor_repr        # Tensor.__repr__
