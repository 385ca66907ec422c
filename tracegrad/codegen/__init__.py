"""Code generation from IR: numpy for the CPU (numpy_cpu.py), Triton kernels and their
launcher (triton_gpu.py), and the memory traffic of those kernels (triton_traffic.py).

Only numpy_cpu.py loads with the package; the Triton modules load on first use. Importing
them needs neither a GPU nor triton: they import triton and torch only when a kernel is
built or run."""
from .numpy_cpu import generate, compile_graph  # noqa: F401
