"""Error inputs, table-driven: each case runs in torch and in tracegrad and must raise the
same exception type with torch's message (tracegrad may add a hint after it).
"""
import numpy as np
import pytest
import torch

import tracegrad

BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "floor_divide", "eq", "ne", "lt",
          "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"]
OPERATORS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
             "**": lambda a, b: a ** b, "//": lambda a, b: a // b, "%": lambda a, b: a % b, "<": lambda a, b: a < b,
             "==": lambda a, b: a == b, "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b}


def f(m, *shape, dtype="float32", requires_grad=False):
    """A deterministic tensor of `shape` (values 1, 2, 3, ...)."""
    n = int(np.prod(shape)) if shape else 1
    return m.arange(1, n + 1).reshape(shape).to(getattr(m, dtype)).requires_grad_(requires_grad)


def i(m, data):
    return m.tensor(data, dtype=m.int64)


def _broadcast_cases():
    cases = []
    for name in BINARY:
        dtype = "int64" if name.startswith("bitwise") else "float32"
        cases.append((f"{name}-(2,3)-(4,)", lambda m, n=name, d=dtype: getattr(m, n)(f(m, 2, 3, dtype=d),
                                                                                  f(m, 4, dtype=d))))
        cases.append((f"{name}-(2,3,1)-(4,2)", lambda m, n=name, d=dtype: getattr(m, n)(f(m, 2, 3, 1, dtype=d),
                                                                                      f(m, 4, 2, dtype=d))))
    for sym, fn in OPERATORS.items():
        dtype = "int64" if sym in "&|^" else "float32"
        cases.append((f"operator{sym}-(3,)-(2,2)", lambda m, fn=fn, d=dtype: fn(f(m, 3, dtype=d), f(m, 2, 2, dtype=d))))
    cases += [
        ("where-bcast", lambda m: m.where(f(m, 2, 3) > 2, f(m, 3, 1), f(m, 2))),
        ("masked_fill-bcast", lambda m: f(m, 2, 3).masked_fill(f(m, 2) > 1, 0.0)),
        ("clamp-tensor-bcast", lambda m: m.clamp(f(m, 2, 3), min=f(m, 4))),
        ("iadd-grows", lambda m: f(m, 3).add_(f(m, 2, 3))),
        ("iadd-mismatch", lambda m: f(m, 2, 3).__iadd__(f(m, 4))),
        ("imul-mismatch", lambda m: f(m, 2, 3).mul_(f(m, 2))),
    ]
    return cases


