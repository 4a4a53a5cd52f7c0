# Fused communication and computation from Python (the host space runs the CPU reference
# implementation): all-gather + GEMM, GEMM + reduce-scatter and transpose + accumulate on
# uneven parts, float16 inputs, against numpy; the plan's checks and errors.
import numpy as np
import pytest

import symcomm


def ints(seed, shape, dtype=np.float16):
    """Small integers: every product and sum is exact in fp32."""
    return np.random.default_rng(seed).integers(-3, 4, size=shape).astype(dtype)


def test_all_gather_gemm(comm):
    p, me, k, n = comm.size, comm.rank, 5, 4
    rows = [2 + r for r in range(p)]
    a = [ints(10 + r, (rows[r], k)) for r in range(p)]
    b = ints(99, (k, n))
    plan = comm.fused_plan("all_gather_gemm", n, k, rows=rows, a_type="float16",
                           c_type="float32", gather_a=True)
    assert plan.implementation
    c = np.full((sum(rows), n), 77, np.float32)
    gathered = np.full((sum(rows), k), 77, np.float16)
    ws = comm.empty(max(1, plan.workspace_size), "uint8") if plan.workspace_size else None
    plan.run(a[me], b, c, gathered=gathered, workspace=ws)
    whole = np.vstack(a)
    np.testing.assert_array_equal(c, whole.astype(np.float32) @ b.astype(np.float32))
    np.testing.assert_array_equal(gathered, whole)
    plan.destroy()


def test_gemm_reduce_scatter(comm):
    p, me, n = comm.size, comm.rank, 3
    rows = [1 + r for r in range(p)]
    cols = [2 + (r % 2) for r in range(p)]
    m = sum(rows)
    a = [ints(20 + r, (m, cols[r])) for r in range(p)]
    b = [ints(40 + r, (cols[r], n)) for r in range(p)]
    plan = comm.fused_plan("gemm_reduce_scatter", n, rows=rows, cols=cols, a_type="float16",
                           c_type="float32")
    c = np.full((rows[me], n), 77, np.float32)
    ws = comm.empty(plan.workspace_size, "uint8") if plan.workspace_size else None
    plan.run(a[me], b[me], c, workspace=ws)
    total = sum(x.astype(np.float32) @ y.astype(np.float32) for x, y in zip(a, b))
    first = sum(rows[:me])
    np.testing.assert_array_equal(c, total[first:first + rows[me]])
    plan.destroy()


def test_transpose_accumulate(comm):
    p, me = comm.size, comm.rank
    cols = [1 + r for r in range(p)]
    n = sum(cols)
    lo = [sum(cols[:r]) for r in range(p)]
    xs = [ints(60 + r, (n, cols[r]), np.float32) for r in range(p)]
    big = np.hstack(xs)  # the N x N matrix X
    plan = comm.fused_plan("transpose_accumulate", n, cols=cols, a_type="float32")
    # X_r is symmetric (every member reads it): one allocation size on every rank.
    heap = comm.empty(n * max(cols), "float32")
    view = heap[:n * cols[me]].reshape(n, cols[me])
    view[...] = xs[me]
    out = np.ones((n, cols[me]), np.float32)
    ws = comm.empty(plan.workspace_size, "uint8") if plan.workspace_size else None
    plan.run(view, None, out, workspace=ws)
    np.testing.assert_array_equal(out, 1 + big.T[:, lo[me]:lo[me] + cols[me]])
    plan.destroy()


def test_fused_refusals(comm):
    ok, why = comm.fused_can_implement("all_gather_gemm", 4, 5, rows=[1] * comm.size,
                                       a_type="float16")
    assert ok and why == ""
    with pytest.raises(symcomm.Error, match="float16 or bfloat16"):
        comm.fused_can_implement("all_gather_gemm", 4, 5, rows=[1] * comm.size,
                                 a_type="float32")
    with pytest.raises(symcomm.Error, match="'allgather_gemm' is not"):
        comm.fused_plan("allgather_gemm", 4, 5)
    with pytest.raises(symcomm.Error):
        comm.fused_plan("all_gather_gemm", 4, 5, rows=[1] * comm.size, a_type="float32")
