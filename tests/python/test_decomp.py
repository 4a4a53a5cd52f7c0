# The pencil decomposition from Python: every transpose of the cycle X -> Y -> Z -> Y -> X on
# plain and heap arrays, real and complex, and halo exchanges, each pencil checked point by
# point against the global index it must hold.
import numpy as np
import pytest

import symcomm

GDIMS = (9, 6, 5)  # uneven splits on 2 and 4 ranks


def value(x, y, z):
    return x + 100.0 * y + 10000.0 * z


def grid(info):
    """The global coordinates of every element of a pencil buffer, as arrays of its memory
    shape (numpy order: slowest first)."""
    order, lo, halo = info["order"], info["lo"], info["halo"]
    axes = [np.arange(info["shape"][k]) + lo[order[k]] - halo[order[k]] for k in range(3)]
    mem = np.meshgrid(axes[2], axes[1], axes[0], indexing="ij")  # slowest first
    coords = [None, None, None]
    for k in range(3):
        coords[order[k]] = mem[2 - k]
    return coords


def owned(info):
    """Mask of the owned (not halo, not padding) elements."""
    x, y, z = grid(info)
    lo, hi = info["lo"], info["hi"]
    return ((x >= lo[0]) & (x < hi[0]) & (y >= lo[1]) & (y < hi[1]) & (z >= lo[2]) &
            (z < hi[2]))


def fill(info, dtype):
    x, y, z = grid(info)
    a = np.full(info["size"], -1, dtype)
    a.reshape(info["shape"][::-1])[owned(info)] = value(x, y, z)[owned(info)]
    return a


def most(comm, n):
    """The largest of every rank's n: a symmetric allocation has one size."""
    a = np.array([n], np.int64)
    comm.all_reduce(a, op="max")
    return int(a[0])


def mismatches(info, a):
    x, y, z = grid(info)
    got = a[:info["size"]].reshape(info["shape"][::-1])
    return int(np.count_nonzero(got[owned(info)] != value(x, y, z)[owned(info)]))


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
@pytest.mark.parametrize("symmetric", [False, True])
def test_transpose_cycle(comm, dtype, symmetric):
    d = comm.decomp(GDIMS, pdims=(1, comm.size))
    assert d.pdims == (1, comm.size)
    ws = comm.empty(most(comm, max(1, d.workspace_size(dtype))), "uint8")
    pencils = [d.pencil(a) for a in range(3)]
    biggest = most(comm, max(p["size"] for p in pencils))
    real = "float32" if dtype == "float32" else "float64"
    per = 1 if dtype == "float32" else 2  # reals per element

    def buffer():
        if symmetric:
            return comm.empty(biggest * per, real).view(dtype)
        return np.empty(biggest, dtype)
    a, b = buffer(), buffer()
    a[:pencils[0]["size"]] = fill(pencils[0], dtype)
    for src, dst in ((0, 1), (1, 2), (2, 1), (1, 0)):
        b[:] = -7
        d.transpose(src, dst, a, b, ws)
        assert mismatches(pencils[dst], b) == 0, f"{src}->{dst}"
        a, b = b, a
    d.destroy()
    d.destroy()  # a second call does nothing
    with pytest.raises(symcomm.Error, match="destroyed"):
        d.pencil(0)


def test_halo_exchange(comm):
    d = comm.decomp(GDIMS, pdims=(1, comm.size))
    halo = (1, 1, 1)
    info = d.pencil(0, halo=halo)
    buf = comm.empty(most(comm, info["size"]), "float64")
    buf[:info["size"]] = fill(info, "float64")
    for dim in range(3):
        ws = comm.empty(most(comm, max(1, d.halo_workspace_size(0, dim, "float64", halo=halo))),
                        "uint8")
        d.halo(0, dim, buf, ws, halo=halo, periodic=(1, 1, 1))
    x, y, z = grid(info)
    want = value(x % GDIMS[0], y % GDIMS[1], z % GDIMS[2])
    np.testing.assert_array_equal(buf[:info["size"]].reshape(info["shape"][::-1]), want)
    d.destroy()


def test_decomp_errors(comm):
    with pytest.raises(symcomm.Error):
        comm.decomp((4, 4, 4), pdims=(3, 7))  # not the communicator's size
    with pytest.raises(symcomm.Error, match="rank_order"):
        comm.decomp((4, 4, 4), rank_order="diagonal")
    d = comm.decomp(GDIMS, pdims=(1, comm.size))
    with pytest.raises(symcomm.Error, match="float32, float64, complex64 or complex128"):
        d.transpose(0, 1, np.zeros(4, np.int32), np.zeros(4, np.int32), np.zeros(4, np.uint8))
    d.destroy()
