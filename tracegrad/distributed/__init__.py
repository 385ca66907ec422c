"""torch.distributed on MPI: a process group over MPI_COMM_WORLD and collectives on CPU tensors.

    mpiexec -n 2 python train.py        # init_process_group(backend="mpi") in train.py

The MPI library comes from wheels (`pip install "tracegrad[distributed]"`: mpi4py and
mpich, whose `mpiexec` lands beside python). Rank and world size are the launcher's.

Every collective runs on one communication thread per process, in the order the
program issued them (MPI needs the same order on every rank), as a non-blocking MPI
call polled to completion. So a blocking call and `async_op=True` are the same work:
the blocking one waits for it. The poll has a deadline, the process group's `timeout`:
a rank whose peers do not join a collective in time raises instead of hanging. A rank
that dies of an uncaught exception first tells the others (a message on a communicator
of its own) and then aborts the job: the others raise a clear error at their next
collective (or in the one they wait in) rather than wait for the timeout.
"""
import atexit
import datetime
import enum
import importlib
import queue
import sys
import threading
import time
import traceback

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available", "is_mpi_available",
           "is_nccl_available", "is_gloo_available", "get_rank", "get_world_size", "get_backend", "barrier",
           "ReduceOp", "Work", "DistBackendError", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "reduce", "GroupMember", "group"]

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)        # torch's default for its CPU backends
_INSTALL = 'pip install "tracegrad[distributed]" (mpi4py and the mpich wheel, which brings mpiexec)'


class DistBackendError(RuntimeError):
    """torch.distributed.DistBackendError: a collective failed (a peer failed, or the timeout)."""


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self):
        return f"<RedOpType.{self.name}: {list(ReduceOp).index(self)}>"


class _Group:
    """torch.distributed.group / GroupMember: WORLD is the only group (the default one)."""
    WORLD = None


group = GroupMember = _Group

_PG = None          # the default process group (_ProcessGroup) while initialized


def is_available():
    """Whether the MPI backend can be used here (mpi4py is importable)."""
    try:
        import mpi4py  # noqa: F401  lazy: mpi4py is optional
    except ImportError:
        return False
    return True


is_mpi_available = is_available


def is_nccl_available():
    return False


def is_gloo_available():
    return False


def is_initialized():
    return _PG is not None


def _pg(group=None):
    if _PG is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    if group is not None and group is not _PG:
        raise ValueError(f"tracegrad.distributed: only the default process group (group=None) is supported, "
                         f"got {group!r}")
    return _PG


def get_rank(group=None):
    return _pg(group).rank


def get_world_size(group=None):
    return _pg(group).size


def get_backend(group=None):
    _pg(group)
    return "mpi"


