"""Each pass on its own: the verifier accepts its result and the reference interpreter
gives the same values before and after."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.autodiff import derive
from tracegrad.compile import trace_function
from tracegrad.interpret import run_numpy
from tracegrad.ir.verify import verify
from tracegrad.passes import (eliminate_common_subexpressions, eliminate_dead_code, fold_constants, simplify,
                              partition, collect_terms, decompose_row_ops, FORWARD_PIPELINE, RECOMPUTED_PIPELINE)
from tracegrad.passes.rewrite import rewrite
from tracegrad.passes.fuse import group_fusions
from tracegrad.passes.partition import SMALL_BYTES


def traced(fn, *shapes, dtype=tg.float64):
    args = [tg.tensor(np.random.default_rng(i).standard_normal(s), dtype=dtype) for i, s in enumerate(shapes)]
    g, leaves, _, outs = trace_function(fn, tuple(args), {}, "f")
    g.outputs = [o._name for o in outs]
    return g, [a._data for a in args]


def inputs_for(g, arrays):
    # a constant the function read is its tensor; one fold_constants made is its numpy array
    vals = [g[v]["value"] for v in g.inputs[len(arrays):]]
    return list(arrays) + [c if isinstance(c, np.ndarray) else c._data for c in vals]


def _cancel_tol(*arrays):
    """An absolute tolerance for float64 results of sums that may cancel: the rounding of the
    largest magnitude among them (and their terms, which the outputs bound here)."""
    scale = max([float(np.max(np.abs(a), initial=0.0)) for a in arrays if np.size(a)] + [0.0])
    return 1e-12 * scale


def check(before, after, arrays, exact=True):
    """The rewritten graph gives the same results: bit for bit (the sign of zero and nan
    included) for passes in the compile pipelines; within rounding for collect_terms,
    which reassociates and is in none of them."""
    verify(after)
    want = run_numpy(before, inputs_for(before, arrays))
    got = run_numpy(after, inputs_for(after, arrays))
    for w, o in zip(want, got):
        if exact:
            assert_same_bits(o, w)
        else:
            np.testing.assert_allclose(o, w, rtol=1e-12, atol=_cancel_tol(w))


def assert_same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def ops(g):
    return [g[n]["op"] for n in g.ops()]


def test_eliminate_dead_code_drops_unused_values():
    g, a = traced(lambda x: (x.exp(), x.sin() * 2)[0], (5,))
    h = eliminate_dead_code(g)
    assert "sin" in ops(g) and ops(h) == ["exp"]
    check(g, h, a)


def test_eliminate_dead_code_on_a_graph_handed_over_gives_the_copying_result():
    # own=True takes the dead values out of the graph itself (derive's backward): the result
    # must be the one the copying form builds, edges, inputs and next fresh name included
    def f(x, y):
        d = (x * y).exp()                    # dead, with a dead user and a live argument's edge
        _ = d.sin() + y
        return (x.cos() * 3).sum() + (x * y.exp()).sum()
    g, a = traced(f, (4,), (4,))
    bwd = derive(g, list(g.outputs), [g.inputs[0], g.inputs[1]])
    bwd.outputs = [bwd.outputs[0], None]     # x's gradient only: y's, and what only it reads, are dead
    for graph, drop in ((g, ()), (bwd, ("saved",)), (bwd, ())):
        want = eliminate_dead_code(graph, drop)
        assert len(want.nx) < len(graph.nx)
        mine = graph.copy()
        got = eliminate_dead_code(mine, drop, own=True)
        assert list(got.nx.nodes(data=True)) == list(want.nx.nodes(data=True))
        assert sorted(got.nx.edges) == sorted(want.nx.edges)
        assert {n: set(p) for n, p in got.nx._pred.items()} == {n: set(p) for n, p in want.nx._pred.items()}
        assert (got.inputs, got.outputs, got.name) == (want.inputs, want.outputs, want.name)
        assert got.fresh() == want.fresh()
        verify(got)
    check(g, eliminate_dead_code(g.copy(), own=True), a)


def test_cse_merges_repeated_subexpressions():
    g, a = traced(lambda x, y: (x * y).exp() + (x * y).exp() + (y * x), (4,), (4,))
    h = eliminate_dead_code(eliminate_common_subexpressions(g))
    assert ops(g).count("mul") == 3 and ops(h).count("mul") == 2 and ops(h).count("exp") == 1
    check(g, h, a)


def test_fold_constants_evaluates_literal_only_values_once():
    g, a = traced(lambda x: x * (tg.full((3,), 2.0, dtype=tg.float64) * 3 + 1), (3,))
    h = eliminate_dead_code(fold_constants(g))
    assert "full" not in ops(h) and ops(h) == ["mul"]
    check(g, h, a)


def test_fold_constants_never_folds_captured_tensors():
    w = tg.tensor([1.0, 2.0, 3.0], dtype=tg.float64)
    g, a = traced(lambda x: x * (w * 2), (3,))
    h = fold_constants(g)
    assert ops(h) == ops(g)


@pytest.mark.parametrize("n, want", [(2, ["mul"]), (3, ["mul", "mul"]), (4, ["pow"]), (0.5, ["sqrt"]),
                                     (-1, ["reciprocal"]), (-2, ["mul", "reciprocal"]), (2.5, ["pow"])])
def test_simplify_turns_small_powers_into_multiplications(n, want):
    g, a = traced(lambda x: x.abs() ** n, (6,))
    h = simplify(g)
    assert ops(h)[1:] == want
    check(g, h, a)


def test_simplify_drops_identities_but_never_aliases_outputs():
    g, a = traced(lambda x: ((x * 1 - 0.0 + -0.0) / 1).exp() * 1, (3,))
    h = eliminate_dead_code(simplify(g))
    assert ops(h) == ["exp", "mul"]
    check(g, h, a)


def test_simplify_keeps_an_added_zero_and_a_subtracted_negative_zero():
    # -0.0 + 0.0 is 0.0 and -0.0 - -0.0 is 0.0: neither is x where x is -0.0
    g, a = traced(lambda x: ((x * 0.0 + 0) * -1 - -0.0).exp(), (3,))
    h = eliminate_dead_code(simplify(g))
    assert ops(h) == ["mul", "add", "mul", "sub", "exp"]
    check(g, h, a)


def test_partition_recomputes_cheap_values_and_saves_fewer_bytes():
    fn = lambda x: (((x * 2).sin() * 3 + 1) ** 2).sum()   # noqa: E731
    g, a = traced(fn, (20000,))        # values of 160 kB: above SMALL_BYTES, worth recomputing
    for p in FORWARD_PIPELINE:
        g = p(g)
    bwd = derive(g, list(g.outputs), [g.inputs[0]])
    part = partition(g, bwd)
    naive = partition(g, bwd, remat=False)
    verify(part.forward)
    verify(part.backward)
    assert part.saved_bytes < naive.saved_bytes == part.naive_bytes
    assert part.recomputed
    seed = np.ones(())
    outs = run_numpy(part.forward, a)
    n_out = len(g.outputs)
    want = run_numpy(bwd, [seed] + [run_numpy(_with_outputs(g, [bwd[n]["fwd"]]), a)[0]
                                    for n in bwd.inputs[1:]])

    def bind(kind, i):
        return {"seed": lambda: seed, "in": lambda: a[i], "res": lambda: outs[n_out + i]}[kind]()
    got = run_numpy(part.backward, [bind(k, i) for k, i in part.binds])
    exact = 2 * 2 * (3 * np.sin(2 * a[0]) + 1) * 3 * np.cos(2 * a[0])
    # near the zeros of cos(2a) and 3 sin(2a) + 1 the product is exact to its factors' rounding only
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=_cancel_tol(want[0]))
    np.testing.assert_allclose(got[0], exact, rtol=1e-12, atol=_cancel_tol(exact) * 36)


def test_partition_saves_small_values_instead_of_recomputing_them():
    """Below SMALL_BYTES an op's fixed cost outweighs the memory: the backward reads the small
    values it needs as the forward made them (a view is remade from its base), and gives the
    gradient the unpartitioned backward gives."""
    fn = lambda x: (((x * 2).sin() * 3 + 1) ** 2).reshape(10, 100).sum()   # noqa: E731
    g, a = traced(fn, (1000,))
    assert 1000 * 8 <= SMALL_BYTES
    for p in FORWARD_PIPELINE:
        g = p(g)
    bwd = derive(g, list(g.outputs), [g.inputs[0]])
    part = partition(g, bwd)
    verify(part.forward)
    verify(part.backward)
    assert not [n for n in part.recomputed if g[n]["op"] not in ("reshape", "expand", "permute")]
    assert part.saved_bytes > 0
    seed = np.ones(())
    outs = run_numpy(part.forward, a)
    n_out = len(g.outputs)
    want = run_numpy(bwd, [seed] + [run_numpy(_with_outputs(g, [bwd[n]["fwd"]]), a)[0] for n in bwd.inputs[1:]])

    def bind(kind, i):
        return {"seed": lambda: seed, "in": lambda: a[i], "res": lambda: outs[n_out + i]}[kind]()
    got = run_numpy(part.backward, [bind(k, i) for k, i in part.binds])
    np.testing.assert_array_equal(got[0], want[0])


def _with_outputs(g, outs):
    h = g.copy()
    h.outputs = outs
    return h


def test_group_fusions_marks_elementwise_chains_with_their_reduction():
    g, a = traced(lambda x, y: ((x * y).tanh() + 1).sum(1) + (x @ y.T).sum(1), (8, 4), (8, 4))
    h = group_fusions(g, min_bytes=0)
    verify(h)
    check(g, h, a)
    groups = {}
    for n in h.ops():
        if h[n].get("group") is not None:
            groups.setdefault(h[n]["group"], []).append(h[n]["op"])
    assert ["mul", "tanh", "add", "sum"] in groups.values()
    assert all("matmul" not in ops_ for ops_ in groups.values())


def test_group_fusions_hoists_small_values_so_row_chains_meet():
    # s * 3 is recorded between exp and the product that reads it: computed first, it lets
    # exp, mul and sum run as one chunked group instead of two with a full array between
    g, a = traced(lambda x, s: (x.exp() * (s * 3)).sum(1), (64, 256), ())
    h = group_fusions(g)
    check(g, h, a)
    groups = {}
    for n in h.ops():
        if h[n].get("group") is not None:
            groups.setdefault(h[n]["group"], []).append(h[n]["op"])
    assert list(groups.values()) == [["exp", "mul", "sum"]]
    first = h[h.ops()[0]]
    assert first["op"] == "mul" and first["shape"] == ()


def _groups(h):
    groups = {}
    for n in h.ops():
        if h[n].get("group") is not None:
            groups.setdefault(h[n]["group"], []).append(h[n]["op"])
    return list(groups.values())


def test_group_fusions_runs_sibling_chains_apart_in_programs_with_products():
    # two weights' updates meet only as siblings (they share the learning rate): where a matrix
    # product makes the groups run on the calling thread, each is a group of its own; without
    # one they stay one group
    def updates(p1, g1, p2, g2, s):
        return p1 + g1 * s, p2 + g2 * s
    g, a = traced(lambda p1, g1, p2, g2, s, x: updates(p1, g1, p2, g2, s) + (x @ x.T,),
                  (64, 300), (64, 300), (64, 200), (64, 200), (), (4, 4))
    h = group_fusions(g)
    check(g, h, a)
    assert _groups(h) == [["mul", "add"], ["mul", "add"]]
    assert len({h[n]["fuse_rows"] for n in h.ops() if h[n].get("group") is not None}) == 1
    g, a = traced(updates, (64, 300), (64, 300), (64, 200), (64, 200), ())
    h = group_fusions(g)
    check(g, h, a)
    assert _groups(h) == [["mul", "add", "mul", "add"]]
    # chains that read one wide value stay together: one pass over it
    g, a = traced(lambda p1, g1, p2, s, x: (p1 + g1 * s, p2 + g1 * 3, x @ x.T),
                  (64, 300), (64, 300), (64, 300), (), (4, 4))
    h = group_fusions(g)
    check(g, h, a)
    assert _groups(h) == [["mul", "add", "mul", "add"]]
    # a chain that reads another one's value stays with it
    g, a = traced(lambda p1, g1, p2, s, x: (lambda u: (u, p2 + u * s, x @ x.T))(p1 + g1 * s),
                  (64, 300), (64, 300), (64, 300), (), (4, 4))
    h = group_fusions(g)
    check(g, h, a)
    assert _groups(h) == [["mul", "add", "mul", "add"]]


def test_group_fusions_leaves_a_loss_per_row_tail_to_whole_array_calls():
    import tracegrad.nn.functional as F
    x = tg.tensor(np.random.default_rng(0).standard_normal((256, 100)))
    y = tg.tensor(np.random.default_rng(1).integers(0, 100, 256))
    g, _, _, outs = trace_function(lambda x, y: F.cross_entropy(x, y), (x, y), {}, "f")
    g.outputs = [o._name for o in outs]
    for p in FORWARD_PIPELINE + RECOMPUTED_PIPELINE:       # as compile runs them on a forward program
        g = p(g)
    h = group_fusions(g)
    check(g, h, [x._data, y._data])
    grouped = [h[n]["op"] for n in h.ops() if h[n].get("group") is not None]
    # the row-wide work runs in chunks; the log of the row sums, the picked logits' loss and
    # the mean over rows are one call each on (256,)-sized arrays
    assert {"amax", "sub", "exp", "sum"} <= set(grouped)
    assert "log" not in grouped and "neg" not in grouped and "eq" not in grouped


def test_simplify_orders_commutative_constants_and_folds_exact_chains():
    g, a = traced(lambda x: (2 * x) * 4 + (x * 2) * 4, (4,))
    h = eliminate_dead_code(eliminate_common_subexpressions(simplify(g)))
    muls = [h[n]["args"] for n in h.ops() if h[n]["op"] == "mul"]
    assert muls[0] == (h.inputs[0], 8.0)           # scaling up by powers of two is exact
    check(g, h, a)
    # scales that round, scales down (double rounding at subnormals) and added constants stay
    g, a = traced(lambda x: (x * 3) * 5 + ((x * 0.5) * 0.25 + (1 + x) + 2), (4,))
    h = eliminate_dead_code(eliminate_common_subexpressions(simplify(g)))
    assert ops(h).count("mul") == 4 and ops(h).count("add") == 4
    check(g, h, a)
    tiny = [np.array([5 * 2.0 ** -1074, 1e308, -0.0, 3.0])]
    check(g, h, tiny)
    x = np.float64(5 * 2.0 ** -1074)
    assert (x * 0.5) * 0.25 != x * 0.125           # why scales down are not folded


def test_simplify_moves_scalar_ops_before_broadcasts_and_leaves_sums_alone():
    g, a = traced(lambda x: (x.sum(1, keepdim=True).expand(6, 5) / 5 - x * 1).neg().sum(0) + (-x).sum()
                  + (x * 3).mean(), (6, 5))
    h = eliminate_dead_code(eliminate_common_subexpressions(simplify(g)))
    check(g, h, a)
    assert [h[n]["shape"] for n in h.ops() if h[n]["op"] == "div"] == [(6, 1)]
    # sum(-x) is 0.0 where -sum(x) is -0.0, and sum(x * 3) overflows where sum(x) * 3 need not
    # (or the other way round): the scalings stay inside the sums
    assert all(h[n]["shape"] == (6, 5) for n in h.ops() if h[n]["op"] in ("neg", "mul"))
    check(g, h, [np.zeros((6, 5))])


def test_group_fusions_leaves_small_graphs_to_plain_numpy_calls():
    g, a = traced(lambda x, y: ((x * y).tanh() + 1).sum(1), (8, 4), (8, 4))
    h = group_fusions(g)
    check(g, h, a)
    assert all(h[n].get("group") is None for n in h.ops())
    big = group_fusions(g, min_bytes=8 * 4 * 8)
    assert any(big[n].get("group") is not None for n in big.ops())


@pytest.mark.parametrize("op", ["log_softmax", "softmax"])
def test_decompose_row_ops_leaves_row_reductions_and_elementwise_ops(op):
    from tracegrad.passes import decompose_row_ops
    g, a = traced(lambda x: getattr(x, op)(1) * 3, (6, 5))
    h = decompose_row_ops(g)
    check(g, h, a)
    assert op not in ops(h) and ops(h).count("amax") == 1 and ops(h).count("exp") == 1
    assert all(tuple(h[n]["shape"]) == (6, 1) for n in h.ops() if h[n]["op"] in ("amax", "sum"))


@pytest.mark.parametrize("op", ["log_softmax", "softmax"])
def test_decomposed_row_ops_backward_reads_saved_exponentials(op):
    g, a = traced(lambda x: (getattr(x, op)(1) * tg.arange(30.).reshape(6, 5)).sum(), (6, 5))
    for p in FORWARD_PIPELINE:
        g = p(g)
    bwd = derive(g, list(g.outputs), [g.inputs[0]])
    part = partition(g, bwd)
    assert [g[s]["op"] for s in part.saved if s not in g.inputs].count("exp") == 1
    assert "exp" not in ops(part.backward) and "amax" not in ops(part.backward)
    fwd_in = inputs_for(part.forward, a)
    outs = run_numpy(part.forward, fwd_in)

    def bind(kind, i):
        return {"seed": lambda: np.ones(()), "in": lambda: fwd_in[i], "res": lambda: outs[1 + i],
                "const": lambda: i._data}[kind]()
    got = run_numpy(part.backward, [bind(k, i) for k, i in part.binds])[0]
    x = tg.tensor(a[0], requires_grad=True)
    want, = tg.autograd.grad((getattr(x, op)(1) * tg.arange(30.).reshape(6, 5)).sum(), x)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12)


def test_simplify_gathers_before_a_row_shift():
    idx = tg.tensor(np.array([[1], [0], [4]]))
    g, a = traced(lambda x, r: (x - r).gather(1, idx) * 2, (3, 5), (3, 1))
    h = eliminate_dead_code(simplify(g))
    check(g, h, a)
    sub = [n for n in h.ops() if h[n]["op"] == "sub"][0]
    assert tuple(h[sub]["shape"]) == (3, 1)


def test_simplify_cancels_a_permute_of_a_permute():
    g, a = traced(lambda x: (x.permute(2, 0, 1).permute(1, 2, 0) * 2).permute(1, 0, 2).permute(0, 2, 1), (2, 3, 4))
    h = eliminate_dead_code(simplify(g))
    check(g, h, a)
    assert ops(h).count("permute") == 1 and ops(h).count("mul") == 1


def test_simplify_doubles_a_repeated_term_and_nothing_that_would_round_differently():
    g, a = traced(lambda x: x.sin() + x.sin(), (3,))
    h = eliminate_dead_code(simplify(eliminate_common_subexpressions(g)))
    check(g, h, a)
    assert ops(h) == ["sin", "mul"]
    # (x + y) + y rounds twice where x + 2 y rounds once: it stays as it is
    g, a = traced(lambda x, r, c: (x + r * c.expand(4, 5)) + r * c.expand(4, 5), (4, 5), (4, 5), (4, 1))
    h = eliminate_dead_code(simplify(eliminate_common_subexpressions(g)))
    check(g, h, a)
    assert ops(h).count("add") == 2 and not any(2.0 in h[n]["args"] for n in h.ops())
    got = run_numpy(h, inputs_for(h, [np.ones((4, 5)), np.full((4, 5), 2.0 ** -53), np.ones((4, 1))]))[0]
    assert np.all(got == 1.0)      # (1 + 2^-53) + 2^-53 rounds to 1 twice; 1 + 2^-52 would not


def test_simplify_keeps_a_transposed_product_as_it_is():
    # b.T @ a.T is (a @ b).T in exact arithmetic only: BLAS adds the products in another
    # order when the factors swap roles, so the rewrite would change the last bits
    rng = np.random.default_rng(0)
    for m, k, n in [(5, 3, 4), (128, 784, 512), (33, 17, 65), (7, 130, 3)]:
        g, a = traced(lambda x, y: (x.T @ y).T * 2, (k, m), (k, n), dtype=tg.float32)
        h = eliminate_dead_code(simplify(g))
        assert ops(h) == ops(g)
        x, y = rng.standard_normal((k, m)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        got = run_numpy(h, inputs_for(h, [x, y]))[0]
        assert np.array_equal(got, (x.T @ y).T * 2)


def test_simplify_gives_an_output_transposed_back_the_product_itself_once():
    # (g.T @ x).T transposed back is the product: an output takes the product's own array
    # (a written-back .grad adopts it; a view of it would be copied), but never one that
    # another output, an input or a view already stands for (outputs never alias)
    g, a = traced(lambda x, y: (lambda m: (m.T.T, m.T.T, x.T.T, m * 2))(x.T @ y), (5, 3), (5, 4))
    h = eliminate_dead_code(simplify(g))
    check(g, h, a)
    outs = h.outputs
    assert h[outs[0]]["op"] == "matmul"
    assert len(set(outs)) == len(outs)
    assert h[outs[1]]["op"] == "permute"      # the product is taken by the first output
    assert h[outs[2]]["op"] == "permute"      # x.T.T: x is an input
    got = run_numpy(h, inputs_for(h, a))
    assert got[0].base is None and got[0].flags.c_contiguous


def test_compiled_weight_gradients_are_contiguous_and_eager_bit_for_bit():
    # matmul's derivative takes weight.T's layout into account (as torch's mm_mat2_backward):
    # the weight's gradient comes out of BLAS contiguous, eagerly and compiled by the same product
    lin = tg.nn.Linear(6, 4)
    x = tg.tensor(np.random.default_rng(0).standard_normal((3, 6)), dtype=tg.float32)
    tg.compile(lambda x: lin(x).tanh().sum())(x).backward()
    assert lin.weight.grad.numpy().flags.c_contiguous
    lin2 = tg.nn.Linear(6, 4)
    lin2.load_state_dict(lin.state_dict())
    lin2(x).tanh().sum().backward()
    assert lin2.weight.grad.numpy().flags.c_contiguous
    assert np.array_equal(lin.weight.grad.numpy(), lin2.weight.grad.numpy())


def test_simplify_uses_uniform_constants_as_literals_and_drops_unit_powers():
    # the seed of a derivative taken inside a compiled function folds to an array of ones;
    # as a literal it disappears (x * 1), and x ** 1, x ** 0 go with it
    g, a = traced(lambda x: (tg.ones(6, dtype=tg.float64) * 2 * x.exp() ** 1 * x ** 0 + tg.full((6,), 0.5,
                                                                                              dtype=tg.float64)).sin(), (6,))
    h = eliminate_dead_code(simplify(fold_constants(g)))
    assert ops(h) == ["exp", "mul", "add", "sin"]
    check(g, h, a)


def test_simplify_keeps_a_uniform_constant_that_sets_the_result_shape():
    g, a = traced(lambda x: x * tg.ones(4, 3, dtype=tg.float64), (3,))
    h = eliminate_dead_code(simplify(fold_constants(g)))
    assert ops(h) == ["mul"] and h[h.outputs[0]]["shape"] == (4, 3)
    check(g, h, a)


def test_collect_terms_writes_a_product_rule_derivative_as_few_ops():
    # the backward of 0.5 x (1 + tanh(k (x + c x x x))), recomputing the forward from x (values
    # above partition.SMALL_BYTES: smaller ones would be saved)
    g, a = traced(lambda x: 0.5 * x * (1 + (0.79788456 * (x + 0.044715 * x * x * x)).tanh()), (20000,))
    part = partition(g, derive(g, list(g.outputs), [g.inputs[0]]))
    assert part.binds == [("seed", 0), ("in", 0)]
    before = eliminate_dead_code(simplify(part.backward))
    after = collect_terms(before)
    verify(after)
    args = [np.random.default_rng(9).standard_normal(20000), a[0]]
    want = run_numpy(before, args)[0]
    np.testing.assert_allclose(run_numpy(after, args)[0], want, rtol=1e-12, atol=_cancel_tol(want))
    # 0.5 (1 + t) + x (k/2 + 3 k c/2 x^2)(1 - t^2), times the seed: x^2 and t made once each
    assert len(before.ops()) >= 24 and len(after.ops()) <= 16


def test_collect_terms_adds_like_terms_and_never_expands_a_product_of_sums():
    g, a = traced(lambda x, y: x * y + y * x + (x * 2) * y + (x + y) * (x - y), (7,), (7,))
    h = collect_terms(g)
    check(g, h, a, exact=False)
    # 4 x y + (x + y)(x - y): one product of x and y, scaled; the sums stay whole and multiply
    assert ops(h).count("mul") == 3 and ops(h).count("add") == 2 and ops(h).count("sub") == 1


def test_collect_terms_keeps_what_it_cannot_improve():
    g, a = traced(lambda x, y: (x + y).exp() * (x - y), (5,), (5,))
    h = collect_terms(g)
    check(g, h, a)
    assert ops(h) == ops(g)


@pytest.mark.parametrize("seed", range(6))
def test_collect_terms_keeps_values_of_random_sums_of_products(seed):
    rng = np.random.default_rng(seed)

    def build(x, y, z):
        vals = [x, y, z]
        for _ in range(12):
            p, q = (vals[i] for i in rng.integers(0, len(vals), 2))
            op = rng.integers(0, 5)
            vals.append(p + q if op == 0 else p - q if op == 1 else p * q if op == 2 else
                        p * float(rng.integers(-3, 4)) if op == 3 else -p)
        return vals[-1] + vals[-2] * vals[-3]
    g, a = traced(build, (9,), (9,), (9,))
    h = collect_terms(g)
    verify(h)
    want = run_numpy(g, inputs_for(g, a))
    got = run_numpy(h, inputs_for(h, a))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9, atol=1e-9 * np.abs(want[0]).max())
    assert len(eliminate_dead_code(h).ops()) <= len(eliminate_dead_code(g).ops())


@pytest.mark.parametrize("pass_fn", [eliminate_common_subexpressions, fold_constants, decompose_row_ops])
def test_a_pass_with_nothing_to_do_returns_its_input_unchanged(pass_fn):
    # the passes skip their per-node rewrite when a scan shows nothing to change, and return
    # the graph they were given (no copy): it must be what the identity rewrite builds (same
    # names, attributes, inputs, outputs), and the pass must not have changed it
    g, _ = traced(lambda x, y: ((x * y).sin() + y).sum(), (3, 4), (4,))
    snapshot = lambda: ([(n, dict(a)) for n, a in g.nx.nodes(data=True)], sorted(g.nx.edges),  # noqa: E731
                        list(g.inputs), list(g.outputs))
    before = snapshot()
    full = rewrite(g, lambda b, n, a, args: None)
    fast = pass_fn(g)
    assert fast is g
    assert snapshot() == before
    assert list(fast.nx.nodes(data=True)) == list(full.nx.nodes(data=True))
    assert sorted(fast.nx.edges) == sorted(full.nx.edges)
    assert (fast.inputs, fast.outputs, fast.name) == (full.inputs, full.outputs, full.name)


def test_cse_still_merges_when_the_first_repeat_comes_late():
    g, arrays = traced(lambda x: (x.sin() * 2).exp() + (x.sin() * 2).exp(), (5,))
    after = eliminate_common_subexpressions(g)
    assert sum(a["op"] == "sin" for a in after.nx._node.values()) == 1
    assert sum(a["op"] == "exp" for a in after.nx._node.values()) == 1
    check(g, after, arrays)


def test_pipelines_hand_the_graphs_they_made_to_dead_code_with_the_same_result(monkeypatch):
    # a program that keeps no stages lets the dead-code passes change the graphs an earlier
    # pass of the same pipeline made instead of copying them: the graphs come out the same
    import sys
    from tracegrad.passes import dead_code
    C = sys.modules["tracegrad.compile"]
    copies = []
    copy_nx = dead_code.copy_nx
    monkeypatch.setattr(dead_code, "copy_nx", lambda *a: copies.append(1) or copy_nx(*a))

    def f(x, w):
        for _ in range(4):
            x = (x * w).sin().cos() * 1.01
        return x.sum() + (w * w).sum()
    x, w = tg.tensor(np.linspace(-1, 1, 6)), tg.tensor(np.linspace(0.5, 1, 6), requires_grad=True)
    made = []
    for keep in (True, False):
        del copies[:]
        p = C.build(f, (x, w), {}, "f", "numpy", keep_stages=keep)
        made.append((len(copies), [str(g) for g in (p.fwd_ir, p.bwd_opt, p.fwd_run, p.bwd_run)]))
    assert made[1][1] == made[0][1]
    assert made[1][0] < made[0][0]


def test_relu_backward_compiles_to_a_mask_and_a_select_and_differentiates_again():
    """relu's derivative is threshold_backward (so that a derivative of it connects x, as torch's
    ThresholdBackwardBackward0); a graph nobody differentiates again (a backward after autodiff,
    a whole step) has it as x <= 0 and a select: the mask kept from the forward, the select
    written through it (where_zero), no kernel call per chunk."""
    import torch
    import io
    tg.manual_seed(0)
    m = tg.nn.Sequential(tg.nn.Linear(64, 256), tg.nn.ReLU(), tg.nn.Linear(256, 3))
    x = tg.tensor(np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32))
    y = tg.tensor(np.random.default_rng(1).integers(0, 3, 128))
    f = tg.compile(lambda x, y: tg.nn.functional.cross_entropy(m(x), y), fullgraph=True)
    f(x, y).backward()
    out = io.StringIO()
    tg.explain(f, x, y, file=out, verbose=True)
    src = out.getvalue().split("==== generated backward source ====", 1)[1].split("\n====", 1)[0]
    assert "threshold_backward" not in src and "where_zero(" in src
    for lib, c in ((torch, lambda fn: fn), (tg, lambda fn: tg.compile(fn, fullgraph=True))):
        g2 = c(lambda x, w: (x.relu() * w).sum())
        for _ in range(3):
            a = lib.tensor([0.5, -4.0, 0.0], requires_grad=True)
            w = lib.tensor([2.0, 3.0, 4.0], requires_grad=True)
            (g,) = lib.autograd.grad(g2(a, w), a, create_graph=True)
            assert g.requires_grad
            ha, hw = lib.autograd.grad(g.sum(), (a, w))
            assert ha.tolist() == [0.0, 0.0, 0.0] and hw.tolist() == [1.0, 0.0, 0.0]
