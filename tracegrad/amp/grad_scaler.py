"""torch.amp.GradScaler: loss scaling for low-precision gradients. scale(loss) multiplies the
loss by S (so that small float16 gradients do not flush to zero), unscale_/step divide the
gradients by S and skip the step where any is inf or NaN, update() halves S after such a step
and doubles it after growth_interval clean ones."""
import warnings
from collections import defaultdict

from .. import _dtype as D
from .. import cuda
from ..creation import full
from ..grad_mode import no_grad
from ..tensor import Tensor
from ..ops import functional as O

__all__ = ["GradScaler", "OptState"]


class OptState:
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state():
    return {"stage": OptState.READY, "found_inf": None}


_NO_SCALE = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                              UserWarning, stacklevel=2)
                self._enabled = False
        if self._enabled:
            if not growth_factor > 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if not backoff_factor < 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_fresh_state)

    def _lazy_init(self):
        self._scale = full((), float(self._init_scale), dtype=D.float32)
        self._growth_tracker = full((), self._init_growth_tracker, dtype=D.int32)

    def _check_scale(self, funcname):
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + _NO_SCALE)

    def scale(self, outputs):
        """outputs (a tensor, or an iterable of them, nested) times the scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._lazy_init()
        if isinstance(outputs, Tensor):
            return outputs * self._scale.to(outputs.device)

        def apply(v):
            if isinstance(v, Tensor):
                return v * self._scale.to(v.device)
            if isinstance(v, (list, tuple)) or hasattr(v, "__iter__") and not isinstance(v, (str, bytes, dict)):
                out = [apply(x) for x in v]
                return type(v)(out) if isinstance(v, (list, tuple)) else iter(out)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply(outputs)

    def _unscale_grads(self, optimizer, inv_scale, allow_fp16):
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if not isinstance(p, Tensor):
                        raise AssertionError(f"expected param to be torch.Tensor, got {type(p).__name__}")
                    if p.grad is None:
                        continue
                    if not allow_fp16 and p.grad.dtype is D.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g = p.grad
                    found = found or not bool(O.isfinite(g).all())
                    g.mul_(inv_scale.to(g.dtype) if g.dtype is not D.float32 else inv_scale)
        return full((), 1.0 if found else 0.0, dtype=D.float32)

    def unscale_(self, optimizer):
        """The optimizer's gradients divided by the scale, in place; whether any is inf or NaN is
        kept for step() and update()."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] == OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()
        state["found_inf"] = self._unscale_grads(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() with the gradients unscaled, skipped where any was inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] == OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == OptState.READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = None
        if not float(state["found_inf"].item()):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale=None):
        """The next scale: new_scale if given, else halved (backoff) after a skipped step, grown
        after growth_interval steps in a row without inf or NaN."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise AssertionError("new_scale should be a single-element tensor.")
                if new_scale.requires_grad:
                    raise AssertionError("new_scale should not require grad.")
                self._scale.copy_(new_scale)
            else:
                self._scale.fill_(new_scale)
        else:
            founds = [s["found_inf"] for s in self._per_optimizer_states.values() if s["found_inf"] is not None]
            if not founds:
                raise AssertionError("No inf checks were recorded prior to update.")
            if sum(float(f.item()) for f in founds):
                self._scale.mul_(self._backoff_factor)
                self._growth_tracker.fill_(0)
            else:
                tracker = int(self._growth_tracker.item()) + 1
                if tracker == self._growth_interval:
                    self._scale.mul_(self._growth_factor)
                    tracker = 0
                self._growth_tracker.fill_(tracker)
        self._per_optimizer_states = defaultdict(_fresh_state)

    def get_scale(self):
        if not self._enabled:
            return 1.0
        return float(self._init_scale) if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def is_enabled(self):
        return self._enabled

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled instance "
                               "of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])
