"""symcomm: GPU-to-GPU communication through symmetric memory, from Python.

A communicator joins the ranks of a launcher (``symcomm.init()`` under symrun, torchrun,
mpirun or srun), of a unique id (``symcomm.Comm(nranks, rank, uid)``), or of a
``torch.distributed`` store (``symcomm.init_from_store``). Arrays are anything that speaks
DLPack (numpy, torch, cupy, jax); ``comm.empty`` makes arrays on the symmetric heap.
Every call takes an optional ``stream`` (an int cudaStream_t, or a torch.cuda.Stream), and
fails with ``symcomm.Error`` carrying the library's code and message. docs/python.md has
the reference.
"""

import contextlib
import os

from ._symcomm import Comm, Error, group_end, group_start, unique_id, version

__all__ = ["Comm", "Error", "init", "init_from_group", "init_from_store", "group",
           "unique_id", "version", "WORLD", "empty", "peer", "default_comm", "set_default_comm"]

WORLD = 0  # the team of every rank (SYMCOMM_TEAM_WORLD)

_default = None  # the communicator of empty() and peer() without one: the first joined


def set_default_comm(comm):
    """Makes `comm` the communicator that empty() and peer() use when given none."""
    global _default
    _default = comm


def default_comm():
    """The communicator that empty() and peer() use when given none: the first one this
    process joined through init(), init_from_store() or init_from_group(), or the one
    set_default_comm() named."""
    if _default is None or _default.finalized:
        raise Error("no default communicator: join one with symcomm.init() first")
    return _default


def _joined(comm):
    if _default is None or _default.finalized:
        set_default_comm(comm)
    return comm


def empty(shape, dtype="float32", device=None, comm=None):
    """Collective: an uninitialised tensor on the symmetric heap of `comm` (the default
    communicator if None). device None: the communicator's default framework (numpy in the
    host space, a DLPack array in the cuda space); "cpu" or "cuda": a torch tensor (the
    communicator's space must hold that device's memory)."""
    comm = comm or default_comm()
    if device is not None:
        want = "cuda" if str(device).startswith("cuda") else "host"
        if want != comm.space:
            raise Error(f"device {device}: the communicator's heap is in the {comm.space} space")
        return comm.empty(shape, dtype, framework="torch")
    return comm.empty(shape, dtype)


def peer(tensor, rank, comm=None):
    """Rank `rank`'s tensor at the same heap offset as `tensor`, as this rank loads and
    stores it (ranks on this node that load/store reaches)."""
    comm = comm or default_comm()
    framework = "torch" if type(tensor).__module__.startswith("torch") else None
    return comm.peer(tensor, rank, framework=framework)


_inits = 0  # communicators joined through torchrun's store by this process


def init(space=None, device=-1):
    """Joins the communicator of the launcher's environment (collective).

    space: "cuda", "host" or None (SYMCOMM_MEMORY_SPACE, else cuda where a GPU is);
    device: -1 for SYMCOMM_DEVICE, else the local rank modulo the GPUs.

    Under torchrun (its agent's store named by TORCHELASTIC_USE_AGENT_STORE) the unique id
    goes through that store, rather than through a bootstrap root of its own near
    MASTER_PORT + SYMCOMM_MASTER_PORT_OFFSET (the C API's rule, docs/launch.md).
    """
    global _inits
    if (os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and
            "SYMCOMM_UNIQUE_ID" not in os.environ):
        try:
            import torch.distributed as dist
        except ImportError:
            dist = None
        if dist is not None:
            store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                  is_master=False)
            _inits += 1
            key = (f"symcomm/{os.environ.get('TORCHELASTIC_RUN_ID', '')}/"
                   f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{_inits}")
            return init_from_store(store, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                                   space, device, key=key)
    return _joined(Comm.from_env(space, device))


def init_from_store(store, rank, world_size, space=None, device=-1, key="symcomm/unique_id",
                    make_default=True):
    """Joins a communicator through a key-value store that every rank reaches
    (torch.distributed's TCPStore or FileStore, or anything with set(key, value) and a
    blocking get(key)): rank 0 makes the unique id and publishes it under ``key``.
    make_default: the communicator becomes the default one if there is none yet."""
    if rank == 0:
        uid = unique_id()
        store.set(key, uid)
    else:
        uid = store.get(key)
        if isinstance(uid, bytes):
            uid = uid.decode()
    comm = Comm(world_size, rank, uid, space, device)
    return _joined(comm) if make_default else comm


def init_from_group(group=None, space=None, device=-1):
    """Joins a communicator of the ranks of a torch.distributed process group (collective
    over it; None: the default group): its rank 0 makes the unique id and broadcasts it
    through the group."""
    import torch.distributed as dist

    rank, size = dist.get_rank(group), dist.get_world_size(group)
    box = [unique_id() if rank == 0 else None]
    root = dist.get_global_rank(group, 0) if group is not None else 0
    dist.broadcast_object_list(box, src=root, group=group)
    return _joined(Comm(size, rank, box[0], space, device))


@contextlib.contextmanager
def group():
    """The calls in the block (on this thread) are issued as one unit at its end
    (symcommGroupStart / symcommGroupEnd): a ring of sends and receives cannot deadlock."""
    group_start()
    try:
        yield
    finally:
        group_end()
