"""symcomm's collectives as torch operators (torch.library), so that torch.compile traces
them without a graph break and CUDA graphs capture them:

    import symcomm.torch_ops as ops
    y = ops.all_reduce(comm, x)          # a new tensor: the sum over the team
    ops.all_reduce_(comm, x)             # in place
    g = ops.all_gather(comm, x)          # team size x x's rows, in team-rank order
    y = ops.transpose(comm, d, x, 0, 1)  # a pencil transpose of decomposition d (comm.decomp)

Each runs on torch.cuda.current_stream() for CUDA tensors (the host space for CPU tensors),
as the Comm's method of the same name does; the functional forms allocate their output with
torch, so they are plain tensors (the staged paths). A communicator passed here is kept
alive for the process's life (the operators name it by a number), and so is a
decomposition with its workspace of each type (made at its first transpose: collective).
A compiled function's first call must find them known: call register(comm, decomp), or an
operator on them eagerly, before torch.compile traces one.
"""

from typing import List

import torch
from torch import Tensor

__all__ = ["all_reduce", "all_reduce_", "all_gather", "reduce_scatter", "all_to_all",
           "broadcast_", "transpose", "halo_", "register"]

_comms = {}  # the number an operator names a communicator by -> the Comm
_decomps = {}  # ... a decomposition by -> (the Decomp, its Comm)
_workspaces = {}  # (decomposition number, type) -> its transposes' workspace
_TYPES = {torch.float32: "float32", torch.float64: "float64", torch.complex64: "complex64",
          torch.complex128: "complex128"}


def _named(table, key, value, what):
    """Files `value` under `key` for the operators, eagerly; a compiled region only looks it
    up (torch.compile replays a traced function's writes to such tables after its graph,
    too late for the operators' fake implementations)."""
    if key not in table:
        if torch.compiler.is_compiling():
            raise RuntimeError(f"symcomm operators: this {what} was not registered before "
                               f"torch.compile traced it: call symcomm.torch_ops.register() "
                               f"with it, or one operator on it eagerly, first")
        table[key] = value
    return key


def _key(comm):
    return _named(_comms, id(comm), comm, "communicator")


def register(comm, decomp=None):
    """Makes a communicator (and a decomposition of it) known to the operators, as their
    first eager call does; needed before torch.compile traces a first call."""
    _key(comm)
    if decomp is not None:
        _named(_decomps, id(decomp), (decomp, comm), "decomposition")


def _stream(t):
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else None


def _flat(t):
    if not t.is_contiguous():
        raise RuntimeError("symcomm operators take contiguous tensors")
    return t.reshape(-1)


@torch.library.custom_op("symcomm::all_reduce_", mutates_args=("t",))
def _all_reduce_(t: Tensor, comm: int, op: str, team: int) -> None:
    _comms[comm].all_reduce(_flat(t), op=op, team=team, stream=_stream(t))


@torch.library.custom_op("symcomm::all_reduce", mutates_args=())
def _all_reduce(t: Tensor, comm: int, op: str, team: int) -> Tensor:
    out = t.contiguous().clone()
    _comms[comm].all_reduce(_flat(out), op=op, team=team, stream=_stream(out))
    return out


@_all_reduce.register_fake
def _(t, comm, op, team):
    return torch.empty_like(t, memory_format=torch.contiguous_format)


@torch.library.custom_op("symcomm::all_gather", mutates_args=())
def _all_gather(t: Tensor, comm: int, team: int) -> Tensor:
    c = _comms[comm]
    x = t.contiguous()
    out = x.new_empty((c.team_size(team) * x.shape[0],) + tuple(x.shape[1:]))
    c.all_gather(_flat(x), _flat(out), team=team, stream=_stream(x))
    return out


@_all_gather.register_fake
def _(t, comm, team):
    return t.new_empty((_comms[comm].team_size(team) * t.shape[0],) + tuple(t.shape[1:]))


