"""The "cuda" device without a GPU: TRITON_INTERPRET=1 makes tracegrad's CUDA tensors CPU
torch tensors run by Triton's interpreter, so every eager op, autograd, the optimizers,
compile(backend="auto") and the demo run on the device path here.

TRITON_INTERPRET is read when triton and tracegrad are imported, so each check runs in a
subprocess with the variable set; many checks share one subprocess (one JSON result).
Tests marked `gpu` run the same checks on a real GPU and skip without one.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tracegrad.ops.primitives import PRIMITIVES
from tracegrad.ops.lowering import Refuse
import tracegrad.ops.math_primitives  # noqa: F401  (registers the primitives)

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(interpret):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.path.join(ROOT, "tests"), PYTHONWARNINGS="ignore")
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return env


def run_script(script, interpret=True, timeout=400, args=()):
    r = subprocess.run([sys.executable, "-c", script, *args], env=_env(interpret), capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_sharded(script, shards, interpret=True, timeout=400):
    """script over the ops in `shards` processes at once (argv: dtype, "i/n"), results merged:
    on a GPU each process compiles its own kernels, so the sweep takes the cores it is given."""
    procs = [subprocess.Popen([sys.executable, "-c", script, "float32", f"{i}/{shards}"], env=_env(interpret),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
             for i in range(shards)]
    merged = {"fwd": 0, "bwd": 0, "fails": [], "stats": {}, "host_ops": []}
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-4000:]
        r = json.loads(out.strip().splitlines()[-1])
        merged["fwd"] += r["fwd"]
        merged["bwd"] += r["bwd"]
        merged["fails"] += r["fails"]
        for k, v in r["stats"].items():
            merged["stats"][k] = merged["stats"].get(k, 0) + v
        merged["host_ops"] = sorted(set(merged["host_ops"]) | set(r["host_ops"]))
    return merged


def has_gpu():
    return torch.cuda.is_available()


gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")


# -- every op of tests/op_db.py, forward and backward: cuda vs cpu vs torch -------------------------

OPS_SCRIPT = r"""
import json, sys, warnings
import numpy as np
import torch
import tracegrad as tg
import op_db

warnings.filterwarnings("ignore")
CREATE = {"tensor", "zeros", "ones", "full", "arange", "empty", "eye", "linspace", "rand", "randn", "randint",
          "as_tensor"}


class OnCuda:
    # tracegrad whose creation functions default to device="cuda" (constants made inside an op's fn)
    def __getattr__(self, name):
        f = getattr(tg, name)
        if name not in CREATE:
            return f
        def make(*a, **k):
            k.setdefault("device", "cuda")
            return f(*a, **k)
        return make


CUDA = OnCuda()
DTYPE = sys.argv[1] if len(sys.argv) > 1 else "float32"
SHARD, SHARDS = (int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "0/1").split("/"))
fails, n_fwd, n_bwd = [], 0, 0


