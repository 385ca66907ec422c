"""torch.jit as scripts use it, over @tracegrad.compile: `trace(model, example)` and `script(model)`
give the compiled callable (tracegrad's trace already is what TorchScript's tracer records, with
guards that recompile where torch's traced graph would silently keep the first path); the
decorators that steer TorchScript (`ignore`, `unused`, `export`) leave functions as they are;
`fork`/`wait` run at once. Serialization (`save`, `load`) is not there: a TorchScript file runs
without Python, a tracegrad program does not."""
import typing

from .compile import compile as _compile

__all__ = ["trace", "script", "is_scripting", "is_tracing", "ignore", "unused", "export", "annotate", "Final",
           "fork", "wait", "save", "load", "freeze", "optimize_for_inference"]

Final = typing.Final


def _compiled(obj):
    return _compile(obj)


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None, example_kwarg_inputs=None,
          _store_inputs=True):
    """func compiled, called once on the example inputs as torch's tracer calls it (their errors
    raise here), returned to be called on other inputs."""
    if example_inputs is None and example_kwarg_inputs is None:
        raise RuntimeError("example_kwarg_inputs or example_inputs must be provided")
    compiled = _compiled(func)
    if example_kwarg_inputs is not None:
        compiled(**example_kwarg_inputs)
    else:
        compiled(*(example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)))
    return compiled


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """obj compiled (a function or a module): its Python control flow is traced per call, under guards."""
    return _compiled(obj)


def is_scripting():
    return False


def is_tracing():
    return False


def ignore(drop=False, **kwargs):
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def annotate(the_type, the_value):
    return the_value


class _Done:
    """torch.jit.Future of a call already made."""

    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value


def fork(func, *args, **kwargs):
    return _Done(func(*args, **kwargs))


def wait(future):
    return future.wait()


def _no_serialization(name):
    raise NotImplementedError(f"torch.jit.{name}: TorchScript files are not supported by tracegrad; save the "
                              f"model's state_dict with tracegrad.save and rebuild the model to load it")


def save(m, f, _extra_files=None):
    _no_serialization("save")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    _no_serialization("load")


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod
