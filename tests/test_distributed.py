"""tracegrad.distributed, DistributedDataParallel and DistributedSampler.

The collectives and DDP run as real jobs: `mpiexec -n 2` and `-n 4` over this machine's
loopback, each rank running tests/mpi_scripts/dist_checks.py (every check prints PASS or
FAIL on every rank). The MPI library is the mpich wheel of the `distributed` extra."""
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.autograd import engine
from tracegrad.utils.data.distributed import DistributedSampler, torch_randperm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "tests", "mpi_scripts")

try:
    import mpi4py  # noqa: F401
    HAVE_MPI = True
except ImportError:
    HAVE_MPI = False
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason='mpi4py is not installed: pip install "tracegrad[distributed]"')


def mpiexec():
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.path.exists(here) else shutil.which("mpiexec")
    assert found, "mpi4py is installed but mpiexec is not on PATH nor beside python (pip install mpich)"
    return found


def run_job(n, script, *args, timeout=240):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    t0 = time.monotonic()
    p = subprocess.run([mpiexec(), "-n", str(n), sys.executable, os.path.join(SCRIPTS, script), *map(str, args)],
                       capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    return p, time.monotonic() - t0


CHECKS = ["process_group", "collectives_all_reduce", "collectives_broadcast_gather_scatter", "async_work_handles",
          "differentiable_all_reduce", "ddp_w2_matches_single_process", "ddp_no_sync_accumulates",
          "ddp_find_unused_parameters", "ddp_broadcasts_buffers", "ddp_rebuilds_buckets_in_ready_order", "ddp_compiled_forward",
          "ddp_compile_of_ddp", "ddp_compiled_whole_step"]
_JOBS = {}


def job(n):
    if n not in _JOBS:
        _JOBS[n] = run_job(n, "dist_checks.py", n)[0]
    return _JOBS[n]


@needs_mpi
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("name", CHECKS)
def test_distributed_job(world, name):
    p = job(world)
    out = p.stdout
    # the ranks' lines reach mpiexec's output interleaved: count the marks, not lines
    passed = len(re.findall(rf"PASS {name}(?![a-z_])", out))
    failed = len(re.findall(rf"FAIL {name}(?![a-z_])", out))
    if passed != world or failed:
        i = out.find(f"FAIL {name}")
        detail = out[i:i + 3000] if i >= 0 else out[-3000:] + p.stderr[-3000:]
        pytest.fail(f"{name} passed on {passed} of {world} ranks (exit {p.returncode}):\n{detail}")


@needs_mpi
def test_job_exit_status():
    p = job(2)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


@needs_mpi
def test_raising_rank_stops_the_others_fast():
    p, took = run_job(2, "dist_fail.py", "raise", 30)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "ValueError: rank 1 cannot read its shard" in out
    # rank 0 learns why at its next collective, long before the 30 s timeout
    assert "rank 1 of 2 failed (ValueError: rank 1 cannot read its shard)" in out, out[-3000:]
    assert "second step done" not in out
    assert took < 25, f"the job took {took:.1f} s to stop"


@needs_mpi
def test_hung_rank_times_out():
    p, took = run_job(2, "dist_fail.py", "hang", 2)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "timed out on rank 0 of 2 after 2 s" in out, out[-3000:]
    assert "second step done" not in out
    assert took < 40, f"the job took {took:.1f} s to stop (rank 1 sleeps 60 s)"


# -- without a job --------------------------------------------------------------------------
def test_not_initialized_and_other_backends():
    import tracegrad.distributed as dist
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.get_rank()
    with pytest.raises(RuntimeError, match="backend 'nccl' is not available"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="has not been initialized"):
        tg.nn.parallel.DistributedDataParallel(tg.nn.Linear(2, 2))


def test_queue_callback_runs_after_the_gradients_are_delivered():
    w = tg.randn(3, requires_grad=True)
    seen = []

    def hook(g):
        engine.queue_callback(lambda: seen.append(None if w.grad is None else w.grad.numpy().copy()))
    w.register_hook(hook)
    (w * 2).sum().backward()
    assert len(seen) == 1 and np.array_equal(seen[0], np.full(3, 2.0, np.float32))
    with pytest.raises(RuntimeError, match="only be installed during backward"):
        engine.queue_callback(lambda: None)


@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
def test_randperm_is_torchs(n):
    for seed in (0, 5, 2 ** 40 + 3):
        g = torch.Generator()
        g.manual_seed(seed)
        assert torch_randperm(n, seed) == torch.randperm(n, generator=g).tolist()


@pytest.mark.parametrize("n", [1, 3, 10, 11, 100])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_matches_torch(n, replicas, shuffle, drop_last):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    data = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=7,
                                  drop_last=drop_last)
        theirs = TorchSampler(data, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=7, drop_last=drop_last)
        for epoch in (0, 3):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs)
            assert len(ours) == len(theirs) and ours.total_size == theirs.total_size


