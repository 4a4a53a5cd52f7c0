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
           "unique_id", "version", "WORLD"]

WORLD = 0  # the team of every rank (SYMCOMM_TEAM_WORLD)


_inits = 0  # communicators joined through torchrun's store by this process


def init(space=None, device=-1):
    """Joins the communicator of the launcher's environment (collective).

    space: "cuda", "host" or None (SYMCOMM_MEMORY_SPACE, else cuda where a GPU is);
    device: -1 for SYMCOMM_DEVICE, else the local rank modulo the GPUs.

    Under torchrun (its agent's store named by TORCHELASTIC_USE_AGENT_STORE) the unique id
    goes through that store: the C API's own rule for torchrun, a bootstrap root at
    MASTER_PORT + SYMCOMM_MASTER_PORT_OFFSET, finds that port taken at times under
    `torchrun --standalone`, whose store's clients hold ports next to MASTER_PORT.
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
    return Comm.from_env(space, device)


def init_from_store(store, rank, world_size, space=None, device=-1, key="symcomm/unique_id"):
    """Joins a communicator through a key-value store that every rank reaches
    (torch.distributed's TCPStore or FileStore, or anything with set(key, value) and a
    blocking get(key)): rank 0 makes the unique id and publishes it under ``key``."""
    if rank == 0:
        uid = unique_id()
        store.set(key, uid)
    else:
        uid = store.get(key)
        if isinstance(uid, bytes):
            uid = uid.decode()
    return Comm(world_size, rank, uid, space, device)


def init_from_group(group=None, space=None, device=-1):
    """Joins a communicator of the ranks of a torch.distributed process group (collective
    over it; None: the default group): its rank 0 makes the unique id and broadcasts it
    through the group."""
    import torch.distributed as dist

    rank, size = dist.get_rank(group), dist.get_world_size(group)
    box = [unique_id() if rank == 0 else None]
    root = dist.get_global_rank(group, 0) if group is not None else 0
    dist.broadcast_object_list(box, src=root, group=group)
    return Comm(size, rank, box[0], space, device)


@contextlib.contextmanager
def group():
    """The calls in the block (on this thread) are issued as one unit at its end
    (symcommGroupStart / symcommGroupEnd): a ring of sends and receives cannot deadlock."""
    group_start()
    try:
        yield
    finally:
        group_end()
