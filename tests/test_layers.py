"""The package's layering as a checked contract (issue 16).

`lint-imports` checks the import-linter contracts in pyproject.toml: ir/ imports nothing of
tracegrad outside itself; passes/ and codegen/ import no tensor, autograd, front end or
compiler; the op table imports none of them nor the public ops; nothing in ops/ imports the
autograd engine; the tensor never imports the compiler; the core is layered (passes and
codegen over the op table over ir/). grimp, which import-linter builds its graph with,
counts imports inside functions too; the checks below read that same graph, and the source
itself, to make sure of it. An import inside a function stays only for a stated reason that
the last test checks.
"""
import ast
import os
import re
import subprocess
import sys

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


# A function-level import must say why it is not at the top of its module, in a comment on
# its line (or the comment lines directly above it) that starts with one of these tags:
#   lazy:      an optional dependency (torch, triton, ...) or a heavy module that
#              `import tracegrad` does not load;
#   deferred:  a tracegrad module that `import tracegrad` does not load;
#   cycle:     a module that is not yet fully imported when this one finishes loading (it
#              imports this one, or a package `__init__` imports this one before it is done).
REASON = re.compile(r"#.*\b(lazy|deferred|cycle):\s*\S.{8,}")


def _function_level_imports():
    """(path, line, module this file is, imported modules, the reason's tag or None) for every
    import statement inside a function or method body under tracegrad/."""
    found = []
    for d, _, files in os.walk(PKG):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            lines = open(path, encoding="utf-8").read().splitlines()
            parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            is_pkg = parts[-1] == "__init__"
            mod = ".".join(parts[:-1] if is_pkg else parts)

            def reason(node):
                text = lines[node.lineno - 1:node.end_lineno]
                i = node.lineno - 2
                while i >= 0 and lines[i].lstrip().startswith("#"):
                    text.append(lines[i])
                    i -= 1
                tags = [m.group(1) for m in map(REASON.search, text) if m]
                return tags[0] if tags else None

            def targets(node):
                """The modules the statement imports: `from p import m` imports module p.m
                where p/m is a module of tracegrad, else p."""
                if isinstance(node, ast.Import):
                    return [a.name for a in node.names]
                base = node.module or ""
                if node.level:
                    up = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    up = up[:len(up) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                found = {f"{base}.{a.name}" for a in node.names
                         if base.split(".")[0] == "tracegrad" and _is_module(f"{base}.{a.name}")}
                return sorted(found) if len(found) == len(node.names) else sorted(found | {base})

            def walk(node, in_fn):
                for ch in ast.iter_child_nodes(node):
                    if in_fn and isinstance(ch, (ast.Import, ast.ImportFrom)):
                        found.append((os.path.relpath(path, ROOT), ch.lineno, mod, targets(ch), reason(ch)))
                    walk(ch, in_fn or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
            walk(ast.parse("\n".join(lines)), False)
    return found


def _is_module(name):
    path = os.path.join(ROOT, *name.split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


@pytest.fixture(scope="module")
def import_order():
    """The order in which modules finish loading (python -X importtime prints each module as it
    finishes) in `import tracegrad`, then in imports of the modules that hold a `cycle:` import
    and are not loaded by it; and the modules loaded once `import tracegrad` is done."""
    extra = sorted({m for _, _, m, _, tag in _function_level_imports() if tag == "cycle"})
    # __import__, not importlib.import_module: -X importtime times only imports made through it
    code = "import sys, tracegrad\nprint(*sorted(sys.modules))\nfor m in %r:\n    __import__(m)" % (extra,)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=True)
    names = [ln.rsplit("|", 1)[1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")]
    return {n: i for i, n in enumerate(names)}, set(r.stdout.split())


def test_function_level_imports_say_why(import_order):
    """Every import inside a function gives its reason, and the reason holds: a `lazy:` or
    `deferred:` module is one `import tracegrad` does not load; a `cycle:` module is still being
    loaded (or not yet loaded) when the importing module finishes."""
    done, loaded = import_order
    bad = []
    for path, line, mod, names, tag in _function_level_imports():
        where = f"{path}:{line} ({', '.join(names)})"
        if tag is None:
            bad.append(f"{where}: says not why it is not at the top of its module")
        elif tag in ("lazy", "deferred"):
            early = [n for n in names if n in loaded]
            if early:
                bad.append(f"{where}: says {tag}, but `import tracegrad` loads {early}: move it to the top")
        elif tag == "cycle":
            early = [n for n in names if n in done and mod in done and done[n] < done[mod]]
            if early:
                bad.append(f"{where}: says cycle, but {early} is fully loaded before {mod} is: move it to the top")
    assert not bad, ("imports inside functions: move each to the top of its module, or say why it stays with "
                     "`# lazy: ...`, `# deferred: ...` or `# cycle: ...`:\n" + "\n".join(bad))
