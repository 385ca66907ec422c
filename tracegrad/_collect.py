"""Building a program allocates many small objects that live until it is built (graph
nodes, attribute dicts, argument tuples): Python's cyclic collector would walk all of
them again and again while they pile up, a third of the time of compiling a long chain.
`paused()` holds it off while a program is built; the objects that turn out to be
garbage are collected as usual afterwards."""
import contextlib
import gc


@contextlib.contextmanager
def paused():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
