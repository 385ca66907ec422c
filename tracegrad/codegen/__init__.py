"""Code generation from IR: numpy for the CPU (numpy_cpu.py)."""
from .numpy_cpu import generate, compile_graph  # noqa: F401
