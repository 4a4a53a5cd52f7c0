# One-sided calls and the symmetric heap from Python: arrays of empty(), peers' views,
# put/get/put_signal/signal_wait, atomics, and DLPack round trips.
import numpy as np
import pytest

import symcomm


def test_heap_array_and_dlpack(comm):
    a = comm.empty((4, 8), "float64")
    assert a.shape == (4, 8) and a.dtype == np.float64
    a[...] = comm.rank
    b = np.from_dlpack(a)  # the same memory through DLPack
    b[0, 0] = -1
    assert a[0, 0] == -1
    raw = comm.empty(16, np.int32, framework="dlpack")
    view = np.from_dlpack(raw)
    view[:] = np.arange(16)
    assert view.sum() == 120
    comm.free(raw)
    comm.free(a)


def test_peer_views(comm):
    a = comm.empty(64, "int32")
    a[:] = comm.rank
    comm.host_barrier()
    for pe in range(comm.size):
        if comm.peer_accessible(pe):
            assert (comm.peer(a, pe) == pe).all()
    comm.host_barrier()
    comm.free(a)


def test_put_get_and_signal(comm):
    p, me = comm.size, comm.rank
    right, left = (me + 1) % p, (me + p - 1) % p
    n = 100000
    dst = comm.empty(n, "float32")
    sig = comm.empty(1, "uint64")
    sig[0] = 0
    dst[:] = -1
    comm.host_barrier()
    src = np.arange(n, dtype=np.float32) * (me + 1)
    comm.put_signal(dst, src, sig, 1, right)
    comm.signal_wait(sig, "eq", 1)
    np.testing.assert_array_equal(dst, np.arange(n, dtype=np.float32) * (left + 1))
    comm.host_barrier()
    back = np.zeros(n, np.float32)
    comm.get(back, dst, right)  # right's dst holds this rank's src
    np.testing.assert_array_equal(back, src)
    comm.host_barrier()
    dst[:] = 0
    comm.host_barrier()
    comm.put(dst[:10], src[:10], right, nbi=True)
    comm.quiet()
    comm.host_barrier()
    np.testing.assert_array_equal(dst[:10], np.arange(10, dtype=np.float32) * (left + 1))
    comm.host_barrier()
    comm.free(sig)
    comm.free(dst)


def test_put_host_us_times_real_puts(comm):
    # bench/torch_dist.py --overhead's C API baseline: n puts that do land, and a time.
    dst = comm.empty(4, "int32")
    dst[:] = -1
    src = np.array([7, 8, 9, comm.rank], np.int32)
    us = comm._put_host_us(dst, src, comm.rank, 50)
    comm.synchronize()
    assert us > 0
    np.testing.assert_array_equal(dst, src)
    with pytest.raises(symcomm.Error, match="at least 1"):
        comm._put_host_us(dst, src, comm.rank, 0)
    with pytest.raises(symcomm.Error, match="bytes"):
        comm._put_host_us(dst, src[:2], comm.rank, 1)
    comm.free(dst)


def test_atomics(comm):
    word = comm.empty(1, "uint64")
    word[0] = 0
    comm.host_barrier()
    old = np.zeros(1, np.uint64)
    comm.fetch_add(word, 5, 0, old)
    comm.quiet()
    comm.host_barrier()
    if comm.rank == 0:
        assert word[0] == 5 * comm.size
    comm.host_barrier()
    comm.compare_swap(word, 5 * comm.size, 1, 0, old)  # one rank's succeeds
    comm.quiet()
    comm.host_barrier()
    if comm.rank == 0:
        assert word[0] == 1
    comm.host_barrier()
    comm.free(word)


def test_stream_barrier(comm):
    comm.barrier()
    comm.barrier(team=symcomm.WORLD)


def test_module_level_empty_and_peer(comm):
    # symcomm.empty and symcomm.peer on the default communicator (the session's, joined
    # first by this process).
    assert symcomm.default_comm() is comm
    a = symcomm.empty(16, "int64")
    a[:] = comm.rank
    comm.host_barrier()
    for pe in range(comm.size):
        if comm.peer_accessible(pe):
            assert (symcomm.peer(a, pe) == pe).all()
    comm.host_barrier()
    with pytest.raises(symcomm.Error, match="heap is in the host space"):
        symcomm.empty(4, "float32", device="cuda")
    comm.free(a)
