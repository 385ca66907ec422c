"""The Triton backend's numeric checks against torch, on any device: random programs (value,
gradients and a Hessian-vector product) and IEEE special values. The interpreter's tests
(test_triton_random.py, test_triton_special_values.py) run them on CPU tensors;
test_triton_on_a_gpu.py runs them on "cuda" tensors, through this file as a script, so that
a real GPU's compiled kernels meet the same cases:

    python tests/triton_checks.py programs|special [SHARD/SHARDS] [SEEDS]

prints one JSON line: how many cases ran and the failures. This module sets nothing up: with
TRITON_INTERPRET=1 in the environment "cuda" runs on Triton's interpreter, else on the GPU."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracegrad as tg  # noqa: E402

from test_stress import _loss, run_program  # noqa: E402


def _host(t):
    return t.detach().cpu().numpy()


# -- random programs ----------------------------------------------------------------------------------

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


def check_close(got, want, what):
    want = want.detach().numpy()
    got = np.asarray(_host(got), dtype=np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    # float32 arithmetic against float64: relative to the result's own scale
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4 * scale, err_msg=what)


def check_program(seed, device="cpu"):
    """seed's program compiled with backend="triton" on `device` (float32): its value, gradients
    and Hessian-vector product (the first derivative compiled again) against torch's float64.
    Returns the compiled function."""
    from tracegrad.codegen import triton_gpu
    ref = torch_program(seed)
    assert ref is not None, f"seed {seed}: torch rejects the program"
    arrays, vs, tout, tgrads, thv = ref
    f = tg.compile(lambda *xs: _loss(tg, run_program(tg, seed, xs)), backend="triton", fullgraph=True)
    xs = [tg.tensor(a.copy(), requires_grad=True, device=device) for a in arrays]
    out = f(*xs)
    assert isinstance(f.last_program.fwd_fn.program, triton_gpu.TritonProgram)
    assert str(out.device).startswith(device), (out.device, device)
    check_close(out, tout, f"seed {seed}: value")
    grads = tg.autograd.grad(out, xs, create_graph=True, allow_unused=True, materialize_grads=True)
    for i, (a, b) in enumerate(zip(grads, tgrads)):
        check_close(a, b, f"seed {seed}: gradient {i}")
    terms = [(gr * tg.tensor(v.astype(np.float32), device=device)).sum() for gr, v in zip(grads, vs)
             if gr.requires_grad]
    if terms:
        hv = tg.autograd.grad(sum(terms[1:], terms[0]), xs, allow_unused=True, materialize_grads=True)
        for i, (a, b) in enumerate(zip(hv, thv)):
            check_close(a, b, f"seed {seed}: Hessian-vector product {i}")
    return f


# -- IEEE special values ------------------------------------------------------------------------------

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, -2.5, 2.0, 3.0, 7.0, -7.0, 100.0,
           1e-40, 1e-8, 3e38, -3e38]
ULPS = {"float32": 2.0 ** -21, "float16": 2.0 ** -9, "float64": 2.0 ** -50}          # 2 units in the last place


def same(got, want, dtype, what):
    """NaN where torch has NaN, the same infinities, the sign of every zero; other values
    within 2 ulp (the interpreter's exp and log are numpy's, torch's its own)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), (what, got[np.isnan(got) != nan], want[np.isnan(got) != nan])
    exact = ~nan & (np.isinf(want) | (want == 0))
    bad = exact & ((got != want) | (np.signbit(got) != np.signbit(want)))
    assert not bad.any(), (what, np.argwhere(bad)[:5].tolist(), got[bad][:5], want[bad][:5])
    rest = ~nan & ~exact
    np.testing.assert_allclose(got[rest], want[rest], rtol=ULPS[dtype], atol=0, err_msg=what)


def pairs(dtype):
    v = np.array(SPECIAL, np.float64)
    return np.repeat(v, len(v)).astype(dtype), np.tile(v, len(v)).astype(dtype)


def quotient_pairs(dtype):
    """Dividends and divisors whose quotients pass 2 ** 24 (up to 2 ** 277 in float32, 2 ** 2098 in
    float64), subnormal divisors, and exact multiples (signed zero remainders)."""
    f = np.finfo(dtype)
    big = [1e10, 3e38, 1.7e308, 65504.0, 16777217.0, 2.0 ** 60 + 2.0 ** 8, 123456.789, 1e-30, 4.0, 6.0]
    small = [3.0, 7.0, 0.1, 1e-40, 1.4e-45, 5e-324, 2.5, 1.5, 2.0, 1e-7, 6.1e-5]
    v = np.array([b for b in big if b <= f.max], np.float64)
    w = np.array([s for s in small if s >= float(f.smallest_subnormal)], np.float64)
    a = np.concatenate([v, -v]).astype(dtype)
    b = np.concatenate([w, -w]).astype(dtype)
    return np.repeat(a, len(b)), np.tile(b, len(a))


def reference_division(op, a, b):
    """fmod, remainder and floor_divide as torch's CUDA kernels compute them (exact fmod; the
    remainder moved by b where its sign is not b's, a zero keeping fmod's sign; numpy's
    floor_divide, whose algorithm torch's div_floor copies), in the inputs' dtype."""
    with np.errstate(all="ignore"):
        m = np.fmod(a, b)
        if op == "fmod":
            return m
        if op == "remainder":
            return np.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)
        return np.floor_divide(a, b)