def run(m, dev, arrays, op, s, grad):
    if m is torch:
        xs = [torch.tensor(a, requires_grad=grad) for a in arrays]
    else:
        xs = [tg.tensor(a, device=dev, requires_grad=grad) for a in arrays]
    out = op.fn(m, *xs, **s.kwargs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    gs = None
    if grad:
        fl = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
        if fl:
            tot = sum((o * (k + 1.5)).sum() for k, o in enumerate(fl))
            gs = (torch if m is torch else tg).autograd.grad(tot, xs, allow_unused=True)
    return outs, gs


def host(t):
    assert t.is_cuda and t.device == tg.device("cuda:0"), f"result on {t.device}"
    return t.detach().cpu().numpy()


for op in op_db.OPS[SHARD::SHARDS]:
    for i, s in enumerate(op.samples):
        dt = DTYPE if DTYPE in op.dtypes else None
        if dt is None or (s.dtypes is not None and dt not in s.dtypes):
            continue
        arrays = [op_db.make_array(sh, dt, s.domain_of(k, op), f"{op.name}-{i}-{k}")
                  for k, sh in enumerate(s.shapes)]
        grad = op.grad and s.grad and dt in ("float32", "float64")
        name = op_db.sample_id(op, i, s)
        try:
            try:
                to, tgr = run(torch, None, arrays, op, s, grad)
            except Exception:
                continue                       # torch refuses this sample in this dtype
            co, cg = run(tg, "cpu", arrays, op, s, grad)
            go, gg = run(CUDA, "cuda", arrays, op, s, grad)
            assert len(go) == len(co)
            tol = dict(rtol=1e-4, atol=1e-5) if dt == "float32" else dict(rtol=1e-7, atol=1e-9)
            for a, b, c in zip(go, co, to):
                assert str(a.dtype) == str(b.dtype) == str(c.dtype), (a.dtype, b.dtype, c.dtype)
                assert a.requires_grad == b.requires_grad
                ha = host(a)
                np.testing.assert_allclose(ha, b.detach().numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
                np.testing.assert_allclose(ha, c.detach().numpy(), equal_nan=True, **tol)
            n_fwd += 1
            if cg is not None:
                for a, b, c in zip(gg, cg, tgr):
                    assert (a is None) == (b is None), "gradient present on one device only"
                    if a is None:
                        continue
                    ha = host(a)
                    np.testing.assert_allclose(ha, b.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
                    if c is not None:
                        np.testing.assert_allclose(ha, c.numpy(), equal_nan=True, **tol)
                n_bwd += 1
        except Exception as e:
            fails.append(f"{name}: {type(e).__name__}: {str(e)[:400]}")
            print(fails[-1], file=sys.stderr, flush=True)      # as it happens: a run cut short keeps it
print(json.dumps({"fwd": n_fwd, "bwd": n_bwd, "fails": fails, "stats": dict(tg.cuda.STATS),
                  "host_ops": sorted(tg.cuda.HOST_OPS)}))
"""

# primitives the Triton lowering refuses for some calls: they run their numpy kernel on a host
# copy (convolutions and einsum on integers: tl.dot is lowered for floats only)
HOST_OK = {"conv2d", "conv_transpose2d", "conv2d_weight", "einsum", "index_put", "as_strided_scatter",
           "getitem_backward", "scatter"}
# lowered primitives whose generated kernel fails on some samples (0-d softmax rows, integer
# maximum/minimum, pow and norm on some dtypes): those samples fall back to the host kernel
HOST_OK |= {"softmax", "log_softmax", "maximum", "minimum", "pow", "norm"}
# primitives the op table gives no Triton lowering (inverse and hyperbolic functions, scans,
# sorting, linear algebra): they run their numpy kernel on a host copy by design
HOST_OK |= {name for name, prim in PRIMITIVES.items() if isinstance(prim.triton, Refuse)}


def check_ops(result):
    assert not result["fails"], "\n".join(result["fails"])
    assert result["stats"]["triton"] > 10 * result["stats"].get("host", 0)
    assert result["stats"]["backward_triton"] > result["stats"].get("backward_eager", 0)
    assert set(result["host_ops"]) <= HOST_OK, result["host_ops"]


def test_every_op_forward_and_backward_on_cuda_matches_cpu_and_torch():
    r = run_sharded(OPS_SCRIPT, 2)
    assert r["fwd"] > 600 and r["bwd"] > 450, r
    check_ops(r)


@gpu
@needs_gpu
def test_every_op_on_a_gpu():
    r = run_sharded(OPS_SCRIPT, max(1, min(8, (os.cpu_count() or 2) // 2)), interpret=False, timeout=900)
    assert r["fwd"] > 600 and r["bwd"] > 450, r
    check_ops(r)


# -- tensors, transfers, errors ----------------------------------------------------------------------

DEVICE_SCRIPT = r"""
import json
import numpy as np
import tracegrad as tg
import tracegrad.nn as nn

out = {}
x = tg.tensor([1., 2.], device="cuda")
out["repr"] = repr(x)
out["repr_grad"] = repr(tg.tensor([1.5], device="cuda", requires_grad=True) * 2)
out["repr_i"] = repr(tg.arange(3, device="cuda"))
out["device"] = [str(x.device), repr(x.device), x.is_cuda, x.device.type, x.device.index, x.device == tg.device("cuda:0")]
out["avail"] = [tg.cuda.is_available(), tg.cuda.device_count()]
tg.cuda.synchronize()
c = x.cpu()
out["cpu"] = [str(c.device), c.is_cuda, repr(c)]
out["to"] = [str(c.to("cuda").device), str(c.to(tg.device("cuda")).device), str(x.to("cpu").device),
             str(c.cuda().device), str(x.to(x.device).device), x.to("cuda") is x, c.to("cpu") is c,
             str(c.to("cuda", tg.float64).dtype), str(c.to(x).device),
             str(c.to(device="cuda").device)]
made = {}
for name, t in [("zeros", tg.zeros(2, 3, device="cuda")), ("ones", tg.ones(2, device="cuda")),
                ("full", tg.full((2,), 7., device="cuda")), ("empty", tg.empty(2, device="cuda")),
                ("eye", tg.eye(2, device="cuda")), ("arange", tg.arange(4, device="cuda")),
                ("linspace", tg.linspace(0, 1, 5, device="cuda")), ("rand", tg.rand(3, device="cuda")),
                ("randn", tg.randn(3, device="cuda")), ("randint", tg.randint(0, 5, (3,), device="cuda")),
                ("zeros_like", tg.zeros_like(x)), ("ones_like", tg.ones_like(x)), ("full_like", tg.full_like(x, 2)),
                ("randn_like", tg.randn_like(x)), ("new_zeros", x.new_zeros(2)), ("new_tensor", x.new_tensor([1])),
                ("tensor_dev", tg.tensor([1], device=tg.device("cuda", 0))), ("as_tensor", tg.as_tensor([1.], device="cuda")),
                ("cuda0", tg.ones(1, device="cuda:0"))]:
    made[name] = str(t.device)
out["made"] = made
out["seed"] = [tg.manual_seed(3) and None, tg.randn(4, device="cuda").cpu().tolist(), tg.manual_seed(3) and None,
               tg.randn(4).tolist()]
errs = {}
def err(name, f):
    try:
        f()
        errs[name] = None
    except Exception as e:
        errs[name] = [type(e).__name__, str(e)]
err("mixed", lambda: x + tg.ones(2))
err("mixed_rev", lambda: tg.ones(2) + x)
err("mixed_mm", lambda: tg.ones(2, 2, device="cuda") @ tg.ones(2, 2))
err("mixed_cat", lambda: tg.cat([x, tg.ones(2)]))
err("mixed_index_select", lambda: tg.index_select(x, 0, tg.tensor([0])))
out["cpu_index_ok"] = x[tg.tensor([1, 0])].cpu().tolist()
err("numpy", lambda: x.numpy())
err("array", lambda: np.asarray(x))
err("bad_device", lambda: tg.zeros(1, device="tpu"))
err("bad_index", lambda: tg.zeros(1, device="cuda:3"))
wd = tg.ones(2, device="cuda", requires_grad=True)
def set_grad():
    wd.grad = tg.ones(2)
err("grad_device", set_grad)
out["errs"] = errs
import copy
m2 = nn.Linear(2, 2).cuda()
m2.load_state_dict(nn.Linear(2, 2).state_dict())
out["state"] = [str(copy.deepcopy(wd).device), sorted({str(v.device) for v in m2.state_dict().values()}),
                x.get_device(), x.cpu().get_device()]
out["scalar_ok"] = (x + tg.tensor(1.)).cpu().tolist()   # a 0-dim CPU tensor mixes, as in torch
w_inf = tg.ones(2, device="cuda", requires_grad=True)
with tg.inference_mode():
    y_inf = w_inf * 2
out["inference"] = [y_inf.requires_grad, y_inf.grad_fn is None]   # no graph inside inference_mode, as torch
out["item"] = [x.sum().item(), x.tolist(), float(x[1]), int(tg.tensor(3, device="cuda")), bool(x[0] > 0)]

# round trips, bit for bit
rng = np.random.default_rng(0)
rt = {}
for name, a in [("f32", rng.standard_normal((3, 5)).astype(np.float32)), ("f64", rng.standard_normal(7)),
                ("i64", rng.integers(-2**62, 2**62, (4, 2))), ("i32", rng.integers(-2**31, 2**31 - 1, 6, dtype=np.int32)),
                ("bool", rng.random(9) > 0.5), ("f16", rng.standard_normal(5).astype(np.float16)),
                ("special", np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, 3.4e38], np.float32)),
                ("empty", np.zeros((0, 3), np.float32)), ("scalar", np.array(2.5))]:
    t = tg.tensor(a)
    back = t.cuda().cpu().numpy()
    rt[name] = [back.dtype == a.dtype, back.shape == a.shape, back.tobytes() == a.tobytes(),
                str(t.cuda().dtype) == str(t.dtype)]
v = tg.arange(12.).reshape(3, 4).t()
rt["noncontig"] = [v.cuda().cpu().numpy().tobytes() == np.ascontiguousarray(v.numpy()).tobytes()]
out["roundtrip"] = rt
# the copies are independent
a = tg.zeros(3); b = a.cuda(); b.add_(1); out["independent"] = [a.tolist(), b.cpu().tolist()]

# autograd across devices and on the device
w = tg.tensor([1., 2., 3.], requires_grad=True)
wc = w.cuda()
out["tocopy"] = [type(wc.grad_fn).__name__, wc.is_leaf]
(wc * wc).sum().backward()
out["grad_through_transfer"] = [w.grad.tolist(), str(w.grad.device)]
p = tg.tensor([1., -2., 3.], device="cuda", requires_grad=True)
y = (p.exp() * p).sum()
y.backward()
out["grad_on_device"] = [str(p.grad.device), p.grad.cpu().tolist(), type(y.grad_fn).__name__]
(p * 2).sum().backward()
out["grad_accumulates"] = p.grad.cpu().tolist()
g, = tg.autograd.grad((p ** 3).sum(), p, create_graph=True)
g2, = tg.autograd.grad(g.sum(), p)
out["double"] = [str(g.device), str(g2.device), g2.cpu().tolist()]
q = p.detach().cpu().requires_grad_()
(q.cuda() * 3).sum().backward()
out["grad_from_cuda_to_cpu_leaf"] = [str(q.grad.device), q.grad.tolist()]
h = []
p.register_hook(lambda gr: h.append(str(gr.device)))
(p * 1).sum().backward()
out["hook"] = h
m = nn.Linear(3, 2).cuda()
out["module"] = [str(t.device) for t in m.parameters()] + [str(m(tg.ones(4, 3, device="cuda")).device)]
m.cpu()
out["module_cpu"] = [str(t.device) for t in m.parameters()]
z = tg.zeros(4, device="cuda")
z[1:3] = 5.
z.mul_(2)
z[tg.tensor([0])] = tg.tensor([1.], device="cuda")
out["inplace"] = [z.cpu().tolist(), z._version]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def dev():
    return run_script(DEVICE_SCRIPT)


def test_repr_and_attributes(dev):
    assert dev["repr"] == "tensor([1., 2.], device='cuda:0')"
    assert dev["repr_grad"] == "tensor([3.], device='cuda:0', grad_fn=<MulBackward0>)"
    assert dev["repr_i"] == "tensor([0, 1, 2], device='cuda:0')"
    assert dev["device"] == ["cuda:0", "device(type='cuda', index=0)", True, "cuda", 0, True]
    assert dev["avail"] == [True, 1]
    assert dev["cpu"] == ["cpu", False, "tensor([1., 2.])"]


def test_transfers_and_creation_on_device(dev):
    assert dev["to"] == ["cuda:0", "cuda:0", "cpu", "cuda:0", "cuda:0", True, True, "torch.float64", "cuda:0",
                         "cuda:0"]
    assert set(dev["made"].values()) == {"cuda:0"}, dev["made"]
    assert dev["seed"][1] == dev["seed"][3]          # the same numbers as on the CPU
    assert dev["independent"] == [[0., 0., 0.], [1., 1., 1.]]
    assert dev["scalar_ok"] == [2., 3.]
    assert dev["item"] == [3.0, [1.0, 2.0], 2.0, 3, True]
    assert dev["inference"] == [False, True]


def test_round_trips_are_bit_for_bit(dev):
    for name, checks in dev["roundtrip"].items():
        assert all(checks), (name, checks)


def test_device_errors_match_torch(dev):
    e = dev["errs"]
    mixed = ["RuntimeError", "Expected all tensors to be on the same device, but found at least two devices, "
             "cuda:0 and cpu!"]
    assert e["mixed"] == mixed and e["mixed_cat"] == mixed
    # ops whose generated wrapper checks each named argument name it (torch's wording)
    assert e["mixed_mm"] == ["RuntimeError", "Expected all tensors to be on the same device, but got mat2 is on cpu, "
                             "different from other tensors on cuda:0 (when checking argument in method "
                             "wrapper_CUDA_mm)"]
    assert e["mixed_index_select"] == ["RuntimeError", "Expected all tensors to be on the same device, but got index "
                                       "is on cpu, different from other tensors on cuda:0 (when checking argument in "
                                       "method wrapper_CUDA__index_select)"]
    assert dev["cpu_index_ok"] == [2., 1.]            # a CPU index tensor may index a CUDA tensor
    assert e["mixed_rev"] == ["RuntimeError", "Expected all tensors to be on the same device, but found at least "
                              "two devices, cpu and cuda:0!"]
    numpy_msg = ["TypeError", "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                 "tensor to host memory first."]
    assert e["numpy"] == numpy_msg and e["array"] == numpy_msg
    assert e["bad_device"][0] == "RuntimeError" and "Expected one of cpu, cuda" in e["bad_device"][1]
    assert e["bad_index"] == ["RuntimeError", "CUDA error: invalid device ordinal"]
    assert e["grad_device"] == ["RuntimeError", "assigned grad has data located on a different device"]
    assert dev["state"] == ["cuda:0", ["cuda:0"], 0, -1]


def test_autograd_on_the_device(dev):
    import numpy as np
    assert dev["tocopy"] == ["ToCopyBackward0", False]
    assert dev["grad_through_transfer"] == [[2., 4., 6.], "cpu"]
    p = np.array([1., -2., 3.], np.float32)
    d, grad, name = dev["grad_on_device"]
    assert d == "cuda:0" and name == "SumBackward0"
    np.testing.assert_allclose(grad, np.exp(p) * (1 + p), rtol=1e-6)
    np.testing.assert_allclose(dev["grad_accumulates"], np.exp(p) * (1 + p) + 2, rtol=1e-6)
    assert dev["double"][:2] == ["cuda:0", "cuda:0"]
    np.testing.assert_allclose(dev["double"][2], 6 * p)
    assert dev["grad_from_cuda_to_cpu_leaf"] == ["cpu", [3., 3., 3.]]
    assert dev["hook"] == ["cuda:0"]
    assert dev["module"] == ["cuda:0"] * 3 and dev["module_cpu"] == ["cpu"] * 2
    assert dev["inplace"][0] == [1., 10., 10., 0.]


def test_without_gpu_or_interpreter_cuda_is_refused_and_torch_is_not_imported():
    if has_gpu():
        pytest.skip("a CUDA GPU is available here")
    r = run_script(r"""
import json, sys
import tracegrad as tg
out = {"torch_imported": "torch" in sys.modules, "avail": [tg.cuda.is_available(), tg.cuda.device_count()]}
x = tg.ones(2)
for name, f in [("zeros", lambda: tg.zeros(1, device="cuda")), ("cuda", lambda: x.cuda()), ("to", lambda: x.to("cuda")),
                ("module", lambda: tg.nn.Linear(1, 1).cuda())]:
    try:
        f()
        out[name] = None
    except RuntimeError as e:
        out[name] = str(e)
out["cpu_still"] = [str(x.device), x.is_cuda, str((x + 1).device)]
print(json.dumps(out))
""", interpret=False)
    assert r["torch_imported"] is False and r["avail"] == [False, 0]
    for k in ("zeros", "cuda", "to", "module"):
        assert r[k].startswith("Torch not compiled with CUDA enabled") and "TRITON_INTERPRET=1" in r[k], r[k]
    assert r["cpu_still"] == ["cpu", False, "cpu"]


# -- training, compile, demo ----------------------------------------------------------------------

TRAIN_SCRIPT = r"""
import json
import numpy as np
import tracegrad as tg
import tracegrad.nn as nn

def train(dev, make_opt, steps=6, compiled=False):
    tg.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3)).to(dev)
    opt = make_opt(m.parameters())
    X = tg.randn(32, 5).to(dev)
    Y = tg.randint(0, 3, (32,)).to(dev)
    f = tg.compile(m) if compiled else m
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(f(X), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    devs = sorted({str(p.device) for p in m.parameters()} | {str(p.grad.device) for p in m.parameters()})
    return losses, [p.detach().cpu().numpy() for p in m.parameters()], devs, f

out = {}
opts = {"sgd": lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
        "adam": lambda ps: tg.optim.Adam(ps, lr=0.01), "adamw": lambda ps: tg.optim.AdamW(ps, lr=0.01),
        "rmsprop": lambda ps: tg.optim.RMSprop(ps, lr=0.01, momentum=0.5),
        # its accumulator made in __init__, on the parameters' device (it was a host array)
        "adagrad": lambda ps: tg.optim.Adagrad(ps, lr=0.1, initial_accumulator_value=0.1)}
for name, make in opts.items():
    lc, pc, _, _ = train("cpu", make)
    lg, pg, devs, _ = train("cuda", make)
    out[name] = {"loss_cpu": lc, "loss_cuda": lg, "param_diff": max(float(np.abs(a - b).max()) for a, b in zip(pc, pg)),
                 "devices": devs}
lc, pc, _, _ = train("cpu", opts["adam"])
lg, pg, devs, f = train("cuda", opts["adam"], compiled=True)
out["compiled"] = {"loss_cpu": lc, "loss_cuda": lg, "devices": devs,
                   "param_diff": max(float(np.abs(a - b).max()) for a, b in zip(pc, pg)),
                   "triton": "@triton.jit" in f.last_program.fwd_fn.source and "@triton.jit" in f.last_program.bwd_fn.source}

g = tg.compile(lambda x, w: (tg.tanh(x * w) + x).sum(1).mean())
x = tg.randn(4, 8, requires_grad=True); w = tg.randn(8, requires_grad=True)
yc = g(x, w); yc.backward()
src_cpu = g.last_program.fwd_fn.source
xg, wg = x.detach().cuda().requires_grad_(), w.detach().cuda().requires_grad_()
yg = g(xg, wg); yg.backward()
out["auto"] = {"cpu_numpy": "@triton.jit" not in src_cpu, "cuda_triton": "@triton.jit" in g.last_program.fwd_fn.source,
               "out_device": str(yg.device), "grad_device": str(xg.grad.device),
               "diff": [abs(yc.item() - yg.item()), float(np.abs(x.grad.numpy() - xg.grad.cpu().numpy()).max()),
                        float(np.abs(w.grad.numpy() - wg.grad.cpu().numpy()).max())]}
print(json.dumps(out))
"""


def test_training_on_cuda_matches_cpu_and_compile_auto_picks_triton():
    r = run_script(TRAIN_SCRIPT)
    import numpy as np
    for name in ("sgd", "adam", "adamw", "rmsprop", "adagrad", "compiled"):
        np.testing.assert_allclose(r[name]["loss_cuda"], r[name]["loss_cpu"], rtol=1e-5, err_msg=name)
        assert r[name]["param_diff"] < 1e-5, (name, r[name]["param_diff"])
        assert r[name]["devices"] == ["cuda:0"], name
        assert r[name]["loss_cuda"][-1] < r[name]["loss_cuda"][0]
    assert r["compiled"]["triton"]
    a = r["auto"]
    assert a["cpu_numpy"] and a["cuda_triton"] and a["out_device"] == "cuda:0" and a["grad_device"] == "cuda:0"
    assert max(a["diff"]) < 1e-5


def test_demo_runs_on_cuda_under_the_interpreter(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    for extra in ([], ["--compile"]):
        r = subprocess.run([sys.executable, "-m", "tracegrad.demo", "--device", "cuda", "--subset", "20",
                            "--epochs", "1", "--batch-size", "8", "--quiet", "--out", str(tmp_path)] + extra,
                           env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "test accuracy" in r.stdout


@gpu
@needs_gpu
def test_training_and_demo_on_a_gpu(tmp_path):
    r = run_script(TRAIN_SCRIPT, interpret=False)
    for name in ("sgd", "adam", "adamw", "compiled"):
        assert abs(r[name]["loss_cuda"][-1] - r[name]["loss_cpu"][-1]) < 1e-3, name
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, "-m", "tracegrad.demo", "--device", "cuda", "--epochs", "2", "--quiet",
                        "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]


ADAM_CACHE_SCRIPT = r"""
import json, numpy as np, tracegrad as tg
from tracegrad import cuda
rng = np.random.default_rng(0)
w0, x0 = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
runs = {}
for dev in ("cpu", "cuda"):
    w = tg.tensor(w0.copy(), device=dev, requires_grad=True)
    x = tg.tensor(x0.copy(), device=dev)
    opt = tg.optim.Adam([w], lr=0.05)
    sizes = []
    for step in range(10):
        opt.zero_grad()
        (x @ w).tanh().pow(2).sum().backward()
        opt.step()
        sizes.append(len(cuda._KERNELS))
    runs[dev] = (w.detach().cpu().numpy(), sizes)
print(json.dumps({"diff": float(np.abs(runs["cpu"][0] - runs["cuda"][0]).max()), "sizes": runs["cuda"][1]}))
"""


def test_eager_adam_reuses_its_kernels_every_step():
    """Adam's step-dependent scalars (bias corrections) are kernel arguments, not source
    text: after the first steps no step compiles a kernel, and the result is CPU Adam's."""
    r = run_script(ADAM_CACHE_SCRIPT)
    assert r["diff"] < 1e-5, r
    sizes = r["sizes"]
    assert sizes[2] == sizes[-1], sizes


DEVICE_BACKWARD_SCRIPT = r"""
import json, numpy as np, tracegrad as tg
rng = np.random.default_rng(0)
arrays = [rng.standard_normal(s).astype(np.float32) for s in ((6, 5), (5, 4), (4,))]
f = tg.compile(lambda x, w, b: (x @ w + b).relu().pow(2).sum())
grads = {}
for dev in ("cpu", "cuda"):
    ts = [tg.tensor(a.copy(), device=dev, requires_grad=True) for a in arrays]
    f(*ts).backward()
    grads[dev] = [t.grad.cpu().numpy() for t in ts]
    if dev == "cuda":
        p = f.last_program
print(json.dumps({"diff": max(float(np.abs(a - b).max()) for a, b in zip(grads["cpu"], grads["cuda"])),
                  "double": p.double is not None, "bwd_triton": "@triton.jit" in p.bwd_fn.source}))
"""


def test_device_backward_of_a_compiled_call_runs_its_partitioned_program():
    """Without create_graph the backward launches the partitioned backward kernels, not the
    differentiable program that traces and recomputes the forward (matmuls included)."""
    r = run_script(DEVICE_BACKWARD_SCRIPT)
    assert r["diff"] < 1e-5, r
    assert r["bwd_triton"] and not r["double"], r


OUTPUT_CHANGED_SCRIPT = r"""
import json, numpy as np, tracegrad as tg
out = {}
for name in ("exp", "tanh", "times two"):
    f = {"exp": lambda x: tg.exp(x), "tanh": lambda x: tg.tanh(x), "times two": lambda x: x * 2}[name]
    x = tg.tensor(np.array([0.5, 1.0, 2.0], np.float32), device="cuda", requires_grad=True)
    y = tg.compile(f)(x)
    y.mul_(2)
    try:
        y.sum().backward()
        out[name] = x.grad.cpu().numpy().tolist()
    except RuntimeError as e:
        out[name] = "raises" if "modified by an inplace operation" in str(e) else str(e)
print(json.dumps(out))
"""


def test_a_compiled_output_changed_in_place_on_the_device_raises_as_on_the_cpu():
    """The device's saved values are checked as the CPU's (its arrays compared by storage):
    exp's and tanh's backward read their output, which y.mul_(2) changed."""
    r = run_script(OUTPUT_CHANGED_SCRIPT)
    assert r == {"exp": "raises", "tanh": "raises", "times two": [4.0, 4.0, 4.0]}, r


HOST_WARNING_SCRIPT = r"""
import json, warnings, numpy as np, tracegrad as tg
from tracegrad.codegen import triton_gpu
def broken(self, *args):
    raise RuntimeError("out of resources: shared memory")
triton_gpu.TritonProgram.__call__ = broken
x = tg.tensor(np.arange(4, dtype=np.float32), device="cuda")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    y = (x * 3).cpu().numpy()
    z = (x * 5).cpu().numpy()
print(json.dumps({"y": y.tolist(), "z": z.tolist(), "warnings": [str(m.message) for m in w]}))
"""


def test_a_kernel_that_fails_to_launch_runs_on_the_host_with_a_warning():
    r = run_script(HOST_WARNING_SCRIPT)
    assert r["y"] == [0.0, 3.0, 6.0, 9.0] and r["z"] == [0.0, 5.0, 10.0, 15.0]
    msgs = [m for m in r["warnings"] if "Triton kernel of mul failed" in m]
    assert len(msgs) == 1 and "host copy" in msgs[0] and "out of resources" in msgs[0], r["warnings"]


REPEATED_INDEX_SCRIPT = r"""
import json
import numpy as np, torch, tracegrad as tg
xn = np.arange(12.).reshape(3, 4)
x = tg.tensor(xn, device="cuda", requires_grad=True)
idx = tg.tensor([0, 2, 0], device="cuda")
j = tg.tensor([1, 3, 1], device="cuda")
((x[1:, idx] * 2).sum() + (x[idx, 1] ** 2).sum() + (x[idx, j] * 3).sum() + x[1, idx].sum()).backward()
xt, it, jt = torch.tensor(xn, requires_grad=True), torch.tensor([0, 2, 0]), torch.tensor([1, 3, 1])
((xt[1:, it] * 2).sum() + (xt[it, 1] ** 2).sum() + (xt[it, jt] * 3).sum() + xt[1, it].sum()).backward()
z = tg.zeros(5, device="cuda")
z.index_put_((tg.tensor([1, 1, 3], device="cuda"),), tg.tensor([1., 2., 3.], device="cuda"), accumulate=True)
print(json.dumps({"grad": x.grad.cpu().numpy().tolist(), "want": xt.grad.numpy().tolist(),
                  "put": z.cpu().numpy().tolist()}))
"""


def test_repeated_indices_add_up_on_the_device():
    """The gradient of x[idx] with a repeated index, and index_put_(accumulate=True), add every
    repeat (a plain indexed assignment keeps one)."""
    r = run_script(REPEATED_INDEX_SCRIPT)
    np.testing.assert_array_equal(r["grad"], r["want"])
    assert r["put"] == [0.0, 3.0, 0.0, 3.0, 0.0]
