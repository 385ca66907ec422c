"""Building a program allocates many small objects that live until it is built (graph
nodes, attribute dicts, argument tuples): Python's cyclic collector would walk all of
them again and again while they pile up, a third of the time of compiling a long chain.
`paused()` holds it off while a program is built; the objects that turn out to be
garbage are collected as usual afterwards.

Most of what a compiled program's build makes outlives it: the program keeps its graphs
(a 10,000-op chain's are half a million tracked objects). Left in the youngest
generation, they are walked by the next young collection and again, in the middle
generation, by the one after (0.14 s and 0.2 s for that chain, in its first call and its
first backward), only to be found alive. With `promote`, a build that left more than
PROMOTE_AFTER new tracked objects moves them straight to the oldest generation when it
ends (gc.freeze then gc.unfreeze: every tracked object goes there, none is walked), where
full collections look at them as at any long-lived object; the young generations are
collected when the pause begins, so that what moves is what the build made. Where the
application froze objects itself (gc.freeze before a fork), its freeze is left alone and
the objects age as usual."""
import contextlib
import gc

PROMOTE_AFTER = 100_000


@contextlib.contextmanager
def paused(promote=False):
    was = gc.isenabled()
    if was and promote:
        gc.collect(1)          # the young generations' garbage from before the build: freed now
    gc.disable()
    try:
        yield
    finally:
        if was:
            # (the youngest generation's count: tracked objects made, less those freed, since
            # its last collection, which is the one above)
            if promote and gc.get_count()[0] > PROMOTE_AFTER and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
