"""explain(fn, *args): every stage of compiling fn for these arguments, each under a
header naming it: traced IR, IR after each pass, backward IR, the partition (saved vs
recomputed) and the generated source; for a scalar output, also the joint
forward+backward program that calls run once a backward has followed each of the last
few. With `dot=` a folder, the forward and backward graphs are also written there as
Graphviz DOT. `backend="triton"` (the default for a function compiled with that
backend) shows the Triton source of every kernel and the launcher's steps."""
import os
import sys

from .compile import CompiledFunction, build, speculative_program, _render


def explain(fn, *args, dot=None, file=None, backend=None, **kwargs):
    file = file if file is not None else sys.stdout
    if isinstance(fn, CompiledFunction):
        name, target = fn.__name__, fn._fn
        backend = backend or ("triton" if fn.backend == "triton" else "numpy")
    else:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        target = fn
    p = build(target, args, kwargs, name, backend or "numpy")
    if p.spec_ok:
        speculative_program(p)          # what calls run once their backward follows each of them
    out = []
    for header, text in p.stages:
        out.append(f"==== {header} ====\n{_render(text).rstrip()}\n")
    for stem, run in (("forward", p.fwd_fn), ("backward", p.bwd_fn)):
        if getattr(run, "program", None) is not None:
            out.append(f"==== Triton launcher ({stem}) ====\n{run.program.plan}\n")
    if dot is not None:
        os.makedirs(dot, exist_ok=True)
        graphs = [("forward", p.fwd_run), ("backward", p.bwd_run)]
        for stem, g in graphs:
            if g is not None:
                path = os.path.join(dot, f"{stem}.dot")
                with open(path, "w") as f:
                    f.write(g.to_dot())
                out.append(f"==== DOT written ====\n{path}\n")
    text = "\n".join(out)
    print(text, file=file)
    return text