def _reduction(op, dim):
    if dim is None:
        return lambda m, x: getattr(m, op)(x)
    if op in ("max", "min"):
        return lambda m, x: getattr(m, op)(x, dim=dim)[0]
    return lambda m, x: getattr(m, op)(x, dim=dim)


def special_cases():
    """{id: (fn(m, *arrays), arrays, dtype, how)}: how is "exact" (positions), "same" (against
    torch), or "float64" (against torch's float64 result, rounded back: fmod and remainder are
    exact in any precision, and torch's float32 kernel takes a - trunc(a / b) * b in its
    vectorized loop, NaN where a / b overflows: fmod(7, 1e-40) is NaN on 8 elements), or
    "division" (bit for bit against reference_division: torch's CUDA kernels' definitions)."""
    out = {}
    for op in ("fmod", "remainder", "floor_divide"):
        out[f"{op}-large-quotients-float64"] = ((lambda op: lambda m, p, q: getattr(m, op)(p, q))(op),
                                                list(quotient_pairs("float64")), "float64", "division")
    a, b = pairs("float64")
    for op in ("copysign", "hypot"):
        out[f"{op}-float64"] = ((lambda op: lambda m, p, q: getattr(m, op)(p, q))(op), [a, b], "float64", "same")
    for dtype in ("float32", "float16"):
        x = np.array([[1.0, np.nan, np.inf, -3.0], [np.inf, -np.inf, 2.0, np.nan], [0.5, 2.0, -1.0, 0.0],
                      [-np.inf, -0.0, np.nan, 5.0], [4.0, 4.0, -2.0, 1.0]], dtype)
        for dim in (1, 0, None):
            for op in ("amax", "amin", "max", "min", "argmax", "argmin"):
                out[f"nan-wins-{op}-dim{dim}-{dtype}"] = (_reduction(op, dim), [x], dtype,
                                                         "exact" if op.startswith("arg") else "same")
        a, b = pairs(dtype)
        out[f"pow-tensors-{dtype}"] = (lambda m, p, q: m.pow(p, q), [a, b], dtype, "same")
        s = np.array(SPECIAL, dtype)
        for e in (2.5, -2.5, 5, -3, 0.5, 0.1, float("inf"), float("-inf")):
            out[f"pow-exponent{e}-{dtype}"] = ((lambda e: lambda m, p: p ** e)(e), [s], dtype, "same")
        for base in (2.0, 1.0, 0.5, -2.0):
            out[f"pow-base{base}-{dtype}"] = ((lambda base: lambda m, p: base ** p)(base), [s], dtype, "same")
        for op in ("floor_divide", "fmod", "remainder"):
            out[f"{op}-{dtype}"] = ((lambda op: lambda m, p, q: getattr(m, op)(p, q))(op), [a, b], dtype,
                                    "float64" if op in ("fmod", "remainder") else "same")
        for op in ("fmod", "remainder", "floor_divide"):
            out[f"{op}-large-quotients-{dtype}"] = ((lambda op: lambda m, p, q: getattr(m, op)(p, q))(op),
                                                    list(quotient_pairs(dtype)), dtype, "division")
        for op in ("copysign", "hypot", "heaviside"):
            out[f"{op}-{dtype}"] = ((lambda op: lambda m, p, q: getattr(m, op)(p, q))(op), [a, b], dtype, "same")
        out[f"copysign-number-{dtype}"] = (lambda m, p: m.copysign(p, -0.0) + m.copysign(p, 2.0), [a], dtype, "same")
        out[f"signbit-{dtype}"] = (lambda m, p: m.signbit(p), [np.concatenate([a, -a])], dtype, "exact")
        # a number operand is a literal in the kernel (the array beside it holds its value, for
        # the reference)
        p, q = quotient_pairs(dtype)
        for op in ("fmod", "remainder", "floor_divide"):
            out[f"{op}-number-divisor-{dtype}"] = ((lambda op: lambda m, x, _: getattr(m, op)(x, -2.5))(op),
                                                   [p, np.full_like(p, -2.5)], dtype, "division")
        out[f"remainder-number-dividend-{dtype}"] = (lambda m, _, y: m.remainder(7.5, y),
                                                     [np.full_like(q, 7.5), q], dtype, "division")
        edges = np.array(SPECIAL + [-0.3, 0.3, -1.5, 2.5, 8388609.0, -8388609.0, 16777215.0, 88.0, 89.0, 700.0],
                         dtype)
        for op in ("round", "log1p", "expm1"):
            out[f"{op}-edges-{dtype}"] = ((lambda op: lambda m, p: getattr(m, op)(p))(op), [edges], dtype, "same")
    return out


