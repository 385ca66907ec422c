"""Grad mode, per thread: no_grad, enable_grad, set_grad_enabled, inference_mode.

Each is a context manager and a decorator, like torch's.
"""
import functools
import inspect
import sys
import warnings
import threading


class _ModeState(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.inference = False
        # set by the engine while it runs a backward that frees the graph's saved values
        # after (retain_graph=False): a compiled backward may then write over them
        self.freeing_saved = False
        # how many times inference_mode was entered (compile: a trace that entered it falls back)
        self.inference_entered = 0
        # how many times grad mode was turned on from off (compile: a trace called under no_grad
        # that turns it on falls back)
        self.grad_entered = 0


STATE = _ModeState()


def is_grad_enabled():
    return STATE.grad_enabled


def is_inference_mode_enabled():
    return STATE.inference


class _DecoratorContextManager:
    """Base for grad-mode contexts: `with mode():` and `@mode()` (and bare `@mode`)."""

    def __new__(cls, orig_func=None, *args, **kwargs):
        if orig_func is None or not callable(orig_func) or cls is set_grad_enabled:
            return super().__new__(cls)
        return cls()(orig_func)      # bare decorator: @no_grad

    def __call__(self, func):
        if inspect.isclass(func):
            warnings.warn("Decorating classes is deprecated and will be disabled in future versions. You should only "
                          "decorate functions or methods. To preserve the current behavior of class decoration, you "
                          "can directly decorate the `__init__` method and nothing else.", FutureWarning, stacklevel=2)
            cls_ = func
            func = lambda *args, **kwargs: cls_(*args, **kwargs)      # noqa: E731 (torch's behaviour)
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def gen_wrapper(*args, **kwargs):
                # as torch's _wrap_generator: every step of the generator, send, throw and
                # close alike, runs under this mode; the caller's mode is kept between steps
                gen = func(*args, **kwargs)
                try:
                    with self.clone():
                        response = gen.send(None)
                    while True:
                        try:
                            request = yield response
                        except GeneratorExit:
                            with self.clone():
                                gen.close()
                            raise
                        except BaseException:
                            with self.clone():
                                response = gen.throw(*sys.exc_info())
                        else:
                            with self.clone():
                                response = gen.send(request)
                except StopIteration as e:
                    return e.value
            return gen_wrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_DecoratorContextManager):
    def __init__(self, orig_func=None):
        self.prev = False

    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev


class enable_grad(_DecoratorContextManager):
    def __init__(self, orig_func=None):
        self.prev = False

    def __enter__(self):
        self.prev = STATE.grad_enabled
        if not self.prev:
            STATE.grad_entered += 1
        STATE.grad_enabled = True

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev


class set_grad_enabled(_DecoratorContextManager):
    """Sets grad mode at once (as a function call) and restores it on exit (as a context)."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, not {type(mode).__name__}")
        self.prev = STATE.grad_enabled
        self.mode = mode
        if mode and not self.prev:
            STATE.grad_entered += 1
        STATE.grad_enabled = mode

    def __call__(self, func):
        STATE.grad_enabled = self.prev
        return super().__call__(func)

    def __enter__(self):
        if self.mode and not STATE.grad_enabled:
            STATE.grad_entered += 1
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """Like no_grad; tensors made inside are inference tensors that can't enter autograd later."""

    def __init__(self, mode=True):
        if not isinstance(mode, bool):     # bare decorator passes the function here
            mode = True
        self.mode = mode
        self.prev = None

    def __enter__(self):
        self.prev = (STATE.grad_enabled, STATE.inference)
        # as torch's InferenceMode guard: grad mode is the opposite of inference mode
        STATE.grad_enabled = not self.mode
        STATE.inference = self.mode
        STATE.inference_entered += 1

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self.prev

    def clone(self):
        return self.__class__(self.mode)
