"""torch.backends.cpu: the vector instructions the CPU kernels (numpy's) use."""
import numpy as np


def get_cpu_capability():
    """"AVX512", "AVX2" or "DEFAULT", as torch names them, from numpy's own runtime dispatch."""
    try:
        features = np._core._multiarray_umath.__cpu_features__
    except AttributeError:
        return "DEFAULT"
    if all(features.get(f) for f in ("AVX512F", "AVX512CD", "AVX512BW", "AVX512DQ", "AVX512VL")):
        return "AVX512"
    if features.get("AVX2") and features.get("FMA3"):
        return "AVX2"
    return "DEFAULT"
