#!/usr/bin/env bash
# The checks and benchmarks that need a CUDA GPU, in one command for a lent GPU machine: its
# python3 (with torch and triton) runs the repository's tests marked `gpu` (every op, training
# and the demo, random programs and special values compiled for the GPU) and
# benchmarks/bench_compile.py --device cuda. Each stage has a time limit, so the run ends inside
# the machine's and what finished is kept. Logs and JSON go to $OUT (default benchmarks/out/gpu),
# packed into gpu_run.tgz at the end.
#
#   bash benchmarks/gpu_run.sh [tests] [steps] [checks SECONDS] [bench W2,W6,W8] [bench W3,W4,W5] ...
#
# `steps` runs the whole-training-step scripts of tests/test_triton_on_a_gpu.py (four optimizers,
# then eight corners, each compiled step against the eager step) on the GPU itself, side by side.
#   (no arguments: tests, then every workload)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/out/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PYTHONDONTWRITEBYTECODE=1
PY=${PY:-python3}
TESTS_S=${TESTS_S:-240}
BENCH_S=${BENCH_S:-150}
[ $# -eq 0 ] && set -- tests bench W2,W6,W8 bench W3,W4,W5 bench W7

# run "$@" in a process group of its own, killed whole at the limit or when it ends: a test run
# cut off leaves no worker compiling kernels on the host while the next stage measures
limited() {
  local secs=$1; shift
  setsid "$@" &
  local pid=$!
  ( sleep "$secs"; kill -9 -- -"$pid" 2>/dev/null ) &
  local killer=$!
  wait "$pid"; local rc=$?
  kill "$killer" 2>/dev/null
  kill -9 -- -"$pid" 2>/dev/null
  return $rc
}

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
  $PY -c "import sys, torch, triton, numpy, networkx; print(sys.version.split()[0], 'torch', torch.__version__, \
'cuda', torch.version.cuda, 'triton', triton.__version__, 'numpy', numpy.__version__, 'networkx', \
networkx.__version__, torch.cuda.get_device_name())"
  $PY -c "import tracegrad as tg; print('tracegrad cuda available:', tg.cuda.is_available())"
  nproc
} 2>&1 | tee "$OUT/env.txt"

while [ $# -gt 0 ]; do
  case "$1" in
    tests)
      shift
      echo "== tests marked gpu (limit ${TESTS_S} s)"
      limited "$TESTS_S" $PY -m pytest -q -m gpu -p no:cacheprovider -rfE -n 4 --durations=10 \
        tests/test_cuda_interpret.py tests/test_triton_interpret.py tests/test_triton_on_a_gpu.py \
        > "$OUT/gpu_tests.log" 2>&1
      echo "tests exit: $? (137: cut off at the limit)" >> "$OUT/gpu_tests.log"
      tail -60 "$OUT/gpu_tests.log"
      ;;
    steps)
      shift
      echo "== whole training steps compiled for the GPU against eager (limit ${STEPS_S:-150} s)"
      for script in STEP_SCRIPT STEP_CASES_SCRIPT; do
        limited "${STEPS_S:-150}" $PY -c "import sys; sys.path.insert(0, 'tests'); import test_triton_on_a_gpu as t; \
exec(compile(t.$script, '$script', 'exec'))" > "$OUT/steps_$script.log" 2>&1 &
      done
      wait
      for script in STEP_SCRIPT STEP_CASES_SCRIPT; do echo "-- $script"; tail -c 3000 "$OUT/steps_$script.log"; done
      ;;
    checks)
      secs=$2; shift 2
      echo "== numeric sweeps on the GPU (limit ${secs} s)"
      limited $((secs + 60)) $PY benchmarks/gpu_checks.py "$OUT/checks" "$secs" > "$OUT/checks.log" 2>&1
      tail -80 "$OUT/checks.log"
      ;;
    bench)
      only=$2; shift 2
      echo "== bench_compile --device cuda --only $only (limit ${BENCH_S} s)"
      limited "$BENCH_S" $PY benchmarks/bench_compile.py --device cuda --repeat 15 --only "$only" ${BENCH_ARGS:-} \
        --out "$OUT/bench_${only//,/_}" > "$OUT/bench_${only//,/_}.log" 2>&1
      echo "bench $only exit: $?"
      tr '\r' '\n' < "$OUT/bench_${only//,/_}.log" | grep -v '^\s*$' | tail -12
      ;;
    *)
      echo "unknown stage $1"; shift
      ;;
  esac
done
(cd "$OUT" && tar czf gpu_run.tgz --exclude=gpu_run.tgz . 2>/dev/null)
ls -la "$OUT"
