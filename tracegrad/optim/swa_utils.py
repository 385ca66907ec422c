"""torch.optim.swa_utils: stochastic weight averaging and exponential moving averages of a
model's parameters (AveragedModel), the annealed learning rate to the SWA rate (SWALR), and
recomputing BatchNorm statistics for the averaged weights (update_bn)."""
import copy
import itertools
import math

from .. import _dtype as D
from ..creation import tensor
from ..grad_mode import no_grad
from ..nn.modules.module import Module
from ..nn.modules.layers import _BatchNorm
from ..ops import functional as O
from .lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _lerp_all(averaged, current, weight):
    """Each averaged tensor moved toward its current one by `weight` in place (torch's lerp_ for
    floating tensors; for integer ones, diff * weight added, as torch's foreach fallback)."""
    for a, c in zip(averaged, current):
        if a.dtype.is_floating_point:
            a.lerp_(c, float(weight))
        else:
            a.add_((c - a) * float(weight))


def get_ema_multi_avg_fn(decay=0.999):
    """An update of a list of averages in place: ema <- lerp(ema, current, 1 - decay)."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if ema_param_list[0].dtype.is_floating_point:
            _lerp_all(ema_param_list, current_param_list, 1 - decay)
        else:                              # (integers: the float average truncated into them)
            for e, c in zip(ema_param_list, current_param_list):
                e.copy_(e * decay + c * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """An update of a list of averages in place: the running mean over the n models seen so far."""
    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        # (a count tensor's 1 / (n + 1) is a float32 tensor, as torch's: the weight is that value)
        weight = 1 / (num_averaged + 1)
        if averaged_param_list[0].dtype.is_floating_point:
            _lerp_all(averaged_param_list, current_param_list, float(weight))
        else:
            for a, c in zip(averaged_param_list, current_param_list):
                a.add_((c - a) / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """A new average from one tensor: decay * ema + (1 - decay) * current."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """A new average from one tensor: averaged + (current - averaged) / (n + 1)."""
    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers, with use_buffers) are an average of the
    models passed to update_parameters: their running mean by default (SWA), or what avg_fn (one
    tensor at a time, returning the new average) or multi_avg_fn (lists, in place) computes. The
    first update copies the model; n_averaged counts the updates. Without use_buffers the
    buffers are copied from the model at each update."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=D.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged(self, model):
        if self.use_buffers:
            return (list(itertools.chain(self.module.parameters(), self.module.buffers())),
                    list(itertools.chain(model.parameters(), model.buffers())))
        return list(self.parameters()), list(model.parameters())

    def update_parameters(self, model):
        mine, theirs = self._averaged(model)
        current = [p.detach().to(a.device) for a, p in zip(mine, theirs)]
        averages = [a.detach() for a in mine]
        n = int(self.n_averaged.item())
        with no_grad():
            if n == 0:
                for a, c in zip(averages, current):
                    a.copy_(c)
            elif self.avg_fn is not None:
                for a, c in zip(averages, current):
                    a.copy_(self.avg_fn(a, c, self.n_averaged))
            elif self.multi_avg_fn is not None:
                # (grouped by dtype, as torch's foreach groups are)
                for dt in dict.fromkeys(a.dtype for a in averages):
                    pairs = [(a, c) for a, c in zip(averages, current) if a.dtype == dt]
                    self.multi_avg_fn([a for a, _ in pairs], [c for _, c in pairs], self.n_averaged)
            else:
                swa = get_swa_avg_fn()         # (torch's per-tensor form on the CPU)
                for a, c in zip(averages, current):
                    a.copy_(swa(a, c, self.n_averaged))
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged += 1


@no_grad()
def update_bn(loader, model, device=None):
    """One pass over `loader` in train mode to recompute every BatchNorm's running statistics as
    cumulative averages (momentum None), then the momenta and the mode put back. A batch that is
    a list or tuple gives its first element as the input."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate to its swa_lr over anneal_epochs steps (cosine or
    linear), then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for rate, group in zip(_format_param("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = rate
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        """The rate before this step's annealing, recovered from the current one."""
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def _progress(self, step):
        return max(0, min(1, step / max(1, self.anneal_epochs)))

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(self._progress(step - 1))
        alpha = self.anneal_func(self._progress(step))
        return [group["swa_lr"] * alpha + self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha) * (1 - alpha)
                for group in self.optimizer.param_groups]
