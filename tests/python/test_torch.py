# The torch.distributed backend (symcomm.torch_backend) on CPU tensors (CUDA tensors with
# SYMCOMM_TEST_TORCH_DEVICE=cuda, ctest's gpu_py_torch_n2): every operation of
# torch.distributed that it serves against a reference recomputed from every rank's input,
# a subgroup, the refusals, and a DDP training loop whose parameters match a single process
# trained on every rank's data. Run on every rank under symrun (ctest: py_torch_n2,
# py_torch_n4); skipped where torch is not installed.
import hashlib
import os
import tempfile

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import symcomm.torch_backend  # noqa: E402,F401 - registers "symcomm"

DEV = os.environ.get("SYMCOMM_TEST_TORCH_DEVICE", "cpu")


def on(t):
    return t.to(DEV)


def close(got, want, **tol):
    torch.testing.assert_close(got.cpu(), want.cpu(), **(tol or {"rtol": 0, "atol": 0}))


@pytest.fixture(scope="module")
def pg():
    rank, size = int(os.environ["SYMCOMM_RANK"]), int(os.environ["SYMCOMM_NRANKS"])
    # A file store that every rank of this run names alike (symrun's unique id).
    tag = hashlib.sha1(os.environ["SYMCOMM_UNIQUE_ID"].encode()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"symcomm_torch_store_{tag}")
    store = dist.FileStore(path, size)
    if DEV == "cuda":  # a GPU per rank, or one shared under MPS (SYMCOMM_TEST_SHARED_GPUS)
        torch.cuda.set_device(int(os.environ["SYMCOMM_LOCAL_RANK"]) % torch.cuda.device_count())
    dist.init_process_group(backend="symcomm", store=store, rank=rank, world_size=size)
    yield dist.group.WORLD
    dist.destroy_process_group()
    if rank == 0 and os.path.exists(path):
        os.remove(path)


