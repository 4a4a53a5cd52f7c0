# The cuda space from Python without a GPU framework: arrays on the heap (DLPack arrays of
# GPU memory) filled and read through put and get from numpy arrays, every collective on
# them checked against numpy. ctest's gpu_py_n2 runs this file in the cuda space; elsewhere
# it skips.
import numpy as np
import pytest

from conftest import rank_data


@pytest.fixture
def gpu(comm):
    if comm.space != "cuda":
        pytest.skip("the cuda space's tests")
    return comm


def upload(comm, host, dtype):
    a = comm.empty(host.size, dtype)
    comm.put(a, np.ascontiguousarray(host, dtype), comm.rank)  # to this rank's own copy
    return a


def download(comm, a, n, dtype):
    out = np.full(n, 77, dtype)
    comm.get(out, a, comm.rank)
    comm.synchronize()  # the stream's work, the get's included, is done
    return out


def test_heap_arrays_are_gpu_memory(gpu):
    a = gpu.empty(16, "float32")
    assert a.__dlpack_device__() == (2, gpu.device)  # kDLCUDA
    gpu.free(a)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
def test_collectives_on_the_gpu(gpu, dtype):
    n, p, me = 4099, gpu.size, gpu.rank
    data = [rank_data(9, r, n * p, dtype) for r in range(p)]
    send = upload(gpu, data[me], dtype)
    recv = upload(gpu, np.full(n * p, 77, dtype), dtype)
    gpu.all_reduce(send, recv)
    want = np.sum(np.stack(data).astype(np.float64), axis=0).astype(dtype)
    np.testing.assert_array_equal(download(gpu, recv, n * p, dtype), want)
    part = upload(gpu, np.full(n, 77, dtype), dtype)
    gpu.reduce_scatter(send, part, op="max")
    want = np.max(np.stack(data), axis=0)[me * n:(me + 1) * n]
    np.testing.assert_array_equal(download(gpu, part, n, dtype), want)
    gpu.all_gather(part, recv)
    want = np.concatenate([np.max(np.stack(data), axis=0)[j * n:(j + 1) * n] for j in range(p)])
    np.testing.assert_array_equal(download(gpu, recv, n * p, dtype), want)
    gpu.all_to_all(send, recv)
    want = np.concatenate([data[j][me * n:(me + 1) * n] for j in range(p)])
    np.testing.assert_array_equal(download(gpu, recv, n * p, dtype), want)
    for a in (part, recv, send):
        gpu.free(a)


def test_send_recv_and_put_signal_on_the_gpu(gpu):
    import symcomm
    p, me = gpu.size, gpu.rank
    right, left = (me + 1) % p, (me + p - 1) % p
    n = 1 << 20
    out = upload(gpu, np.arange(n, dtype=np.float32) + me, "float32")
    got = upload(gpu, np.zeros(n, np.float32), "float32")
    with symcomm.group():
        gpu.send(out, right)
        gpu.recv(got, left)
    np.testing.assert_array_equal(download(gpu, got, n, "float32"),
                                  np.arange(n, dtype=np.float32) + left)
    sig = upload(gpu, np.zeros(1, np.uint64), "uint64")
    gpu.host_barrier()
    gpu.put_signal(got, np.arange(n, dtype=np.float32) * 2 + me, sig, 1, right)
    gpu.signal_wait(sig, "eq", 1)
    np.testing.assert_array_equal(download(gpu, got, n, "float32"),
                                  np.arange(n, dtype=np.float32) * 2 + left)
    gpu.host_barrier()
    for a in (sig, got, out):
        gpu.free(a)


def most(comm, n):
    """The largest of every rank's n, through the GPU (a symmetric allocation has one size)."""
    a = upload(comm, np.array([n], np.int64), "int64")
    comm.all_reduce(a, op="max")
    got = int(download(comm, a, 1, "int64")[0])
    comm.free(a)
    return got


def test_transposes_on_the_gpu(gpu):
    from test_decomp import GDIMS, fill, mismatches
    d = gpu.decomp(GDIMS, pdims=(1, gpu.size))
    ws = gpu.empty(most(gpu, max(1, d.workspace_size("float64"))), "uint8")
    pencils = [d.pencil(a) for a in range(3)]
    n = most(gpu, max(p["size"] for p in pencils))
    a = upload(gpu, np.concatenate([fill(pencils[0], "float64"),
                                    np.zeros(n - pencils[0]["size"])]), "float64")
    b = upload(gpu, np.full(n, -7.0), "float64")
    for src, dst in ((0, 1), (1, 2), (2, 1), (1, 0)):
        d.transpose(src, dst, a, b, ws)
        assert mismatches(pencils[dst], download(gpu, b, n, "float64")) == 0, f"{src}->{dst}"
        a, b = b, a
    d.destroy()
    for x in (b, a, ws):
        gpu.free(x)


def test_all_gather_gemm_on_the_gpu(gpu):
    from test_fused import ints
    p, me, k, n = gpu.size, gpu.rank, 64, 32
    rows = [16 + 8 * r for r in range(p)]
    a = [ints(10 + r, (rows[r], k)) for r in range(p)]
    b = ints(99, (k, n))
    plan = gpu.fused_plan("all_gather_gemm", n, k, rows=rows, a_type="float16",
                          c_type="float32")
    m = sum(rows)
    a_dev = upload(gpu, np.concatenate([a[me].reshape(-1),
                                        np.zeros(max(rows) * k - rows[me] * k, np.float16)]),
                   "float16")
    b_dev = upload(gpu, b.reshape(-1), "float16")
    c_dev = upload(gpu, np.full(m * n, 77, np.float32), "float32")
    ws = gpu.empty(plan.workspace_size, "uint8") if plan.workspace_size else None
    plan.run(a_dev, b_dev, c_dev, workspace=ws)
    got = download(gpu, c_dev, m * n, "float32").reshape(m, n)
    np.testing.assert_array_equal(got, np.vstack(a).astype(np.float32) @ b.astype(np.float32))
    plan.destroy()


def test_register_a_gpu_array(gpu):
    # Memory of the application's own (cudaMalloc through torch or cupy, where installed):
    # registered, a collective on it in place, deregistered.
    torch = pytest.importorskip("torch")
    me, p = gpu.rank, gpu.size
    t = torch.full((1000,), float(me + 1), device=f"cuda:{gpu.device}")
    reg = gpu.register(t)
    gpu.all_reduce(t, stream=torch.cuda.current_stream(t.device).cuda_stream)
    torch.cuda.synchronize()
    assert bool((t == float(sum(range(1, p + 1)))).all())
    reg.deregister()
    reg.deregister()
