"""Where tracegrad differed from torch, found after the sixteenth stop; each case against torch."""
import pytest
import torch

import tracegrad as tg


def outcome(fn):
    """('ok', values) or (error type, message)."""
    try:
        r = fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return (RuntimeError if isinstance(e, RuntimeError) else type(e)), str(e)
    return "ok", r.tolist() if hasattr(r, "tolist") else r


# -- a method's TypeError numbers its arguments after self ------------------------------------------

_WRONG = ["a", None, {"a": 1}]


@pytest.mark.parametrize("bad", _WRONG, ids=["str", "None", "dict"])
@pytest.mark.parametrize("call", [
    lambda m, x, b: x.maximum(b), lambda m, x, b: m.maximum(x, b),
    lambda m, x, b: x.minimum(b), lambda m, x, b: x.atan2(b), lambda m, x, b: x.atan2_(b),
    lambda m, x, b: x.add(b), lambda m, x, b: m.add(x, b), lambda m, x, b: x.add_(b), lambda m, x, b: x.sub_(b),
    lambda m, x, b: x.mul(b), lambda m, x, b: m.div(x, b), lambda m, x, b: x.mul_(b),
    lambda m, x, b: x.addcmul(b, x), lambda m, x, b: x.addcmul(x, b), lambda m, x, b: m.addcmul(x, x, b),
    lambda m, x, b: x.addcdiv(x, b), lambda m, x, b: x.addcmul_(b, x),
    lambda m, x, b: x.matmul(b), lambda m, x, b: m.matmul(x, b), lambda m, x, b: x.outer(b), lambda m, x, b: x.dot(b),
    lambda m, x, b: x.mm(b), lambda m, x, b: m.mm(x, b),
    lambda m, x, b: x.expand_as(b), lambda m, x, b: x.type_as(b),
    lambda m, x, b: x.isclose(b), lambda m, x, b: m.isclose(x, b), lambda m, x, b: x.allclose(b),
    lambda m, x, b: m.allclose(x, b), lambda m, x, b: x.equal(b), lambda m, x, b: m.equal(x, b),
    lambda m, x, b: x.fmax(b), lambda m, x, b: x.hypot(b),
    lambda m, x, b: x.logaddexp(b), lambda m, x, b: x.heaviside(b),
    lambda m, x, b: x.index_put((m.tensor([0]),), b), lambda m, x, b: m.index_put(x, (m.tensor([0]),), b),
    lambda m, x, b: x.index_put_((m.tensor([0]),), b),
])
def test_argument_type_errors_number_as_torchs(call, bad):
    """x.maximum("a") said "argument 'other' (position 2)", the function's numbering, where torch's
    method counts from the argument after self (position 1), and add_'s error named add; add(x, None)
    said "must be Tensor or Number" where torch says "must be Tensor"; expand_as, type_as, isclose,
    allclose, equal, addcmul and mm gave an AttributeError (or a RuntimeError) for what torch refuses
    with its TypeError."""
    got = [outcome(lambda m=m: call(m, m.ones(2, 2), bad)) for m in (tg, torch)]
    assert got[0][0] is TypeError
    assert got[0] == got[1]


@pytest.mark.parametrize("call", [
    lambda m, x: m.xlogy(x, None), lambda m, x: m.xlogy(None, x), lambda m, x: m.xlogy(x, "a"),
    lambda m, x: m.xlogy(2.0, 3.0), lambda m, x: m.special.xlog1py(x, None), lambda m, x: m.special.xlog1py(None, x),
])
def test_xlogy_of_none_raises_torchs_error(call):
    """xlogy(x, None) gave NaN (None was taken for a number) where torch raises."""
    got = [outcome(lambda m=m: call(m, m.tensor([1.0, 2.0]))) for m in (tg, torch)]
    assert got[0][0] is TypeError
    assert got[0] == got[1]


@pytest.mark.parametrize("call", [
    lambda m, x: m.clamp_min(x, None), lambda m, x: m.clamp_max(x, None),
    lambda m, x: m.masked_fill(x, None, 1.0), lambda m, x: m.masked_fill(x, "a", 1.0),
    lambda m, x: m.masked_fill(x, x > 0, None),
])
def test_refused_overloads_raise_a_type_error(call):
    """clamp_min(x, None) was clamp's RuntimeError and masked_fill(x, None, v) a RuntimeError about the
    mask's dtype: torch finds no overload (TypeError); the message starts as torch's."""
    got = [outcome(lambda m=m: call(m, m.tensor([1.0, -2.0]))) for m in (tg, torch)]
    assert got[0][0] is got[1][0] is TypeError
    assert got[0][1].split("\n")[0] == got[1][1].split("\n")[0]


def test_allclose_method_compares_in_one_dtype():
    """x.allclose(float64) was True where torch (and tracegrad's function) raises."""
    got = [outcome(lambda m=m: m.ones(2).allclose(m.ones(2, dtype=m.float64))) for m in (tg, torch)]
    assert got[0] == got[1] == (RuntimeError, "Float did not match Double")


@pytest.mark.parametrize("call", [lambda m, x, y: x.allclose(y), lambda m, x, y: x.isclose(y),
                                  lambda m, x, y: x.equal(y), lambda m, x, y: m.equal(x, y)])
def test_whole_tensor_comparisons_still_compare(call):
    a, b = [1.0, 2.0, float("nan")], [1.0, 2.0000001, float("nan")]
    got = [outcome(lambda m=m: call(m, m.tensor(a), m.tensor(b))) for m in (tg, torch)]
    assert got[0] == got[1] or (got[0][0] == "ok" and str(got[0]) == str(got[1]))


@pytest.mark.parametrize("call", [lambda m, x: x.maximum("a"), lambda m, x: m.xlogy(x, None),
                                  lambda m, x: x.add_(None)])
def test_argument_type_errors_compiled(call):
    got = [outcome(lambda: tg.compile(lambda x: call(tg, x))(tg.ones(2))), outcome(lambda: call(torch, torch.ones(2)))]
    assert got[0][0] is TypeError
    assert got[0] == got[1]
