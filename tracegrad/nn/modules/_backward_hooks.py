"""Module full backward hooks (torch's nn.Module.register_full_backward_hook and
register_full_backward_pre_hook, torch.utils.hooks.BackwardHook).

A call of a module with such hooks passes its tensor inputs, and then its tensor outputs,
through an identity custom Function (BackwardHookFunction, as in torch). In backward, the
outputs' node gets the gradients with respect to the outputs: the pre-hooks run there and
may replace them. The inputs' node gets the gradients with respect to the inputs: the hooks
run there with (grad_input, grad_output) and may replace grad_input. Where no input requires
grad, the hooks run at the outputs' node with grad_input all None, with torch's warning.
"""
import warnings
from collections import OrderedDict

from ...tensor import Tensor
from ...autograd.function import Function
from ... import _tensor_methods
from ...grad_mode import is_grad_enabled
from ...creation import zeros
from ...ops.primitives import check_hook_results

# The full backward (pre-)hooks of every module (register_module_full_backward_hook and
# register_module_full_backward_pre_hook in module.py add to them), run before a module's own.
_global_backward_hooks = OrderedDict()
_global_backward_pre_hooks = OrderedDict()


class BackwardHookFunction(Function):
    @staticmethod
    def forward(ctx, call, kind, *tensors):
        ctx.call = call
        ctx.kind = kind
        ctx.set_materialize_grads(False)      # an output no gradient reached is None, as torch's
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        ctx.metas = [(tuple(t.shape), t.dtype, t.device) for t in tensors]
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        if ctx.kind == "outputs":
            grads = ctx.call.output_grads(grads, ctx.metas)
        else:
            grads = ctx.call.input_grads(grads, ctx.metas)
        return (None, None) + tuple(grads)


def _materialized(grads, metas):
    """The gradients torch's BackwardHookFunction hands on (it materializes): zeros where none
    reached."""
    return tuple(zeros(s, dtype=d, device=dev) if g is None else g for g, (s, d, dev) in zip(grads, metas))


def _packed(pos, values, size):
    """A tuple of `size`, the values at positions `pos` (the tensor arguments), None elsewhere."""
    res = [None] * size
    for i, v in zip(pos, values):
        res[i] = v
    return tuple(res)


class _HookedCall:
    """One call of a module with backward hooks: what its backward hands to the hooks."""

    def __init__(self, module, n_args, pos, input_req):
        self.module = module
        self.n_args = n_args              # the hooks' grad_input has one entry per argument, tensor or not
        self.pos = pos                    # the positions of the tensor arguments
        self.input_req = input_req
        self.pre_hooks = (list(_global_backward_pre_hooks.values())
                          + list(module.__dict__.get("_backward_pre_hooks", {}).values()))
        self.hooks = (list(_global_backward_hooks.values())
                      + list(module.__dict__.get("_backward_hooks", {}).values()))
        self.grad_output = None

    def output_grads(self, grads, metas):
        grads = orig = tuple(grads)
        for hook in self.pre_hooks:
            r = hook(self.module, grads)
            if r is not None:
                r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                if len(r) != len(grads):
                    raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got {len(r)}, "
                                       f"but expected {len(grads)}")
                grads = r
        self.grad_output = grads
        if not any(self.input_req) and self.hooks:
            warnings.warn("Full backward hook is firing when gradients are computed with respect to module outputs "
                          "since no inputs require gradients. See https://docs.pytorch.org/docs/main/generated/"
                          "torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more details.",
                          stacklevel=2)
            for hook in self.hooks:
                r = hook(self.module, (None,) * self.n_args, self.grad_output)
                if r is not None and not (isinstance(r, tuple) and all(g is None for g in r)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
            self.grad_output = None
        # torch checks what the pre-hooks leave against the gradients its node would hand on
        return check_hook_results(None, _materialized(orig, metas), grads, name="hook")

    def input_grads(self, grads, metas):
        if self.grad_output is None:
            # the gradient reached the inputs without passing the outputs (double backward
            # through a saved input): torch calls no hook then
            return tuple(g if req else None for g, req in zip(grads, self.input_req))
        grads = _materialized(grads, metas)
        res = _packed(self.pos, grads, self.n_args)
        for hook in self.hooks:
            r = hook(self.module, res, self.grad_output)
            if r is not None:
                if len(r) != len(res):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(r)}, but "
                                       f"expected {len(res)}")
                res = r
        self.grad_output = None
        res = check_hook_results(None, grads, tuple(res[i] for i in self.pos), name="hook")
        return tuple(g if req else None for g, req in zip(res, self.input_req))


def refuse_tracing(module):
    if _tensor_methods._tracing():
        # the hooks run in backward, which a compiled program does not run through Python:
        # the call runs eagerly (compile warns and falls back), never without its hooks
        raise NotImplementedError(f"{type(module).__name__} has module backward hooks "
                                  f"(register_full_backward_hook), which a compiled function does not run")


def setup_input_hook(module, args):
    """torch's BackwardHook.setup_input_hook: the module's tensor arguments, as the forward
    pre-hooks left them, through the inputs' node. Returns the call's hook state (None where
    grad mode is off) and the arguments forward gets."""
    refuse_tracing(module)
    if not is_grad_enabled():
        return None, args
    pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    req = tuple(args[i].requires_grad for i in pos)
    hooked = _HookedCall(module, len(args), pos, req)
    if any(req):
        new = BackwardHookFunction.apply(hooked, "inputs", *[args[i] for i in pos])
        args = list(args)
        for i, t in zip(pos, new):
            args[i] = t
        args = tuple(args)
    return hooked, args


def setup_output_hook(hooked, out):
    """torch's BackwardHook.setup_output_hook: the result, as the forward hooks left it,
    through the outputs' node."""
    if hooked is None:
        return out
    single = isinstance(out, Tensor)
    outs = (out,) if single else out
    if not isinstance(outs, tuple) or not all(isinstance(o, Tensor) for o in outs):
        return out                 # torch hooks tensor outputs only; other structures pass as they are
    if not any(o.requires_grad for o in outs):
        return out
    new = BackwardHookFunction.apply(hooked, "outputs", *outs)
    return new[0] if single else tuple(new)
