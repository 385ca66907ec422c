"""torch.distributed.nn.functional: out-of-place collectives with derivatives (torch's rules)."""
from ... import distributed as dist
from ...autograd.function import Function


class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, group, tensor):
        ctx.group = group
        ctx.op = op
        tensor = tensor.clone()
        dist.all_reduce(tensor, op=op, group=group)
        return tensor

    @staticmethod
    def backward(ctx, grad_output):
        # torch's rule: the gradient of every rank's input is the all-reduce of the output gradients
        return (None, None) + (_AllReduce.apply(ctx.op, ctx.group, grad_output),)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, group, tensor):
        ctx.src = src
        ctx.group = group
        ctx.rank = dist.get_rank(group)
        tensor = tensor.clone()
        dist.broadcast(tensor, src, group=group)
        return tensor

    @staticmethod
    def backward(ctx, grad_output):
        # the sum of every rank's output gradient flows to the source; the others' inputs had no effect
        gx = _Reduce.apply(ctx.src, dist.ReduceOp.SUM, ctx.group, grad_output)
        if ctx.src != ctx.rank:
            gx = gx * 0
        return (None, None, gx)


class _Reduce(Function):
    @staticmethod
    def forward(ctx, src, op, group, tensor):
        ctx.src = src
        ctx.group = group
        tensor = tensor.clone()
        dist.reduce(tensor, src, op=op, group=group)
        return tensor

    @staticmethod
    def backward(ctx, grad_output):
        return (None, None, None) + (_Broadcast.apply(ctx.src, ctx.group, grad_output),)


def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None):
    """The reduction of `tensor` over all ranks, as a new tensor; its gradient is the
    all-reduce (with the same op) of the output gradients, as torch's."""
    return _AllReduce.apply(op, group, tensor)


def broadcast(tensor, src, group=None):
    """`tensor` of rank `src` on every rank, as a new tensor; the gradient reaching `src` is
    the sum of every rank's output gradient (the others get zeros)."""
    return _Broadcast.apply(src, group, tensor)


def reduce(tensor, dst, op=dist.ReduceOp.SUM, group=None):
    """The reduction over all ranks on rank `dst` (the others keep their input), as a new
    tensor; every rank's input gets dst's output gradient."""
    return _Reduce.apply(dst, op, group, tensor)
