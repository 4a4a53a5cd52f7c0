# symcomm's collectives as torch operators (symcomm.torch_ops): eager against a reference,
# and inside torch.compile(fullgraph=True) (no graph break; aot_eager: no code generation),
# on CPU tensors (CUDA tensors with SYMCOMM_TEST_TORCH_DEVICE=cuda).
import os

import pytest

torch = pytest.importorskip("torch")

import symcomm.torch_ops as ops  # noqa: E402

DEV = os.environ.get("SYMCOMM_TEST_TORCH_DEVICE", "cpu")


def rows(rank, n=6, width=3, seed=0):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return torch.randint(-8, 9, (n, width), generator=g).float()


@pytest.fixture
def tcomm(comm):
    if (DEV == "cuda") != (comm.space == "cuda"):
        pytest.skip("the communicator's space is not this device's")
    return comm


def test_operators_eager(tcomm):
    me, p = tcomm.rank, tcomm.size
    everyone = [rows(r, n=2 * p) for r in range(p)]
    x = everyone[me].to(DEV)
    torch.testing.assert_close(ops.all_reduce(tcomm, x).cpu(), sum(everyone))
    torch.testing.assert_close(x.cpu(), everyone[me])  # the functional form leaves x alone
    torch.testing.assert_close(ops.all_gather(tcomm, x).cpu(), torch.cat(everyone))
    block = x.shape[0] // p
    torch.testing.assert_close(ops.reduce_scatter(tcomm, x, op="max").cpu(),
                               torch.stack(everyone).max(0).values[me * block:(me + 1) * block])
    torch.testing.assert_close(ops.all_to_all(tcomm, x).cpu(),
                               torch.cat([e[me * block:(me + 1) * block] for e in everyone]))
    y = x.clone()
    ops.broadcast_(tcomm, y, root=p - 1)
    torch.testing.assert_close(y.cpu(), everyone[p - 1])
    ops.all_reduce_(tcomm, y)
    torch.testing.assert_close(y.cpu(), everyone[p - 1] * p)


def test_operators_compiled(tcomm):
    me, p = tcomm.rank, tcomm.size
    everyone = [rows(r, n=2 * p, seed=1) for r in range(p)]

    def layer(x):
        h = ops.all_gather(tcomm, x * 2)      # [p * rows, width]
        s = ops.reduce_scatter(tcomm, h + 1)  # this rank's block of the sum
        return ops.all_reduce(tcomm, s.relu())

    got = torch.compile(layer, backend="aot_eager", fullgraph=True)(everyone[me].to(DEV))
    h = torch.cat(everyone) * 2 + 1
    n = h.shape[0] // p
    want = sum((h * p)[r * n:(r + 1) * n].relu() for r in range(p))
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_transpose_cycle(tcomm, compiled):
    """Pencil transposes as operators: X -> Y -> Z -> Y -> X of a field of global coordinates,
    each pencil checked, eagerly and inside torch.compile(fullgraph=True)."""
    from test_decomp import GDIMS, fill

    d = tcomm.decomp(GDIMS, pdims=(1, tcomm.size))
    pencils = [d.pencil(a) for a in range(3)]

    def want(axis):
        return torch.from_numpy(fill(pencils[axis], "float64")).reshape(
            tuple(pencils[axis]["shape"][::-1]))

    def cycle(x):
        out = []
        for src, dst in ((0, 1), (1, 2), (2, 1), (1, 0)):
            x = ops.transpose(tcomm, d, x, src, dst)
            out.append(x)
        return out

    if compiled:
        torch._dynamo.reset()
        compiled_cycle = torch.compile(cycle, backend="aot_eager", fullgraph=True)
        with pytest.raises(Exception, match="not registered before torch.compile"):
            compiled_cycle(want(0).to(DEV))
        torch._dynamo.reset()
        ops.register(tcomm, d)
        cycle = torch.compile(cycle, backend="aot_eager", fullgraph=True)
    got = cycle(want(0).to(DEV))
    for y, axis in zip(got, (1, 2, 1, 0)):
        torch.testing.assert_close(y.cpu(), want(axis), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="not this rank's pencil"):
        ops.transpose(tcomm, d, torch.zeros((1, 1, 1), dtype=torch.float64, device=DEV), 0, 1)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_halo_exchange(tcomm, compiled):
    """Halo exchanges as an operator: every dimension's halo of a pencil of global
    coordinates filled from the neighbours (periodic), eagerly and compiled."""
    from test_decomp import GDIMS, fill, grid, value

    d = tcomm.decomp(GDIMS, pdims=(1, tcomm.size))
    halo = (1, 1, 1)
    info = d.pencil(0, halo=halo)
    shape = tuple(info["shape"][::-1])
    t = torch.from_numpy(fill(info, "float64")).reshape(shape).to(DEV)

    def exchange(t):
        for dim in range(3):
            ops.halo_(tcomm, d, t, 0, dim, halo)
        return t

    if compiled:
        torch._dynamo.reset()
        ops.register(tcomm, d)
        exchange = torch.compile(exchange, backend="aot_eager", fullgraph=True)
    exchange(t)
    x, y, z = grid(info)
    want = torch.from_numpy(value(x % GDIMS[0], y % GDIMS[1], z % GDIMS[2]))
    torch.testing.assert_close(t.cpu(), want, rtol=0, atol=0)