def _seconds(timeout):
    if timeout is None:
        return DEFAULT_TIMEOUT.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        return float(timeout)
    raise TypeError(f"init_process_group: timeout must be a datetime.timedelta (or positive seconds), "
                    f"got {timeout!r}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Join the job that the MPI launcher started: rank and world size are MPI_COMM_WORLD's."""
    global _PG
    if _PG is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    if backend is not None and str(backend).lower() not in ("mpi", "cpu:mpi"):
        raise RuntimeError(f"init_process_group: backend {backend!r} is not available in tracegrad; its one backend "
                           f"is 'mpi' (CPU tensors, the MPI library from wheels: {_INSTALL})")
    seconds = _seconds(timeout)
    try:
        from mpi4py import MPI  # lazy: mpi4py is optional
    except ImportError as e:
        raise RuntimeError(f"init_process_group(backend='mpi') needs mpi4py and an MPI library: {_INSTALL}; "
                           f"then launch with `mpiexec -n N python script.py`") from e
    comm = MPI.COMM_WORLD
    if world_size not in (-1, None) and world_size != comm.Get_size():
        raise ValueError(f"init_process_group: world_size={world_size} but the MPI launcher started "
                         f"{comm.Get_size()} process(es); with backend 'mpi' leave world_size out")
    if rank not in (-1, None) and rank != comm.Get_rank():
        raise ValueError(f"init_process_group: rank={rank} but MPI gave this process rank {comm.Get_rank()}; with "
                         f"backend 'mpi' leave rank out")
    _PG = _ProcessGroup(MPI, seconds)


def destroy_process_group(group=None):
    """Finish the queued collectives and stop the process group's thread."""
    global _PG
    pg = _pg(group)
    _PG = None
    pg.close()


def barrier(group=None, async_op=False, device_ids=None):
    pg = _pg(group)
    return pg.run("barrier", lambda c: c.Ibarrier(), None, async_op)


class Work:
    """torch.distributed.Work: the handle of a collective run with async_op=True."""

    def __init__(self, name, seq, result=()):
        self._name = name
        self._seq = seq
        self._done = threading.Event()
        self._error = None
        self._result = list(result)
        self.started = self.finished = None         # perf_counter times of MPI's start and completion

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        if not self._done.is_set():
            raise RuntimeError(f"Work.is_success: {self._name} has not completed yet; call wait() first")
        return self._error is None

    def exception(self):
        return self._error

    def wait(self, timeout=None):
        """Block until the collective is done (its results written); raise what failed it."""
        if not self._done.wait(None if timeout is None else _seconds(timeout)):
            raise DistBackendError(f"tracegrad.distributed: {self._name} (collective #{self._seq}) did not complete "
                                   f"within wait(timeout={timeout})")
        if self._error is not None:
            raise self._error
        return True

    def result(self):
        self.wait()
        return self._result

    def _finish(self, error=None):
        self._error = error
        self._done.set()


_STOP = object()
_SWITCH_IN_FLIGHT = 0.0002          # seconds (Python's default switch interval is 0.005)
_TAG_FAIL = 7


class _ProcessGroup:
    def __init__(self, MPI, timeout):
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()            # the collectives' communicator
        self.ctrl = MPI.COMM_WORLD.Dup()            # failure notices between ranks
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.timeout = timeout
        self.seq = 0
        self.failed = None                          # the error every later collective raises
        self._notice = bytearray(4096)
        self._notice_req = self.ctrl.Irecv([self._notice, MPI.BYTE], source=MPI.ANY_SOURCE, tag=_TAG_FAIL)
        self._status = MPI.Status()
        self._queue = queue.Queue()
        self._switch = sys.getswitchinterval()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="tracegrad-mpi", daemon=True)
        self._thread.start()
        self._prev_hook = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self._at_exit)

    # -- the communication thread ------------------------------------------------
    def submit(self, name, start, finish=None, result=()):
        """Queue a collective: `start(comm)` posts the MPI request (on the communication
        thread), `finish()` writes the results once it completed. Returns its Work."""
        with self._lock:
            self.seq += 1
            w = Work(f"{name} on rank {self.rank}", self.seq, result)
        if self.failed is not None:
            w._finish(self.failed)
            return w
        self._queue.put((w, name, start, finish))
        return w

    def run(self, name, start, finish, async_op, result=()):
        w = self.submit(name, start, finish, result)
        if async_op:
            return w
        w.wait()
        return None

    def _check_notice(self):
        if self.failed is None and self._notice_req.Test(self._status):
            n = self._status.Get_count(self.MPI.BYTE)
            text = bytes(self._notice[:n]).decode("utf-8", "replace")
            self.failed = DistBackendError(
                f"tracegrad.distributed: rank {self._status.Get_source()} of {self.size} failed ({text}); rank "
                f"{self.rank} stops too: the job cannot go on without it")
        return self.failed

    def _loop(self):
        while True:
            try:
                item = self._queue.get(timeout=0.05)
            except queue.Empty:
                self._check_notice()
                continue
            if item is _STOP:
                return
            w, name, start, finish = item
            if self._check_notice() is not None:
                w._finish(self.failed)
                continue
            try:
                req = start(self.comm)
            except Exception as e:              # a bad buffer: this call's error, the group goes on
                w._finish(e)
                continue
            w.started = time.perf_counter()
            deadline = time.monotonic() + self.timeout
            polls = 0
            # while a collective is in flight the main thread hands the GIL over more often, so
            # that this thread's polls (which drive MPI's progress) are not held up by up to 5 ms
            sys.setswitchinterval(_SWITCH_IN_FLIGHT)
            while not req.Test():
                polls += 1
                if polls % 16 == 0:
                    if self._check_notice() is not None:
                        break
                    if time.monotonic() > deadline:
                        self.failed = DistBackendError(
                            f"tracegrad.distributed: {name} timed out on rank {self.rank} of {self.size} after "
                            f"{self.timeout:g} s (collective #{w._seq}): another rank did not join it; it has raised, "
                            f"exited, hung, or runs a different sequence of collectives. The timeout is "
                            f"init_process_group(timeout=...)")
                        break
                # the first polls spin (a short collective finishes in microseconds); then
                # the thread sleeps between polls, leaving the core to the computation
                time.sleep(0 if polls < 64 else 0.0002)
            w.finished = time.perf_counter()
            if self._queue.empty():
                sys.setswitchinterval(self._switch)
            if self.failed is not None:
                w._finish(self.failed)
                continue
            try:
                if finish is not None:
                    finish()
            except Exception as e:
                w._finish(e)
                continue
            w._finish()

    # -- failure handling ------------------------------------------------------------
    def _excepthook(self, kind, value, tb):
        self._prev_hook(kind, value, tb)
        if _PG is not self:
            return
        try:
            if not isinstance(value, DistBackendError):
                # tell the others why (they raise at their next collective), then end the job
                text = "".join(traceback.format_exception_only(kind, value)).strip()[-2000:].encode()
                reqs = [self.ctrl.Isend([text, self.MPI.BYTE], dest=r, tag=_TAG_FAIL)
                        for r in range(self.size) if r != self.rank]
                end = time.monotonic() + 1.0
                while reqs and not self.MPI.Request.Testall(reqs) and time.monotonic() < end:
                    time.sleep(0.001)
                time.sleep(min(1.0, self.timeout))   # a moment for the others to report their error
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            self.comm.Abort(1)

    def close(self):
        self._queue.put(_STOP)
        self._thread.join()
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._prev_hook
        try:
            self._notice_req.Cancel()
            self._notice_req.Wait()
        except Exception:
            pass
        try:
            self.comm.Free()
            self.ctrl.Free()
        except Exception:
            pass

    def _at_exit(self):
        global _PG
        if _PG is self:
            _PG = None
            if self.failed is not None:
                return                          # a collective may still be posted: no clean shutdown
            self.close()


