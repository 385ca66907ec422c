"""Reference interpreters for the IR.

They run the op table's kernels (`run_numpy`) or the eager ops (`run_eager`), so they live
in the front end, not in `ir/`, which is a data structure only.

`run_numpy` runs each node's numpy kernel and checks that the kernel's result has the
shape and dtype the graph says (what defines the IR). `run_eager` runs each node through
the eager ops, so with grad mode on the results record their own grad_fn: this is how
a backward graph is differentiated again (create_graph=True).
"""
import numpy as np

from .ir.graph import V
from .tracing import apply, rename_grad_fn


def _resolve(a, env):
    if isinstance(a, V):
        return env[a]
    return a


def walk(graph, args, compute, resolve=_resolve):
    """Each op node of `graph` in order, `compute(n, attrs, resolved args)` giving its value
    (a multi-output op's tuple, read by its proj nodes); the outputs' values. `resolve(x,
    env)` turns an argument into its value."""
    env = dict(zip(graph.inputs, args))
    for n in graph.nodes():
        a = graph[n]
        op = a["op"]
        if op == "input":
            continue
        if op == "proj":
            env[n] = env[a["args"][0]][a["params"]["index"]]
            continue
        env[n] = compute(n, a, [resolve(x, env) for x in a["args"]])
    return [None if o is None else env[o] for o in graph.outputs]


def run_eager(graph, args):
    def compute(n, a, xs):
        prim = a["prim"]
        return prim.eager(*xs, **a["params"]) if prim.eager else apply(prim, tuple(xs), a["params"])
    return walk(graph, args, compute)


def plan_eager(graph):
    """run_eager of `graph` as one generated function of its inputs, each op's eager rule
    (or `apply`) and parameters bound once: what a backward taken again and again with
    create_graph=True runs. Parameters and constants reach the code through a table, never
    as text."""
    table = {"apply": apply, "rename_grad_fn": rename_grad_fn}
    names = {v: f"a{k}" for k, v in enumerate(graph.inputs)}
    lines = []

    def arg(x):
        if isinstance(x, V):
            return names[x]
        table[f"c{len(table)}"] = x
        return f"c{len(table) - 1}"
    for n in graph.nodes():
        a = graph[n]
        if a["op"] == "input":
            continue
        out = names[n] = f"t{len(names)}"
        if a["op"] == "proj":
            lines.append(f"    {out} = {names[a['args'][0]]}[{int(a['params']['index'])}]")
            continue
        prim, k = a["prim"], len(table)
        args = "".join(arg(x) + ", " for x in a["args"])
        table[f"p{k}"] = a["params"]
        if prim.eager:
            table[f"f{k}"] = prim.eager
            lines.append(f"    {out} = f{k}({args}**p{k})")
        else:
            table[f"f{k}"] = prim
            lines.append(f"    {out} = apply(f{k}, ({args}), p{k})")
        if a.get("grad_fn_name"):        # torch's name for the gradient a rule computed
            table[f"n{k}"] = a["grad_fn_name"]
            lines.append(f"    rename_grad_fn({out}, n{k})")
    outs = "".join(("None" if o is None else names[o]) + ", " for o in graph.outputs)
    src = f"def run({''.join(f'a{k}, ' for k in range(len(graph.inputs)))}):\n" + "\n".join(lines) + \
        f"\n    return [{outs}]\n"
    exec(compile(src, "<tracegrad:eager backward>", "exec"), table)
    return table["run"]


def run_numpy(graph, args, check=True):
    def compute(n, a, xs):
        out = a["prim"].impl(*xs, **a["params"])
        if check:
            outs = out if a["prim"].multi else (out,)
            shapes = a["shape"] if a["prim"].multi else [a["shape"]]
            dtypes = a["dtype"] if a["prim"].multi else [a["dtype"]]
            for o, s, d in zip(outs, shapes, dtypes):
                if tuple(np.shape(o)) != tuple(s):
                    raise AssertionError(f"{n} = {a['op']}(...): kernel gave shape {np.shape(o)}, graph says "
                                         f"{tuple(s)}")
                if np.asarray(o).dtype != d.np:
                    raise AssertionError(f"{n} = {a['op']}(...): kernel gave dtype {np.asarray(o).dtype}, graph "
                                         f"says {d}")
        return out
    return walk(graph, args, compute)
