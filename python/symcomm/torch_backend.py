"""symcomm as a torch.distributed backend.

``import symcomm.torch_backend`` registers the backend "symcomm" for CPU and CUDA tensors:

    import torch.distributed as dist
    import symcomm.torch_backend  # noqa: F401
    dist.init_process_group(backend="symcomm")          # or "cuda:symcomm,cpu:gloo"

Each process group holds a communicator of the host space (CPU tensors) and, where torch
sees a GPU, one of the cuda space on the current device (CUDA tensors, on the current
stream), both joined through the group's store when the group is made. Tensors go through
symcomm's staged paths (they are not on the symmetric heap); a non-contiguous tensor goes
through a contiguous copy. What the backend cannot do raises an error naming the operation.
"""

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceCoalescedOptions,
                                        AllreduceOptions, AllToAllOptions, BarrierOptions,
                                        BroadcastOptions, GatherOptions, ReduceOptions,
                                        ReduceScatterOptions, ScatterOptions)
from torch.futures import Future

from . import group, init_from_store

__all__ = ["SymcommProcessGroup"]

_NAME = "symcomm"
_SUM = dist.ReduceOp.SUM


def _unsupported(what):
    return RuntimeError(f"the symcomm backend does not support {what}")


def _redop(opts, what):
    op = opts.reduceOp
    for torch_op, name in ((dist.ReduceOp.SUM, "sum"), (dist.ReduceOp.MIN, "min"),
                           (dist.ReduceOp.MAX, "max"), (dist.ReduceOp.PRODUCT, "prod"),
                           (dist.ReduceOp.AVG, "avg")):
        if op == torch_op:
            return name
    raise _unsupported(f"{what} with the reduction {op}")


# A tensor as a DLPack capsule, which the communicator's calls take as they take the tensor:
# without Tensor.__dlpack__, which (asked for no stream) makes the default stream wait for
# the current one on every call, an event recorded and waited for.
_dl = torch._C._to_dlpack


def _plain(t):
    """Whether symcomm takes `t` as it is: contiguous, not bool (the calls' fast paths)."""
    return t.is_contiguous() and t.dtype != torch.bool


class _Done(dist.Work):
    """A Work that is complete (CPU) or ordered in the current stream (CUDA) already. Its
    Future is made only when asked for (DDP's hooks ask; dist.all_reduce only waits): a
    Future, its result and a Work made from it cost 5.0 us a call, this 1.4 (CPU)."""

    __slots__ = ("_result",)

    def __init__(self, result):
        super().__init__()
        self._result = result

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def wait(self, timeout=None):
        return True

    def result(self):
        return self._result

    def get_future(self):
        fut = Future()
        fut.set_result(self._result)
        return fut


def _done(result):
    """A Work that is complete (CPU) or ordered in the current stream (CUDA) already."""
    return _Done(result)


def _capturing(stream):
    """Whether `stream` is being captured into a CUDA graph."""
    with torch.cuda.stream(stream):
        return torch.cuda.is_current_stream_capturing()


def _movable(t):
    """The tensor as the communicator's calls take it: a DLPack capsule (_dl), bool as uint8
    (data movement only). A capsule serves one argument of one call."""
    return _dl(t.view(torch.uint8) if t.dtype == torch.bool else t)


class _QueuedWork(dist._Work):
    """The work of a queued send or receive: waiting for it issues the queue."""

    def __init__(self, pg, tensors):
        super().__init__()
        self._pg, self._tensors, self._fut = pg, tensors, Future()

    def wait(self, timeout=None):
        self._pg._flush()
        return True

    def is_completed(self):
        return self._fut.done()

    def get_future(self):
        self._pg._flush()
        return self._fut


class _Contiguous:
    """A contiguous tensor for the call; written back to the caller's on exit (outputs)."""

    def __init__(self, t, output=False):
        self.t, self.output = t, output
        self.c = t if t.is_contiguous() else t.contiguous()

    def flat(self):
        """What symcomm is given: the contiguous tensor, flat (bool as uint8), as a capsule
        for one argument (_movable)."""
        return _movable(self.c.reshape(-1))

    def write_back(self):
        """An output reduced in a copy: the result into the caller's tensor."""
        if self.output and self.c is not self.t:
            self.t.copy_(self.c)

    def __enter__(self):
        return self.flat()

    def __exit__(self, *exc):
        if exc[0] is None:
            self.write_back()


