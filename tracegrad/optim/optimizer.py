"""Optimizer: torch.optim.Optimizer's parameter groups, state, state_dict and zero_grad.

Subclasses update parameters in place under no_grad. The built-in ones (SGD, Adam,
AdamW) do their arithmetic directly on the tensors' numpy storage with in-place ufuncs,
in the order of torch's single-tensor (CPU) implementation and with its scalars cast to
the parameter's dtype, so their float32 results agree with torch's to rounding; each
update bumps the parameter's version counter as an in-place op would.
"""
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor
from ..grad_mode import no_grad, enable_grad
from ..functionalize import active, OPTIMIZERS
from ..tracing import TraceError
from ..nn.modules.module import RemovableHandle
from ..runtime.side_effects import SideEffects

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Base class: holds `param_groups` (dicts with 'params' and options) and per-parameter
    `state` (a defaultdict keyed by parameter tensor)."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            "got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(dict(group))
        if defaults.get("fused") and defaults.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")     # (torch's, after the groups)
        OPTIMIZERS.add(self)          # a trace undoes changes of its options (functionalize.options_changed)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\n"
            s += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        s += ")"
        return s

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        names = [p[0] for p in param_group["params"] if isinstance(p, tuple)]
        param_group["params"] = [p[1] if isinstance(p, tuple) else p for p in param_group["params"]]
        if names:
            if len(names) != len(param_group["params"]):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will cause "
                          "an error; see github.com/pytorch/pytorch/issues/40967 for more information", stacklevel=3)
        param_set = set()
        for group in self.param_groups:
            param_set.update(set(group["params"]))
        if not param_set.isdisjoint(set(param_group["params"])):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        sh = active()
        if sh is not None:
            sh.optimizers[id(self)] = self        # inside compile: .grad writes are recorded
            if set_to_none:
                for group in self.param_groups:
                    for p in group["params"]:
                        sh.set_grad(p, None)
                return
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        g = p.grad
                        if g.grad_fn is not None:
                            g.detach_()
                        else:
                            g.requires_grad_(False)
                        g.zero_()

    def state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{options..., 'params': [index, ...]}]}, with
        parameters replaced by their index in group order (torch's layout). The state-dict pre-hooks
        run first, the post-hooks after (each may return a dict to use instead)."""
        for hook in list(self._hooks("_optimizer_state_dict_pre_hooks").values()):
            hook(self)
        mapping = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            mapping.update({id(p): i for i, p in enumerate(group["params"], start) if id(p) not in mapping})
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        state_dict = {"state": state, "param_groups": groups}
        for hook in list(self._hooks("_optimizer_state_dict_post_hooks").values()):
            res = hook(self, state_dict)
            if res is not None:
                state_dict = res
        return state_dict

    def load_state_dict(self, state_dict):
        state_dict = state_dict.copy()
        for hook in list(self._hooks("_optimizer_load_state_dict_pre_hooks").values()):
            res = hook(self, state_dict)
            if res is not None:
                state_dict = res
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of optimizer's "
                             "group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                if key == "step":
                    return value
                return value.to(param.dtype) if param.is_floating_point() else value
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        self.__setstate__({"state": state, "param_groups": [update_group(g, ng) for g, ng in
                                                            zip(groups, saved_groups)]})
        for hook in list(self._hooks("_optimizer_load_state_dict_post_hooks").values()):
            hook(self)

    def _hooks(self, name):
        """One of the hook tables (an optimizer unpickled from an older tracegrad has none yet)."""
        table = self.__dict__.get(name)
        if table is None:
            table = self.__dict__[name] = OrderedDict()
        return table

    def _register(self, name, hook, prepend):
        table = self._hooks(name)
        handle = RemovableHandle(table)
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer), before state_dict() builds its dict."""
        return self._register("_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> state_dict or None, after state_dict() built it."""
        return self._register("_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> state_dict or None, before load_state_dict() reads it."""
        return self._register("_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer), after load_state_dict() loaded."""
        return self._register("_optimizer_load_state_dict_post_hooks", hook, prepend)

    def register_step_pre_hook(self, hook):
        handle = RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        handle = RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def _run_step(self, closure, update):
        """Pre-hooks, the closure (with grad enabled), `update()` under no_grad, post-hooks."""
        if active() is not None:
            _hooks_traceable(self)
        for hook in self._optimizer_step_pre_hooks.values():
            r = hook(self, (), {})
            if r is not None:
                raise RuntimeError(f"optimizer step pre-hook must return None, but got {r}")
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        sh = active()
        with no_grad():
            if sh is None:
                update()
            else:
                self._traced_update(sh, update)
        for hook in self._optimizer_step_post_hooks.values():
            hook(self, (), {})
        return loss

    def step(self, closure=None):
        raise NotImplementedError

    def _traced_update(self, sh, update):
        """optimizer.step() inside a compiled function: the update on symbolic values
        (optim/traced.py) for the built-in optimizers; another optimizer's update runs as
        written, its in-place ops on the parameters recorded as writes (functionalize.py)."""
        sh.optimizers[id(self)] = self
        fn = getattr(update, "__func__", None)
        rule = TRACED_UPDATES.get(fn)
        if rule is not None:
            rule(self, sh)
        elif fn is not None and fn.__module__.startswith(__package__ + "."):
            # a built-in update written on numpy storage
            raise TraceError(f"{type(self).__name__}.step() inside a compiled function is not traced yet "
                             f"(SGD, Adam, AdamW, RMSprop and Adagrad are); compile the forward and backward only")
        else:
            update()


def _hooks_traceable(opt):
    """Inside a trace, the step's hooks run once, as the trace is made: a hook with a Python
    side effect (a counter, a log) would not run at the program's calls, so the function
    runs eagerly instead (what runtime/side_effects.py finds in the hook's code)."""
    for hook in (*opt._optimizer_step_pre_hooks.values(), *opt._optimizer_step_post_hooks.values()):
        found = SideEffects(hook).find((opt, (), {}), {})
        if found:
            raise TraceError(f"a step hook of {type(opt).__name__} has a Python side effect at "
                             f"{found[0].describe()}; a program would not run it")


def _typename(obj):
    if isinstance(obj, Tensor):
        return "torch." + D.LEGACY[obj.dtype]
    return type(obj).__module__ + "." + type(obj).__qualname__ if type(obj).__module__ != "builtins" else \
        type(obj).__qualname__


# {an optimizer's numpy update function: its update on symbolic values (optim/traced.py)}, filled
# by the optimizers' modules (sgd.py, adam.py), which import this one
TRACED_UPDATES = {}


def _scalar(x):
    """A float option (a Python number or a one-element tensor)."""
    return float(x.item()) if isinstance(x, Tensor) else x


def _check_options(name, lr, differentiable, **nonnegative):
    """torch's checks of an optimizer's options, in its order: a one-element learning rate that
    is not negative, then each of `nonnegative` (named as torch's messages name them)."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= _scalar(lr):
        raise ValueError(f"Invalid learning rate: {lr}")
    for what, value in nonnegative.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {what} value: {value}")
    if differentiable:
        raise NotImplementedError(f"{name}(differentiable=True) is not supported")


def _zeros_like(p):
    return Tensor._make(np.zeros_like(p._data), p._dtype)


def _finish(tensors):
    """After an update in storage: round bfloat16 values and bump version counters."""
    for t in tensors:
        if t._dtype is D.bfloat16:
            t._data[...] = D.round_bfloat16(t._data)
        t._vc[0] += 1
