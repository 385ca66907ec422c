"""The Triton backend on IEEE special values (NaN, +-inf, +-0.0, subnormals, the largest
floats), under Triton's interpreter, against torch: NaN wins in max/min/argmax reductions,
pow follows C's special cases (and computes |x| ** y in float64), floor_divide by zero and
a zero quotient keep torch's signs, round keeps the sign of a zero and leaves large floats
alone, log1p and expm1 of huge values are inf, fmod by an infinite divisor is the dividend.
Each case failed before its fix (a NaN row's max came out inf, 1 ** inf NaN, 7 ** 2 49.000008,
x // 0 NaN, round(2**23 + 1) 2**23 + 2, log1p(3e38) NaN, fmod(1, inf) NaN). The kernels also
compile for sm_90 with the real compiler."""
import os

import numpy as np
import pytest
import torch

from test_triton_interpret import triton, triton_interpreter  # noqa: F401  (the interpreter's set-up)

import tracegrad as tg  # noqa: E402
from triton_checks import check_special, special_cases  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("name", sorted(special_cases()))
def test_special_values_against_torch(name):
    """NaN wins in max/min/argmax (each dim, both dtypes), pow of two tensors, of a number
    exponent and of a number base over every pair of special values, floor_divide, fmod and
    remainder by zero and infinity, round/log1p/expm1 at the edges."""
    check_special(name)


def test_the_special_value_kernels_compile_for_sm90():
    """float64 exp/log in pow, NaN-propagating max, the new helpers: the real compiler takes them."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    import triton_traffic as TT
    rng = np.random.default_rng(0)
    x, y = (tg.tensor(rng.standard_normal((64, 256)).astype(np.float32)) for _ in range(2))

    def f(m, a, b):
        return (m.pow(a, b) + a ** 2.5 + 2.0 ** b + m.floor_divide(a, b) + m.round(a) + m.log1p(a.abs())
                + m.expm1(b) + m.fmod(a, b)).amax(1) + a.argmax(1)
    before = os.environ.pop("TRITON_INTERPRET", None)
    try:
        progs = TT.programs(f, [x, y])
    finally:
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before
    specs = [s for _, prog in progs for s in TT.kernel_specs(prog)]
    assert specs
    results = TT.compile_all(specs, arch=90)
    assert not [r for r in results if "error" in r], results
    assert not [r for r in results if r["spill"]], results
