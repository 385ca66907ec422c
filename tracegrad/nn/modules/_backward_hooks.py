"""Module backward hooks (register_full_backward_hook and _pre_hook), as torch's BackwardHook
does them: the module's tensor inputs and outputs pass through identity autograd Functions;
the outputs' one sees grad_output (pre-hooks may replace it), the inputs' one sees
grad_input and calls the hooks (which may replace it)."""
from ...tensor import Tensor
from ...autograd.function import Function


class _State:
    __slots__ = ("module", "n_inputs", "grad_outputs", "input_requires_grad")

    def __init__(self, module, n_inputs):
        self.module, self.n_inputs, self.grad_outputs, self.input_requires_grad = module, n_inputs, None, False


def _run_hooks(state, grad_inputs):
    out = tuple(grad_inputs)
    for hook in tuple(state.module._backward_hooks.values()):
        r = hook(state.module, out, state.grad_outputs)
        if r is not None:
            r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
            if len(r) != len(out):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(r)}, but "
                                   f"expected {len(out)}")
            out = r
    return out


class _InputsHook(Function):
    @staticmethod
    def forward(ctx, state, *xs):
        ctx.state = state
        ctx.set_materialize_grads(False)
        return tuple(x.clone() for x in xs) if len(xs) > 1 else xs[0].clone()

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(_run_hooks(ctx.state, grads))


class _OutputsHook(Function):
    @staticmethod
    def forward(ctx, state, *ys):
        ctx.state = state
        ctx.set_materialize_grads(False)     # an output no gradient reached is None, as torch's
        return tuple(y.clone() for y in ys) if len(ys) > 1 else ys[0].clone()

    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        for hook in tuple(state.module._backward_pre_hooks.values()):
            r = hook(state.module, grads)
            if r is not None:
                grads = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        state.grad_outputs = tuple(grads)
        if not state.input_requires_grad:
            # no input needs a gradient: the hooks see grad_input of Nones now, as torch's
            _run_hooks(state, (None,) * state.n_inputs)
        return (None,) + tuple(grads)


def call_with_backward_hooks(module, call, args, kwargs):
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    state = _State(module, len(positions))
    args = list(args)
    needing = [i for i in positions if args[i].requires_grad]
    if needing:
        state.input_requires_grad = True
        new = _InputsHook.apply(state, *(args[i] for i in positions))
        new = new if isinstance(new, tuple) else (new,)
        for i, t in zip(positions, new):
            args[i] = t
    result = call(*args, **kwargs)
    single = isinstance(result, Tensor)
    outs = [result] if single else (list(result) if isinstance(result, (tuple, list)) else None)
    if outs is None:
        return result
    tensor_pos = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not tensor_pos:
        return result
    wrapped = _OutputsHook.apply(state, *(outs[i] for i in tensor_pos))
    wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
    for i, t in zip(tensor_pos, wrapped):
        outs[i] = t
    if single:
        return outs[0]
    return type(result)(outs) if isinstance(result, list) else tuple(outs)
