"""Optimizer.register_state_dict_pre_hook / _post_hook and register_load_state_dict_pre_hook /
_post_hook, against torch: call order (prepend too), arguments, a returned dict used in place of
the built or loaded one, removal by handle."""
import numpy as np
import torch

import tracegrad as tg


def run(L):
    p = L.nn.Parameter(L.tensor([1.0, -2.0], dtype=L.float64))
    opt = L.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = L.tensor([0.5, 0.25], dtype=L.float64)
    opt.step()
    log = []
    opt.register_state_dict_pre_hook(lambda o: log.append(("pre", o is opt)))
    opt.register_state_dict_pre_hook(lambda o: log.append(("pre first",)), prepend=True)

    def post(o, sd):
        log.append(("post", sorted(sd)))
        sd = dict(sd)
        sd["extra"] = 7
        return sd
    h = opt.register_state_dict_post_hook(post)
    opt.register_state_dict_post_hook(lambda o, sd: log.append(("post 2", sd.get("extra"))))
    sd = opt.state_dict()
    log.append(("saved", sorted(sd), sd["param_groups"][0]["lr"]))
    h.remove()
    log.append(("after remove", sorted(opt.state_dict())))

    def load_pre(o, sd):
        log.append(("load pre", sorted(sd)))
        sd = dict(sd)
        sd["param_groups"] = [dict(g, lr=0.5) for g in sd["param_groups"]]
        return sd
    opt.register_load_state_dict_pre_hook(load_pre)
    opt.register_load_state_dict_post_hook(lambda o: log.append(("load post", o.param_groups[0]["lr"])))
    opt.load_state_dict(sd)
    log.append(("loaded lr", opt.param_groups[0]["lr"],
                np.asarray(opt.state[p]["momentum_buffer"].detach().numpy()).tolist()))
    return log


def test_optimizer_state_dict_hooks_match_torch():
    assert run(tg) == run(torch)
