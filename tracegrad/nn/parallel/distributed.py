"""torch.nn.parallel.DistributedDataParallel over tracegrad.distributed (MPI).

Each process holds a replica of the module and runs forward and backward on its share of
the batch; the gradients are averaged across processes before the optimizer's step, so
every replica takes the same step.

How the averaging overlaps the backward: the parameters are grouped into buckets as torch
groups them: one bucket per dtype for the first backward (with find_unused_parameters,
buckets over the declaration order, reversed), then, rebuilt after it, in the order the
gradients became ready, the first bucket capped at 1 MiB (with the default cap) and the
others at `bucket_cap_mb`. A gradient hook on each parameter runs inside the backward
program as soon as that parameter's gradient is complete (where torch's AccumulateGrad
runs): it writes the gradient that .grad is about to hold (its value so far plus the new
one) into the bucket's flat buffer, and when a bucket's last gradient has arrived, the
bucket's all-reduce starts on the communication thread (MPI_Iallreduce) while the
backward goes on computing the remaining gradients. Buckets start in index order on
every rank, as MPI matches collectives by order. A callback queued on the autograd engine
runs when the backward has delivered every gradient: it waits for the buckets and writes
the averages into .grad.
"""
import contextlib
import sys
import time
import zlib

import numpy as np

from ... import _dtype as D
from ... import distributed as dist
from ...autograd import engine
from ...grad_mode import is_grad_enabled
from ...tensor import Tensor
from ..modules.module import Module

FIRST_BUCKET_BYTES = 1024 * 1024          # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
MB = 1024 * 1024


class _Bucket:
    __slots__ = ("index", "params", "offsets", "flat", "pending", "work", "dtype")

    def __init__(self, index, params, dtype):
        self.index = index
        self.params = params                   # indices into DDP's parameter list
        self.dtype = dtype
        self.offsets = []
        self.flat = None
        self.pending = 0
        self.work = None


def _assign_buckets(params, order, limits, sort=False):
    """torch's compute_bucket_assignment_by_size: the parameters in `order`, one open bucket
    per dtype, closed once it holds at least its limit (limits[0] for a dtype's first
    bucket, then the next, the last one for the rest). Returns lists of parameter indices:
    in the order their buckets were closed (the open ones last), or with `sort`, by the
    smallest index each holds."""
    done, open_, sizes, level = [], {}, {}, {}
    for i in order:
        p = params[i]
        key = p._dtype
        open_.setdefault(key, []).append(i)
        sizes[key] = sizes.get(key, 0) + p._data.size * p._data.itemsize
        k = level.setdefault(key, 0)
        if sizes[key] >= limits[k]:
            done.append(open_.pop(key))
            sizes[key] = 0
            level[key] = min(k + 1, len(limits) - 1)
    done.extend(b for b in open_.values() if b)
    if sort:
        done.sort(key=min)
    return done


class _Iteration:
    """What one synchronised backward has done so far."""
    __slots__ = ("sync", "ready", "order", "next_launch", "t_first_hook")

    def __init__(self, sync):
        self.sync = sync
        self.ready = set()
        self.order = []
        self.next_launch = 0
        self.t_first_hook = None


