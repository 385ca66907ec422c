"""The nodes a backward runs, against torch's engine: backward() without inputs runs every node it
reaches (its exec_info is empty), a node with no path to a leaf too; grad() and backward(inputs=...)
run only what their inputs need. Such a node comes from an op on a view made under no_grad of a
tensor that requires grad (the view is a leaf whose gradient goes nowhere: the op's next_functions
are ((None, 0),)), on a view whose base was detach_()'d, and from ops on their results.

tracegrad's engine ran only the nodes with a path to a leaf (engine.executed): the hooks of those
nodes (tensor hooks, grad_fn pre-hooks and hooks, retain_grad) did not run, a saved value of theirs
written in place gave gradients where torch raises, and their saved values were never freed. Then
register_multi_grad_hook in mode "all" under grad(): torch refuses a leaf among the tensors whose
gradient grad() returns; tracegrad called the hook.

Each case runs in torch and in tracegrad, in float64, and compares what it returns (or raises),
the gradients and every hook's log."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def snap(x):
    if x is None:
        return None
    if isinstance(x, (tuple, list)):
        return [snap(y) for y in x]
    return np.round(x.detach().numpy().astype(np.float64), 6).reshape(-1).tolist() + \
        (["graph"] if x.grad_fn is not None else [])


def outcome(f):
    try:
        return "ok", f()
    except Exception as e:          # noqa: BLE001  (compared with torch's)
        return type(e).__name__, str(e)[:160]


def nowhere_chain(m, log, node_hooks=True):
    """a (a leaf), v = a[None] under no_grad, mu = v * 0.3 and e = mu.exp() (nodes with no path to
    a): tensor hooks on both, grad_fn pre-hooks and hooks, retain_grad; s = a.sin() with a hook."""
    a = m.tensor([0.3, -1.2], dtype=m.float64, requires_grad=True)
    with m.no_grad():
        v = a[None]
    mu = v * 0.3
    e = mu.exp()
    for name, t in (("mu", mu), ("e", e)):
        t.register_hook(lambda g, name=name: log.append(("hook", name, snap(g))))
        if node_hooks:
            t.grad_fn.register_prehook(lambda gs, name=name: log.append(("prehook", name, snap(gs))))
            t.grad_fn.register_hook(lambda gi, go, name=name: log.append(("post", name, snap(gi), snap(go))))
        t.retain_grad()
    s = a.sin()
    s.register_hook(lambda g: log.append(("hook", "s", snap(g))))
    return a, mu, e, s


def both(case):
    res = []
    for m in (torch, tg):
        log = []
        res.append((case(m, log), log))
    assert res[1] == res[0], res
    return res[0]


# -- backward() runs them: hooks, their order and values, retain_grad -------------------------------

def test_backward_runs_the_hooks_of_nodes_with_no_path_to_a_leaf():
    def case(m, log):
        a, mu, e, s = nowhere_chain(m, log)
        r = outcome(lambda: (e.sum() * 2 + s.sum()).backward())
        return r, snap(a.grad), snap(mu.grad), snap(e.grad)
    (r, ga, gmu, ge), log = both(case)
    assert r == ("ok", None) and ge == [2.0, 2.0] and gmu is not None
    assert [k[:2] for k in log] == [("hook", "s"), ("hook", "e"), ("prehook", "e"), ("post", "e"),
                                    ("hook", "mu"), ("prehook", "mu"), ("post", "mu")]


def test_a_root_that_reaches_only_such_nodes_runs_them_and_sets_no_grad():
    def case(m, log):
        a, mu, e, s = nowhere_chain(m, log)
        r = outcome(lambda: e.sum().backward())
        return r, snap(a.grad), snap(mu.grad), snap(e.grad)
    (r, ga, gmu, ge), log = both(case)
    assert ga is None and ge == [1.0, 1.0] and len(log) == 6


def test_create_graph_hands_such_nodes_gradients_with_a_graph():
    def case(m, log):
        a, mu, e, s = nowhere_chain(m, log)
        r = outcome(lambda: (e.sum() * 2 + s.sum()).backward(create_graph=True))
        return r, snap(a.grad), snap(mu.grad), snap(e.grad)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (r, ga, gmu, ge), log = both(case)
    assert gmu[-1] == "graph" and ("post", "mu", [None, None], [gmu]) in log


def test_a_view_of_a_base_detached_in_place_and_written_runs_its_node_and_hooks():
    def case(m, log):
        x = m.tensor([[0.5, 1.0], [2.0, 3.0]], dtype=m.float64, requires_grad=True)
        b = x.clone()
        vw = b[0]
        b.detach_()
        b.mul_(2)
        y = vw.exp()
        y.register_hook(lambda g: log.append(("hook", "y", snap(g))))
        y.grad_fn.register_hook(lambda gi, go: log.append(("post", "y", snap(gi))))
        vw.grad_fn.register_prehook(lambda gs: log.append(("prehook", "vw", snap(gs))))
        r = outcome(lambda: (y.sum() + x.sum()).backward())
        return r, snap(x.grad), str(vw.grad_fn.next_functions)
    _, log = both(case)
    assert [k[:2] for k in log] == [("hook", "y"), ("post", "y"), ("prehook", "vw")]


def test_a_multi_output_node_above_such_a_node_runs_its_hooks():
    def case(m, log):
        a = m.tensor([[0.3, -1.2], [0.5, 2.0]], dtype=m.float64, requires_grad=True)
        with m.no_grad():
            v = a[None]
        mx, _ = (v * 1.0).max(1)
        mx.register_hook(lambda g: log.append(("hook", snap(g))))
        mx.grad_fn.register_hook(lambda gi, go: log.append(("post", snap(gi), snap(go))))
        r = outcome(lambda: (mx.sum() + a.sum()).backward())
        return r, snap(a.grad)
    _, log = both(case)
    assert len(log) == 2


def test_a_node_with_an_integer_output_and_no_path_to_a_leaf_runs_its_grad_fn_hooks():
    # max(dim)'s node has one gradient (its values'): torch runs its pre-hooks and hooks
    def case(m, log):
        a = m.tensor([[0.3, -1.2], [0.5, 2.0]], dtype=m.float64, requires_grad=True)
        with m.no_grad():
            v = a[None]
        mx, _ = v.max(1)
        mx.register_hook(lambda g: log.append(("hook", snap(g))))
        mx.grad_fn.register_prehook(lambda gs: log.append(("prehook", snap(gs))))
        mx.grad_fn.register_hook(lambda gi, go: log.append(("post", snap(gi), snap(go))))
        r = outcome(lambda: ((mx * 2).sum() + a.sum()).backward())
        return r, snap(a.grad)
    _, log = both(case)
    assert [k[0] for k in log] == ["hook", "prehook", "post"]


@pytest.mark.parametrize("retain", [False, True])
@pytest.mark.parametrize("used", [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_a_node_of_several_outputs_with_no_path_to_a_leaf_runs_its_grad_fn_hooks_once(used, retain):
    # unbind's node on such a view: its pre-hooks and hooks see every output's gradient (None where
    # none reaches one), once, after the last of them; retained outputs get theirs
    def case(m, log):
        a = m.tensor([[0.3, -1.2, 0.4], [0.5, 2.0, 0.1], [0.7, 0.2, 0.9]], dtype=m.float64, requires_grad=True)
        with m.no_grad():
            v = a[None]
        parts = v.unbind(1)
        if retain:
            parts[0].retain_grad()
            parts[2].retain_grad()
        parts[0].grad_fn.register_prehook(lambda gs: log.append(("prehook", snap(gs))))
        parts[0].grad_fn.register_hook(lambda gi, go: log.append(("post", snap(gi), snap(go))))
        loss = a.sum()
        for i in used:
            loss = loss + (parts[i] * (i + 2)).sum()
        r = outcome(lambda: loss.backward())
        return r, snap(a.grad), [snap(p.grad) if p.retains_grad else "-" for p in parts]
    _, log = both(case)
    assert [k[0] for k in log] == ["prehook", "post"]


# -- what they saved: checked, freed -----------------------------------------------------------------

def test_a_saved_value_of_such_a_node_written_in_place_raises_after_what_runs_before_it():
    def case(m, log):
        a = m.tensor([0.3, -1.2], dtype=m.float64, requires_grad=True)
        with m.no_grad():
            v = a[None]
        e = v.exp()
        e.add_(1.0)                  # ExpBackward0's result
        f = (e * 2).sin()
        s = a.sin()
        s.register_hook(lambda g: log.append(("hook", "s", snap(g))))
        f.register_hook(lambda g: log.append(("hook", "f", snap(g))))
        r = outcome(lambda: (f.sum() + s.sum() * 3).backward())
        return r[0], r[1], snap(a.grad)
    (kind, msg, ga), log = both(case)
    assert kind == "RuntimeError" and "modified by an inplace operation" in msg and ga is not None
    assert [k[1] for k in log] == ["s", "f"]


def test_retain_graph_false_frees_such_nodes_and_a_second_backward_raises():
    def case(m, log):
        a, mu, e, s = nowhere_chain(m, log, node_hooks=False)
        w = e.sum() * 2
        r1 = outcome(lambda: (w + s.sum()).backward())
        r2 = outcome(lambda: e.sum().backward())
        return r1, r2, snap(a.grad), snap(e.grad)
    (r1, r2, _, _), log = both(case)
    assert r1 == ("ok", None) and r2[0] == "RuntimeError" and "second time" in r2[1]


def test_retain_graph_true_runs_them_again():
    def case(m, log):
        a, mu, e, s = nowhere_chain(m, log)
        r1 = outcome(lambda: (e.sum() + s.sum()).backward(retain_graph=True))
        r2 = outcome(lambda: e.sum().backward())
        return r1, r2, snap(a.grad), snap(e.grad), snap(mu.grad)
    (r1, r2, _, ge, _), log = both(case)
    assert r2 == ("ok", None) and ge == [2.0, 2.0] and len(log) == 13


def test_a_compiled_call_on_such_a_view_runs_its_hooks_and_checks_what_it_saved():
    def case(m, log):
        res = []
        for write in (False, True):
            a = m.tensor([0.3, -1.2], dtype=m.float64, requires_grad=True)
            with m.no_grad():
                v = a[None]
            y = m.compile(lambda t: (t * 2).exp())(v)
            y.register_hook(lambda g: log.append(("hook", snap(g))))
            w = y.sin()
            if write:
                y.add_(1)            # the compiled call's saved result
            res.append((outcome(lambda: (w.sum() + a.sum()).backward(retain_graph=not write))[0], snap(a.grad)))
            if not write:            # freed by a backward that does not retain it
                res.append(outcome(lambda: (w.sum() + a.sum()).backward())[0])
                res.append(outcome(lambda: (w.sum() + a.sum()).backward())[0])
        return res
    res, log = both(case)
    assert res[1:3] == ["ok", "RuntimeError"] and res[3][0] == "RuntimeError" and len(log) == 2


@pytest.mark.parametrize("nowhere", [False, True])
@pytest.mark.parametrize("retain", [False, True])
@pytest.mark.parametrize("kind", ["freed", "written"])
def test_the_node_that_raises_runs_its_pre_hooks_first_and_not_its_hooks(kind, retain, nowhere):
    # torch's node runs its tensor hooks, retain_grad's, its pre-hooks, then unpacks what it saved
    # and raises: tracegrad ran no pre-hook (or, retained, ran them and its hooks given None)
    def case(m, log):
        a = m.tensor([0.3, -1.2], dtype=m.float64, requires_grad=True)
        if nowhere:
            with m.no_grad():
                a = a[None]
        e = (a * 0.3).exp()
        e.register_hook(lambda g: log.append(("hook", snap(g))))
        e.grad_fn.register_prehook(lambda gs: log.append(("prehook", snap(gs))))
        e.grad_fn.register_hook(lambda gi, go: log.append(("post", snap(gi))))
        if retain:
            e.retain_grad()
        if kind == "freed":
            e.sum().backward()
        else:
            e.add_(1)
        log.append("--")
        r = outcome(lambda: e.sum().backward())
        return r[0], snap(e.grad) if retain else None
    (r, _), log = both(case)
    assert r == "RuntimeError" and [k[0] for k in log[log.index("--") + 1:]] == ["hook", "prehook"]


# -- grad() and backward(inputs=...) run only what their inputs need, as torch's ------------------

@pytest.mark.parametrize("call", ["grad", "inputs", "inputs_mu", "grad_mu"])
def test_grad_and_backward_with_inputs_run_only_what_the_inputs_need(call):
    def case(m, log):
        a, mu, e, s = nowhere_chain(m, log)
        if call in ("grad", "inputs"):
            e.add_(1.0)              # no error: ExpBackward0 does not run
        loss = e.sum() + s.sum()
        f = {"grad": lambda: snap(m.autograd.grad(loss, [a])),
             "inputs": lambda: loss.backward(inputs=[a]),
             "grad_mu": lambda: snap(m.autograd.grad(loss, [mu])),
             "inputs_mu": lambda: loss.backward(inputs=[mu])}[call]
        return outcome(f), snap(a.grad), snap(e.grad), snap(mu.grad)
    (r, _, _, _), log = both(case)
    assert r[0] == "ok"


def test_backward_with_and_without_inputs_on_one_structure_keep_apart():
    # the engine caches a backward by the graph's structure and targets: backward(inputs=[a]) and
    # backward() of one structure name the same targets and run other nodes
    def case(m, log):
        res = []
        for inputs in (True, False, True, False):
            a, mu, e, s = nowhere_chain(m, log)
            log.append("--")
            loss = e.sum() + s.sum()
            res.append(outcome(lambda: loss.backward(inputs=[a] if inputs else None)))
        return res
    _, log = both(case)
    assert sum(1 for k in log if k != "--" and k[1] == "mu") == 6


# -- register_multi_grad_hook under grad() and backward(inputs=...) --------------------------------

@pytest.mark.parametrize("mode", ["all", "any"])
@pytest.mark.parametrize("call", ["backward", "grad_a", "grad_ab", "grad_c", "inputs_a", "inputs_b",
                                  "inputs_c", "grad_a_with_c"])
def test_multi_grad_hook_under_grad_and_backward_with_inputs(mode, call):
    def case(m, log):
        a = m.tensor([0.3, -1.2], dtype=m.float64, requires_grad=True)
        b = m.tensor([0.5, 2.0], dtype=m.float64, requires_grad=True)
        c = a * b
        ts = (a, c) if call == "grad_a_with_c" else (a, b)
        m.autograd.graph.register_multi_grad_hook(ts, lambda gs: log.append(snap(list(gs) if mode == "all" else gs)),
                                                  mode=mode)
        loss = c.sin().sum() * 2
        f = {"backward": lambda: loss.backward(),
             "grad_a": lambda: snap(m.autograd.grad(loss, [a])),
             "grad_a_with_c": lambda: snap(m.autograd.grad(loss, [a])),
             "grad_ab": lambda: snap(m.autograd.grad(loss, [a, b])),
             "grad_c": lambda: snap(m.autograd.grad(loss, [c])),
             "inputs_a": lambda: loss.backward(inputs=[a]),
             "inputs_b": lambda: loss.backward(inputs=[b]),
             "inputs_c": lambda: loss.backward(inputs=[c])}[call]
        return outcome(f), snap(a.grad), snap(b.grad)
    (r, _, _), log = both(case)
    if mode == "all" and call in ("grad_a", "grad_ab", "grad_a_with_c"):
        # torch's _will_engine_execute_node refuses a leaf whose gradient grad() returns
        assert r == ("RuntimeError", "A leaf node was passed to _will_engine_execute_node but we are currently "
                                     "running autograd.grad(). This is currently not supported.")


@pytest.mark.parametrize("mode", ["all", "any"])
@pytest.mark.parametrize("call", ["backward", "grad_mu", "grad_e", "inputs_mu", "inputs_a", "grad_a"])
def test_multi_grad_hook_on_nodes_with_no_path_to_a_leaf(mode, call):
    def case(m, log):
        a, mu, e, s = nowhere_chain(m, [], node_hooks=False)
        m.autograd.graph.register_multi_grad_hook(
            (mu, s, e), lambda gs: log.append(snap(list(gs) if mode == "all" else gs)), mode=mode)
        loss = e.sum() + s.sum() * 2
        f = {"backward": lambda: loss.backward(),
             "grad_mu": lambda: snap(m.autograd.grad(loss, [mu])),
             "grad_e": lambda: snap(m.autograd.grad(loss, [e])),
             "inputs_mu": lambda: loss.backward(inputs=[mu]),
             "inputs_a": lambda: loss.backward(inputs=[a]),
             "grad_a": lambda: snap(m.autograd.grad(loss, [a]))}[call]
        return outcome(f)
    r, log = both(case)
    if mode == "all" and call == "grad_mu":     # mu's node has no edge on: a leaf to torch's check
        assert r[0] == "RuntimeError"
    else:
        assert r[0] == "ok" and len(log) == 1
