"""torch.compile's arguments, taken by tracegrad.compile as torch takes them (code written for
torch.compile ran into a TypeError: disable, options, name, recompile_limit)."""
import warnings

import pytest
import torch

import tracegrad as tg


def outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__, str(e)


def both(make):
    return outcome(lambda: make(tg)), outcome(lambda: make(torch))


@pytest.mark.parametrize("what", ["function", "module", "decorator"])
def test_disable_returns_the_function_itself(what):
    def make(m):
        f = (lambda x: x * 2) if what != "module" else m.nn.Linear(2, 2)
        g = m.compile(disable=True)(f) if what == "decorator" else m.compile(f, disable=True)
        return g is f
    assert both(make) == (("ok", True), ("ok", True))


@pytest.mark.parametrize("kw", [dict(mode="max-autotune", options={"a": 1}), dict(mode="bogus"), dict(mode="fast")])
def test_mode_is_checked_as_torchs(kw):
    got = both(lambda m: m.compile(lambda x: x * 2, **kw))
    assert got[0] == got[1] and got[0][0] == "RuntimeError"


@pytest.mark.parametrize("mode", ["default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune",
                                  None])
def test_every_mode_of_torch_compiles(mode):
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    f = tg.compile(lambda x: (x * x).sin().sum(), mode=mode)
    y = f(x)
    y.backward()
    xt = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    yt = (xt * xt).sin().sum()
    yt.backward()
    assert f.last_program is not None
    torch.testing.assert_close(torch.tensor(y.item()), yt.detach())
    torch.testing.assert_close(torch.tensor(x.grad.numpy()), xt.grad)


def test_inductor_is_the_default_backend_and_name_names_the_function():
    f = tg.compile(lambda x: x.exp() + 1, backend="inductor", name="shifted_exp")
    assert f.backend == "auto" and f.__name__ == "shifted_exp"
    assert f(tg.zeros(2)).tolist() == [2.0, 2.0]
    m = tg.compile(tg.nn.Linear(2, 2), name="head")
    assert m.__name__ == "head"
    with pytest.raises(ValueError, match="unknown backend 'aot_eager'"):
        tg.compile(lambda x: x, backend="aot_eager")


def test_recompile_limit_is_cache_limit():
    f = tg.compile(lambda x, c: x * c, recompile_limit=2, dynamic=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        outs = [f(tg.ones(2), c).tolist() for c in (1.5, 2.5, 3.5, 4.5)]
    assert outs == [[c] * 2 for c in (1.5, 2.5, 3.5, 4.5)]
    assert f.cache.limit == 2 and f.cache.compiles == 2
    assert sum("recompile limit" in str(m.message) for m in w) == 1


def test_options_are_ignored_with_a_warning_that_names_them():
    with pytest.warns(UserWarning, match=r"ignores options=\['epilogue_fusion', 'triton.cudagraphs'\]"):
        f = tg.compile(lambda x: x + 1, options={"triton.cudagraphs": True, "epilogue_fusion": False})
    assert f(tg.ones(2)).tolist() == [2.0, 2.0]
