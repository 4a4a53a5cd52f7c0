#!/usr/bin/env python3
"""Plots `symcomm-bench coll` JSON Lines: per operation, bus bandwidth and time against size
(log-log), one line per implementation, every operation in one PNG; the barrier (no size)
as bars of the time per barrier, one per implementation.

    python3 bench/plot_coll.py bench/results/h200x8/coll.jsonl coll.png [--ops allreduce,...]

Records of plain (cudaMalloc) buffers are drawn as their own lines, "<impl> (plain)", and so
are those of replayed CUDA graphs (`--graph`), "<impl> (graph)"; where a file holds a point
more than once, the last record wins.
"""
import json
import sys
from collections import defaultdict

OPS = ["alltoall", "alltoallv", "alltoallv_device", "allgather", "reducescatter", "allreduce",
       "broadcast", "barrier"]


def bus_factor(op, n):
    """nccl-tests' bus bandwidth factors."""
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    if op == "broadcast":
        return 1.0
    return (n - 1) / n


def load(path, ops):
    # series[op][label][bytes] = (busbw, time_us); the barrier's under bytes 0 (busbw None)
    series = defaultdict(lambda: defaultdict(dict))
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"plot_coll.py: {path}:{n}: not JSON ({e}); line skipped", file=sys.stderr)
                continue
            if r.get("bench") != "coll" or r.get("op") not in ops:
                continue
            label = r["impl"] + (" (plain)" if r.get("buffers") == "plain" else "") + (
                " (graph)" if r.get("launch") == "graph" else "")
            if r["op"] == "barrier":
                series["barrier"][label][0] = (None, r["time_us"])
                continue
            if r.get("bytes", 0) <= 0:
                continue
            # From time_us rather than busbw_gbs, whose two decimals are 0 at small sizes.
            busbw = r["bytes"] / (r["time_us"] * 1e3) * bus_factor(r["op"], r.get("ranks", 1))
            series[r["op"]][label][r["bytes"]] = (busbw, r["time_us"])
    return series


def barrier_bars(ax, by_label):
    """Time per barrier, a bar per implementation (NCCL's is a 1-element all-reduce)."""
    labels = sorted(by_label, key=lambda s: (not s.startswith("nccl"), s))
    times = [by_label[label][0][1] for label in labels]
    ax.bar(range(len(labels)), times, color=["black" if s.startswith("nccl") else "C0" for s in labels])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("time per barrier (us)")
    ax.set_title("barrier")
    ax.grid(True, axis="y", alpha=0.3)
    for i, v in enumerate(times):
        ax.annotate(f"{v:.2f}", (i, v), ha="center", va="bottom", fontsize=8)


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args and args[0] in ("-h", "--help") else 2
    src, out = args[0], args[1]
    ops = args[args.index("--ops") + 1].split(",") if "--ops" in args else OPS
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_coll.py: matplotlib is not installed; no plot written "
              "(pip install matplotlib)", file=sys.stderr)
        return 1
    try:
        series = load(src, ops)
    except OSError as e:
        print(f"plot_coll.py: {e}", file=sys.stderr)
        return 1
    present = [op for op in ops if op in series]
    if not present:
        print(f"plot_coll.py: no coll records for {','.join(ops)} in {src}", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(len(present), 2, figsize=(14, 4.2 * len(present)), squeeze=False)
    for (bw, t), op in zip(axes, present):
        if op == "barrier":
            barrier_bars(bw, series[op])
            t.axis("off")
            continue
        for label in sorted(series[op], key=lambda s: (s != "nccl", s)):
            pts = sorted(series[op][label].items())
            xs = [b for b, _ in pts]
            style = dict(color="black", linestyle="--") if label == "nccl" else {}
            bw.plot(xs, [v[0] for _, v in pts], marker="o", markersize=3, label=label, **style)
            t.plot(xs, [v[1] for _, v in pts], marker="o", markersize=3, label=label, **style)
        for ax, ylabel in ((bw, "busbw (GB/s)"), (t, "time per op (us)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("bytes per rank")
            ax.set_ylabel(ylabel)
            ax.set_title(op)
            ax.grid(True, which="both", alpha=0.3)
        bw.legend(fontsize=8)
    fig.suptitle(f"symcomm-bench coll: {src}")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    fig.savefig(out, dpi=100)
    print(f"plot_coll.py: wrote {out} ({', '.join(present)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
