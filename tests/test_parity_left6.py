"""Where tracegrad differed from torch, found after the fifteenth stop; each case against torch."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def outcome(fn):
    """('ok', values, requires_grad, grad_fn name) or (error type, message)."""
    try:
        r = fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return (RuntimeError if isinstance(e, RuntimeError) else type(e)), str(e)
    return "ok", r.tolist(), r.requires_grad, type(r.grad_fn).__name__ if r.grad_fn is not None else None


# -- out= of an op without a derivative -----------------------------------------------------------

@pytest.mark.parametrize("op", ["heaviside", "floor_divide"])
def test_out_of_an_op_without_a_derivative_takes_its_node(op):
    """torch writes out= of heaviside and floor_divide where an argument requires grad (their
    grad_fn is NotImplemented, so no gradient can be wrong); `out` takes the node."""
    res = []
    for m in (tg, torch):
        x = m.tensor([1.5, -2.5, 0.0], requires_grad=True)
        y = m.tensor([1.0, 2.0, 0.5])
        o = m.empty(3)
        r = getattr(m, op)(x, y, out=o)
        assert r is o and not o.is_leaf
        res.append((o.tolist(), o.requires_grad, type(o.grad_fn).__name__))
        with pytest.raises(RuntimeError, match="not implemented"):
            o.sum().backward()
    assert res[0] == res[1]


@pytest.mark.parametrize("op", ["heaviside", "floor_divide"])
def test_out_requiring_grad_of_an_op_without_a_derivative_raises_torchs_error(op):
    got = []
    for m in (tg, torch):
        x = m.tensor([1.5, -2.5], requires_grad=True)
        got.append(outcome(lambda: getattr(m, op)(x, m.tensor([1.0, 2.0]), out=m.empty(2, requires_grad=True))))
    assert got[0] == got[1]
    assert got[0][1].startswith(f"aten::{op}(): functions with out=")


@pytest.mark.parametrize("op", ["nextafter", "gcd", "lcm"])
def test_out_of_nextafter_gcd_lcm(op):
    """tracegrad's nextafter, gcd and lcm took no out= (a TypeError where torch writes)."""
    dt = "float64" if op == "nextafter" else "int64"
    a = np.array([1.5, -2.0, 6.0, 0.0]) if op == "nextafter" else np.array([4, -6, 9, 0])
    b = np.array([2.0, -3.0, 6.0, -1.0]) if op == "nextafter" else np.array([6, 4, -3, 5])
    got = []
    for m in (tg, torch):
        o = m.empty(4, dtype=getattr(m, dt))
        r = getattr(m, op)(m.tensor(a), m.tensor(b), out=o)
        assert r is o
        got.append(o.tolist())
    assert got[0] == got[1]


def test_out_of_nextafter_with_an_argument_requiring_grad_raises_as_torch():
    """nextafter has a derivative in torch (NextafterBackward0): out= refuses as for any op that has one."""
    got = [outcome(lambda m=m: m.nextafter(m.tensor([1.0, 2.0], requires_grad=True), m.tensor([2.0, 1.0]),
                                           out=m.empty(2)))
           for m in (tg, torch)]
    assert got[0] == got[1]


# -- Python ints beyond 64 bits ------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda m, a, b: m.add(a, -2 ** 63 - 1),
    lambda m, a, b: m.add(a, 2 ** 64),
    lambda m, a, b: m.add(a, a, alpha=-2 ** 63 - 1),
    lambda m, a, b: m.add(b, b, alpha=-2 ** 64 - 1),
    lambda m, a, b: m.add(a, a, alpha=2 ** 64),
    lambda m, a, b: m.add(a, a, alpha=2 ** 63),
    lambda m, a, b: m.sub(a, a, alpha=2 ** 65),
    lambda m, a, b: m.rsub(a, a, alpha=-2 ** 70),
    lambda m, a, b: a.add_(a, alpha=2 ** 64),
    lambda m, a, b: m.add(b, b, alpha=2 ** 63),
], ids=["operand_negative", "operand_2_64", "alpha_negative", "alpha_negative_float", "alpha_2_64", "alpha_2_63",
        "sub_alpha_2_65", "rsub_alpha_negative", "add__alpha_2_64", "float_alpha_2_63"])
def test_alpha_and_operands_beyond_64_bits_raise_torchs_error(call):
    """torch converts a Python int to a Scalar first: OverflowError beyond [-2**63, 2**64) ("int too
    big to convert", "can't convert negative int to unsigned"), then the dtype's check (RuntimeError
    for 2**63 into int64). tracegrad raised the RuntimeError for alpha beyond 64 bits."""
    got = [outcome(lambda m=m: call(m, m.tensor([1, 2]), m.tensor([1.0, 2.0]))) for m in (tg, torch)]
    assert got[0] == got[1]
