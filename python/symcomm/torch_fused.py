"""Tensor-parallel layers on symcomm's fused operations, with autograd:

    from symcomm.torch_fused import all_gather_matmul, matmul_reduce_scatter
    h = all_gather_matmul(comm, x_r, w1_r)        # [M, N_r] = allgather(x_r) @ w1_r
    y_r = matmul_reduce_scatter(comm, h, w2_r)    # [M_r, K]: this rank's rows of sum_s h_s @ w2_s

The forward passes are one fused plan each (all-gather + GEMM; GEMM + reduce-scatter); so are
the backward passes' communicating products (dx = the reduce-scatter of dh @ w1^T is a GEMM +
reduce-scatter; dh = allgather(dy) @ w2^T an all-gather + GEMM); the weights' gradients are
local products. Every rank holds the same number of rows (M_r = M / team size). Tensors are
float16 or bfloat16, contiguous, on this rank's device (CPU in the host space, where the
plans run symcomm's reference implementation); outputs have the inputs' type. Plans and
their workspaces are made at the first call of each shape (collective, as every call is)
and kept for the process's life.

The fused operations are torch operators (torch.library: symcomm::all_gather_gemm and
symcomm::gemm_reduce_scatter, each with a fake implementation), so that torch.compile traces
a layer, forward and backward, without a graph break. A communicator passed here is kept
alive for the process's life (the operators name it by a number); before torch.compile
traces a first call, register(comm) or an eager call makes it known.
"""

from typing import Tuple

import torch
from torch import Tensor

__all__ = ["all_gather_matmul", "matmul_reduce_scatter", "register"]

_plans = {}  # (communicator, operation, shape, type, flags) -> (plan, workspace)
_comms = {}  # the number an operator names a communicator by -> the Comm


def _key(comm):
    """The number the operators name `comm` by, filed eagerly (see torch_ops.register)."""
    key = id(comm)
    if key not in _comms:
        if torch.compiler.is_compiling():
            raise RuntimeError("symcomm fused layers: this communicator was not registered "
                               "before torch.compile traced it: call "
                               "symcomm.torch_fused.register(comm), or a layer eagerly, first")
        _comms[key] = comm
    return key


def register(comm):
    """Makes a communicator known to the fused operators, as a first eager call does."""
    _key(comm)


def _type(t):
    name = str(t.dtype).replace("torch.", "")
    if name not in ("float16", "bfloat16"):
        raise RuntimeError(f"symcomm fused layers take float16 or bfloat16 tensors, not {name}")
    return name


def _stream(t):
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else None


def _plan(comm, op, **config):
    key = (id(comm), op) + tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                        for k, v in config.items()))
    entry = _plans.get(key)
    if entry is None:
        plan = comm.fused_plan(op, **config)
        size = plan.workspace_size
        workspace = comm.empty(size, "uint8") if size else None
        entry = _plans[key] = (plan, workspace, comm)  # the communicator lives as long
    return entry[0], entry[1]


def _ag_gemm(comm, a, b, b_transposed, gather):
    """allgather(a) @ b (b [K, N], or [N, K] when b_transposed), and allgather(a) if
    gather."""
    p = comm.size
    m_r, k = a.shape
    n = b.shape[0] if b_transposed else b.shape[1]
    t = _type(a)
    plan, ws = _plan(comm, "all_gather_gemm", n=n, k=k, rows=[m_r] * p, a_type=t, b_type=t,
                     c_type=t, b_transposed=b_transposed, gather_a=gather)
    c = a.new_empty((m_r * p, n))
    gathered = a.new_empty((m_r * p, k)) if gather else None
    plan.run(a.contiguous(), b.contiguous(), c, gathered=gathered, workspace=ws,
             stream=_stream(a))
    return c, gathered


def _gemm_rs(comm, a, b, b_transposed):
    """This rank's rows (M / team size) of the sum over ranks of a @ b (a [M, K_r]; b [K_r, N],
    or [N, K_r] when b_transposed)."""
    p = comm.size
    m, k_r = a.shape
    n = b.shape[0] if b_transposed else b.shape[1]
    if m % p:
        raise RuntimeError(f"symcomm fused layers: {m} rows do not split evenly over {p} ranks")
    t = _type(a)
    plan, ws = _plan(comm, "gemm_reduce_scatter", n=n, rows=[m // p] * p, cols=[k_r] * p,
                     a_type=t, b_type=t, c_type=t, b_transposed=b_transposed)
    c = a.new_empty((m // p, n))
    plan.run(a.contiguous(), b.contiguous(), c, workspace=ws, stream=_stream(a))
    return c


@torch.library.custom_op("symcomm::all_gather_gemm", mutates_args=())
def _ag_gemm_op(a: Tensor, b: Tensor, comm: int, b_transposed: bool) -> Tuple[Tensor, Tensor]:
    """(allgather(a) @ b, allgather(a))."""
    return _ag_gemm(_comms[comm], a, b, b_transposed, gather=True)


@_ag_gemm_op.register_fake
def _(a, b, comm, b_transposed):
    rows = a.shape[0] * _comms[comm].size
    n = b.shape[0] if b_transposed else b.shape[1]
    return a.new_empty((rows, n)), a.new_empty((rows, a.shape[1]))


@torch.library.custom_op("symcomm::gemm_reduce_scatter", mutates_args=())
def _gemm_rs_op(a: Tensor, b: Tensor, comm: int, b_transposed: bool) -> Tensor:
    return _gemm_rs(_comms[comm], a, b, b_transposed)


@_gemm_rs_op.register_fake
def _(a, b, comm, b_transposed):
    n = b.shape[0] if b_transposed else b.shape[1]
    return a.new_empty((a.shape[0] // _comms[comm].size, n))


class _AllGatherMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, comm):
        h, gathered = torch.ops.symcomm.all_gather_gemm(x, w, comm, False)
        ctx.save_for_backward(gathered, w)
        ctx.comm = comm
        return h

    @staticmethod
    def backward(ctx, dh):
        gathered, w = ctx.saved_tensors
        # dx_r: this rank's rows of sum_s dh_s @ w_s^T (w_s [K, N_s] is that product's B^T).
        dx = torch.ops.symcomm.gemm_reduce_scatter(dh.contiguous(), w, ctx.comm, True)
        dw = gathered.t().matmul(dh)
        return dx, dw, None


class _MatmulReduceScatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w, comm):
        ctx.save_for_backward(h, w)
        ctx.comm = comm
        return torch.ops.symcomm.gemm_reduce_scatter(h, w, comm, False)

    @staticmethod
    def backward(ctx, dy):
        h, w = ctx.saved_tensors
        # dh = allgather(dy) @ w^T (w [N_r, K] is that product's B^T); dw = h^T allgather(dy).
        dh, dy_all = torch.ops.symcomm.all_gather_gemm(dy.contiguous(), w, ctx.comm, True)
        dw = h.t().matmul(dy_all)
        return dh, dw, None


def all_gather_matmul(comm, x, w):
    """allgather(x) @ w over the communicator: x [M_r, K] (this rank's rows), w [K, N_r]
    (this rank's columns); [M, N_r]. Differentiable in x and w."""
    return _AllGatherMatmul.apply(x, w, _key(comm))


def matmul_reduce_scatter(comm, h, w):
    """This rank's rows of sum over ranks of h @ w: h [M, N_r], w [N_r, K]; [M / size, K].
    Differentiable in h and w."""
    return _MatmulReduceScatter.apply(h, w, _key(comm))