class SymcommProcessGroup(dist.ProcessGroup):
    """A process group whose collectives and point-to-point calls are symcomm's."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._pending = []  # queued sends and receives (_queue)
        self._last_stream = None  # the stream of the last call on the GPU (_follow)
        self._last_raw = None     # its cudaStream_t
        # The group's own communicators: never the module's default one (symcomm.empty).
        self._comms = {"host": init_from_store(store, rank, size, space="host",
                                               key="symcomm/host", make_default=False)}
        if torch.cuda.is_available():
            self._comms["cuda"] = init_from_store(store, rank, size, space="cuda",
                                                  device=torch.cuda.current_device(),
                                                  key="symcomm/cuda", make_default=False)

    # --- what every call shares -------------------------------------------------------
    def _on_plain(self, tensors):
        """_on for the calls' fast paths: (comm, stream) where every tensor is on the same
        side and symcomm takes each as it is (_plain) and no send or receive is queued; None
        where the general path must run (it checks and raises).

        The general path costs a Python-level wrapper object per tensor and a Stream object
        per call: a 1-rank all-reduce of 8 KiB through dist.all_reduce took 25.6 us of host
        time against 8.3 us through the communicator (2-core CPU machine, host space)."""
        if self._pending:
            return None
        cuda = tensors[0].is_cuda
        for t in tensors:
            if t.is_cuda != cuda or not _plain(t):
                return None
        if not cuda:
            return self._comms["host"], None
        comm = self._comms.get("cuda")
        if comm is None or tensors[0].device.index != comm.device:
            return None
        raw = torch._C._cuda_getCurrentRawStream(comm.device)
        if raw != self._last_raw:
            self._follow(torch.cuda.current_stream(tensors[0].device))
        return comm, raw

    def _on(self, tensors, what):
        """The communicator and stream for `tensors` (all CPU or all on this rank's GPU);
        a collective first issues the queued sends and receives."""
        if what not in ("send", "recv"):
            self._flush()
        cuda = {t.is_cuda for t in tensors}
        if len(cuda) != 1:
            raise _unsupported(f"{what} on CPU and CUDA tensors at once")
        if cuda.pop():
            comm = self._comms.get("cuda")
            if comm is None:
                raise _unsupported(f"{what} on CUDA tensors: torch saw no GPU when the "
                                   "group was made")
            device = tensors[0].device
            if device.index != comm.device:
                raise _unsupported(f"{what} on {device}: the group's GPU is cuda:{comm.device}")
            stream = torch.cuda.current_stream(device)
            self._follow(stream)
            return comm, stream.cuda_stream
        return self._comms["host"], None

    def _follow(self, stream):
        """Orders a call on `stream` after the group's last call, made on another stream.

        A communicator's collectives must be stream-ordered (they share its workspace and
        counters: docs/coll.md), and torch's users issue them on streams of their own (FSDP
        all-gathers on one, reduce-scatters on another). Where the stream changes, it waits
        for what the last one holds so far, so the calls keep their order on the GPU. Not
        across a CUDA graph capture's edge (a capture cannot wait for work outside it)."""
        last, self._last_stream = self._last_stream, stream
        self._last_raw = stream.cuda_stream
        if last is None or last == stream or _capturing(stream) or _capturing(last):
            return
        event = torch.cuda.Event()
        event.record(last)
        stream.wait_event(event)

    def getBackendName(self):
        return _NAME

    # The group's name: torch keeps it in a group's C++ backends, which this group has none
    # of; functional collectives and torch.compile look groups up by it.
    def _set_group_name(self, name):
        self._group_name = name

    @property
    def group_name(self):
        return self._group_name

    def size(self):
        return self._size

    def rank(self):
        return self._rank

    # --- collectives ------------------------------------------------------------------
    def allreduce(self, tensors, opts=AllreduceOptions()):
        if len(tensors) == 1:
            on = self._on_plain(tensors)
            if on is not None:
                op = "sum" if opts.reduceOp == _SUM else _redop(opts, "allreduce")
                on[0].all_reduce(_dl(tensors[0]), op=op, stream=on[1])
                return _done(tensors)
        comm, stream = self._on(tensors, "allreduce")
        op = _redop(opts, "allreduce")
        views = [_Contiguous(t, output=True) for t in tensors]
        with group():  # several tensors: one unit, run at the group's end
            for v in views:
                comm.all_reduce(v.flat(), op=op, stream=stream)
        for v in views:  # then written back where a copy was reduced
            v.write_back()
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=AllreduceCoalescedOptions()):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts=BroadcastOptions()):
        comm, stream = self._on(tensors, "broadcast")
        for t in tensors:
            with _Contiguous(t, output=True) as c:
                comm.broadcast(c, root=opts.rootRank, stream=stream)
        return _done(tensors)

    def _allgather_base(self, output, input, opts=AllgatherOptions()):
        on = self._on_plain([output, input])
        if on is not None:
            on[0].all_gather(_dl(input), _dl(output), stream=on[1])
            return _done([output])
        comm, stream = self._on([output, input], "all_gather_into_tensor")
        with _Contiguous(input) as i, _Contiguous(output, output=True) as o:
            comm.all_gather(i, o, stream=stream)
        return _done([output])

    def allgather(self, output_lists, inputs, opts=AllgatherOptions()):
        for outputs, input in zip(output_lists, inputs):
            if any(o.numel() != input.numel() or o.dtype != input.dtype for o in outputs):
                raise _unsupported("all_gather into tensors of other sizes or types than the "
                                   "input's")
            gathered = input.new_empty((self._size * input.numel(),))
            self._allgather_base(gathered, input.reshape(-1), opts)
            for o, part in zip(outputs, gathered.chunk(self._size)):
                o.copy_(part.view(o.shape))
        return _done(output_lists)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=AllgatherOptions()):
        for o, i in zip(outputs, inputs):
            self._allgather_base(o, i, opts)
        return _done(outputs)

    def _reduce_scatter_base(self, output, input, opts=ReduceScatterOptions()):
        op = "sum" if opts.reduceOp == _SUM else _redop(opts, "reduce_scatter")
        on = self._on_plain([output, input])
        if on is not None:
            on[0].reduce_scatter(_dl(input), _dl(output), op=op, stream=on[1])
            return _done([output])
        comm, stream = self._on([output, input], "reduce_scatter_tensor")
        with _Contiguous(input) as i, _Contiguous(output, output=True) as o:
            comm.reduce_scatter(i, o, op=op, stream=stream)
        return _done([output])

    def reduce_scatter(self, outputs, input_lists, opts=ReduceScatterOptions()):
        for output, inputs in zip(outputs, input_lists):
            whole = torch.cat([t.reshape(-1) for t in inputs])
            self._reduce_scatter_base(output, whole, opts)
        return _done(outputs)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs,
                                        opts=ReduceScatterOptions()):
        for o, i in zip(outputs, inputs):
            self._reduce_scatter_base(o, i, opts)
        return _done(outputs)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes,
                      opts=AllToAllOptions()):
        if not output_split_sizes and not input_split_sizes:
            on = self._on_plain([output, input])
            if on is not None:
                on[0].all_to_all(_dl(input), _dl(output), stream=on[1])
                return _done([output])
        comm, stream = self._on([output, input], "all_to_all_single")
        with _Contiguous(input) as i, _Contiguous(output, output=True) as o:
            if not output_split_sizes and not input_split_sizes:
                comm.all_to_all(i, o, stream=stream)
            else:
                def layout(t, splits):  # rows of dim 0 -> elements
                    row = t[0].numel() if t.dim() and t.shape[0] else 1
                    counts = ([s * row for s in splits] if splits
                              else [t.numel() // self._size] * self._size)
                    displs = [sum(counts[:j]) for j in range(self._size)]
                    return counts, displs
                sc, sd = layout(input, input_split_sizes)
                rc, rd = layout(output, output_split_sizes)
                comm.all_to_all_v(i, sc, sd, o, rc, rd, stream=stream)
        return _done([output])

    def alltoall(self, outputs, inputs, opts=AllToAllOptions()):
        send = torch.cat([t.reshape(-1) for t in inputs])
        recv = outputs[0].new_empty((sum(t.numel() for t in outputs),))
        comm, stream = self._on([send, recv], "all_to_all")
        sc = [t.numel() for t in inputs]
        rc = [t.numel() for t in outputs]
        comm.all_to_all_v(_movable(send), sc, [sum(sc[:j]) for j in range(len(sc))],
                          _movable(recv), rc, [sum(rc[:j]) for j in range(len(rc))],
                          stream=stream)
        for o, part in zip(outputs, recv.split(rc)):
            o.copy_(part.view(o.shape))
        return _done(outputs)

    def reduce(self, tensors, opts=ReduceOptions()):
        comm, stream = self._on(tensors, "reduce")
        op = _redop(opts, "reduce")
        for t in tensors:
            v = _Contiguous(t, output=True)
            comm.reduce(v.flat(), v.flat() if self._rank == opts.rootRank else None, op=op,
                        root=opts.rootRank, stream=stream)
            v.write_back()
        return _done(tensors)

    def gather(self, output_lists, inputs, opts=GatherOptions()):
        comm, stream = self._on(inputs, "gather")
        root = opts.rootRank
        for k, input in enumerate(inputs):
            gathered = None
            if self._rank == root:
                gathered = input.new_empty((self._size * input.numel(),))
            with _Contiguous(input) as i:
                comm.gather(i, None if gathered is None else _movable(gathered), root=root,
                            stream=stream)
            if gathered is not None:
                for o, part in zip(output_lists[k], gathered.chunk(self._size)):
                    o.copy_(part.view(o.shape))
        return _done(output_lists)

    def scatter(self, outputs, input_lists, opts=ScatterOptions()):
        comm, stream = self._on(outputs, "scatter")
        root = opts.rootRank
        for k, output in enumerate(outputs):
            whole = None
            if self._rank == root:
                whole = torch.cat([t.reshape(-1) for t in input_lists[k]])
            with _Contiguous(output, output=True) as o:
                comm.scatter(None if whole is None else _movable(whole), o, root=root,
                             stream=stream)
        return _done(outputs)

    def gather_single(self, output, input, opts=GatherOptions()):
        comm, stream = self._on([input], "gather_into_tensor")
        root = opts.rootRank
        with _Contiguous(input) as i:
            if self._rank == root:
                with _Contiguous(output, output=True) as o:
                    comm.gather(i, o, root=root, stream=stream)
            else:
                comm.gather(i, None, root=root, stream=stream)
        return _done([output])

    # Newer torch calls the operations on one tensor by these names.
    all_gather_single = _allgather_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single = _reduce_scatter_base
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
    all_to_all_single = alltoall_base

    def allgather_coalesced(self, output_lists, inputs, opts=AllgatherOptions()):
        return self.allgather(output_lists, inputs, opts)

    def _get_backend(self, device):
        """The backend of every device is this group itself (torch asks it, for instance,
        whether it coalesces point-to-point calls: it does not)."""
        return self

    supports_coalescing = False

    def monitored_barrier(self, opts=BarrierOptions(), wait_all_ranks=False):
        """A barrier (every wait of symcomm's is bounded: a rank that never comes ends it with
        symcommTimeout or symcommPeerLost, naming the rank)."""
        return self.barrier(opts)

    def barrier(self, opts=BarrierOptions()):
        self._flush()
        comm = self._comms.get("cuda")
        if comm is not None:  # the GPU's work before it is ordered too, as NCCL's barrier
            stream = torch.cuda.current_stream(comm.device)
            self._follow(stream)
            comm.barrier(stream=stream.cuda_stream)
            comm.synchronize(stream.cuda_stream)
        self._comms["host"].host_barrier()
        return _done([])

    # --- point to point ---------------------------------------------------------------
    # Sends and receives wait in a queue and are issued as one symcomm group at the first
    # wait of one of their works, or before the next collective: a ring of isend/irecv
    # (batch_isend_irecv, which torch issues one by one here) cannot deadlock, where a lone
    # send on a GPU stream would wait for a receive queued behind it on the peer.
    def _queue(self, kind, tensors, peer):
        comm, stream = self._on(tensors, kind)
        views = [_Contiguous(t, output=(kind == "recv")) for t in tensors]
        work = _QueuedWork(self, tensors)
        self._pending.append((kind, comm, stream, views, peer, work))
        return work

    def _flush(self):
        pending, self._pending = self._pending, []
        if not pending:
            return
        with group():
            for kind, comm, stream, views, peer, _ in pending:
                for v in views:
                    getattr(comm, kind)(v.flat(), peer, stream=stream)
        for _, _, _, views, _, work in pending:
            for v in views:
                v.write_back()
            work._fut.set_result(work._tensors)

    def send(self, tensors, dst, tag=0):
        return self._queue("send", tensors, dst)

    def recv(self, tensors, src, tag=0):
        return self._queue("recv", tensors, src)

    def recv_anysource(self, tensors, tag=0):
        raise _unsupported("recv from any source (symcomm matches receives per peer)")

    # --- the group's symmetric heap ---------------------------------------------------
    def communicator(self, device="cuda"):
        """The group's symcomm communicator of `device` ("cuda" or "cpu")."""
        comm = self._comms.get("cuda" if str(device).startswith("cuda") else "host")
        if comm is None:
            raise _unsupported("CUDA tensors: torch saw no GPU when the group was made")
        return comm

    def empty(self, shape, dtype=torch.float32, device="cuda"):
        """Collective: a tensor on the heap of the group's communicator of `device`, which its
        collectives use in place (no staging); free() (collective) or the group's end frees
        it."""
        name = str(dtype).replace("torch.", "")
        return self.communicator(device).empty(shape, name, framework="torch")

    def free(self, tensor):
        """Collective: frees a tensor of empty()."""
        self.communicator(tensor.device.type).free(tensor)

    # --- failure control --------------------------------------------------------------
    def abort(self):
        for comm in self._comms.values():
            comm.abort()

    def shutdown(self):
        for comm in self._comms.values():
            comm.finalize()

    def async_error(self):
        """None, or (code, message) of the first communicator that failed."""
        for comm in self._comms.values():
            error = comm.async_error()
            if error is not None:
                return error
        return None


def _create(store, rank, size, timeout):
    return SymcommProcessGroup(store, rank, size, timeout)


if _NAME.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(_NAME, _create, devices=["cpu", "cuda"])