class DistributedDataParallel(Module):
    """torch.nn.parallel.DistributedDataParallel for CPU modules on the 'mpi' process group."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True, init_sync=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None,
                 skip_all_reduce_unused_params=False):
        super().__init__()
        pg = dist._pg(process_group)
        compiled = getattr(module, "_orig_mod", None)
        inner = compiled if compiled is not None else module
        if not isinstance(inner, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module (or a compiled one), got "
                            f"{type(module).__name__}")
        self.module = inner
        # a compiled module (tracegrad.compile(model)) runs the forward; its module holds the state
        self.__dict__["_call"] = module
        params, seen = [], set()
        for p in inner.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                               "requires a gradient.")
        devices = {str(p.device) for p in inner.parameters()} | {str(b.device) for b in inner.buffers()}
        if devices != {"cpu"}:
            raise ValueError(f"DistributedDataParallel: the module's tensors are on {sorted(devices)}; the 'mpi' "
                             f"backend averages CPU tensors (NCCL, the GPU path, is not in tracegrad): keep the "
                             f"module on the CPU")
        if device_ids is not None or output_device is not None:
            raise ValueError(f"DistributedDataParallel device_ids and output_device arguments only work with "
                             f"single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                             f"{device_ids}, output_device {output_device}, and module parameters "
                             f"{{device(type='cpu')}}.")
        if gradient_as_bucket_view:
            raise NotImplementedError("DistributedDataParallel(gradient_as_bucket_view=True) is not supported: the "
                                      "gradients are copied into and out of the buckets; leave it False")
        if mixed_precision is not None or device_mesh is not None:
            raise NotImplementedError("DistributedDataParallel: mixed_precision and device_mesh are not supported")
        self.__dict__["_pg"] = pg
        self.__dict__["_params"] = params
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.static_graph = static_graph
        self.gradient_as_bucket_view = False
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * MB)
        # a small first bucket (1 MiB) only with the default cap, as torch
        self.__dict__["_first_bucket_bytes"] = FIRST_BUCKET_BYTES if bucket_cap_mb is None else self.bucket_bytes_cap
        self._verify_shapes()
        if init_sync:
            self._broadcast_state()
        # torch's first assignment: without find_unused_parameters (or with static_graph) one
        # bucket per dtype; else buckets over module.parameters() in order, reversed (the
        # backward produces the last layer's gradients first). After the first averaged
        # backward they are rebuilt in the order the gradients became ready (rank 0's).
        if static_graph or not find_unused_parameters:
            buckets = _assign_buckets(params, range(len(params)), [sys.maxsize], sort=True)
        else:
            buckets = _assign_buckets(params, range(len(params)), self._limits(), sort=True)
        self._make_buckets(list(reversed(buckets)))
        self.__dict__["_rebuilt"] = False
        self.__dict__["_iter"] = None
        self.__dict__["_decision"] = None
        self.__dict__["_overlap"] = True          # False: all-reduce after the backward (for measurements)
        self.__dict__["_timings"] = None            # the last averaged backward's timings (the benchmark reads them)
        self.__dict__["_handles"] = [p.register_hook(self._make_hook(i)) for i, p in enumerate(params)]

    # -- set-up ----------------------------------------------------------------------------
    def _limits(self):
        first, cap = self._first_bucket_bytes, self.bucket_bytes_cap
        return [first, cap] if first < cap else [cap]

    def _make_buckets(self, assignment):
        params = self._params
        buckets = []
        for k, idx in enumerate(assignment):
            b = _Bucket(k, idx, params[idx[0]]._dtype)
            off = 0
            for i in idx:
                b.offsets.append(off)
                off += params[i]._data.size
            b.flat = np.zeros(off, params[idx[0]]._data.dtype)
            b.pending = len(idx)
            buckets.append(b)
        where = {}
        for b in buckets:
            for i, off in zip(b.params, b.offsets):
                where[i] = (b, off)
        self.__dict__["_buckets"] = buckets
        self.__dict__["_where"] = where

    def _verify_shapes(self):
        """Every rank must wrap the same parameters (torch's _verify_param_shape_across_processes)."""
        pg = self._pg
        sig = np.array([len(self._params), sum(p._data.size for p in self._params),
                        zlib.crc32(repr([(tuple(p.shape), p._dtype.name) for p in self._params]).encode())],
                       np.int64)
        lo, hi = Tensor._make(sig.copy(), D.int64), Tensor._make(sig.copy(), D.int64)
        dist.all_reduce(lo, dist.ReduceOp.MIN)
        dist.all_reduce(hi, dist.ReduceOp.MAX)
        if not np.array_equal(lo._data, hi._data):
            raise RuntimeError(f"DistributedDataParallel: the ranks wrap different parameters (rank {pg.rank} has "
                               f"{len(self._params)} parameters of {int(sig[1])} elements); every rank must build "
                               f"the same model")

    def _state_tensors(self):
        return list(self._params) + [b for b in self.module.buffers()]

    def _broadcast_state(self, buffers_only=False):
        """Rank 0's parameters and buffers into every rank's, one broadcast per dtype."""
        tensors = list(self.module.buffers()) if buffers_only else self._state_tensors()
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t._data.dtype, []).append(t)
        for dtype, ts in by_dtype.items():
            flat = Tensor._make(np.concatenate([t._data.reshape(-1) for t in ts]), D.from_numpy_dtype(dtype))
            dist.broadcast(flat, 0)
            off = 0
            for t in ts:
                n = t._data.size
                t._data[...] = flat._data[off:off + n].reshape(t._data.shape)
                t._vc[0] += 1
                off += n

    # -- forward ---------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        traced = any(type(a).__name__ == "Proxy" for a in (*inputs, *kwargs.values()))
        buffers = self.broadcast_buffers and self._pg.size > 1 and any(True for _ in self.module.buffers())
        if traced:
            # inside tracegrad.compile(ddp): the program runs without this method, so whether
            # to average is decided when the backward starts (no_sync around the backward)
            if buffers:
                raise NotImplementedError(
                    "DistributedDataParallel(broadcast_buffers=True) broadcasts the module's buffers from rank 0 at "
                    "every forward, which a compiled program does not do: the forward runs eagerly. Compile the "
                    "module instead (DistributedDataParallel(tracegrad.compile(model))) or pass "
                    "broadcast_buffers=False")
            return self._call(*inputs, **kwargs)
        # torch decides at the forward whether the next backward averages (no_sync around the
        # forward); the buffers are rank 0's before a forward that trains (not in evaluation,
        # which one rank may run alone)
        sync = is_grad_enabled() and self.require_backward_grad_sync
        self.__dict__["_iter"] = None
        self.__dict__["_decision"] = sync
        self.require_forward_param_sync = sync
        if buffers and sync:
            self._broadcast_state(buffers_only=True)
        return self._call(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of the backwards of forwards run inside accumulate locally, unaveraged;
        the first synchronised backward after it averages the sums."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -- backward ----------------------------------------------------------------------------
    def _make_hook(self, i):
        def ddp_grad_hook(grad):
            self._grad_ready(i, grad)
        ddp_grad_hook.trace_hint = (
            "DistributedDataParallel's gradient hooks start all-reduces in the backward, which a compiled step does "
            "not trace: the step runs eagerly, its gradients averaged as always; to compile, compile the module: "
            "DistributedDataParallel(tracegrad.compile(model))")
        return ddp_grad_hook

    def _grad_ready(self, i, grad):
        if not engine.accumulating():
            return                       # autograd.grad: no .grad to average (torch's hooks do not run)
        it = self._iter
        if it is None:
            # the first gradient of this backward: is it averaged, and the callback that ends it
            sync = self._decision
            self.__dict__["_decision"] = None
            if sync is None:
                sync = self.require_backward_grad_sync
            it = self.__dict__["_iter"] = _Iteration(sync)
            engine.queue_callback(self._finalize)
            it.t_first_hook = time.perf_counter()
            if sync:
                self._reset_pending()
        if not it.sync:
            return                       # under no_sync: .grad accumulates this rank's gradients
        if i in it.ready:
            raise RuntimeError(f"Expected to mark a variable ready only once. This error is caused by one of the "
                               f"following reasons: 1) Use of a module parameter outside the `forward` function; "
                               f"2) Reused parameters in multiple reentrant backward passes. Parameter at index {i} "
                               f"has been marked as ready twice.")
        it.ready.add(i)
        it.order.append(i)
        b, off = self._where[i]
        p = self._params[i]
        n = p._data.size
        view = b.flat[off:off + n]
        g = grad._data.reshape(-1)
        if p._grad is None:
            np.copyto(view, g, casting="unsafe")
        else:                         # what .grad will hold after this backward's accumulation
            np.add(p._grad._data.reshape(-1), g, out=view, casting="unsafe")
        b.pending -= 1
        if b.pending == 0 and self._overlap:
            self._launch_ready(it)

    def _launch(self, b):
        pg = self._pg
        flat = b.flat
        b.work = pg.submit("all_reduce (DistributedDataParallel bucket)",
                           lambda c: c.Iallreduce(pg.MPI.IN_PLACE, flat, pg.MPI.SUM))
        b.work.launched = time.perf_counter()

    def _launch_ready(self, it):
        # buckets start in index order on every rank (MPI matches collectives by order)
        bs = self._buckets
        while it.next_launch < len(bs) and bs[it.next_launch].pending == 0:
            self._launch(bs[it.next_launch])
            it.next_launch += 1

    def _finalize(self):
        """The final callback of a synchronised backward: start what has not started, wait,
        write the averages into .grad."""
        it = self._iter
        self.__dict__["_iter"] = None
        if not it.sync:
            return
        t_end = time.perf_counter()
        missing = [i for i in range(len(self._params)) if i not in it.ready]
        if missing and not self.find_unused_parameters:
            names = {id(p): n for n, p in self.module.named_parameters()}
            raise RuntimeError(
                f"Expected to have finished reduction in the prior iteration before starting a new one. This error "
                f"indicates that your module has parameters that were not used in producing loss. You can enable "
                f"unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                f"`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
                f"participate in calculating loss.\nParameter indices which did not receive grad for rank "
                f"{self._pg.rank}: {' '.join(map(str, missing))}\nParameters which did not receive grad for rank "
                f"{self._pg.rank}: {', '.join(names.get(id(self._params[i]), '?') for i in missing)}")
        for i in missing:
            # locally unused: contributes zeros (or its accumulated .grad under no_sync sums)
            b, off = self._where[i]
            p = self._params[i]
            n = p._data.size
            if p._grad is None:
                b.flat[off:off + n] = 0
            else:
                np.copyto(b.flat[off:off + n], p._grad._data.reshape(-1), casting="unsafe")
            b.pending = 0
        self._launch_ready(it)
        used = None
        if self.find_unused_parameters:
            used = Tensor._make(np.zeros(len(self._params), np.int32), D.int32)
            used._data[list(it.ready)] = 1
            used_work = dist.all_reduce(used, async_op=True)
        size = self._pg.size
        t0 = time.perf_counter()
        for b in self._buckets:
            b.work.wait()
        if used is not None:
            used_work.wait()
        t_wait = time.perf_counter()
        for b in self._buckets:
            if size > 1:
                np.divide(b.flat, size, out=b.flat, casting="unsafe")
            for i, off in zip(b.params, b.offsets):
                p = self._params[i]
                if used is not None and used._data[i] == 0:
                    continue                  # unused on every rank: .grad is left as it is (torch)
                avg = b.flat[off:off + p._data.size].reshape(p._data.shape)
                if p._grad is None:
                    p._grad = Tensor._make(avg.astype(p._data.dtype, copy=True), p._dtype)
                else:
                    np.copyto(p._grad._data, avg, casting="unsafe")
                    p._grad._vc[0] += 1
                if p._dtype is D.bfloat16:
                    p._grad._data[...] = D.round_bfloat16(p._grad._data)
        self.__dict__["_timings"] = {
            "backward_start": it.t_first_hook, "backward_end": t_end, "wait_start": t0, "wait_end": t_wait,
            "buckets": [(b.work.launched, b.work.started, b.work.finished) for b in self._buckets]}
        if not self._rebuilt and (self.static_graph or not self.find_unused_parameters) and \
                len(it.order) == len(self._params):
            # torch's rebuild: buckets in the order the gradients became ready, rank 0's on every rank
            order = Tensor._make(np.array(it.order, np.int64), D.int64)
            dist.broadcast(order, 0)
            self._make_buckets(_assign_buckets(self._params, order._data.tolist(), self._limits()))
            self.__dict__["_rebuilt"] = True

    def _reset_pending(self):
        for b in self._buckets:
            b.pending = len(b.params)
