"""torch.utils.checkpoint: activation checkpointing.

`checkpoint(fn, *args, use_reentrant=...)` runs `fn` without keeping what its ops save for
backward, and runs it again in backward to get those values back, trading compute for
memory. Two variants, as torch has them:

- use_reentrant=False (torch's recommendation): `fn` runs under saved-tensor hooks; each
  tensor an op saves becomes a placeholder, and the first unpack in backward reruns `fn`
  (with the random-number state of the first run) and hands out what that rerun saved, in
  the same order. Works with autograd.grad, inputs that do not require grad, nested
  checkpoints and double backward.
- use_reentrant=True: `fn` runs under no_grad inside a custom Function; its backward reruns
  `fn` with grad enabled and calls backward on that graph. As in torch, it does not work
  with autograd.grad (or backward(inputs=...)), and gradients reach only the tensor inputs.

Called without use_reentrant, both functions warn as torch does and use the reentrant
variant, torch's current default.
"""
import contextlib
import warnings

from ..tensor import Tensor
from ..grad_mode import enable_grad, no_grad, is_grad_enabled
from ..autograd.function import Function
from ..autograd.graph import saved_tensors_hooks
from .. import creation
from ..autograd.engine import current_task
from ..autograd import backward as _backward

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn"]


class CheckpointError(RuntimeError):
    """torch.utils.checkpoint.CheckpointError: the rerun of a checkpointed function did not
    save what the first run saved."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _rng_state(preserve):
    return creation.get_rng_state() if preserve else None


@contextlib.contextmanager
def _restored_rng(state):
    """Run the body with the random-number state `state`, then put back the state it found."""
    if state is None:
        yield
        return
    now = creation.get_rng_state()
    creation.set_rng_state(state)
    try:
        yield
    finally:
        creation.set_rng_state(now)


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in "
                      "PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the differences between "
                      "the two variants.", stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        return _CheckpointFunction.apply(function, preserve_rng_state, *args)
    return _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, args, kwargs)


# -- use_reentrant=True -----------------------------------------------------------------------

class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.rng_state = _rng_state(preserve_rng_state)
        ctx.grad_enabled = is_grad_enabled()
        ctx.tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.others = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_pos])
        if not any(args[i].requires_grad for i in ctx.tensor_pos):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=4)
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_pos, saved):
            args[i] = t.detach().requires_grad_(t.requires_grad)
        with _restored_rng(ctx.rng_state), enable_grad():
            outputs = ctx.run_function(*args)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        outs, gs = [], []
        for o, g in zip(outputs, grads):
            if isinstance(o, Tensor) and o.requires_grad and g is not None:
                outs.append(o)
                gs.append(g)
        if not outs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward(outs, gs)
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in args)


# -- use_reentrant=False ----------------------------------------------------------------------

class _Kept:
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


class _Frame:
    """One call of a checkpointed function: how many tensors its first run saved, and what
    the rerun in backward saved (by position), handed out once each."""

    def __init__(self, function, args, kwargs, rng_state, context_fn, check):
        self.function = function
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
        self.context_fn = context_fn
        self.check = check
        self.metas = []              # (shape, dtype) of each tensor the first run saved
        self.recomputed = {}         # position -> what the rerun saved there, until handed out
        self.task = None             # the backward that ran the last rerun

    def pack(self, x):
        i = len(self.metas)
        self.metas.append((tuple(x.shape), x.dtype))
        if not x.requires_grad and any(x is a for a in self.args):
            return _Kept(x)          # an argument outside the graph: kept as it is (the same object), not rerun
        return i

    def unpack(self, i):
        if isinstance(i, _Kept):
            return i.tensor
        task = current_task()
        if i not in self.recomputed:
            if task is not None and self.task == task.id:
                # one backward reruns the function once; a second unpack of a value it
                # handed out already is refused, as torch refuses it
                raise CheckpointError(
                    "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. "
                    "If you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise "
                    "please open an issue with details on your use case.")
            self.recompute()
            self.task = task.id if task is not None else None
        return self.recomputed.pop(i)

    def recompute(self):
        got = []

        def pack(x):
            got.append(x.detach())
            return None

        def unpack(_):
            raise CheckpointError("torch.utils.checkpoint: the recomputation of a checkpointed function unpacked a "
                                  "saved tensor during its forward")

        args = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in self.args]
        _, recompute_ctx = self.context_fn()
        with _restored_rng(self.rng_state), enable_grad(), recompute_ctx, saved_tensors_hooks(pack, unpack):
            self.function(*args, **self.kwargs)
        # as torch with early stop: a rerun that saves more than the first run is cut to its length
        if self.check and len(got) < len(self.metas):
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(self.metas)}\nNumber of tensors saved "
                f"during recomputation: {len(got)}.")
        if self.check:
            bad = [(k, m, (tuple(x.shape), x.dtype)) for k, (m, x) in enumerate(zip(self.metas, got))
                   if m != (tuple(x.shape), x.dtype)]
            if bad:
                raise CheckpointError(
                    "torch.utils.checkpoint: Recomputed values for the following tensors have different metadata "
                    "than during the forward pass.\n" + "".join(
                        f"tensor at position {k}:\nsaved metadata: {{'shape': {list(m[0])}, 'dtype': {m[1]}}}\n"
                        f"recomputed metadata: {{'shape': {list(r[0])}, 'dtype': {r[1]}}}\n" for k, m, r in bad))
        for i, x in enumerate(got[:len(self.metas)]):
            self.recomputed[i] = x


def _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, args, kwargs):
    frame = _Frame(function, args, kwargs, _rng_state(preserve_rng_state), context_fn,
                   determinism_check == "default")
    forward_ctx, _ = context_fn()
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_ctx:
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """torch.utils.checkpoint.checkpoint_sequential: `functions` (a Sequential or a list of
    modules/functions) run in `segments` chunks, each checkpointed but the last."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
                      "explicitly. In version 2.9 we will raise an exception if use_reentrant is not passed. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the differences between "
                      "the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))

    def run_function(start, end, functions):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    functions = list(functions)
    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1, functions)(input)
