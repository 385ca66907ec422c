"""Two races between threads calling one compiled function whose argument sizes change (its
automatic dynamic shapes): each made a call raise (TypeError "'NoneType' object is not
iterable", a KeyError of the program's structure) where eager runs. Each race is forced here
the way the other thread's write interleaves; then a stress run of threads against eager."""
import threading
import warnings

import numpy as np

import tracegrad as tg


def _f(x, w):
    return ((x @ w).tanh() * x.shape[0]).sum()


class _SeenByAnotherThread(dict):
    """self._seen as a thread sees it when another thread's failed dynamic build stores None for
    a structure between its `in` test and its setdefault."""

    def __contains__(self, key):
        return False


def test_failed_dynamic_build_stored_meanwhile_compiles_statically():
    cf = tg.compile(_f)
    x, w = tg.ones(2, 3, dtype=tg.float64), tg.ones(3, 2, dtype=tg.float64)
    cf(x, w)
    seen = _SeenByAnotherThread((k, None) for k in cf._seen)
    cf._seen = seen
    x3 = tg.ones(5, 3, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cf(x3, w)
    assert got.item() == _f(x3, w).item()


def _g(x, w):
    return (x @ w).tanh().sum()          # (no size read as a number: its dynamic build succeeds)


def test_dims_dropped_by_another_thread_during_a_dynamic_build():
    cf = tg.compile(_g)
    compile_ = cf._compile

    def compile_then_drop(args, kwargs, dyn=None):
        out = compile_(args, kwargs, dyn)
        cf._dims.clear()          # another thread's failed dynamic build of this structure, meanwhile
        return out
    cf._compile = compile_then_drop
    w = tg.ones(3, 2, dtype=tg.float64)
    for n in (2, 4, 6):
        x = tg.arange(3 * n, dtype=tg.float64).reshape(n, 3) / 10
        assert cf(x, w).item() == _g(x, w).item()
    assert cf.last_program.sym_check is not None          # the build was dynamic


def test_threads_with_changing_sizes_and_dtypes_match_eager():
    problems = []
    for trial in range(4):
        cf = tg.compile(_f)

        def work(k, trial=trial, cf=cf):
            rng = np.random.default_rng(100 * trial + k)
            for rep in range(20):
                n, m = int(rng.integers(1, 9)), int(rng.integers(1, 4))
                dt = tg.float64 if rep % 3 else tg.float32
                x = tg.tensor(rng.standard_normal((n, 3)), dtype=dt)
                w = tg.tensor(rng.standard_normal((3, m)), dtype=dt, requires_grad=True)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        r = cf(x, w)
                    r.backward()
                    w2 = w.detach().clone().requires_grad_()
                    r2 = _f(x, w2)
                    r2.backward()
                    tol = 1e-5 if dt is tg.float32 else 1e-12
                    if not np.allclose(r.item(), r2.item(), rtol=tol) or \
                            not np.allclose(w.grad.numpy(), w2.grad.numpy(), rtol=tol, atol=tol):
                        problems.append((trial, k, rep, r.item(), r2.item()))
                except Exception as e:      # reported below
                    problems.append((trial, k, rep, repr(e)))
                    return
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not problems, problems[:3]
