"""numpy code generation: an IR graph becomes a readable Python function.

Each op calls its numpy kernel from the op table (`k_<op>`); parameters that are not
plain literals live in the function's globals. The source is kept on the function
(`fn.source`) for inspection.
"""
import itertools
import math

import numpy as np

from ..ir.graph import V, refs, type_str

_ids = itertools.count()


def _literal(x, env):
    if isinstance(x, V):
        return str(x)
    if x is None or isinstance(x, (bool, int, str)):
        return repr(x)
    if isinstance(x, float) and math.isfinite(x):
        return repr(x)
    name = f"CONST_{len(env)}"           # upper case: never a value name (t3, s1, c2...)
    env[name] = x
    return name


def generate(graph, name=None):
    """Python source for `graph` and the globals it needs."""
    name = name or f"{graph.name}_{next(_ids)}"
    env = {"np": np}
    params = ", ".join(graph.inputs)
    lines = [f"def {name}({params}):"]
    # free each value after its last use, so big temporaries go back to the allocator
    # (and are reused without page faults) instead of living to the end of the call
    order = graph.nodes()
    last_use = {}
    for i, n in enumerate(order):
        for r in refs(graph[n]["args"]):
            last_use[r] = i
    keep = set(o for o in graph.outputs if o is not None)
    dying = {}
    for v, i in last_use.items():
        if v not in keep:
            dying.setdefault(i, []).append(v)
    for i, n in enumerate(order):
        a = graph[n]
        op = a["op"]
        if op == "input":
            continue
        if op == "proj":
            lines.append(f"    {n} = {a['args'][0]}[{a['params']['index']}]")
            if i in dying:
                lines.append(f"    del {', '.join(sorted(set(dying[i])))}")
            continue
        k = f"k_{op}"
        env[k] = a["prim"].impl
        args = [_literal(x, env) for x in a["args"]]
        for key, val in a["params"].items():
            args.append(f"{key}={_literal(val, env)}")
        comment = type_str(a["shape"], a["dtype"])
        if a.get("source"):
            comment += f"  {a['source']}"
        lines.append(f"    {n} = {k}({', '.join(args)})  # {comment}")
        if i in dying:
            lines.append(f"    del {', '.join(sorted(set(dying[i])))}")
    outs = ", ".join(str(o) if o is not None else "None" for o in graph.outputs)
    lines.append(f"    return ({outs}{',' if len(graph.outputs) == 1 else ''})")
    return "\n".join(lines) + "\n", env


def compile_graph(graph, name=None):
    """exec the generated source; the function carries `.source`."""
    src, env = generate(graph, name)
    code = compile(src, f"<tracegrad:{graph.name}>", "exec")
    exec(code, env)
    fn = [v for k, v in env.items() if callable(v) and getattr(v, "__code__", None) is not None
          and v.__code__.co_filename.startswith("<tracegrad:")][-1]
    fn.source = src
    return fn


def interpret_graph(graph):
    """A runner for graphs too big to be worth generating source for: one closure call
    per op, values freed at last use (same contract as compile_graph's function)."""
    order = graph.nodes()
    slot = {n: i for i, n in enumerate(order)}
    last_use = {}
    for i, n in enumerate(order):
        for r in refs(graph[n]["args"]):
            last_use[r] = i
    keep = set(o for o in graph.outputs if o is not None)
    steps = []
    for i, n in enumerate(order):
        a = graph[n]
        if a["op"] == "input":
            continue
        args = tuple((True, slot[x]) if isinstance(x, V) else (False, x) for x in a["args"])
        free = tuple(slot[v] for v in refs(a["args"]) if last_use.get(v) == i and v not in keep)
        if a["op"] == "proj":
            steps.append((None, args, a["params"]["index"], slot[n], free))
        else:
            steps.append((a["prim"].impl, args, a["params"], slot[n], free))
    in_slots = [slot[n] for n in graph.inputs]
    out_slots = [None if o is None else slot[o] for o in graph.outputs]
    size = len(order)

    def run(*inputs):
        env = [None] * size
        for s, v in zip(in_slots, inputs):
            env[s] = v
        for impl, args, params, out, free in steps:
            vals = [env[x] if is_ref else x for is_ref, x in args]
            env[out] = vals[0][params] if impl is None else impl(*vals, **params)
            for f in free:
                env[f] = None
        return tuple(None if s is None else env[s] for s in out_slots)
    run.source = None
    return run
