"""The IR: graphs (graph.py), values and their types (values.py), printing (printer.py) and
verification (verify.py).

A pure data structure: it imports nothing of tracegrad outside `ir/`, so passes, code
generators and tests can use it without the eager library. `tracegrad.ir.graph_of(t)` and
`tracegrad.ir.backward_graph_of(t)`, which read a tensor's recorded graph, live with the
engine (`autograd/recorded.py`); the package's `__init__` puts them on this namespace.
"""
from .graph import Graph, V  # noqa: F401
from .verify import verify  # noqa: F401