def data(rank, n, dtype=torch.float32, seed=0):
    """Rank `rank`'s input: small integers, exact in every type and in their sums."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(-8, 9, (n,), generator=g).to(dtype)


def mlp():
    """The same small model on every rank (and in the one-process reference)."""
    torch.manual_seed(7)
    return on(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                  torch.nn.Linear(16, 1)))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return on(torch.randn(4, 8, generator=g)), on(torch.randn(4, 1, generator=g))


def train_beside_one_process(wrapped, single, steps):
    """SGD steps of `wrapped` (DDP or FSDP) on this rank's batches, and of `single` as one
    process on every rank's: the mean of the ranks' mean losses."""
    me, p = dist.get_rank(), dist.get_world_size()
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(single.parameters(), lr=0.1)
    for step in range(steps):
        x, y = batch(me, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(wrapped(x), y).backward()
        opt.step()
        ref_opt.zero_grad()
        (sum(torch.nn.functional.mse_loss(single(xb), yb)
             for xb, yb in (batch(r, step) for r in range(p))) / p).backward()
        ref_opt.step()


def test_backend_name(pg):
    assert dist.get_backend(pg) == "symcomm"


@pytest.mark.parametrize("op,ref", [(dist.ReduceOp.SUM, "sum"), (dist.ReduceOp.MAX, "max"),
                                    (dist.ReduceOp.MIN, "min"), (dist.ReduceOp.PRODUCT, "prod"),
                                    (dist.ReduceOp.AVG, "avg")])
def test_all_reduce(pg, op, ref):
    me, p = dist.get_rank(), dist.get_world_size()
    stack = torch.stack([data(r, 1000, torch.float64) for r in range(p)])
    want = {"sum": stack.sum(0), "max": stack.max(0).values, "min": stack.min(0).values,
            "prod": stack.prod(0), "avg": stack.sum(0) / p}[ref]
    t = on(data(me, 1000, torch.float64))
    dist.all_reduce(t, op=op)
    close(t, want)


def test_all_reduce_async_and_non_contiguous(pg):
    me, p = dist.get_rank(), dist.get_world_size()
    t = on(data(me, 64 * 2)).reshape(64, 2).t()  # not contiguous
    work = dist.all_reduce(t, async_op=True)
    assert work.wait()
    want = sum(data(r, 64 * 2).reshape(64, 2).t() for r in range(p))
    close(t, want)
    # The fast path's Work (contiguous): complete, its Future made when asked for.
    u = on(data(me, 100))
    work = dist.all_reduce(u, async_op=True)
    assert work.is_completed() and work.is_success() and work.wait()
    assert work.result()[0] is u
    fut = work.get_future()
    assert fut.done() and fut.value()[0] is u
    close(fut.then(lambda f: f.value()[0] * 2).wait(), 2 * sum(data(r, 100) for r in range(p)))


def test_gathers_and_scatters(pg):
    me, p, n = dist.get_rank(), dist.get_world_size(), 37
    everyone = [data(r, n * p, seed=1) for r in range(p)]
    mine = on(everyone[me])
    outs = [on(torch.full((n,), 77.0)) for _ in range(p)]
    dist.all_gather(outs, mine[:n])
    for r in range(p):
        close(outs[r], everyone[r][:n])
    whole = on(torch.full((n * p,), 77.0))
    dist.all_gather_into_tensor(whole, mine[:n])
    close(whole, torch.cat([e[:n] for e in everyone]))
    part = on(torch.full((n,), 77.0))
    dist.reduce_scatter_tensor(part, mine)
    close(part, sum(everyone)[me * n:(me + 1) * n])
    part.fill_(77)
    dist.reduce_scatter(part, list(mine.chunk(p)), op=dist.ReduceOp.MAX)
    close(part, torch.stack(everyone).max(0).values[me * n:(me + 1) * n])


@pytest.mark.parametrize("root", [0, -1])
def test_rooted(pg, root):
    me, p, n = dist.get_rank(), dist.get_world_size(), 19
    root %= p
    everyone = [data(r, n * p, seed=2) for r in range(p)]
    t = on(everyone[me][:n].clone() if me == root else torch.full((n,), 77.0))
    dist.broadcast(t, src=root)
    close(t, everyone[root][:n])
    t = on(everyone[me][:n].clone())
    dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
    if me == root:
        close(t, sum(e[:n] for e in everyone))
    outs = [on(torch.full((n,), 77.0)) for _ in range(p)] if me == root else None
    dist.gather(on(everyone[me][:n]), outs, dst=root)
    if me == root:
        for r in range(p):
            close(outs[r], everyone[r][:n])
    got = on(torch.full((n,), 77.0))
    dist.scatter(got, [on(c) for c in everyone[me].chunk(p)] if me == root else None, src=root)
    close(got, everyone[root][me * n:(me + 1) * n])


def test_all_to_all(pg):
    me, p = dist.get_rank(), dist.get_world_size()
    rows = lambda i, j: (i + 2 * j) % 3 + 1  # noqa: E731 - rows rank i sends rank j
    send = on(torch.cat([torch.full((rows(me, j), 4), 100.0 * me + j) for j in range(p)]))
    recv = on(torch.full((sum(rows(i, me) for i in range(p)), 4), 77.0))
    dist.all_to_all_single(recv, send, [rows(i, me) for i in range(p)],
                           [rows(me, j) for j in range(p)])
    close(recv, torch.cat([torch.full((rows(i, me), 4), 100.0 * i + me) for i in range(p)]))
    even = on(torch.arange(p * 3, dtype=torch.float32) + 10 * me)
    out = on(torch.full((p * 3,), 77.0))
    dist.all_to_all_single(out, even)
    close(out, torch.cat([torch.arange(me * 3, me * 3 + 3, dtype=torch.float32) + 10 * i
                          for i in range(p)]))
    outs = [on(torch.full((j + 1,), 77.0)) for j in range(p)]  # rank j sends me j + 1
    dist.all_to_all(outs, [on(torch.full((me + 1,), float(me * 10 + j))) for j in range(p)])
    for j in range(p):
        close(outs[j], torch.full((j + 1,), float(j * 10 + me)))


def test_send_recv_and_bool(pg):
    me, p = dist.get_rank(), dist.get_world_size()
    right, left = (me + 1) % p, (me + p - 1) % p
    out, got = on(torch.arange(500.0) + me), on(torch.full((500,), 77.0))
    ops = [dist.P2POp(dist.isend, out, right), dist.P2POp(dist.irecv, got, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    close(got, torch.arange(500.0) + left)
    # Blocking calls, ordered so that no rank waits for itself; a non-contiguous receive.
    wide = on(torch.full((500, 2), 77.0))
    if me % 2 == 0:
        dist.send(out, right)
        dist.recv(wide[:, 1], left)
    else:
        dist.recv(wide[:, 1], left)
        dist.send(out, right)
    close(wide[:, 1], torch.arange(500.0) + left)
    close(wide[:, 0], torch.full((500,), 77.0))
    flags = torch.tensor([me == 0, True, False]) if me == 0 else torch.zeros(3, dtype=torch.bool)
    flags = on(flags)
    dist.broadcast(flags, src=0)
    assert flags.tolist() == [True, True, False]


def test_queued_sends_and_bools_take_the_general_path(pg):
    # A collective after queued sends and receives issues them first; a bool all-gather and
    # a non-contiguous output leave the calls' fast path (torch_backend._on_plain).
    me, p = dist.get_rank(), dist.get_world_size()
    right, left = (me + 1) % p, (me + p - 1) % p
    out, got = on(torch.arange(300.0) + me), on(torch.full((300,), 77.0))
    works = [dist.isend(out, right), dist.irecv(got, left)]
    total = on(torch.full((5,), float(me)))
    dist.all_reduce(total)
    for w in works:
        w.wait()
    close(got, torch.arange(300.0) + left)
    close(total, torch.full((5,), float(sum(range(p)))))
    flags = on(torch.tensor([me % 2 == 0, True, me == 0]))
    gathered = on(torch.zeros(3 * p, dtype=torch.bool))
    dist.all_gather_into_tensor(gathered, flags)
    assert gathered.tolist() == sum(([r % 2 == 0, True, r == 0] for r in range(p)), [])
    wide = on(torch.full((7 * p, 2), 77.0))
    dist.all_gather_into_tensor(wide[:, 1], on(torch.full((7,), float(me))))
    close(wide[:, 1], torch.cat([torch.full((7,), float(r)) for r in range(p)]))
    close(wide[:, 0], torch.full((7 * p,), 77.0))


def test_subgroup(pg):
    me, p = dist.get_rank(), dist.get_world_size()
    evens = list(range(0, p, 2))
    sub = dist.new_group(evens, backend="symcomm")
    if me in evens:
        t = on(torch.tensor([float(me)]))
        dist.all_reduce(t, group=sub)
        assert t.item() == float(sum(evens))
    dist.barrier()


def test_refusals(pg):
    t = on(torch.ones(4, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="does not support allreduce with the reduction"):
        dist.all_reduce(t, op=dist.ReduceOp.BAND)
    with pytest.raises(RuntimeError, match="recv from any source"):
        dist.recv(t)  # no source: any
    dist.barrier()


def test_ddp_matches_one_process(pg):
    ddp = torch.nn.parallel.DistributedDataParallel(mlp())
    single = mlp()
    train_beside_one_process(ddp, single, steps=5)
    for a, b in zip(ddp.module.parameters(), single.parameters()):
        close(a.detach(), b.detach(), rtol=1e-5, atol=1e-6)


def test_compiled_step(pg):
    # torch.compile traces dist.all_reduce and functional collectives through the group
    # (found by its name) without a graph break; aot_eager: no code generation needed.
    import torch.distributed._functional_collectives as fc
    me, p = dist.get_rank(), dist.get_world_size()

    def step(x):
        y = x * 2
        dist.all_reduce(y)
        return fc.all_reduce(y + 1, "sum", dist.group.WORLD)

    got = torch.compile(step, backend="aot_eager", fullgraph=True)(on(torch.ones(8) * (me + 1)))
    close(got, torch.full((8,), float(p * (2 * sum(range(1, p + 1)) + 1))))


def test_cuda_graph_replays_a_step(pg):
    if DEV != "cuda":
        pytest.skip("CUDA graphs need CUDA tensors")
    me, p = dist.get_rank(), dist.get_world_size()
    x = on(torch.zeros(4096))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture
        y = x * 2
        dist.all_reduce(y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x * 2
        dist.all_reduce(y)
    for k in range(3):
        x.fill_(float(k + me))
        graph.replay()
        torch.cuda.synchronize()
        close(y, torch.full((4096,), float(sum(2 * (k + r) for r in range(p)))))
    dist.barrier()


def test_collectives_on_two_streams(pg):
    """Collectives issued on two streams with nothing ordering the streams (as FSDP issues its
    all-gathers and reduce-scatters) run in the order they were made, each right. Each rank
    holds back one of the streams before its call (even ranks the first, odd ranks the
    second), so that, unordered, the ranks would run the calls in different orders: all-reduces
    of one size, which would then pair one rank's call k with another's call k + 1."""
    if DEV != "cuda":
        pytest.skip("streams need CUDA tensors")
    me, p = dist.get_rank(), dist.get_world_size()
    n = 1 << 20
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    results = []
    for k in range(12):
        s = streams[k % 2]
        with torch.cuda.stream(s):
            x = on(data(me, n, seed=k))
            if k % 2 == me % 2:
                torch.cuda._sleep(20_000_000)  # about 10 ms
            dist.all_reduce(x)
        results.append((k, x))
    torch.cuda.synchronize()
    for k, y in results:
        close(y, sum(data(r, n, seed=k) for r in range(p)))
    dist.barrier()


def test_heap_tensors(pg):
    # Tensors on the group's symmetric heap: its collectives use them in place.
    me, p = dist.get_rank(), dist.get_world_size()
    t = pg.empty(1000, torch.float32, DEV)
    assert t.device.type == DEV
    t.fill_(float(me + 1))
    dist.all_reduce(t)
    close(t, torch.full((1000,), float(sum(range(1, p + 1)))))
    whole = pg.empty(1000 * p, torch.float32, DEV)
    dist.all_gather_into_tensor(whole, t)
    close(whole, torch.full((1000 * p,), float(sum(range(1, p + 1)))))
    pg.free(whole)
    pg.free(t)


def test_init_from_group(pg):
    # A symcomm communicator of the group's ranks, its id passed through the group.
    import symcomm
    me, p = dist.get_rank(), dist.get_world_size()
    comm = symcomm.init_from_group(space="host")
    assert (comm.rank, comm.size) == (me, p)
    import numpy as np
    x = np.full(4, me + 1.0)
    comm.all_reduce(x)
    assert (x == sum(range(1, p + 1))).all()
    comm.finalize()


def test_fsdp_matches_one_process(pg):
    # FSDP2 (fully_shard over a device mesh of the default group): all-gathers of the
    # parameters, reduce-scatters of the gradients; the parameters after 3 SGD steps match
    # one process trained on every rank's batches.
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh(DEV, (dist.get_world_size(),))
    sharded = mlp()
    for layer in sharded:
        if isinstance(layer, torch.nn.Linear):
            fsdp.fully_shard(layer, mesh=mesh)
    fsdp.fully_shard(sharded, mesh=mesh)
    single = mlp()
    train_beside_one_process(sharded, single, steps=3)
    for a, b in zip(sharded.parameters(), single.parameters()):
        close(a.full_tensor().detach(), b.detach(), rtol=1e-5, atol=1e-6)