def check_special(name, device="cpu"):
    fn, arrays, dtype, how = special_cases()[name]
    f = tg.compile(lambda *xs: fn(tg, *xs), backend="triton")
    got = _host(f(*[tg.tensor(a, device=device) for a in arrays]))
    if how == "float64":
        want = fn(torch, *[torch.tensor(a.astype(np.float64)) for a in arrays]).numpy().astype(dtype)
    else:
        want = fn(torch, *[torch.tensor(a) for a in arrays]).numpy()
    if how == "division":
        want = reference_division(name.split("-")[0], *arrays)
        bad = ~((got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want)))
        assert not bad.any(), (name, np.argwhere(bad)[:5].tolist(), [a[bad][:5] for a in arrays], got[bad][:5],
                               want[bad][:5])
        return
    if how == "exact":
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        same(got, want, dtype, name)


def main(argv):
    import warnings
    warnings.filterwarnings("ignore")
    kind = argv[0]
    shard, shards = (int(v) for v in (argv[1] if len(argv) > 1 else "0/1").split("/"))
    if kind == "programs":
        names = valid_seeds(int(argv[2]) if len(argv) > 2 else 150)
        check = check_program
    else:
        names = sorted(special_cases())
        check = check_special
    fails, n = [], 0
    for name in names[shard::shards]:
        n += 1
        try:
            with np.errstate(all="ignore"):
                check(name, "cuda")
        except Exception as e:
            fails.append(f"{kind} {name}: {type(e).__name__}: {str(e)[:600]}")
            print(fails[-1], file=sys.stderr, flush=True)      # as it happens: a run cut short keeps it
        print(f"done {kind} {name}", file=sys.stderr, flush=True)
    print(json.dumps({"n": n, "fails": fails}))


if __name__ == "__main__":
    main(sys.argv[1:])