CASES = _broadcast_cases() + [
    # -- matmul family --
    ("matmul-2d", lambda m: f(m, 3, 4) @ f(m, 5, 2)),
    ("matmul-1d1d", lambda m: m.matmul(f(m, 4), f(m, 5))),
    ("matmul-2d1d", lambda m: m.matmul(f(m, 3, 4), f(m, 5))),
    ("matmul-1d2d", lambda m: m.matmul(f(m, 4), f(m, 5, 2))),
    ("matmul-3d", lambda m: m.matmul(f(m, 2, 3, 4), f(m, 2, 5, 2))),
    ("matmul-batch", lambda m: m.matmul(f(m, 2, 3, 4), f(m, 3, 4, 2))),
    ("matmul-0d", lambda m: m.matmul(f(m), f(m, 3))),
    ("matmul-dtype", lambda m: m.matmul(f(m, 2, 3), f(m, 3, 2, dtype="float64"))),
    ("mm-mismatch", lambda m: m.mm(f(m, 2, 3), f(m, 4, 2))),
    ("mm-1d", lambda m: m.mm(f(m, 3), f(m, 3, 2))),
    ("mm-3d-second", lambda m: m.mm(f(m, 2, 3), f(m, 1, 3, 2))),
    ("mm-bool", lambda m: m.mm(f(m, 2, 2, dtype="bool"), f(m, 2, 2, dtype="bool"))),
    ("bmm-2d", lambda m: m.bmm(f(m, 2, 3), f(m, 3, 2))),
    ("bmm-batch", lambda m: m.bmm(f(m, 2, 3, 4), f(m, 3, 4, 2))),
    ("bmm-inner", lambda m: m.bmm(f(m, 2, 3, 4), f(m, 2, 5, 2))),
    ("dot-2d", lambda m: m.dot(f(m, 2, 2), f(m, 2, 2))),
    ("dot-bool", lambda m: m.dot(f(m, 2, dtype="bool"), f(m, 2, dtype="bool"))),
    ("mv-mismatch", lambda m: m.mv(f(m, 2, 3), f(m, 4))),
    ("einsum-operands", lambda m: m.einsum("ij,jk->ik", f(m, 2, 3))),
    ("einsum-ndim", lambda m: m.einsum("ij->ji", f(m, 2, 3, 4))),
    # -- view / reshape / expand --
    ("view-size", lambda m: f(m, 2, 3).view(4, 2)),
    ("view-two-minus-one", lambda m: f(m, 2, 3).view(-1, -1)),
    ("view-bad-infer", lambda m: f(m, 2, 3).view(-1, 4)),
    ("view-noncontiguous", lambda m: f(m, 2, 3).t().view(6)),
    ("view-negative", lambda m: f(m, 2, 3).view(-2, 3)),
    ("reshape-size", lambda m: f(m, 2, 3).reshape(7)),
    ("reshape-zero-infer", lambda m: f(m, 0, 3).reshape(-1, 0)),
    ("expand-mismatch", lambda m: f(m, 2, 3).expand(4, 3)),
    ("expand-fewer", lambda m: f(m, 2, 3).expand(3)),
    ("expand-leading-negative", lambda m: f(m, 3).expand(-1, 3)),
    ("unflatten-sizes", lambda m: f(m, 2, 6).unflatten(1, (4, 2))),
    ("flatten-order", lambda m: f(m, 2, 3, 4).flatten(2, 1)),
    ("permute-length", lambda m: f(m, 2, 3).permute(0, 1, 2)),
    ("permute-duplicate", lambda m: f(m, 2, 3).permute(0, 0)),
    ("repeat-fewer", lambda m: f(m, 2, 3).repeat(2)),
    ("t-3d", lambda m: f(m, 2, 3, 4).t()),
    ("mT-1d", lambda m: f(m, 3).mT),
    ("tril-1d", lambda m: f(m, 3).tril()),
    ("triu-0d", lambda m: f(m).triu()),
    # -- dims out of range --
    ("sum-dim", lambda m: f(m, 2, 3).sum(2)),
    ("sum-dim-negative", lambda m: f(m, 2, 3).sum(-3)),
    ("sum-dim-repeated", lambda m: f(m, 2, 3).sum((0, 0))),
    ("sum-0d-dim", lambda m: f(m).sum(1)),
    ("mean-dim", lambda m: f(m, 2, 3).mean(3)),
    ("prod-dim", lambda m: f(m, 2, 3).prod(2)),
    ("max-dim", lambda m: f(m, 2, 3).max(2)),
    ("min-dim", lambda m: f(m, 2, 3).min(-3)),
    ("amax-dim", lambda m: f(m, 2, 3).amax(5)),
    ("argmax-dim", lambda m: f(m, 2, 3).argmax(2)),
    ("var-dim", lambda m: f(m, 2, 3).var(2)),
    ("std-dim", lambda m: f(m, 2, 3).std(-4)),
    ("logsumexp-dim", lambda m: f(m, 2, 3).logsumexp(2)),
    ("norm-dim", lambda m: f(m, 2, 3).norm(dim=2)),
    ("softmax-dim", lambda m: f(m, 2, 3).softmax(2)),
    ("log_softmax-dim", lambda m: f(m, 2, 3).log_softmax(-3)),
    ("cat-dim", lambda m: m.cat([f(m, 2, 3), f(m, 2, 3)], 2)),
    ("stack-dim", lambda m: m.stack([f(m, 2, 3), f(m, 2, 3)], 3)),
    ("squeeze-dim", lambda m: f(m, 2, 3).squeeze(2)),
    ("unsqueeze-dim", lambda m: f(m, 2, 3).unsqueeze(3)),
    ("transpose-dim", lambda m: f(m, 2, 3).transpose(0, 2)),
    ("flatten-dim", lambda m: f(m, 2, 3).flatten(0, 2)),
    ("flip-dim", lambda m: f(m, 2, 3).flip(2)),
    ("roll-dim", lambda m: f(m, 2, 3).roll(1, 2)),
    ("select-dim", lambda m: f(m, 2, 3).select(2, 0)),
    ("split-dim", lambda m: f(m, 2, 3).split(1, 2)),
    ("chunk-dim", lambda m: f(m, 2, 3).chunk(2, -3)),
    ("unbind-dim", lambda m: f(m, 2, 3).unbind(2)),
    ("gather-dim", lambda m: f(m, 2, 3).gather(2, i(m, [[0]]))),
    ("index_select-dim", lambda m: f(m, 2, 3).index_select(2, i(m, [0]))),
    # -- indices out of range --
    ("getitem-int", lambda m: f(m, 2, 3)[2]),
    ("getitem-negative", lambda m: f(m, 2, 3)[-3]),
    ("getitem-second-dim", lambda m: f(m, 2, 3)[:, 3]),
    ("getitem-too-many", lambda m: f(m, 2, 3)[0, 0, 0]),
    ("getitem-0d", lambda m: f(m)[0]),
    ("getitem-tensor", lambda m: f(m, 2, 3)[i(m, [0, 2])]),
    ("getitem-tensor-negative", lambda m: f(m, 2, 3)[:, i(m, [-4])]),
    ("getitem-float-index", lambda m: f(m, 2, 3)[f(m, 1)]),
    ("getitem-mask-shape", lambda m: f(m, 2, 3)[m.tensor([True, False, True])]),
    ("getitem-step", lambda m: f(m, 4)[::-1]),
    ("setitem-shape", lambda m: f(m, 2, 3).__setitem__(0, f(m, 2))),
    ("setitem-more-dims", lambda m: f(m, 2, 3).__setitem__(0, f(m, 2, 3))),
    ("setitem-mask-shape", lambda m: f(m, 2, 3).__setitem__(f(m, 2, 3) > 0, f(m, 5))),
    ("setitem-tensor-index-shape", lambda m: f(m, 2, 3).__setitem__(i(m, [0, 1]), f(m, 2, 2))),
    ("setitem-grad-shape", lambda m: f(m, 2, 3).__setitem__((slice(None), 0), f(m, 3, requires_grad=True))),
    ("getitem-tensor-second-of-two", lambda m: f(m, 2, 3)[i(m, [0]), i(m, [5])]),
    ("matmul-1d3d", lambda m: m.matmul(f(m, 4), f(m, 2, 5, 2))),
    ("matmul-3d1d", lambda m: m.matmul(f(m, 2, 3, 4), f(m, 5))),
    ("matmul-4d3d", lambda m: m.matmul(f(m, 2, 1, 3, 4), f(m, 3, 5, 2))),
    ("einsum-more-operands", lambda m: m.einsum("ij->ji", f(m, 2, 3), f(m, 2, 3))),
    ("stack-not-tensor", lambda m: m.stack([f(m, 2), 3])),
    ("reshape-zero-infer-nonempty", lambda m: f(m, 2, 3).reshape(-1, 0)),
    ("select-index", lambda m: f(m, 2, 3).select(1, 3)),
    ("index_select-index", lambda m: f(m, 2, 3).index_select(0, i(m, [2]))),
    ("gather-index", lambda m: f(m, 2, 3).gather(1, i(m, [[3]]))),
    ("gather-index-size", lambda m: f(m, 2, 3).gather(0, m.zeros(1, 5, dtype=m.int64))),
    ("scatter-index-size", lambda m: f(m, 2, 3).scatter(0, m.zeros(1, 2, dtype=m.int64), f(m, 1, 1))),
    ("scatter-index-range", lambda m: f(m, 2, 3).scatter(0, i(m, [[2]]), f(m, 1, 1))),
    ("scatter_add-index-range", lambda m: f(m, 2, 3).scatter_add(1, i(m, [[-4]]), f(m, 1, 1))),
    ("split-sizes", lambda m: f(m, 4).split([1, 2])),
    ("chunk-zero", lambda m: f(m, 4).chunk(0)),
    # -- cat / stack --
    ("cat-sizes", lambda m: m.cat([f(m, 2, 3), f(m, 2, 4)])),
    ("cat-ndim", lambda m: m.cat([f(m, 2, 3), f(m, 3)])),
    ("cat-empty", lambda m: m.cat([])),
    ("cat-not-tensor", lambda m: m.cat([f(m, 2), 3])),
    ("stack-sizes", lambda m: m.stack([f(m, 2, 3), f(m, 3, 2)])),
    ("stack-empty", lambda m: m.stack([])),
    # -- dtypes --
    ("gather-float-index", lambda m: f(m, 2, 3).gather(1, f(m, 2, 1))),
    ("scatter-float-index", lambda m: f(m, 2, 3).scatter(1, f(m, 2, 1), f(m, 2, 1))),
    ("scatter-src-dtype", lambda m: f(m, 2, 3).scatter(1, i(m, [[0], [1]]), f(m, 2, 1, dtype="float64"))),
    ("index_select-float-index", lambda m: f(m, 2, 3).index_select(0, f(m, 1))),
    ("index_select-2d-index", lambda m: f(m, 2, 3).index_select(0, i(m, [[0]]))),
    ("where-float-condition", lambda m: m.where(f(m, 2, 3), f(m, 2, 3), f(m, 2, 3))),
    ("where-int-condition", lambda m: m.where(f(m, 2, 3, dtype="int64"), f(m, 2, 3), f(m, 2, 3))),
    ("masked_fill-float-mask", lambda m: f(m, 2, 3).masked_fill(f(m, 2, 3), 0.0)),
    ("masked_fill-int-mask", lambda m: f(m, 2, 3).masked_fill(f(m, 2, 3, dtype="int64"), 0.0)),
    ("masked_fill-1d-value", lambda m: f(m, 2, 3).masked_fill(f(m, 2, 3) > 2, f(m, 1))),
    ("mean-int", lambda m: f(m, 2, 3, dtype="int64").mean()),
    ("var-int", lambda m: f(m, 2, 3, dtype="int64").var()),
    ("std-bool", lambda m: f(m, 2, 3, dtype="bool").std()),
    ("norm-int", lambda m: f(m, 2, 3, dtype="int64").norm()),
    ("softmax-int", lambda m: f(m, 2, 3, dtype="int64").softmax(1)),
    ("softmax-int-dim0", lambda m: f(m, 2, 3, dtype="int32").softmax(0)),
    ("log_softmax-bool", lambda m: f(m, 2, 3, dtype="bool").log_softmax(-1)),
    ("neg-bool", lambda m: -f(m, 3, dtype="bool")),
    ("sub-bool", lambda m: f(m, 3, dtype="bool") - f(m, 3, dtype="bool")),
    ("sub-bool-scalar", lambda m: f(m, 3) - True),
    ("abs-bool", lambda m: f(m, 3, dtype="bool").abs()),
    ("relu-bool", lambda m: f(m, 3, dtype="bool").relu()),
    ("floor-bool", lambda m: f(m, 3, dtype="bool").floor()),
    ("round-decimals-int", lambda m: f(m, 3, dtype="int64").round(decimals=1)),
    ("round-decimals-0-int", lambda m: f(m, 3, dtype="int32").round(decimals=0)),
    ("pow-bool", lambda m: m.pow(f(m, 3, dtype="bool"), f(m, 3, dtype="bool"))),
    ("pow-int-negative-scalar", lambda m: f(m, 3, dtype="int64") ** -1),
    ("remainder-bool", lambda m: m.remainder(f(m, 3, dtype="bool"), f(m, 3, dtype="bool"))),
    ("floor_divide-bool", lambda m: f(m, 3, dtype="bool") // f(m, 3, dtype="bool")),
    ("floor_divide-int-zero", lambda m: f(m, 3, dtype="int64") // i(m, [1, 0, 1])),
    ("remainder-int-zero", lambda m: f(m, 3, dtype="int64") % i(m, [1, 0, 1])),
    ("div-floor-bool", lambda m: m.div(f(m, 3, dtype="bool"), f(m, 3, dtype="bool"), rounding_mode="floor")),
    ("div-rounding-mode", lambda m: m.div(f(m, 3), f(m, 3), rounding_mode="round")),
    ("bitwise-float", lambda m: m.bitwise_and(f(m, 3), f(m, 3))),
    ("operator-and-float", lambda m: f(m, 3) & f(m, 3)),
    ("invert-float", lambda m: ~f(m, 3)),
    ("argmax-bool", lambda m: f(m, 3, dtype="bool").argmax()),
    ("argmin-empty", lambda m: f(m, 0).argmin()),
    ("max-empty", lambda m: f(m, 0).max()),
    ("max-empty-dim", lambda m: f(m, 0, 2).max(0)),
    ("amax-empty", lambda m: f(m, 2, 0).amax(1)),
    ("clamp-no-bounds", lambda m: f(m, 3).clamp()),
    ("clamp-bool-scalar", lambda m: f(m, 3, dtype="bool").clamp(min=True)),
    ("add-alpha-float-int", lambda m: m.add(f(m, 3, dtype="int64"), f(m, 3, dtype="int64"), alpha=0.5)),
    ("iadd-dtype", lambda m: f(m, 3, dtype="int64").add_(f(m, 3))),
    # -- indexing: torch names the dim by the index's position in the key --
    ("getitem-after-none", lambda m: f(m, 2, 3)[None, 2]),
    ("getitem-after-ellipsis", lambda m: f(m, 2, 3, 4)[..., 4]),
    ("getitem-after-bool", lambda m: f(m, 2, 3)[True, 5]),
    ("getitem-str", lambda m: f(m, 2, 3)["a"]),
    ("getitem-int-then-tensor", lambda m: f(m, 2, 3, 4)[1, :, i(m, [4])]),
    ("getitem-tensor-int-tensor", lambda m: f(m, 2, 3, 4)[i(m, [0]), 1, i(m, [7])]),
    ("getitem-0d-tensor-range", lambda m: f(m, 2, 3)[:, i(m, 3)]),
    ("getitem-list-range", lambda m: f(m, 2, 3)[:, [0, 5]]),
    ("getitem-tensor-bcast", lambda m: f(m, 3, 4)[i(m, [[0, 1]]), i(m, [0, 1, 2])]),
    # -- index_put --
    ("index_put_-range", lambda m: f(m, 3, 4).index_put_((i(m, [3]),), m.tensor(1.0))),
    ("index_put_-shape", lambda m: f(m, 3, 4).index_put_((i(m, [0]),), f(m, 3))),
    ("index_put_-dtype", lambda m: f(m, 3, 4).index_put_((i(m, [0]),), f(m, 4, dtype="float64"))),
    ("index_put_-not-tuple", lambda m: f(m, 3, 4).index_put_(i(m, [0]), f(m, 4))),
    ("index_put-not-tuple", lambda m: f(m, 3, 4).index_put(i(m, [0]), f(m, 4))),
    ("index_put_-int-entry", lambda m: f(m, 3, 4).index_put_((1,), f(m, 4))),
    ("index_put_-none-entry", lambda m: f(m, 3, 4).index_put_((None, i(m, [0])), f(m, 3))),
    ("index_put_-float-index", lambda m: f(m, 3, 4).index_put_((f(m, 1),), f(m, 4))),
    ("index_put_-too-many", lambda m: f(m, 3, 4).index_put_((i(m, [0]),) * 3, f(m, 1))),
    ("index_put_-value-number", lambda m: f(m, 3, 4).index_put_((i(m, [0]),), 1.0)),
    ("index_put_-leaf", lambda m: f(m, 3, 4, requires_grad=True).index_put_((i(m, [0]),), f(m, 4))),
    # -- narrow --
    ("narrow-past-end", lambda m: f(m, 3, 4).narrow(0, 2, 2)),
    ("narrow-start-low", lambda m: f(m, 3, 4).narrow(0, -4, 1)),
    ("narrow-start-high", lambda m: f(m, 3, 4).narrow(1, 5, 0)),
    ("narrow-negative-length", lambda m: f(m, 3, 4).narrow(0, 0, -1)),
    ("narrow-negative-start-past-end", lambda m: f(m, 3, 4).narrow(1, -2, 3)),
    ("narrow-dim", lambda m: f(m, 3, 4).narrow(2, 0, 1)),
    ("narrow-0d", lambda m: f(m).narrow(0, 0, 1)),
    ("narrow-float-start-tensor", lambda m: f(m, 3, 4).narrow(0, m.tensor(1.0), 1)),
    # -- einsum's parser and "..." --
    ("einsum-ellipsis-bcast", lambda m: m.einsum("...ij,...jk->...ik", f(m, 2, 3, 4), f(m, 3, 4, 5))),
    ("einsum-ellipsis-bcast-shorter", lambda m: m.einsum("...i,...i", f(m, 5, 4), f(m, 2, 3, 4))),
    ("einsum-ellipsis-bcast-after-label", lambda m: m.einsum("i...,j...->ij", f(m, 2, 3, 4), f(m, 3, 5))),
    ("einsum-ellipsis-too-many-labels", lambda m: m.einsum("ijk...l", f(m, 2, 3, 4))),
    ("einsum-lone-dot", lambda m: m.einsum("i.j", f(m, 2, 3))),
    ("einsum-two-ellipses", lambda m: m.einsum("i...j...", f(m, 2, 3))),
    ("einsum-two-ellipses-output", lambda m: m.einsum("ij->...i...", f(m, 2, 3))),
    ("einsum-dot-output", lambda m: m.einsum("ij->i.", f(m, 2, 3))),
    ("einsum-output-unknown", lambda m: m.einsum("ij->k", f(m, 2, 3))),
    ("einsum-output-repeated", lambda m: m.einsum("ij->ii", f(m, 2, 3))),
    ("einsum-bad-subscript", lambda m: m.einsum("i1->i", f(m, 2, 3))),
    ("einsum-bad-subscript-output", lambda m: m.einsum("ij->i->j", f(m, 2, 3))),
    ("einsum-fewer-operands", lambda m: m.einsum("ij,jk", f(m, 2, 3))),
    ("einsum-label-bcast", lambda m: m.einsum("...j,j...", f(m, 2, 3, 4), f(m, 2, 3, 4))),
    # -- pad --
    ("pad-crop-past-size", lambda m: m.nn.functional.pad(f(m, 1, 2, 4), (-5, 1))),
    ("pad-crop-both-past-size", lambda m: m.nn.functional.pad(f(m, 1, 2, 4), (-2, -3))),
    ("pad-reflect-4d-one-pair", lambda m: m.nn.functional.pad(f(m, 1, 2, 3, 4), (-1, 1), mode="reflect")),
    ("pad-reflect-2d-two-pairs", lambda m: m.nn.functional.pad(f(m, 3, 4), (1, 1, 1, 1), mode="reflect")),
    ("pad-circular-1d", lambda m: m.nn.functional.pad(f(m, 4), (1, 1), mode="circular")),
    ("pad-odd-length", lambda m: m.nn.functional.pad(f(m, 3, 4), (1, 1, 1))),
    ("pad-too-long", lambda m: m.nn.functional.pad(f(m, 3), (1, 1, 1, 1))),
    ("pad-mode", lambda m: m.nn.functional.pad(f(m, 3, 4), (1, 1), mode="zeros")),
    # -- autograd-facing --
    ("requires_grad-int", lambda m: m.tensor([1, 2], requires_grad=True)),
    ("requires_grad_-int", lambda m: f(m, 2, dtype="int64").requires_grad_()),
    ("requires_grad_-bool", lambda m: f(m, 2, dtype="bool").requires_grad_(True)),
    ("item-several", lambda m: f(m, 2).item()),
    ("item-empty", lambda m: f(m, 0).item()),
    ("leaf-inplace", lambda m: f(m, 2, requires_grad=True).add_(1)),
    ("backward-nonscalar", lambda m: (f(m, 2, requires_grad=True) * 2).backward()),
    ("floor_divide-backward", lambda m: (f(m, 2, requires_grad=True) // 2).sum().backward()),
    ("rmod-backward", lambda m: (7 % f(m, 2, requires_grad=True)).sum().backward()),
]


def _outcome(m, fn):
    try:
        fn(m)
    except Exception as e:  # noqa: BLE001  (compared with torch's below)
        return e
    return None


@pytest.mark.parametrize("case", [pytest.param(fn, id=name) for name, fn in CASES])
def test_error_matches_torch(case):
    expected = _outcome(torch, case)
    assert expected is not None, "torch accepts this input; the case is wrong"
    got = _outcome(tracegrad, case)
    assert got is not None, f"tracegrad accepted what torch refuses with {type(expected).__name__}: {expected}"
    assert type(got) is type(expected) or isinstance(got, type(expected)), (type(got), got, type(expected), expected)
    want = str(expected).strip()
    assert want in str(got), (str(got), want)


def test_case_names_are_unique():
    names = [name for name, _ in CASES]
    assert len(names) == len(set(names))


# -- indices out of range: torch raises for a negative index too (these ops do not wrap) ---------

INDEX_OPS = {
    "gather": lambda m, x, ix: m.gather(x, 1, ix),
    "scatter": lambda m, x, ix: x.scatter(1, ix, 1.0),
    "scatter_add": lambda m, x, ix: x.scatter_add(1, ix, m.ones(2, 2)),
    "scatter_reduce": lambda m, x, ix: x.scatter_reduce(1, ix, m.ones(2, 2), "sum"),
    "index_select": lambda m, x, ix: x.index_select(1, ix[:, 1]),
    "index_add": lambda m, x, ix: x.index_add(1, ix[:, 1], m.ones(2, 2)),
}


@pytest.mark.parametrize("bad", [-1, -5, -6, 5, 9])
@pytest.mark.parametrize("name", sorted(INDEX_OPS))
def test_an_index_out_of_range_raises_as_torch_eagerly_and_compiled(name, bad):
    op = INDEX_OPS[name]
    data = [[0, 1], [2, bad]]
    with pytest.raises(Exception) as want:
        op(torch, torch.arange(10.).reshape(2, 5), torch.tensor(data))
    for run in ("eager", "compiled"):
        x, ix = tracegrad.arange(10.).reshape(2, 5), tracegrad.tensor(data)
        fn = (lambda a, b: op(tracegrad, a, b)) if run == "eager" else tracegrad.compile(
            lambda a, b: op(tracegrad, a, b))
        with pytest.raises(want.type) as got:
            fn(x, ix)
        assert str(got.value).startswith(str(want.value)), (run, str(got.value), str(want.value))


def test_a_compiled_row_gather_checks_its_labels_each_call():
    # cross-entropy's pick of each row's label is emitted as direct fancy indexing: a label
    # that changes to -1 between calls must raise, not wrap to the last class
    ce = tracegrad.compile(lambda z, y: tracegrad.gather(z, 1, y.reshape(-1, 1)).sum())
    z = tracegrad.randn(4, 3)
    ce(z, tracegrad.tensor([0, 1, 2, 1]))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 3"):
        ce(z, tracegrad.tensor([0, 1, -1, 1]))
