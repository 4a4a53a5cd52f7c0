#!/usr/bin/env python3
"""Plots symcomm-bench JSON Lines: bandwidth and time against size, one line per impl.

    python3 bench/plot.py bench/results/h200x8/rma.jsonl out.png [--op put]

Records of `symcomm-bench decomp` (a file whose records are all bench "decomp") plot as bars
instead: GB/s per GPU of every backend on every process grid, for the largest size in the
file (c32 where present), one panel per transpose (X->Y, Y->Z, Z->Y, Y->X as measured).

    python3 bench/plot.py bench/results/h200x8/decomp.jsonl decomp.png
"""
import json
import sys
from collections import defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError:
    plt = None


def decomp_bars(records):
    """(n, dtype, {op: {grid: {impl: GB/s}}}) for the largest n of the decomp records."""
    recs = [r for r in records if r.get("bench") == "decomp" and r.get("algbw_gbs") is not None]
    if not recs:
        return None, None, {}
    n = max(int(r["n"]) for r in recs)
    dtypes = sorted({r["dtype"] for r in recs if int(r["n"]) == n})
    dtype = "c32" if "c32" in dtypes else dtypes[0]
    bars = defaultdict(lambda: defaultdict(dict))
    for r in recs:
        if int(r["n"]) == n and r["dtype"] == dtype:
            graph = " (graph)" if r.get("launch") == "graph" else ""  # symcomm-bench decomp --graph
            bars[r["op"]][r["grid"]][r["impl"] + graph] = r["algbw_gbs"]
    return n, dtype, bars


TRANSPOSES = ["transpose_xy", "transpose_yz", "transpose_zy", "transpose_yx"]


def plot_decomp(records, src, out):
    n, dtype, bars = decomp_bars(records)
    if not bars:
        print(f"{src}: no decomp records with a bandwidth")
        return 1
    ops = sorted(bars, key=lambda o: (TRANSPOSES.index(o) if o in TRANSPOSES else len(TRANSPOSES), o))
    cols = min(len(ops), 2)
    rows = (len(ops) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 5 * rows), squeeze=False)
    for ax in axes.flat[len(ops):]:
        ax.axis("off")
    for ax, op in zip(axes.flat, ops):
        grids = sorted(bars[op], key=lambda g: int(g.split("x")[0]))
        impls = sorted({i for g in grids for i in bars[op][g]})
        width = 0.8 / max(len(impls), 1)
        for k, impl in enumerate(impls):
            xs = [i + k * width for i in range(len(grids))]
            ax.bar(xs, [bars[op][g].get(impl, 0) for g in grids], width, label=impl)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(grids))])
        ax.set_xticklabels(grids)
        ax.set_xlabel("process grid pr x pc")
        ax.set_ylabel("GB/s per GPU")
        ax.set_title(f"{op}, {n}^3 {dtype}")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"symcomm-bench decomp: {src}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return 0


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    if plt is None:
        print("plot.py: matplotlib is not installed; no plot written (pip install matplotlib)",
              file=sys.stderr)
        return 1
    with open(src) as f:
        records = [json.loads(line) for line in f if line.strip()]
    benches = {r.get("bench") for r in records if "bench" in r}
    if benches == {"decomp"}:
        return plot_decomp(records, src, out)
    op = sys.argv[sys.argv.index("--op") + 1] if "--op" in sys.argv else "put"
    series = defaultdict(list)
    for r in records:
        if r.get("op") != op or "bytes" not in r or r.get("bytes", 0) <= 0:
            continue
        series[r["impl"]].append((r["bytes"], r["time_us"], r.get("algbw_gbs", 0)))
    fig, (bw, t) = plt.subplots(1, 2, figsize=(13, 5))
    for impl, pts in sorted(series.items()):
        pts.sort()
        xs = [p[0] for p in pts]
        bw.plot(xs, [p[2] for p in pts], marker="o", label=impl)
        t.plot(xs, [p[1] for p in pts], marker="o", label=impl)
    for ax, ylabel in ((bw, "GB/s"), (t, "time per op (us)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    t.set_yscale("log")
    bw.legend(fontsize=8)
    fig.suptitle(f"symcomm-bench {op}: {src}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