# -- buffers ---------------------------------------------------------------------------
def _check_tensor(t, fn, what="tensor"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {what} must be a Tensor, got {type(t).__name__}")
    if t.is_cuda:
        raise RuntimeError(f"{fn}: {what} is on {t.device}; the 'mpi' backend reduces CPU tensors (the GPU path "
                           f"would be NCCL, which tracegrad does not have): move it with .cpu() first")


def _buffer(t):
    """A C-contiguous array for MPI to read and write, and whether it must be copied back."""
    a = t._data
    if t._dtype is D.float16:
        return a.astype(np.float32), True       # MPI has no half type: reduce in float32
    if a.flags.c_contiguous and a.flags.writeable:
        return a, False
    return np.ascontiguousarray(a), True


def _store(t, buf):
    """Write a result into tensor t in place (its version counter moves, as an in-place op's)."""
    if buf is not t._data:
        if t._dtype is D.bfloat16:
            buf = D.round_bfloat16(buf)
        np.copyto(t._data, buf, casting="unsafe")
    elif t._dtype is D.bfloat16:
        t._data[...] = D.round_bfloat16(buf)
    t._vc[0] += 1


def _mpi_op(MPI, op, dtype, fn):
    if not isinstance(op, ReduceOp):
        op = _op_by_value(op, fn)
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype.is_floating_point:
        raise RuntimeError(f"{fn}: ReduceOp.{op.name} needs an integer or bool tensor, got {dtype}")
    if op is ReduceOp.AVG and not dtype.is_floating_point:
        raise RuntimeError(f"{fn}: ReduceOp.AVG needs a floating-point tensor (an integer average would round), "
                           f"got {dtype}; use ReduceOp.SUM and divide")
    if dtype is D.bool_:
        return {ReduceOp.SUM: MPI.LOR, ReduceOp.MAX: MPI.LOR, ReduceOp.MIN: MPI.LAND, ReduceOp.PRODUCT: MPI.LAND,
                ReduceOp.BAND: MPI.LAND, ReduceOp.BOR: MPI.LOR, ReduceOp.BXOR: MPI.LXOR}[op], op
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD, ReduceOp.MIN: MPI.MIN,
            ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND, ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op], op


