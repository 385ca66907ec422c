"""Random programs compiled with backend="triton", run by Triton's interpreter, float32:
the value, the gradients and a Hessian-vector product (the first derivative compiled again
and differentiated) against torch in float64.

The programs are test_stress.py's (unary, binary, reductions, shape ops over 0-3 dim
inputs). CI runs a fixed set of seeds; TRACEGRAD_TRITON_RANDOM=150 runs seeds 0..149
(`TRACEGRAD_TRITON_RANDOM=150 python -m pytest -q tests/test_triton_random.py`)."""
import os

import numpy as np
import pytest
import torch

# the interpreter's set-up (TRITON_INTERPRET while triton is imported, and for this module's
# tests): test_triton_interpret's, with its module-wide fixture
from test_triton_interpret import triton, triton_interpreter  # noqa: E402,F401


import tracegrad as tg  # noqa: E402
from tracegrad.codegen import triton_gpu  # noqa: E402

from test_stress import _loss, run_program  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def case(seed):
    r = np.random.default_rng(seed)
    shapes = []
    for _ in range(int(r.integers(1, 4))):
        nd = int(r.integers(0, 4))
        shapes.append(tuple(int(s) for s in r.integers(1, 4, nd)))
    return [r.standard_normal(s).astype(np.float32) for s in shapes]


def torch_program(seed):
    """torch's value, gradients and Hessian-vector product (float64), or None where torch
    rejects the program or its value is not finite (test_stress.py checks those)."""
    arrays = case(seed)
    tl = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    try:
        out = _loss(torch, run_program(torch, seed, tl))
    except Exception:
        return None
    if not np.isfinite(out.item()):
        return None
    grads = torch.autograd.grad(out, tl, create_graph=True, allow_unused=True, materialize_grads=True)
    vs = [np.random.default_rng(seed + 1).standard_normal(a.shape) for a in arrays]
    hv_terms = sum((gr * torch.from_numpy(v)).sum() for gr, v in zip(grads, vs))
    hv = torch.autograd.grad(hv_terms, tl, allow_unused=True, materialize_grads=True) \
        if hv_terms.requires_grad else [torch.zeros_like(t) for t in tl]
    return arrays, vs, out, grads, hv


def valid_seeds(n):
    """The first n seeds whose program torch runs to a finite value."""
    out, seed = [], 0
    while len(out) < n:
        if torch_program(seed) is not None:
            out.append(seed)
        seed += 1
    return out


# CI runs a fixed sample that covers reductions with size-1 dims, softmax, norm/maximum/pow
# lowerings, 0-dim outputs, views of a reduction's row value and groupings that used to
# form cycles between kernels; TRACEGRAD_TRITON_RANDOM=150 runs the first 150 valid seeds
CI_SEEDS = [7, 16, 37, 47, 48, 52, 57, 79, 87, 95, 115, 120, 139, 140]
N = int(os.environ.get("TRACEGRAD_TRITON_RANDOM", "0"))
SEEDS = valid_seeds(N) if N else CI_SEEDS


def check_close(got, want, what):
    want = want.detach().numpy()
    got = np.asarray(got.detach().numpy(), dtype=np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    # float32 arithmetic against float64: relative to the result's own scale
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4 * scale, err_msg=what)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program_compiled_for_triton(seed):
    ref = torch_program(seed)
    assert ref is not None, f"seed {seed}: torch rejects the program"
    arrays, vs, tout, tgrads, thv = ref
    f = tg.compile(lambda *xs: _loss(tg, run_program(tg, seed, xs)), backend="triton", fullgraph=True)
    xs = [tg.tensor(a.copy(), requires_grad=True) for a in arrays]
    out = f(*xs)
    assert isinstance(f.last_program.fwd_fn.program, triton_gpu.TritonProgram)
    check_close(out, tout, f"seed {seed}: value")
    grads = tg.autograd.grad(out, xs, create_graph=True, allow_unused=True, materialize_grads=True)
    for i, (a, b) in enumerate(zip(grads, tgrads)):
        check_close(a, b, f"seed {seed}: gradient {i}")
    terms = [(gr * tg.tensor(v.astype(np.float32))).sum() for gr, v in zip(grads, vs) if gr.requires_grad]
    if terms:
        hv = tg.autograd.grad(sum(terms[1:], terms[0]), xs, allow_unused=True, materialize_grads=True)
        for i, (a, b) in enumerate(zip(hv, thv)):
            check_close(a, b, f"seed {seed}: Hessian-vector product {i}")


@pytest.mark.parametrize("seed", [189, 203])
def test_grouping_that_makes_a_cycle_between_kernels_is_split_into_a_launch_order(seed, monkeypatch):
    """Seeds whose first grouping has two kernels that need each other's values: the grouping
    splits a pointwise kernel, and in the launch order every kernel and copy reads only graph
    inputs and values made by an earlier step (the values above still match torch)."""
    import networkx as nx
    cycles, programs = [], []
    split = triton_gpu._split_cycles

    def spy(g, units, unit_of, kinds):
        try:
            nx.find_cycle(triton_gpu._unit_dag(g, units, unit_of, kinds))
            cycles.append(g.name)
        except nx.NetworkXNoCycle:
            pass
        return split(g, units, unit_of, kinds)

    lower = triton_gpu.lower

    def keep(graph, *a, **k):
        programs.append(lower(graph, *a, **k))
        return programs[-1]

    monkeypatch.setattr(triton_gpu, "_split_cycles", spy)
    monkeypatch.setattr(triton_gpu, "lower", keep)
    arrays = torch_program(seed)[0]
    xs = [tg.tensor(a.copy(), requires_grad=True) for a in arrays]
    f = tg.compile(lambda *t: _loss(tg, run_program(tg, seed, t)), backend="triton", fullgraph=True)
    grads = tg.autograd.grad(f(*xs), xs, create_graph=True, allow_unused=True, materialize_grads=True)
    terms = [gr.sum() for gr in grads if gr.requires_grad]
    if terms:
        tg.autograd.grad(sum(terms[1:], terms[0]), xs, allow_unused=True, materialize_grads=True)
    assert cycles, f"seed {seed}: no grouping made a cycle, the test no longer exercises the split"
    for prog in programs:
        g = prog.graph
        made = set(g.inputs)
        for u in prog.units:
            if u.kind == "glue":
                needs, makes = list(triton_gpu.refs(g[u.root]["args"])), [u.root]
            else:
                needs, makes = u.reads, u.writes
            late = [x for x in needs if x not in made and g[x]["op"] != "input"]
            assert not late, (seed, g.name, u.kind, getattr(u, "name", u.root), late, prog.plan)
            made.update(makes)
