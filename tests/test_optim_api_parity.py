"""The optimizer API against torch: param groups and their defaults, add_param_group, state_dict
and load_state_dict, step hooks, a tensor lr, foreach/fused/capturable flags, argument checks,
zero_grad, repr, a scheduler's state. Each case runs in both libraries; the outcomes (values, or
the error's type and start) must be equal."""
import warnings

import pytest
import torch

import tracegrad as tg

CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


def outcome(f, L):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return f(L)
        except Exception as e:                  # noqa: BLE001 (the outcome is compared)
            return type(e).__name__ + ": " + str(e)[:100]


def mk(L):
    p = L.nn.Parameter(L.tensor([1.0, 2.0]))
    q = L.nn.Parameter(L.tensor([3.0]))
    return p, q


@case
def add_param_group_with_its_own_lr(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1)
    o.add_param_group({"params": [q], "lr": 0.5})
    p.grad = L.ones(2)
    q.grad = L.ones(1)
    o.step()
    return p.tolist(), q.tolist(), [g["lr"] for g in o.param_groups], sorted(o.param_groups[1])


@case
def add_param_group_of_a_parameter_already_there(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1)
    return o.add_param_group({"params": [p]})


@case
def adam_state_dict(L):
    p, q = mk(L)
    o = L.optim.Adam([p, q], lr=0.1)
    p.grad = L.ones(2)
    q.grad = L.ones(1)
    o.step()
    sd = o.state_dict()
    return sorted(sd), sd["param_groups"][0]["params"], sorted(sd["state"][0]), sd["state"][0]["step"].tolist()


@case
def step_hooks(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1)
    log = []
    o.register_step_pre_hook(lambda opt, a, k: log.append("pre"))
    o.register_step_post_hook(lambda opt, a, k: log.append("post"))
    p.grad = L.ones(2)
    o.step()
    return log


@case
def tensor_lr(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=L.tensor(0.1))
    p.grad = L.ones(2)
    o.step()
    return p.tolist()


@case
def foreach_and_fused(L):
    p, q = mk(L)
    return L.optim.SGD([p], lr=0.1, foreach=True, fused=True)


@case
def adam_foreach_false(L):
    p, q = mk(L)
    o = L.optim.Adam([p], lr=0.1, foreach=False)
    p.grad = L.ones(2)
    o.step()
    return p.tolist()


@case
def adam_capturable_and_fused_false(L):
    p, q = mk(L)
    o = L.optim.Adam([p], lr=0.1, capturable=False, fused=False)
    p.grad = L.ones(2)
    o.step()
    return p.tolist()


@case
def empty_parameter_list(L):
    p, q = mk(L)
    return L.optim.SGD([], lr=0.1)


@case
def groups_take_the_defaults(L):
    p, q = mk(L)
    o = L.optim.SGD([{"params": [p]}, {"params": [q], "momentum": 0.9}], lr=0.1)
    return [sorted(k for k in g if k != "params") for g in o.param_groups], [g["momentum"] for g in o.param_groups]


@case
def a_parameter_given_twice(L):
    p, q = mk(L)
    o = L.optim.SGD([p, p], lr=0.1)
    return len(o.param_groups[0]["params"])


@case
def a_tensor_for_params(L):
    p, q = mk(L)
    o = L.optim.SGD(p, lr=0.1)


@case
def adam_beta_of_one(L):
    p, q = mk(L)
    o = L.optim.Adam([p], lr=0.1, betas=(1.0, 0.999))


@case
def negative_lr(L):
    p, q = mk(L)
    o = L.optim.Adam([p], lr=-0.1)


@case
def zero_grad_to_none_and_to_zeros(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1)
    o.zero_grad()
    r1 = p.grad
    p.grad = L.ones(2)
    o.zero_grad(set_to_none=False)
    return r1, p.grad.tolist()


@case
def load_state_dict_of_other_parameters(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = L.ones(2)
    o.step()
    sd = o.state_dict()
    o2 = L.optim.SGD([q], lr=0.1, momentum=0.9)
    return o2.load_state_dict(sd)


@case
def repr_of_an_optimizer(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1)
    return repr(o)


@case
def adam_defaults(L):
    p, q = mk(L)
    o = L.optim.Adam([p])
    return sorted(o.defaults)


@case
def sgd_defaults(L):
    p, q = mk(L)
    o = L.optim.SGD([p])
    return sorted(o.defaults), o.defaults["lr"]


@case
def adam_step_counts_steps(L):
    p, q = mk(L)
    o = L.optim.Adam([p], lr=0.1)
    p.grad = L.ones(2)
    o.step()
    o.zero_grad()
    o.step()
    return p.tolist(), o.state[p]["step"].item()


@case
def adamw_weight_decay_default(L):
    p, q = mk(L)
    o = L.optim.AdamW([p], lr=0.1)
    return o.defaults["weight_decay"]


@case
def steplr_and_its_state_dict(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1)
    s = L.optim.lr_scheduler.StepLR(o, 2)
    r = []
    for i in range(5):
        o.step()
        s.step()
        r.append(s.get_last_lr()[0])
    return r, sorted(s.state_dict())


@case
def scheduler_stepped_before_the_optimizer(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1)
    s = L.optim.lr_scheduler.StepLR(o, 2)
    s.step()
    return "warned?"


@case
def sgd_state_and_group_dict(L):
    p, q = mk(L)
    o = L.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = L.ones(2)
    o.step()
    return sorted(o.state[p]), o.state_dict()["param_groups"][0]


@pytest.mark.parametrize("name", list(CASES))
def test_optimizer_api_matches_torch(name):
    assert outcome(CASES[name], tg) == outcome(CASES[name], torch)
