"""torch.nn.utils.stateless / torch.func.functional_call: call a module with some of its
parameters and buffers replaced by the given tensors, for the call alone (MAML's inner steps,
hypernetworks, gradients with respect to a dict of weights)."""
import contextlib
import warnings

from ...tensor import Tensor
from ..modules.module import Module

_MISSING = object()


def _swap_tensor(module, name, tensor):
    """Put `tensor` at module.<name> (a parameter, a buffer or a plain attribute) and return
    what was there (_MISSING where nothing was; `tensor` _MISSING deletes it)."""
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of torch.Tensor")
    if "." in name:
        raise KeyError('tensor name can\'t contain "."')
    if name == "":
        raise KeyError('tensor name can\'t be empty string ""')
    for table in (module._parameters, module._buffers):
        if name in table:
            orig = table[name]
            if tensor is _MISSING:
                del table[name]
            else:
                table[name] = tensor
            return orig
    orig = getattr(module, name, _MISSING)
    if orig is not _MISSING and orig is not None and not isinstance(orig, Tensor):
        raise TypeError(f"attribute `{name}`: {orig} is not an instance of torch.Tensor")
    if tensor is not _MISSING:
        setattr(module, name, tensor)
    elif orig is not _MISSING:
        delattr(module, name)
    return orig


def _swap(module, name, tensor):
    prefix, _, attr = name.rpartition(".")
    return _swap_tensor(module.get_submodule(prefix) if prefix else module, attr, tensor)


def _swap_all(module, named):
    done = {}
    try:
        for name, t in named.items():
            done[name] = _swap(module, name, t)
    except Exception:
        for name, t in done.items():
            _swap(module, name, t)
        raise
    return done


def _named_tensors(module):
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return named


def _untie(module, given):
    """torch's: a value given for one of tied tensors (one Parameter under two names) goes to
    every name it has; different values for names of one tensor are an error."""
    names_of = {}
    for name, t in _named_tensors(module).items():
        names_of.setdefault(id(t), set()).add(name)
    tied = {n: names for names in names_of.values() if len(names) > 1 for n in names}
    out = dict(given)
    for name in [n for n in given if n in tied]:
        names = tied[name]
        if len({id(given[n]) for n in names if n in given}) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(n for n in names if n in given)}, "
                             f"which are tied. Consider using tie_weights=False")
        for n in names:
            out.setdefault(n, given[name])
    return out


@contextlib.contextmanager
def _reparametrize_module(module, parameters_and_buffers, tie_weights=False, strict=False):
    given = _untie(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = set(_named_tensors(module))
        missing, unexpected = sorted(valid - set(given)), sorted(set(given) - valid)
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError(f"Error(s) in reparametrizing for {module._get_name()}:\n\t" + "\n\t".join(msgs))
    orig = {}
    try:
        orig = _swap_all(module, given)
        yield
    finally:
        new = _swap_all(module, orig)
        # a module that assigned to its own parameter or buffer during the call (self.foo = self.foo + 1):
        # the new value goes to the caller's dict, as torch's
        parameters_and_buffers.update({k: new[k] for k in parameters_and_buffers if k in new})


def _functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    if not isinstance(module, Module):
        raise TypeError(f"{module} is not an instance of torch.nn.Module")
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """`module(*args, **kwargs)` with the tensors of `parameters_and_buffers` (names as
    `state_dict`'s) in place of the module's, for this call alone."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed in a "
                  "future version of PyTorch. Please use `torch.func.functional_call` instead which is a drop-in "
                  "replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