def _op_by_value(op, fn):
    for o in ReduceOp:
        if op == o.name or op == o.value:
            return o
    raise ValueError(f"{fn}: op must be a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR), got {op!r}")


def _mpi_buf(MPI, a):
    if a.dtype == np.bool_:
        return [a, MPI.C_BOOL]
    return a


# -- collectives -------------------------------------------------------------------------
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` across all ranks, in place: every rank ends with the same result."""
    fn = "all_reduce"
    pg = _pg(group)
    _check_tensor(tensor, fn)
    mop, op = _mpi_op(pg.MPI, op, tensor._dtype, fn)
    buf, copy = _buffer(tensor)
    size = pg.size

    def finish():
        if op is ReduceOp.AVG:
            np.divide(buf, size, out=buf, casting="unsafe")
        if copy or op is ReduceOp.AVG or tensor._dtype is D.bfloat16:
            _store(tensor, buf)
        else:
            tensor._vc[0] += 1
    return pg.run(fn, lambda c: c.Iallreduce(pg.MPI.IN_PLACE, _mpi_buf(pg.MPI, buf), mop), finish, async_op,
                  [tensor])


def broadcast(tensor, src=0, group=None, async_op=False, group_src=None):
    """Copy `tensor` of rank `src` into `tensor` of every rank."""
    fn = "broadcast"
    pg = _pg(group)
    _check_tensor(tensor, fn)
    src = src if group_src is None else group_src
    if not 0 <= src < pg.size:
        raise ValueError(f"{fn}: src={src} is not a rank of the group of {pg.size}")
    buf, copy = _buffer(tensor)
    if tensor._dtype is D.float16:
        buf = np.ascontiguousarray(tensor._data)          # a copy moves float16 bytes exactly
    return pg.run(fn, lambda c: c.Ibcast(_bytes(buf), root=src),
                  lambda: _store(tensor, buf) if copy else tensor._vc.__setitem__(0, tensor._vc[0] + 1),
                  async_op, [tensor])


def _bytes(a):
    return a.reshape(-1).view(np.uint8)


def reduce(tensor, dst=0, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce `tensor` across ranks into `tensor` of rank `dst` (the others' are left as they are)."""
    fn = "reduce"
    pg = _pg(group)
    _check_tensor(tensor, fn)
    dst = dst if group_dst is None else group_dst
    if not 0 <= dst < pg.size:
        raise ValueError(f"{fn}: dst={dst} is not a rank of the group of {pg.size}")
    mop, op = _mpi_op(pg.MPI, op, tensor._dtype, fn)
    buf, _ = _buffer(tensor)
    send = np.array(buf, copy=True)
    out = np.empty_like(send)
    mine = pg.rank == dst

    def finish():
        if mine:
            if op is ReduceOp.AVG:
                np.divide(out, pg.size, out=out, casting="unsafe")
            _store(tensor, out)
    return pg.run(fn, lambda c: c.Ireduce(_mpi_buf(pg.MPI, send), _mpi_buf(pg.MPI, out), mop, root=dst), finish,
                  async_op, [tensor])


def _same(tensors, like, fn, what):
    for i, t in enumerate(tensors):
        _check_tensor(t, fn, f"{what}[{i}]")
        if t._dtype is not like._dtype:
            raise TypeError(f"{fn}: {what}[{i}] is {t._dtype}, the input is {like._dtype}; all must be one dtype")
        if tuple(t.shape) != tuple(like.shape):
            raise ValueError(f"{fn}: {what}[{i}] has shape {tuple(t.shape)}, the input {tuple(like.shape)}; all "
                             f"must be one shape")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] <- `tensor` of rank r, on every rank."""
    fn = "all_gather"
    pg = _pg(group)
    _check_tensor(tensor, fn)
    if len(tensor_list) != pg.size:
        raise ValueError(f"{fn}: tensor_list has {len(tensor_list)} tensors; it needs one per rank "
                         f"({pg.size})")
    _same(tensor_list, tensor, fn, "tensor_list")
    send = np.ascontiguousarray(tensor._data)
    out = np.empty((pg.size,) + send.shape, send.dtype)

    def finish():
        for r, t in enumerate(tensor_list):
            _store(t, out[r])
    return pg.run(fn, lambda c: c.Iallgather(_bytes(send), _bytes(out)), finish, async_op, tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output <- the inputs of all ranks, concatenated along dim 0 (or stacked: output of
    shape (world_size, *input.shape))."""
    fn = "all_gather_into_tensor"
    pg = _pg(group)
    _check_tensor(input_tensor, fn, "input_tensor")
    _check_tensor(output_tensor, fn, "output_tensor")
    if output_tensor._dtype is not input_tensor._dtype:
        raise TypeError(f"{fn}: output_tensor is {output_tensor._dtype}, input_tensor {input_tensor._dtype}")
    if output_tensor.numel() != pg.size * input_tensor.numel():
        raise ValueError(f"{fn}: output_tensor of shape {tuple(output_tensor.shape)} must hold world_size "
                         f"({pg.size}) x input_tensor of shape {tuple(input_tensor.shape)}")
    send = np.ascontiguousarray(input_tensor._data)
    out = np.empty((pg.size,) + send.shape, send.dtype)
    return pg.run(fn, lambda c: c.Iallgather(_bytes(send), _bytes(out)),
                  lambda: _store(output_tensor, out.reshape(output_tensor._data.shape)), async_op,
                  [output_tensor])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output <- the reduction over ranks of input_list[rank]."""
    fn = "reduce_scatter"
    pg = _pg(group)
    _check_tensor(output, fn, "output")
    if len(input_list) != pg.size:
        raise ValueError(f"{fn}: input_list has {len(input_list)} tensors; it needs one per rank ({pg.size})")
    _same(input_list, output, fn, "input_list")
    mop, op = _mpi_op(pg.MPI, op, output._dtype, fn)
    send = np.stack([_buffer(t)[0] for t in input_list])
    out = np.empty_like(send[0])
    return pg.run(fn, lambda c: c.Ireduce_scatter_block(_mpi_buf(pg.MPI, send), _mpi_buf(pg.MPI, out), mop),
                  lambda: _finish_reduced(output, out, op, pg.size), async_op, [output])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """output <- the reduction over ranks of the rank-th of world_size equal chunks of input
    (chunked along dim 0)."""
    fn = "reduce_scatter_tensor"
    pg = _pg(group)
    _check_tensor(output, fn, "output")
    _check_tensor(input, fn, "input")
    if output._dtype is not input._dtype:
        raise TypeError(f"{fn}: output is {output._dtype}, input {input._dtype}")
    if input.numel() != pg.size * output.numel():
        raise ValueError(f"{fn}: input of shape {tuple(input.shape)} must hold world_size ({pg.size}) x output of "
                         f"shape {tuple(output.shape)}")
    mop, op = _mpi_op(pg.MPI, op, output._dtype, fn)
    send = _buffer(input)[0].reshape(pg.size, -1)
    if send.base is input._data or send is input._data:
        send = send.copy()
    out = np.empty_like(send[0])
    return pg.run(fn, lambda c: c.Ireduce_scatter_block(_mpi_buf(pg.MPI, send), _mpi_buf(pg.MPI, out), mop),
                  lambda: _finish_reduced(output, out.reshape(output._data.shape), op, pg.size), async_op, [output])


def _finish_reduced(output, out, op, size):
    if op is ReduceOp.AVG:
        np.divide(out, size, out=out, casting="unsafe")
    _store(output, out)


def __getattr__(name):
    if name == "nn":
        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module 'tracegrad.distributed' has no attribute '{name}'")
