"""The numeric sweeps of the tests marked `gpu`, run side by side under one deadline, for a
lent GPU machine whose time is short: every op of tests/op_db.py forward and backward
(against the CPU and torch), random programs and IEEE special values compiled for the GPU
(tests/triton_checks.py). Each sweep runs in shards, one process each; what a shard finds is
written as it happens, so a sweep cut off at the deadline still reports its failures.

Run: python benchmarks/gpu_checks.py OUT_DIR [SECONDS] [PROGRAM_SEEDS]"""
import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]


def main():
    out = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 300
    seeds = sys.argv[3] if len(sys.argv) > 3 else "48"
    os.makedirs(out, exist_ok=True)
    import test_cuda_interpret as T
    env = T._env(interpret=os.environ.get("TRITON_INTERPRET") == "1")   # the interpreter: a dry run
    checks = os.path.join(ROOT, "tests", "triton_checks.py")
    jobs = [("ops", i, 6, [sys.executable, "-c", T.OPS_SCRIPT, "float32", f"{i}/6"]) for i in range(6)]
    jobs += [("programs", i, 6, [sys.executable, checks, "programs", f"{i}/6", seeds]) for i in range(6)]
    jobs += [("special", i, 3, [sys.executable, checks, "special", f"{i}/3"]) for i in range(3)]
    procs = []
    for kind, i, n, cmd in jobs:
        stem = os.path.join(out, f"{kind}_{i}")
        procs.append((kind, i, subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=open(stem + ".json", "w"),
                                                stderr=open(stem + ".err", "w"), start_new_session=True)))
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(p.poll() is None for _, _, p in procs):
        time.sleep(1)
    lines = []
    for kind, i, p in procs:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait()
            state = "cut off at the deadline"
        else:
            state = f"exit {p.returncode}"
        stem = os.path.join(out, f"{kind}_{i}")
        try:
            r = json.loads(open(stem + ".json").read().strip().splitlines()[-1])
            got = {k: v for k, v in r.items() if k in ("n", "fwd", "bwd")}
            fails = r["fails"]
        except (IndexError, ValueError):
            err = open(stem + ".err").read().splitlines()
            got = {"done": sum(ln.startswith("done ") for ln in err)}
            fails = [ln for ln in err if ln.split(" ")[0] in ("programs", "special") or ": " in ln and
                     not ln.startswith(("done ", " ", "Traceback", "  "))][:50]
        lines.append(f"{kind} shard {i}: {state} {got} failures {len(fails)}")
        lines += [f"    {f[:700]}" for f in fails]
    text = "\n".join(lines)
    open(os.path.join(out, "checks.txt"), "w").write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
