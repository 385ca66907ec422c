"""More state a compiled function reads, changed between calls: each case recompiles (or runs
eagerly) rather than return the first trace's result. Compared, at every step, with the eager
function, with torch.compile's result and with torch's eager one."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def same(a, b, msg):
    """Equal values, dtypes and signs of zero."""
    assert a.dtype == b.dtype, (msg, a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b, err_msg=msg)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=msg + " (signs)")


def scenario(make, steps=3, torch_compiled=True, grads=False):
    """make(lib) -> (fn, mutate): fn(x) reads some state, mutate(i) changes it. For tracegrad
    (compiled) and torch (torch.compile), the compiled result (and with `grads`, the gradient
    of its sum) equals the eager one at each step; and tracegrad's equals torch's."""
    results = {}
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager") if torch_compiled else f)):
        fn, mutate = make(lib)
        cf = comp(fn)
        for i in range(steps):
            if i:
                mutate(i)
            xs = [lib.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=grads) for _ in range(2)]
            got, want = cf(xs[0]), fn(xs[1])
            outs = [got.detach().numpy()]
            same(outs[0], want.detach().numpy(), f"{lib.__name__}, step {i}")
            if grads:
                got.sum().backward()
                want.sum().backward()
                outs.append(xs[0].grad.numpy())
                same(outs[1], xs[1].grad.numpy(), f"{lib.__name__}, gradient, step {i}")
            results.setdefault(i, []).append(outs)
    for i, (a, b) in results.items():
        for x, y in zip(a, b):
            same(x, y, f"tracegrad vs torch, step {i}")


# -- class attributes a class inherits ----------------------------------------------------------

@pytest.mark.parametrize("how", ["Sub.k", "Sub.k set on Sub", "cls.k of a classmethod", "Sub.cfg item",
                                 "inherited classmethod replaced"])
def test_a_class_attribute_read_through_a_subclass(how):
    """`Sub.k` (or `cls.k` in a classmethod called on Sub) where Base defines k: a new value
    on Base, a k that Sub defines later, an item of a dict on Base, the classmethod itself
    replaced on Base. The guards looked for the name in Sub's own __dict__ alone."""
    def make(lib):
        class Base:
            k = 2.0
            cfg = {"a": 2.0}

            @classmethod
            def scaled(cls, x):
                return x * cls.k

        class Sub(Base):
            pass

        fn = {"Sub.k": lambda x: x * Sub.k, "Sub.k set on Sub": lambda x: x * Sub.k,
              "cls.k of a classmethod": Sub.scaled, "Sub.cfg item": lambda x: x * Sub.cfg["a"],
              "inherited classmethod replaced": lambda x: Sub.scaled(x) + 1}[how]

        def mutate(i):
            if how == "Sub.k set on Sub":
                Sub.k = 3.0 + i
            elif how == "Sub.cfg item":
                Base.cfg["a"] = 3.0 + i
            elif how == "inherited classmethod replaced":
                Base.scaled = classmethod(lambda cls, x: x * (5.0 + i))
            else:
                Base.k = 3.0 + i
        return fn, mutate
    # torch.compile (2.13) keeps its program when the classmethod is replaced on the base:
    # compared with torch's eager result there
    scenario(make, grads=True, torch_compiled=how != "inherited classmethod replaced")