@torch.library.custom_op("symcomm::reduce_scatter", mutates_args=())
def _reduce_scatter(t: Tensor, comm: int, op: str, team: int) -> Tensor:
    c = _comms[comm]
    x = t.contiguous()
    out = x.new_empty((x.shape[0] // c.team_size(team),) + tuple(x.shape[1:]))
    c.reduce_scatter(_flat(x), _flat(out), op=op, team=team, stream=_stream(x))
    return out


@_reduce_scatter.register_fake
def _(t, comm, op, team):
    return t.new_empty((t.shape[0] // _comms[comm].team_size(team),) + tuple(t.shape[1:]))


@torch.library.custom_op("symcomm::all_to_all", mutates_args=())
def _all_to_all(t: Tensor, comm: int, team: int) -> Tensor:
    x = t.contiguous()
    out = torch.empty_like(x)
    _comms[comm].all_to_all(_flat(x), _flat(out), team=team, stream=_stream(x))
    return out


@_all_to_all.register_fake
def _(t, comm, team):
    return torch.empty_like(t, memory_format=torch.contiguous_format)


@torch.library.custom_op("symcomm::broadcast_", mutates_args=("t",))
def _broadcast_(t: Tensor, comm: int, root: int, team: int) -> None:
    _comms[comm].broadcast(_flat(t), root=root, team=team, stream=_stream(t))


def _pencil(d, axis):
    """The memory shape of a pencil along `axis` (torch order: slowest first)."""
    return tuple(d.pencil(axis)["shape"][::-1])


def _workspace(key, t):
    """The decomposition's workspace for t's type, made at the first call (collective: the
    largest of every member's size, as a symmetric allocation has one size)."""
    d, comm = _decomps[key]
    name = _TYPES.get(t.dtype)
    if name is None:
        raise RuntimeError(f"symcomm transposes take float32, float64, complex64 or "
                           f"complex128 tensors, not {str(t.dtype).replace('torch.', '')}")
    ws = _workspaces.get((key, name))
    if ws is None:
        size = torch.tensor([max(1, d.workspace_size(name))], dtype=torch.int64, device=t.device)
        comm.all_reduce(size, op="max", stream=_stream(size))
        ws = _workspaces[(key, name)] = comm.empty(int(size.item()), "uint8")
    return ws


@torch.library.custom_op("symcomm::transpose", mutates_args=())
def _transpose(t: Tensor, decomp: int, from_axis: int, to_axis: int) -> Tensor:
    d, _ = _decomps[decomp]
    if tuple(t.shape) != _pencil(d, from_axis):
        raise RuntimeError(f"symcomm transpose: a tensor of shape {tuple(t.shape)} is not this "
                           f"rank's pencil along axis {from_axis}, {_pencil(d, from_axis)}")
    ws = _workspace(decomp, t)
    x = t.contiguous()
    out = x.new_empty(_pencil(d, to_axis))
    d.transpose(from_axis, to_axis, _flat(x), _flat(out), ws, stream=_stream(x))
    return out


@_transpose.register_fake
def _(t, decomp, from_axis, to_axis):
    return t.new_empty(_pencil(_decomps[decomp][0], to_axis))


def _halo_workspace(key, t, axis, dim, halo):
    """The workspace of one halo exchange's shape and type, made at the first call
    (collective: the largest of every member's size)."""
    d, comm = _decomps[key]
    name = _TYPES.get(t.dtype)
    if name is None:
        raise RuntimeError(f"symcomm halo exchanges take float32, float64, complex64 or "
                           f"complex128 tensors, not {str(t.dtype).replace('torch.', '')}")
    index = (key, name, axis, dim, tuple(halo))
    ws = _workspaces.get(index)
    if ws is None:
        size = torch.tensor([max(1, d.halo_workspace_size(axis, dim, name, halo=list(halo)))],
                            dtype=torch.int64, device=t.device)
        comm.all_reduce(size, op="max", stream=_stream(size))
        ws = _workspaces[index] = comm.empty(int(size.item()), "uint8")
    return ws


@torch.library.custom_op("symcomm::halo_", mutates_args=("t",))
def _halo_(t: Tensor, decomp: int, axis: int, dim: int, halo: List[int],
           periodic: List[int]) -> None:
    d, _ = _decomps[decomp]
    want = tuple(d.pencil(axis, halo=list(halo))["shape"][::-1])
    if tuple(t.shape) != want:
        raise RuntimeError(f"symcomm halo exchange: a tensor of shape {tuple(t.shape)} is not "
                           f"this rank's pencil along axis {axis} with halo {tuple(halo)}, "
                           f"{want}")
    ws = _halo_workspace(decomp, t, axis, dim, halo)
    d.halo(axis, dim, _flat(t), ws, halo=list(halo), periodic=list(periodic),
           stream=_stream(t))


def all_reduce_(comm, t, op="sum", team=0):
    """In place: t = op over the team of every member's t."""
    torch.ops.symcomm.all_reduce_(t, _key(comm), op, team)


def all_reduce(comm, t, op="sum", team=0):
    """A new tensor: op over the team of every member's t."""
    return torch.ops.symcomm.all_reduce(t, _key(comm), op, team)


def all_gather(comm, t, team=0):
    """A new tensor of team size x t's rows: every member's t in team-rank order."""
    return torch.ops.symcomm.all_gather(t, _key(comm), team)


def reduce_scatter(comm, t, op="sum", team=0):
    """A new tensor of t's rows / team size: this member's block of op over the team."""
    return torch.ops.symcomm.reduce_scatter(t, _key(comm), op, team)


def all_to_all(comm, t, team=0):
    """A new tensor: block j (t's rows / team size) is member j's block of this member."""
    return torch.ops.symcomm.all_to_all(t, _key(comm), team)


def broadcast_(comm, t, root=0, team=0):
    """In place: t of every member = t of member root."""
    torch.ops.symcomm.broadcast_(t, _key(comm), root, team)


def transpose(comm, decomp, t, from_axis, to_axis):
    """A new tensor: this rank's pencil along to_axis of the field whose pencils along
    from_axis the ranks hold (t: this rank's, its memory shape slowest first, as
    decomp.pencil(from_axis)["shape"] reversed). `decomp` is comm.decomp(...), without halo
    or padding."""
    key = _named(_decomps, id(decomp), (decomp, comm), "decomposition")
    return torch.ops.symcomm.transpose(t, key, from_axis, to_axis)


def halo_(comm, decomp, t, axis, dim, halo, periodic=(1, 1, 1)):
    """In place: the halo of t (this rank's pencil along `axis` with halo widths `halo`, its
    memory shape slowest first) along dimension `dim`, from its neighbours (periodic per
    dimension where `periodic` says so)."""
    key = _named(_decomps, id(decomp), (decomp, comm), "decomposition")
    torch.ops.symcomm.halo_(t, key, axis, dim, list(halo), list(periodic))
