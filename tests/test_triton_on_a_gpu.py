"""The Triton backend's numeric checks (tests/triton_checks.py) on "cuda" tensors: random
programs (value, gradients, Hessian-vector product against torch's float64) and IEEE special
values. On a real GPU (tests marked `gpu`) every case runs, in one process per pair of cores;
without one a few cases run on Triton's interpreter, so the path stays exercised in CI."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def run_checks(kind, shards, interpret, extra=(), timeout=900):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + HERE, PYTHONWARNINGS="ignore")
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "triton_checks.py"), kind, f"{i}/{shards}",
                               *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT) for i in range(shards)]
    n, fails = 0, []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-4000:]
        r = json.loads(out.strip().splitlines()[-1])
        n += r["n"]
        fails += r["fails"]
    return n, fails


def gpu_shards():
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def test_random_programs_on_cuda_under_the_interpreter():
    n, fails = run_checks("programs", 1, interpret=True, extra=["2"])
    assert n == 2 and not fails, fails


def test_special_values_on_cuda_under_the_interpreter():
    n, fails = run_checks("special", 2, interpret=True)
    assert n > 60 and not fails, "\n".join(fails)


@pytest.mark.gpu
@needs_gpu
def test_random_programs_on_a_gpu():
    n, fails = run_checks("programs", gpu_shards(), interpret=False, extra=["150"])
    assert n == 150 and not fails, "\n".join(fails)


@pytest.mark.gpu
@needs_gpu
def test_special_values_on_a_gpu():
    n, fails = run_checks("special", gpu_shards(), interpret=False)
    assert n > 60 and not fails, "\n".join(fails)


DEVICE_SCRIPT = r"""
import json, warnings
import numpy as np
import tracegrad as tg
out = {}
x = tg.tensor([1., 2.], device="cuda", requires_grad=True)
unused = tg.tensor([3.], device="cuda", requires_grad=True)
g = tg.autograd.grad((x * x).sum(), [x, unused], materialize_grads=True)
out["materialized"] = [str(t.device) for t in g] + [g[1].cpu().tolist()]
def f(a):
    # constants made where the argument is, as user code writes them
    return a * tg.ones(2, device=a.device) + tg.tensor([10., 20.], device=a.device) + tg.zeros_like(a)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    cf = tg.compile(f, fullgraph=True)
    y = cf(x.detach())
out["compiled"] = [str(y.device), y.cpu().tolist(), [str(m.message) for m in w]]
out["traced_device"] = []
def probe(a):
    out["traced_device"] += [str(a.device), a.is_cuda, a.get_device()]
    return a + 1
tg.compile(probe)(x.detach())
print(json.dumps(out))
"""


def test_unused_inputs_and_constants_follow_the_device_on_cuda():
    """materialize_grads' zeros are made on the input's device (they were CPU tensors), and a
    compiled function that makes a constant with `device=x.device` traces (it fell back to eager
    with 'tensors on different devices'): the traced tensor reports the call's device."""
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS="ignore", TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", DEVICE_SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["materialized"] == ["cuda:0", "cuda:0", [0.0]]
    assert out["compiled"] == ["cuda:0", [11.0, 22.0], []], out["compiled"]
    assert out["traced_device"] == ["cuda:0", True, 0]


DEVICE_CASES_SCRIPT = r"""
import json, warnings
import numpy as np
import tracegrad as tg
x = tg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="cuda", requires_grad=True)
cases = {
    "is_cuda_branch": lambda a: a * 2 if a.is_cuda else a * 3,
    "device_type": lambda a: a * (2 if a.device.type == "cuda" else 3),
    "get_device": lambda a: a * (a.get_device() + 5),
    "to_cpu_returned": lambda a: (a * 2).cpu(),
    "cpu_round_trip": lambda a: (a.cpu() * 2).to(a.device).sum(),
    "cpu_zeros_moved": lambda a: a + tg.zeros(3).to(a.device),
    "full_like_on_cpu": lambda a: tg.full_like(a, 2.0, device="cpu"),
    "cpu_ones_mixed": lambda a: a + tg.ones(3),
    "new_zeros": lambda a: a + a.new_zeros(3),
    "new_tensor": lambda a: a * a.new_tensor([1., 2., 3.]),
    "arange": lambda a: a * tg.arange(3, device=a.device),
    "eye": lambda a: a @ tg.eye(3, device=a.device),
    "zeros_like": lambda a: a + tg.zeros_like(a),
}
out = {}
for name, fn in cases.items():
    res = []
    for run in (fn, tg.compile(fn)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = run(x)
            res.append([str(r.device), r.detach().cpu().numpy().tolist()])
        except RuntimeError as e:
            res.append(["raises", str(e)[:80]])
    out[name] = res
print(json.dumps(out))
"""


