"""autograd.profiler.profile: counts and times of forward ops and backward nodes.

While a profile is active every op is timed (named as torch names them, "aten::mul"),
and backward runs node by node so each derivative rule's time is charged to its grad_fn
("MulBackward0"). key_averages().table() prints torch's columns; export_chrome_trace
writes the Chrome trace-event JSON that Perfetto and chrome://tracing load.
"""
import collections
import json
import os
import threading
import time

from .. import tracing as tracer

_ACTIVE = []          # active profiles (innermost last)
_LOCK = threading.Lock()


class FunctionEvent:
    __slots__ = ("name", "start_us", "end_us", "thread", "id", "shapes", "kind")

    def __init__(self, name, start_us, end_us, thread, shapes=None, kind="cpu_op"):
        self.name, self.start_us, self.end_us, self.thread = name, start_us, end_us, thread
        self.shapes = shapes
        self.kind = kind

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total

    def __repr__(self):
        return f"<FunctionEvent name={self.name} cpu_time_total={self.cpu_time_total:.3f}us>"


class FunctionEventAvg:
    def __init__(self, key):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.input_shapes = None

    def add(self, ev):
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / max(self.count, 1)

    def __repr__(self):
        return f"<FunctionEventAvg key={self.key} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us>"


def _fmt_us(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    def key_averages(self, group_by_input_shape=False):
        groups = collections.OrderedDict()
        for ev in self:
            k = (ev.key, str(ev.shapes)) if group_by_input_shape else ev.key
            groups.setdefault(k, FunctionEventAvg(ev.key)).add(ev)
            if group_by_input_shape:
                groups[k].input_shapes = ev.shapes
        return EventList(groups.values())

    def total_average(self):
        tot = FunctionEventAvg("Total")
        for ev in self:
            tot.count += getattr(ev, "count", 1)
            tot.cpu_time_total += ev.cpu_time_total
            tot.self_cpu_time_total += ev.self_cpu_time_total
        return tot

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, header=None, top_level_events_only=False):
        rows = list(self)
        if sort_by:
            key = sort_by.replace("self_cpu_time_total", "self_cpu_time_total").replace("cpu_time_total",
                                                                                        "cpu_time_total")
            rows.sort(key=lambda e: getattr(e, key, 0), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total_self = sum(e.self_cpu_time_total for e in self) or 1.0
        name_w = min(max([len(e.key) for e in rows] + [4]) + 2, max_name_column_width)
        cols = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        widths = [name_w, 12, 12, 12, 12, 12, 12]
        sep = "-" * name_w + "  " + "  ".join("-" * w for w in widths[1:])
        lines = [sep, "".join(c.ljust(w) if i == 0 else c.rjust(w) + "  " for i, (c, w) in
                              enumerate(zip(cols, widths))).rstrip(), sep]
        for e in rows:
            count = getattr(e, "count", 1)
            vals = [f"{100 * e.self_cpu_time_total / total_self:.2f}%", _fmt_us(e.self_cpu_time_total),
                    f"{100 * e.cpu_time_total / total_self:.2f}%", _fmt_us(e.cpu_time_total),
                    _fmt_us(e.cpu_time_total / max(count, 1)), str(count)]
            name = e.key if len(e.key) <= name_w - 2 else e.key[:name_w - 5] + "..."
            lines.append(name.ljust(name_w) + "".join(v.rjust(w) + "  " for v, w in zip(vals, widths[1:])).rstrip())
        lines.append(sep)
        lines.append(f"Self CPU time total: {_fmt_us(total_self)}")
        return "\n".join(lines) + "\n"

    def export_chrome_trace(self, path):
        events = []
        pid = os.getpid()
        for ev in self:
            events.append({"name": ev.name, "ph": "X", "ts": ev.start_us, "dur": ev.cpu_time_total, "pid": pid,
                           "tid": ev.thread, "cat": ev.kind,
                           "args": {"Input Dims": ev.shapes} if ev.shapes else {}})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


class profile:
    """torch.autograd.profiler.profile: with profile() as prof: ...; prof.key_averages().table()."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self._events = EventList()
        self._t0 = None

    def __enter__(self):
        if not self.enabled:
            return self
        self._t0 = time.perf_counter()
        with _LOCK:
            _ACTIVE.append(self)
            tracer._PROFILE[0] = _record_op
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return
        with _LOCK:
            _ACTIVE.remove(self)
            tracer._PROFILE[0] = _record_op if _ACTIVE else None

    def _add(self, name, t_start, t_end, shapes=None, kind="cpu_op"):
        us = lambda t: (t - self._t0) * 1e6
        self._events.append(FunctionEvent(name, us(t_start), us(t_end), threading.get_ident(),
                                          shapes if self.record_shapes else None, kind))

    def events(self):
        return self._events

    @property
    def function_events(self):
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return self._events.key_averages(group_by_input_shape)

    def total_average(self):
        return self._events.total_average()

    def table(self, **kw):
        return self._events.table(**kw)

    def export_chrome_trace(self, path):
        self._events.export_chrome_trace(path)

    def __str__(self):
        return self.key_averages().table()


def is_profiling():
    return bool(_ACTIVE)


def record(name, t0, t1, shapes=None, kind="cpu_op"):
    for p in list(_ACTIVE):
        p._add(name, t0, t1, shapes, kind)


def _record_op(prim, args, params, run):
    t0 = time.perf_counter()
    out = run()
    t1 = time.perf_counter()
    shapes = [list(a.shape) if hasattr(a, "shape") else [] for a in args]
    record("aten::" + prim.name, t0, t1, shapes)
    return out


class record_function:
    """A user-named range in the profile."""

    def __init__(self, name, args=None):
        self.name = name

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        record(self.name, self.t0, time.perf_counter(), kind="user_annotation")
