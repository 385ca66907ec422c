"""explain(fn, *args): what compiling fn for these arguments did, stage by stage.

It prints a summary first: the ops of each stage, what each pass changed, the bytes the
forward saves for the backward and the fused groups of the generated code. Then each
stage under a header naming it (traced IR, IR after each pass, backward IR, the
partition into saved and recomputed values, generated source; for a scalar output the
joint forward+backward program that calls run once a backward follows each of them),
where a pass left its input unchanged only its header says so, and where it changed it
the lines it removed and added; `verbose=True` prints every stage in full, the joint
program too. With `dot=` a folder, the forward and backward graphs are also
written there as Graphviz DOT. `backend="triton"` (the default for a function compiled
with that backend) shows the Triton source of every kernel and the launcher's steps, and per
program the bytes each kernel moves, the program's minimum (inputs read once, outputs written
once) and their ratio, in the summary and in a section of its own; `arch=90` (or 80, ...)
also compiles each kernel with the real Triton compiler for that CUDA target (no GPU needed)
and shows its registers and spilled bytes."""
import difflib
import os
import sys

from .compile import CompiledFunction, build, speculative_program, _render


def _ops(g):
    return sum(1 for n in g.nx if g.nx.nodes[n]["op"] not in ("input", "proj"))


def _groups(g):
    return len({a["group"] for a in g.nx.nodes.values() if a.get("group") is not None})


def _family(header):
    for fam in ("forward", "backward", "joint"):
        if header.startswith(fam) or f" {fam}" in header.split("(")[0]:
            return fam
    return "forward" if header == "traced IR" else header


def summary(p):
    """The lines of explain's summary for program p (for a Triton program, the bytes its
    kernels move against its minimum)."""
    lines = []
    last = {}
    for header, obj in p.stages:
        if not hasattr(obj, "nx"):
            continue
        fam = _family(header)
        n = _ops(obj)
        prev = last.get(fam)
        if prev is None:
            lines.append(f"{header}: {n} ops")
        elif n != prev:
            lines.append(f"  {header}: {prev} -> {n} ops")
        last[fam] = n
    if getattr(p, "spec_ok", False):
        lines.append("once a backward follows each call, calls run one joint forward+backward program "
                     "(verbose=True shows it)")
    if getattr(p, "bwd_ir", None) is not None:
        part = next((o for h, o in p.stages if h == "partition"), None)
        if part is not None:
            lines.append(f"saved for the backward: {part.saved_bytes} bytes in {len(part.saved)} values "
                         f"({len(part.recomputed)} recomputed; saving everything would take {part.naive_bytes})")
    for stem, g in (("forward", p.fwd_run), ("backward", p.bwd_run)):
        if g is not None:
            lines.append(f"{stem} program: {_ops(g)} ops, {_groups(g)} fused groups")
    for stem, run in (("forward", p.fwd_fn), ("backward", p.bwd_fn)):
        prog = getattr(run, "program", None)
        if prog is not None:
            from .codegen.triton_traffic import traffic  # deferred: import tracegrad does not load the Triton backend
            t = traffic(prog)
            lines.append(f"{stem} Triton kernels: {len(prog.kernels)}, moving {t.moved:,} bytes against a "
                         f"minimum of {t.least:,} ({t.ratio:.2f}x)")
    return lines


def explain(fn, *args, dot=None, file=None, backend=None, verbose=False, arch=None, **kwargs):
    file = file if file is not None else sys.stdout
    if isinstance(fn, CompiledFunction):
        name, target = fn.__name__, fn._fn
        backend = backend or ("triton" if fn.backend == "triton" else "numpy")
    else:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        target = fn
    p = build(target, args, kwargs, name, backend or "numpy", keep_stages=True)
    if p.spec_ok and verbose:
        speculative_program(p)          # what calls run once their backward follows each of them
    out = ["==== summary ====\n" + "\n".join(summary(p)) + "\n"]
    shown = {}
    for header, obj in p.stages:
        text = _render(obj).rstrip()
        fam = _family(header) if hasattr(obj, "nx") else None
        lines = text.splitlines()[1:]                 # the listing without its def line
        before = shown.get(fam)
        if fam is not None:
            shown[fam] = lines
        if verbose or before is None:
            out.append(f"==== {header} ====\n{text}\n")
        elif before == lines:
            out.append(f"==== {header} (unchanged) ====")
        elif " after " in header:
            # a pass: the lines it removed and added
            diff = [d for d in difflib.ndiff(before, lines) if d[:1] in "+-"]
            out.append(f"==== {header} (changed lines) ====\n" + "\n".join(diff) + "\n")
        else:
            out.append(f"==== {header} ====\n{text}\n")
    for stem, run in (("forward", p.fwd_fn), ("backward", p.bwd_fn)):
        if getattr(run, "program", None) is not None:
            out.append(f"==== Triton launcher ({stem}) ====\n{run.program.plan}\n")
            # deferred: import tracegrad does not load the Triton backend
            from .codegen.triton_traffic import report_lines
            lines = report_lines(run.program, arch=arch, workers=1)
            out.append(f"==== Triton traffic ({stem}) ====\n" + "\n".join(lines) + "\n")
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