def test_a_compiled_function_on_cuda_answers_as_eager_about_devices():
    """Code that asks a traced tensor for its device (a branch on `is_cuda`, `device.type`,
    `get_device()`) took the CPU's branch and returned other numbers; tensors made on the CPU
    inside (a returned `.cpu()`, `full_like(..., device="cpu")`, `a + ones(3)`, which eager
    refuses) came out on the GPU or were added. Each now gives eager's values on eager's device,
    or the same error."""
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS="ignore", TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", DEVICE_CASES_SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for name, (eager, compiled) in out.items():
        assert eager == compiled, (name, eager, compiled)
    assert out["is_cuda_branch"][0][1] == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert out["cpu_ones_mixed"][0][0] == "raises"
    assert out["to_cpu_returned"][0][0] == "cpu" and out["full_like_on_cpu"][0][0] == "cpu"


STEP_SCRIPT = r"""
import warnings, copy, json
import numpy as np, tracegrad as tg, tracegrad.nn as nn, tracegrad.nn.functional as F
warnings.simplefilter("error", UserWarning)   # a fallback is a failure here
def make(opt_name):
    tg.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).cuda()
    m2 = copy.deepcopy(m)
    mk = {"sgd": lambda p: tg.optim.SGD(p, lr=0.1), "mom": lambda p: tg.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
          "adam": lambda p: tg.optim.Adam(p, lr=0.01), "adamw": lambda p: tg.optim.AdamW(p, lr=0.01, weight_decay=0.1)}[opt_name]
    return m, m2, mk(m.parameters()), mk(m2.parameters())
out = {}
r = np.random.default_rng(0)
xs = [tg.tensor(r.standard_normal((5, 6)).astype(np.float32), device="cuda") for _ in range(4)]
y = tg.tensor([0, 1, 2, 1, 0], device="cuda")
for name in ["sgd", "mom", "adam", "adamw"]:
    m, m2, o1, o2 = make(name)
    def body(mod, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(mod(x), y)
        loss.backward()
        tg.nn.utils.clip_grad_norm_(mod.parameters(), 1.0)
        opt.step()
        return loss
    step = tg.compile(lambda x, y: body(m, o1, x, y), fullgraph=True)
    diffs = []
    for x in xs:
        a = step(x, y); b = body(m2, o2, x, y)
        diffs.append(abs(a.item() - b.item()))
        diffs.append(max(float((p - q).abs().max().item()) for p, q in zip(m.parameters(), m2.parameters())))
        diffs.append(max(float((p.grad - q.grad).abs().max().item()) for p, q in zip(m.parameters(), m2.parameters())))
    devs = sorted({str(p.device) for p in m.parameters()} | {str(p.grad.device) for p in m.parameters()})
    st = [str(v.device) for s in o1.state.values() for v in s.values() if hasattr(v, "device")]
    out[name] = [max(diffs), devs, sorted(set(st)), type(step.last_program.fwd_fn.program).__name__ if step.last_program else None]
# in-place on an argument, twice with different tensors
f = tg.compile(lambda a, b: a.mul_(2).add_(b), fullgraph=True)
a1 = tg.ones(3, device="cuda"); a2 = tg.full((3,), 5.0, device="cuda"); bb = tg.arange(3., device="cuda")
v1 = a1[1:]
f(a1, bb); f(a2, bb)
out["inplace_args"] = [a1.cpu().tolist(), a2.cpu().tolist(), v1.cpu().tolist(), a1._version]
# .grad accumulation across two compiled backward calls inside one function
w = tg.ones(3, device="cuda", requires_grad=True)
g = tg.compile(lambda x: ((w * x).sum().backward(), (w * w * x).sum().backward()), fullgraph=True)
g(tg.arange(3., device="cuda")); g(tg.arange(3., device="cuda"))
out["grad_acc"] = [w.grad.cpu().tolist(), str(w.grad.device)]
print(json.dumps(out))
"""


def test_whole_training_steps_compile_for_cuda_tensors():
    """A training step (zero_grad, backward, clip_grad_norm_, step) on CUDA parameters compiles
    into one Triton program, as on the CPU, with SGD (momentum, nesterov, weight decay), Adam and
    AdamW: losses, parameters and gradients over four steps equal the eager step's bit for bit,
    the optimizer state lives where eager puts it (moments on the device, Adam's step count on
    the CPU). In-place writes to arguments go to each call's own argument (a view follows it);
    .grad accumulates across calls on the device. Before, such a function ran eagerly ("compiled
    for the numpy backend only")."""
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS="ignore", TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", STEP_SCRIPT], env=env, capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for name in ("sgd", "mom", "adam", "adamw"):
        diff, devices, state_devices, program = out[name]
        assert diff == 0.0 and devices == ["cuda:0"] and program == "TritonProgram", (name, out[name])
    assert out["mom"][2] == ["cuda:0"] and out["adam"][2] == ["cpu", "cuda:0"]
    assert out["inplace_args"][:3] == [[2.0, 3.0, 4.0], [10.0, 11.0, 12.0], [3.0, 4.0]]
    assert out["grad_acc"] == [[0.0, 6.0, 12.0], "cuda:0"]


