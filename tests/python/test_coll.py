# Every collective of the binding against a numpy reference of every rank's input, on plain
# arrays and on symmetric ones, with outputs poisoned first.
import numpy as np
import pytest

import symcomm
from conftest import rank_data

TYPES = ["int32", "int64", "float32", "float64", "float16", "uint8"]


def everyone(comm, seed, n, dtype):
    return [rank_data(seed, r, n, dtype) for r in range(comm.size)]


def poisoned(shape, dtype, comm=None):
    a = comm.empty(shape, dtype) if comm else np.empty(shape, dtype)
    a[...] = 77
    return a


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("op", ["sum", "min", "max", "prod", "avg"])
def test_all_reduce(comm, dtype, symmetric, op):
    n = 1001
    data = everyone(comm, 1, n, dtype)
    send = comm.empty(n, dtype) if symmetric else np.empty(n, dtype)
    send[...] = data[comm.rank]
    recv = poisoned(n, dtype, comm if symmetric else None)
    comm.all_reduce(send, recv, op=op)
    integer = np.issubdtype(np.dtype(dtype), np.integer)
    # Integers in int64, wrapped to the type at the end as the library's wrap.
    stack = np.stack(data).astype(np.int64 if integer else np.float64)
    if op == "avg":  # the sum in the type, then divided (integers towards zero)
        total = stack.sum(axis=0).astype(dtype).astype(np.float64) / comm.size
        want = np.trunc(total) if integer else total
    else:
        want = {"sum": stack.sum(0), "min": stack.min(0), "max": stack.max(0),
                "prod": stack.prod(0)}[op]
    want = want.astype(dtype)  # integers wrap as the library's do
    np.testing.assert_array_equal(recv, want)
    if symmetric:
        comm.free(recv)
        comm.free(send)


def test_all_reduce_in_place(comm):
    data = everyone(comm, 2, 4096, "float32")
    buf = data[comm.rank].copy()
    comm.all_reduce(buf)
    np.testing.assert_array_equal(buf, np.sum(data, axis=0))


@pytest.mark.parametrize("dtype", ["int8", "float32", "float64"])
def test_all_gather_reduce_scatter_all_to_all(comm, dtype):
    n, p = 333, comm.size
    data = everyone(comm, 3, n * p, dtype)
    send = data[comm.rank]
    gathered = poisoned(n * p, dtype)
    comm.all_gather(send[:n], gathered)
    np.testing.assert_array_equal(gathered, np.concatenate([d[:n] for d in data]))
    scattered = poisoned(n, dtype)
    comm.reduce_scatter(send, scattered)
    want = np.sum(np.stack(data).astype(np.float64), axis=0)[comm.rank * n:(comm.rank + 1) * n]
    np.testing.assert_array_equal(scattered, want.astype(dtype))
    swapped = poisoned(n * p, dtype)
    comm.all_to_all(send, swapped)
    np.testing.assert_array_equal(
        swapped, np.concatenate([data[j][comm.rank * n:(comm.rank + 1) * n] for j in range(p)]))


def test_all_to_all_v(comm):
    p, me = comm.size, comm.rank
    count = lambda i, j: (i * 3 + j * 5) % 7 + 1  # noqa: E731 - elements rank i sends rank j
    sc = [count(me, j) for j in range(p)]
    sd = list(np.cumsum([0] + sc[:-1]))
    rc = [count(i, me) for i in range(p)]
    rd = list(np.cumsum([0] + rc[:-1]))
    send = np.concatenate([np.full(sc[j], me * 100 + j, np.int64) for j in range(p)])
    recv = poisoned(sum(rc), "int64")
    comm.all_to_all_v(send, sc, [int(x) for x in sd], recv, rc, [int(x) for x in rd])
    want = np.concatenate([np.full(rc[i], i * 100 + me, np.int64) for i in range(p)])
    np.testing.assert_array_equal(recv, want)


@pytest.mark.parametrize("root", [0, -1])
def test_rooted(comm, root):
    root = root % comm.size
    n, p, me = 257, comm.size, comm.rank
    data = everyone(comm, 4, n * p, "float32")
    buf = data[me][:n].copy() if me == root else poisoned(n, "float32")
    comm.broadcast(buf, root=root)
    np.testing.assert_array_equal(buf, data[root][:n])
    out = poisoned(n, "float32") if me == root else None
    comm.reduce(data[me][:n], out, op="max", root=root)
    if me == root:
        np.testing.assert_array_equal(out, np.max(np.stack(data)[:, :n], axis=0))
    out = poisoned(n * p, "float32") if me == root else None
    comm.gather(data[me][:n], out, root=root)
    if me == root:
        np.testing.assert_array_equal(out, np.concatenate([d[:n] for d in data]))
    part = poisoned(n, "float32")
    comm.scatter(data[me] if me == root else None, part, root=root)
    np.testing.assert_array_equal(part, data[root][me * n:(me + 1) * n])


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_premul_sum(comm, dtype):
    n = 513
    data = everyone(comm, 5, n, dtype)
    scalar = 0.5 if dtype != "int32" else 3
    op = comm.premul_sum(scalar, dtype)
    recv = poisoned(n, dtype)
    comm.all_reduce(data[comm.rank], recv, op=op)
    want = sum(scalar * d.astype(np.float64) for d in data)
    np.testing.assert_array_equal(recv, want.astype(dtype))
    comm.destroy_op(op)


def test_send_recv_ring_in_a_group(comm):
    p, me = comm.size, comm.rank
    right, left = (me + 1) % p, (me + p - 1) % p
    out = np.arange(10000, dtype=np.float64) + me
    got = poisoned(10000, "float64")
    with symcomm.group():
        comm.send(out, right)
        comm.recv(got, left)
    np.testing.assert_array_equal(got, np.arange(10000, dtype=np.float64) + left)


def test_split_and_teams(comm):
    sub = comm.split(comm.rank % 2, key=-comm.rank)
    members = [r for r in range(comm.size) if r % 2 == comm.rank % 2]
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(comm.rank)
    v = np.array([comm.rank], np.int64)
    total = np.empty(1, np.int64)
    sub.all_reduce(v, total)
    assert total[0] == sum(members)
    sub.finalize()
    assert sub.finalized
    with pytest.raises(symcomm.Error) as e:
        sub.all_reduce(v, total)
    assert e.value.name == "symcommInvalidUsage"
    assert comm.split(-1) is None or comm.size == 1


def test_dlpack_capsules_are_taken_as_their_arrays(comm):
    # A capsule (torch.utils.dlpack.to_dlpack, numpy's __dlpack__()) is an array to every call.
    n = 257
    data = everyone(comm, 5, n, "float32")
    send = np.array(data[comm.rank])
    recv = poisoned(n, "float32")
    comm.all_reduce(send.__dlpack__(), recv.__dlpack__())
    np.testing.assert_allclose(recv, np.stack(data).astype(np.float64).sum(0), rtol=1e-5)
    gathered = poisoned(n * comm.size, "float32")
    comm.all_gather(send.__dlpack__(), gathered.__dlpack__())
    np.testing.assert_array_equal(gathered, np.concatenate(data))
