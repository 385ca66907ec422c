"""Anomaly detection: forward ops remember where they were created; backward checks
every gradient a derivative rule produces and names the forward op that made a NaN."""
import threading
import warnings
import functools

from .. import tracing as tracer
from ..tensor import _VALUE_READS, read_setting

_state = threading.local()


def _anomaly():
    return (tracer._ANOMALY[0], tracer._ANOMALY_NAN[0])


def is_anomaly_enabled():
    if _VALUE_READS[0]:
        read_setting("anomaly detection", _anomaly)     # a branch on it in a compiled function
    return tracer._ANOMALY[0]


def is_anomaly_check_nan_enabled():
    if _VALUE_READS[0]:
        read_setting("anomaly detection", _anomaly)
    return tracer._ANOMALY[0] and tracer._ANOMALY_NAN[0]


class set_detect_anomaly:
    """Turn anomaly detection on or off (at once, and as a context manager restoring it)."""

    def __init__(self, mode, check_nan=True):
        self.prev = (tracer._ANOMALY[0], tracer._ANOMALY_NAN[0])
        tracer._ANOMALY[0] = bool(mode)
        tracer._ANOMALY_NAN[0] = bool(check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        tracer._ANOMALY[0], tracer._ANOMALY_NAN[0] = self.prev


class detect_anomaly:
    """Context manager (and decorator) enabling anomaly detection."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = None
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only "
                      "be enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self):
        self.prev = (tracer._ANOMALY[0], tracer._ANOMALY_NAN[0])
        tracer._ANOMALY[0] = True
        tracer._ANOMALY_NAN[0] = self.check_nan
        return self

    def __exit__(self, *exc):
        tracer._ANOMALY[0], tracer._ANOMALY_NAN[0] = self.prev

    def __call__(self, fn):

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with self.__class__(self.check_nan):
                return fn(*a, **k)
        return wrapper