STEP_CASES_SCRIPT = r"""
import warnings, copy, json
import numpy as np, tracegrad as tg, tracegrad.nn as nn, tracegrad.nn.functional as F
r = np.random.default_rng(1)
xs = [tg.tensor(r.standard_normal((5, 6)).astype(np.float32), device="cuda") for _ in range(4)]
y = tg.tensor([0, 1, 2, 1, 0], device="cuda")
def run(optf, body, n=4, between=None):
    tg.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).cuda()
    m2 = copy.deepcopy(m)
    o1, o2 = optf(m.parameters()), optf(m2.parameters())
    step = tg.compile(lambda x: body(m, o1, x))
    res = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for i in range(n):
            a = step(xs[i % 4]); b = body(m2, o2, xs[i % 4])
            if between: between(m, o1, m2, o2, i)
            av = a if isinstance(a, (tuple, list)) else (a,)
            bv = b if isinstance(b, (tuple, list)) else (b,)
            res.append(all(np.array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy()) and str(p.device) == str(q.device) for p, q in zip(av, bv)))
            res.append(all(np.array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy()) for p, q in zip(m.parameters(), m2.parameters())))
            res.append(all((p.grad is None) == (q.grad is None) and (p.grad is None or np.array_equal(p.grad.cpu().numpy(), q.grad.cpu().numpy())) for p, q in zip(m.parameters(), m2.parameters())))
    fb = [str(x.message)[:100] for x in w if "traced" in str(x.message) or "eager" in str(x.message)]
    return all(res), fb[:1]
def std(mod, opt, x):
    opt.zero_grad(); loss = F.cross_entropy(mod(x), y); loss.backward(); opt.step(); return loss
def keepgrad(mod, opt, x):
    opt.zero_grad(set_to_none=False); loss = F.cross_entropy(mod(x), y); loss.backward(); opt.step(); return loss
def accum(mod, opt, x):
    opt.zero_grad(); F.cross_entropy(mod(x[:3]), y[:3]).backward(); F.cross_entropy(mod(x[3:]), y[3:]).backward(); opt.step(); return x.sum()
def ret_views(mod, opt, x):
    opt.zero_grad(); loss = F.cross_entropy(mod(x), y); loss.backward(); opt.step(); return loss, mod[0].weight.grad, mod[0].weight[0], mod[2].bias.detach()
def no_zero(mod, opt, x):
    loss = F.cross_entropy(mod(x), y); loss.backward(); opt.step(); return loss
def freeze(m, o, m2, o2, i):
    if i == 1:
        m[0].bias.requires_grad_(False); m2[0].bias.requires_grad_(False)
def reload(m, o, m2, o2, i):
    if i == 1:
        sd = copy.deepcopy(o2.state_dict()); o.load_state_dict(copy.deepcopy(sd)); o2.load_state_dict(sd)
cases = {
 "amsgrad": (lambda p: tg.optim.Adam(p, lr=0.01, amsgrad=True), std, None),
 "sgd_damp_max": (lambda p: tg.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.3, maximize=True), std, None),
 "keepgrad_adamw": (lambda p: tg.optim.AdamW(p, lr=0.01), keepgrad, None),
 "accum_sgd": (lambda p: tg.optim.SGD(p, lr=0.1, momentum=0.9), accum, None),
 "ret_views": (lambda p: tg.optim.SGD(p, lr=0.1, momentum=0.9), ret_views, None),
 "no_zero": (lambda p: tg.optim.Adam(p, lr=0.01), no_zero, None),
 "freeze": (lambda p: tg.optim.Adam(p, lr=0.01), std, freeze),
 "reload": (lambda p: tg.optim.Adam(p, lr=0.01), std, reload),
}
out = {}
for n, (o, b, bt) in cases.items():
    try:
        out[n] = list(run(o, b, between=bt))
    except Exception as e:
        out[n] = ["raises", f"{type(e).__name__}: {str(e)[:200]}"]
print(json.dumps(out))
"""


def test_whole_cuda_steps_in_the_corners_equal_eager():
    """Compiled whole steps on CUDA parameters against the eager step, bit for bit over four
    calls (returned values, parameters, .grad), none run eagerly: Adam with amsgrad, SGD with
    dampening and maximize, zero_grad(set_to_none=False), two backward calls accumulated before
    the step, returned .grad and parameter views, a step without zero_grad, a bias frozen after
    the second call, the optimizer's state_dict reloaded between calls."""
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS="ignore", TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", STEP_CASES_SCRIPT], env=env, capture_output=True, text=True,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(out) == 8
    for name, (same, fallbacks) in out.items():
        assert same is True and fallbacks == [], (name, same, fallbacks)
