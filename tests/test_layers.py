"""The package's layering as a checked contract (issue 16).

`lint-imports` checks the import-linter contracts in pyproject.toml: ir/ imports nothing of
tracegrad outside itself; passes/ and codegen/ import no tensor, autograd, front end or
compiler; the op table imports none of them nor the public ops; nothing in ops/ imports the
autograd engine; the tensor never imports the compiler; the core is layered (passes and
codegen over the op table over ir/). grimp, which import-linter builds its graph with,
counts imports inside functions too; the checks below read that same graph, and the source
itself, to make sure of it.
"""
import ast
import os

import grimp                    # import-linter's graph builder (import-linter is in the test extra)
import networkx as nx
import pytest
from importlinter.cli import lint_imports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "tracegrad")

# What passes/, codegen/ and the op table may never import, at module level or inside a function.
FRONT_END = ("tensor", "creation", "grad_mode", "autograd", "nn", "optim", "cuda", "compile", "tracing",
             "interpret", "decompositions", "functionalize", "autodiff", "runtime", "_tensor_methods",
             "ops.functional", "ops.math_functional")
# The op table proper: its entries, rules, lowerings and shape helpers.
TABLE = ("tracegrad.ops.primitives", "tracegrad.ops.math_primitives", "tracegrad.ops.nn_primitives",
         "tracegrad.ops.lowering", "tracegrad.ops.shapes")

# The import cycles left (strongly connected groups of modules, a package's __init__
# importing its own submodules left out): none. A module that must call one above it gets
# it plugged in by that module as it is imported (tensor.Above, tracing.Above, graph.Engine,
# ops.primitives.FrontEnd). The test fails when any cycle appears: never add to this list.
KNOWN_CYCLES = []


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("tracegrad", cache_dir=None)


def test_import_linter_contracts_hold(capsys):
    cwd = os.getcwd()
    os.chdir(ROOT)              # lint-imports reads pyproject.toml from the working directory
    try:
        rc = lint_imports(no_cache=True, no_logo=True)
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert ", 0 broken." in out, out
    assert rc == 0, out


def _imports_in_source():
    """(module, imported tracegrad module, line, inside a function) for every import in the
    package's source, from its syntax tree."""
    found = []
    for d, _, files in os.walk(PKG):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            is_pkg = parts[-1] == "__init__"
            mod = ".".join(parts[:-1] if is_pkg else parts)
            tree = ast.parse(open(path, encoding="utf-8").read())

            def walk(node, in_fn):
                for ch in ast.iter_child_nodes(node):
                    fn = in_fn or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                    if isinstance(ch, ast.Import):
                        found.extend((mod, a.name, ch.lineno, in_fn) for a in ch.names
                                     if a.name.split(".")[0] == "tracegrad")
                    elif isinstance(ch, ast.ImportFrom):
                        base = ch.module or ""
                        if ch.level:
                            up = mod.split(".") if is_pkg else mod.split(".")[:-1]
                            up = up[:len(up) - (ch.level - 1)]
                            base = ".".join(up + ([ch.module] if ch.module else []))
                        if base.split(".")[0] == "tracegrad":
                            found.extend((mod, f"{base}.{a.name}", ch.lineno, in_fn) for a in ch.names)
                    walk(ch, fn)
            walk(tree, False)
    return found


def _under(name, prefix):
    return name == prefix or name.startswith(prefix + ".")


def test_core_imports_no_front_end_even_inside_functions():
    bad = []
    for mod, imported, line, in_fn in _imports_in_source():
        where = f"{mod}:{line} imports {imported}" + (" inside a function" if in_fn else "")
        if _under(mod, "tracegrad.ir") and not _under(imported, "tracegrad.ir"):
            bad.append(where)
        if _under(mod, "tracegrad.passes") or _under(mod, "tracegrad.codegen"):
            if any(_under(imported, f"tracegrad.{m}") for m in FRONT_END):
                bad.append(where)
        if _under(mod, "tracegrad.ops") and _under(imported, "tracegrad.autograd"):
            bad.append(where)
        if mod in TABLE and any(_under(imported, f"tracegrad.{m}") for m in FRONT_END):
            bad.append(where)
        if mod in ("tracegrad.tensor", "tracegrad._tensor_methods") and any(
                _under(imported, f"tracegrad.{m}") for m in ("compile", "passes", "codegen", "runtime")):
            bad.append(where)
    assert not bad, "imports across the layers:\n" + "\n".join(bad)


def test_grimp_counts_imports_inside_functions(graph):
    """The contracts see function-level imports: every one the source holds is in grimp's graph
    (so a back edge hidden in a function still breaks them)."""
    mods = graph.modules
    missing = []
    for mod, imported, line, in_fn in _imports_in_source():
        if not in_fn:
            continue
        target = imported if imported in mods else imported.rsplit(".", 1)[0]
        if target != mod and target not in graph.find_modules_directly_imported_by(mod):
            missing.append(f"{mod}:{line} -> {target}")
    assert not missing, missing


def _cycles(graph):
    mods = graph.modules
    packages = {m for m in mods if any(o.startswith(m + ".") for o in mods)}
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for m in mods:
        for t in graph.find_modules_directly_imported_by(m):
            if m in packages and t.startswith(m + "."):
                continue            # a package's __init__ re-exporting its own submodules
            g.add_edge(m, t)
    return [set(c) for c in nx.strongly_connected_components(g) if len(c) > 1]


def test_no_new_import_cycles(graph):
    core = ("tracegrad.ir", "tracegrad.passes", "tracegrad.codegen", "tracegrad._dtype") + TABLE
    for c in _cycles(graph):
        assert not any(_under(m, p) for m in c for p in core), f"the compiler core is in an import cycle: {sorted(c)}"
        assert any(c <= known for known in KNOWN_CYCLES), (
            f"a new import cycle among {sorted(c)}: break it (move the import to the layer it belongs to)")


def test_ir_imports_nothing_outside_itself(graph):
    for m in graph.find_children("tracegrad.ir") | {"tracegrad.ir"}:
        outside = {t for t in graph.find_modules_directly_imported_by(m)
                   if t.startswith("tracegrad") and not _under(t, "tracegrad.ir")}
        assert not outside, (m, outside)
