"""nn.Module.set_submodule, register_state_dict_pre_hook, register_state_dict_post_hook's
return rule and to_empty, against torch."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def net(L):
    return L.nn.Sequential(L.nn.Linear(2, 3), L.nn.Sequential(L.nn.ReLU(), L.nn.Linear(3, 1)))


def _error(f):
    try:
        f()
    except Exception as e:      # noqa: BLE001 - compared
        return type(e).__name__, str(e)
    return None


def test_set_submodule_matches_torch():
    for L in (torch, tg):
        m = net(L)
        m.set_submodule("1.0", L.nn.Tanh())
        assert type(m[1][0]).__name__ == "Tanh"
        m.set_submodule("2", L.nn.Sigmoid())              # a new name (strict=False)
        assert type(m[2]).__name__ == "Sigmoid"


@pytest.mark.parametrize("case", range(6))
def test_set_submodule_errors_match_torch(case):
    def call(L):
        m = net(L)
        m.extra = 3
        return [lambda: m.set_submodule("", L.nn.ReLU()),
                lambda: m.set_submodule("1.0", 3),
                lambda: m.set_submodule("9.0", L.nn.ReLU()),
                lambda: m.set_submodule("1.7", L.nn.ReLU(), strict=True),
                lambda: m.set_submodule("extra", L.nn.ReLU()),
                lambda: m.set_submodule("0.weight.x", L.nn.ReLU()),
                ][case]()
    want, got = _error(lambda: call(torch)), _error(lambda: call(tg))
    assert want is not None and got is not None and got[0] == want[0], (got, want)
    if case != 1:                             # (the type's repr names the library's module)
        assert got == want


def test_state_dict_hooks_match_torch():
    def run(L):
        m = net(L)
        log = []
        m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))
        m[1].register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre child", prefix)))

        def post(mod, sd, prefix, meta):
            log.append(("post", prefix, sorted(sd)))
            sd["added"] = 1
        m.register_state_dict_post_hook(post)
        sd = m.state_dict(keep_vars=True)
        log.append(sorted(sd))
        m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: {})
        log.append(_error(m.state_dict))
        return log
    assert run(tg) == run(torch)


def test_to_empty_keeps_shapes_dtypes_and_parameters():
    for L in (torch, tg):
        m = net(L).double()
        params = list(m.parameters())
        assert m.to_empty(device="cpu") is m
        after = list(m.parameters())
        assert [tuple(p.shape) for p in after] == [(3, 2), (3,), (1, 3), (1,)]
        assert all(p.dtype == L.float64 and isinstance(p, L.nn.Parameter) and p.requires_grad for p in after)
        assert all(a is b for a, b in zip(params, after))
        with L.no_grad():
            for p in m.parameters():
                p.fill_(0.5)
        x = L.ones(4, 2, dtype=L.float64)
        np.testing.assert_allclose(m(x).detach().numpy(), np.full((4, 1), 2.75))
