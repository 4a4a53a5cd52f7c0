#!/usr/bin/env python3
"""Data-parallel training with symcomm as torch.distributed's backend: the same script runs
under NCCL or gloo with --backend.

    PYTHONPATH=build/python build/bin/symrun -n 2 python3 examples/python/ddp_train.py
    torchrun --nproc_per_node 2 examples/python/ddp_train.py --backend nccl   # to compare

Each rank trains on its own batches of a synthetic regression task; DDP averages the
gradients through the backend's all-reduce. Rank 0 prints the loss every few steps and the
time per step.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist

import symcomm.torch_backend  # noqa: F401 - registers the "symcomm" backend


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="symcomm")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    # symrun's variables, or torchrun's.
    rank = int(os.environ.get("SYMCOMM_RANK", os.environ.get("RANK", 0)))
    size = int(os.environ.get("SYMCOMM_NRANKS", os.environ.get("WORLD_SIZE", 1)))
    local = int(os.environ.get("SYMCOMM_LOCAL_RANK", os.environ.get("LOCAL_RANK", 0)))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    if args.device == "cuda":
        torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group(backend=args.backend, rank=rank, world_size=size)
    device = torch.device(args.device)

    torch.manual_seed(0)  # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 1)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    truth = torch.randn(64, 1, generator=torch.Generator().manual_seed(1)).to(device)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x = torch.randn(32, 64, generator=gen).to(device)
        y = x @ truth
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and (step % 10 == 0 or step == 1):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    if args.device == "cuda":
        torch.cuda.synchronize()
    per_step = (time.perf_counter() - start) / args.steps * 1e3
    # Every rank holds the same parameters: DDP kept them in step.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    spread = flat.clone()
    dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    same = bool(torch.equal(spread, flat))
    if rank == 0:
        print(f"{args.backend}: {size} ranks, {per_step:.2f} ms per step; parameters equal on "
              f"every rank: {same}")
    dist.destroy_process_group()
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
