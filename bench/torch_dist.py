#!/usr/bin/env python3
"""torch.distributed under two backends in one run: the baseline (NCCL on GPUs, gloo on CPUs)
as the default group and symcomm (symcomm.torch_backend) as a second group of the same ranks.

    PYTHONPATH=build/python symrun -n 2 python3 bench/torch_dist.py [--device cuda]
        [--max-bytes 1G] [--json out.jsonl]

For each operation (all_reduce, all_gather_into_tensor, reduce_scatter_tensor,
all_to_all_single) and size (bytes per rank, 8 KiB up by x4): each backend's result is checked
on fresh data first, then the call is timed (CUDA events on GPUs, the host clock on CPUs),
the backends alternating call by call; the medians and their ratio are printed by rank 0 and
written as JSON lines. `--symmetric` passes tensors on the symcomm group's heap
(SymcommProcessGroup.empty) to symcomm; `--ddp` times a DDP training step of a small model
under each backend; `--overhead` times the host cost of one call through the binding against
symcomm's C API (a zero-byte put to oneself).
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

import symcomm.torch_backend  # noqa: F401 - pip install ., or PYTHONPATH=build/python

OPS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"]


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def env_rank():
    for r, s in (("SYMCOMM_RANK", "SYMCOMM_NRANKS"), ("RANK", "WORLD_SIZE")):
        if r in os.environ:
            return int(os.environ[r]), int(os.environ[s])
    raise SystemExit("run under symrun or torchrun")


def buffers(op, n, p, make):
    """(input, output) of `op` for n elements per rank."""
    if op == "all_reduce":
        t = make(n)
        return t, t
    if op == "all_gather_into_tensor":
        return make(n), make(n * p)
    if op == "reduce_scatter_tensor":
        return make(n * p), make(n)
    return make(n), make(n)  # all_to_all_single: n elements, n / p to each rank


def call(op, inp, out, group):
    if op == "all_reduce":
        dist.all_reduce(out, group=group)
    elif op == "all_gather_into_tensor":
        dist.all_gather_into_tensor(out, inp, group=group)
    elif op == "reduce_scatter_tensor":
        dist.reduce_scatter_tensor(out, inp, group=group)
    else:
        dist.all_to_all_single(out, inp, group=group)


def check(op, inp, out, group, me, p):
    """The call on fresh data against its expected result; returns whether it matched. The
    pattern is made in integers: a float32 arange is inexact past 2^24 elements, and the
    GPU's and the CPU's differ there (both backends then looked wrong at 512 MiB)."""
    n_in = inp.numel()

    def pattern(n, device="cpu"):
        return (torch.arange(n, dtype=torch.int64, device=device) % 251).to(torch.float32)
    inp.copy_(pattern(n_in, inp.device) + me)
    if op == "all_reduce":
        want = pattern(n_in) * p + sum(range(p))
    elif op == "all_gather_into_tensor":
        want = torch.cat([pattern(n_in) + r for r in range(p)])
    elif op == "reduce_scatter_tensor":
        whole = pattern(n_in) * p + sum(range(p))
        want = whole.chunk(p)[me]
    else:
        k = n_in // p
        want = torch.cat([(pattern(n_in) + r)[me * k:(me + 1) * k] for r in range(p)])
    if op != "all_reduce":
        out.fill_(-1)
    call(op, inp, out, group)
    if out.is_cuda:
        torch.cuda.synchronize()
    return bool(torch.equal(out.cpu(), want))


class Timer:
    def __init__(self, cuda):
        self.cuda = cuda

    def time(self, fn):
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) * 1e3  # us
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--min-bytes", default="8K")
    ap.add_argument("--max-bytes", default="1G")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--symmetric", action="store_true")
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--overhead", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--machine", default="unknown")
    args = ap.parse_args()
    me, p = env_rank()
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("SYMCOMM_LOCAL_RANK",
                                                 os.environ.get("LOCAL_RANK", me))))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + int(os.environ.get("SYMCOMM_BENCH_PORT", 0))))
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(me), str(p)
    base_name = "nccl" if cuda else "gloo"
    dist.init_process_group(backend=base_name, rank=me, world_size=p)
    sym = dist.new_group(backend="symcomm")  # the SymcommProcessGroup itself
    groups = [(base_name, None), ("symcomm", sym)]
    timer = Timer(cuda)
    records = []
    out = open(args.json, "a") if args.json and me == 0 else None
    lo, hi = parse_bytes(args.min_bytes), parse_bytes(args.max_bytes)
    device = torch.device(args.device)
    commit = os.environ.get("SYMCOMM_BENCH_COMMIT", "unknown")
    for op in args.ops.split(","):
        size = lo
        while size <= hi:
            n = max(p, size // 4 // p * p)  # float32 elements, a multiple of p
            plain = lambda k: torch.empty(k, dtype=torch.float32, device=device)  # noqa: E731
            bufs = {base_name: buffers(op, n, p, plain)}
            if args.symmetric:
                heap = lambda k: sym.empty(k, torch.float32, args.device)  # noqa: E731
                bufs["symcomm"] = buffers(op, n, p, heap)
            else:
                bufs["symcomm"] = buffers(op, n, p, plain)
            ok = {name: check(op, *bufs[name], g, me, p) for name, g in groups}
            times = {name: [] for name, _ in groups}
            for it in range(args.iters + 2):
                for name, g in groups:  # alternating: the host's drift hits both alike
                    t = timer.time(lambda: call(op, *bufs[name], g))
                    if it >= 2:
                        times[name].append(t)
            med = {name: statistics.median(v) for name, v in times.items()}
            rec = {"op": op, "bytes": n * 4, "device": args.device, "ranks": p,
                   "symmetric": args.symmetric, "machine": args.machine, "commit": commit,
                   "baseline": base_name, "baseline_us": med[base_name],
                   "symcomm_us": med["symcomm"], "ratio": med[base_name] / med["symcomm"],
                   "checked": ok}
            records.append(rec)
            if me != 0 and not all(ok.values()):  # rank 0's line says its own
                print(f"rank {me}: {op} {n * 4} B WRONG {ok}", flush=True)
            if me == 0:
                print(f"{op:24s} {n * 4:>12d} B  {base_name} {med[base_name]:10.1f} us  "
                      f"symcomm {med['symcomm']:10.1f} us  x{rec['ratio']:.2f}"
                      + ("" if all(ok.values()) else f"  WRONG {ok}"), flush=True)
                if out:
                    out.write(json.dumps(rec) + "\n")
            if args.symmetric:
                for t in {id(x): x for x in bufs["symcomm"]}.values():
                    sym.free(t)
            size *= 4
    if args.ddp:
        ddp_step(groups, device, timer, me, out, args, commit)
    if args.overhead:
        overhead(sym.communicator(args.device), out, args, commit, me)
    dist.destroy_process_group()
    if any(not all(r["checked"].values()) for r in records):
        raise SystemExit(1)


def ddp_step(groups, device, timer, me, out, args, commit):
    results = {}
    for name, g in groups:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                    torch.nn.Linear(4096, 1024)).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=g)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x = torch.randn(64, 1024, device=device)

        def step():
            opt.zero_grad()
            ddp(x).square().mean().backward()
            opt.step()
        for _ in range(3):
            step()
        results[name] = statistics.median(timer.time(step) for _ in range(args.iters))
    if me == 0:
        names = [n for n, _ in groups]
        print(f"DDP step: {names[0]} {results[names[0]]:.1f} us, symcomm "
              f"{results['symcomm']:.1f} us, x{results[names[0]] / results['symcomm']:.2f}")
        if out:
            out.write(json.dumps({"op": "ddp_step", "device": args.device, "machine": args.machine,
                                  "commit": commit, "baseline": names[0],
                                  "baseline_us": results[names[0]],
                                  "symcomm_us": results["symcomm"]}) + "\n")


def overhead(comm, out, args, commit, me):
    """Host time of one call through the binding: a put of 4 bytes to this rank's own heap
    array, Python's call included, against the same put through the C API in a loop of C++
    in the same process (Comm._put_host_us); the difference is what the binding costs."""
    a = comm.empty(1, "float32", framework="numpy" if comm.space == "host" else None)
    src = torch.zeros(1, device="cpu").numpy()
    n = 20000
    py, c = [], []
    for _ in range(5):  # alternating, the medians of five rounds
        t0 = time.perf_counter()
        for _ in range(n):
            comm.put(a, src, comm.rank)
        py.append((time.perf_counter() - t0) / n * 1e6)
        c.append(comm._put_host_us(a, src, comm.rank, n))
    comm.synchronize()
    comm.free(a)
    per_call, c_api = statistics.median(py), statistics.median(c)
    if me == 0:
        print(f"binding: a put of 4 bytes to oneself, {per_call:.2f} us of host time per call "
              f"through Python, {c_api:.2f} us through the C API: the binding adds "
              f"{per_call - c_api:.2f} us")
        if out:
            out.write(json.dumps({"op": "binding_put", "us": per_call, "c_api_us": c_api,
                                  "binding_us": per_call - c_api, "space": comm.space,
                                  "commit": commit, "machine": args.machine}) + "\n")


if __name__ == "__main__":
    main()
