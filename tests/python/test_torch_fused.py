# A 2-layer tensor-parallel MLP on symcomm's fused operations (symcomm.torch_fused), forward
# and backward, against the same MLP unfused on the full matrices. Inputs are small
# integers, so every product and sum is exact in float16 and the comparison is exact.
import os

import pytest

torch = pytest.importorskip("torch")

from symcomm import torch_fused  # noqa: E402
from symcomm.torch_fused import all_gather_matmul, matmul_reduce_scatter  # noqa: E402

DEV = os.environ.get("SYMCOMM_TEST_TORCH_DEVICE", "cpu")


def small(seed, shape, lo=-2, hi=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g).to(torch.float16)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_tensor_parallel_mlp(comm, compiled):
    """Eager, and the step compiled whole (torch.compile, fullgraph: the fused operations
    are torch operators, so nothing breaks the graph)."""
    if (DEV == "cuda") != (comm.space == "cuda"):
        pytest.skip("the communicator's space is not this device's")
    p, me = comm.size, comm.rank
    m_r, k, n_r = 4, 8, 3
    m, n = m_r * p, n_r * p
    x = small(1, (m, k))
    w1 = small(2, (k, n))
    w2 = small(3, (n, k), 0, 2)
    g = small(4, (m, k))  # the loss's gradient: loss = sum(y * g)
    # This rank's shards: rows of x, columns of w1, rows of w2.
    x_r = x[me * m_r:(me + 1) * m_r].clone().to(DEV).requires_grad_()
    w1_r = w1[:, me * n_r:(me + 1) * n_r].contiguous().to(DEV).requires_grad_()
    w2_r = w2[me * n_r:(me + 1) * n_r].contiguous().to(DEV).requires_grad_()
    g_r = g[me * m_r:(me + 1) * m_r].to(DEV).float()

    def step(x_r, w1_r, w2_r):
        h = all_gather_matmul(comm, x_r, w1_r)
        y_r = matmul_reduce_scatter(comm, h.relu(), w2_r)
        return y_r, (y_r.float() * g_r).sum()

    if compiled:
        torch._dynamo.reset()
        torch_fused.register(comm)
        step = torch.compile(step, backend="aot_eager", fullgraph=True)
    y_r, loss = step(x_r, w1_r, w2_r)
    loss.backward()
    # The unfused MLP in float32 on the full matrices.
    xf, w1f, w2f = (t.float().requires_grad_() for t in (x, w1, w2))
    yf = (xf @ w1f).relu() @ w2f
    (yf * g.float()).sum().backward()
    rows = slice(me * m_r, (me + 1) * m_r)
    cols = slice(me * n_r, (me + 1) * n_r)
    exact = {"rtol": 0, "atol": 0}
    torch.testing.assert_close(y_r.detach().cpu().float(), yf.detach()[rows], **exact)
    torch.testing.assert_close(x_r.grad.cpu().float(), xf.grad[rows], **exact)
    torch.testing.assert_close(w1_r.grad.cpu().float(), w1f.grad[:, cols], **exact)
    torch.testing.assert_close(w2_r.grad.cpu().float(), w2f.grad[cols], **exact)