def test_distributed_sampler_errors():
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedSampler(list(range(4)), num_replicas=2, rank=2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(list(range(4)))


@needs_mpi
def test_demo_trains_data_parallel_to_the_single_process_accuracy(tmp_path):
    from tracegrad import demo
    args = ["--epochs", "2", "--subset", "167", "--quiet"]     # 133 training images: a last batch of 3 + 2
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    p = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "tracegrad.demo", "--distributed", *args,
                        "--out", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300, env=env,
                       cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "averaged across 2 processes" in p.stdout
    found = re.findall(r"test accuracy: ([\d.]+)% \((\d+)/(\d+)\)", p.stdout)
    assert len(found) == 1, p.stdout            # rank 0 reports, the other rank is quiet
    single = demo.main(args + ["--out", str(tmp_path / "single")])
    assert int(found[0][1]) == round(single["test_accuracy"] * int(found[0][2]))
    assert os.path.exists(tmp_path / "dist" / "training_curves.png")


@needs_mpi
def test_readme_training_script_runs_on_two_processes(tmp_path):
    text = open(os.path.join(ROOT, "README.md")).read()
    block = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "DistributedSampler" in b]
    assert len(block) == 1
    script = tmp_path / "train.py"
    script.write_text(block[0])
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    p = subprocess.run([mpiexec(), "-n", "2", sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert sorted(re.findall(r"rank (\d) of 2: loss", p.stdout)) == ["0", "1"], p.stdout


@pytest.mark.parametrize("seed", range(6))
def test_bucket_assignment_is_torchs(seed):
    """DDP's buckets: torch's compute_bucket_assignment_by_size (by declaration order, and
    in a given ready order as the rebuild after the first backward)."""
    import torch.distributed as tdist
    from tracegrad.nn.parallel.distributed import _assign_buckets
    rng = np.random.default_rng(seed)
    shapes = [tuple(rng.integers(1, 40, rng.integers(1, 3))) for _ in range(12)]
    dtypes = [("float32", "float64")[int(k)] for k in rng.integers(0, 2 if seed % 2 else 1, 12)]
    ours = [tg.zeros(s, dtype=getattr(tg, d)) for s, d in zip(shapes, dtypes)]
    theirs = [torch.zeros(s, dtype=getattr(torch, d)) for s, d in zip(shapes, dtypes)]
    for limits in ([400], [300, 2000], [1 << 62]):
        want, _ = tdist._compute_bucket_assignment_by_size(theirs, limits)
        assert _assign_buckets(ours, range(12), limits, sort=True) == want
        order = [int(i) for i in rng.permutation(12)]
        want, _ = tdist._compute_bucket_assignment_by_size([theirs[i] for i in order], limits, [False] * 12, order)
        got = _assign_buckets(ours, order, limits)
        if len({*dtypes}) == 1:
            assert got == want
        else:                      # torch leaves the order of the open buckets (one per dtype) unspecified
            assert sorted(got) == sorted(want)
