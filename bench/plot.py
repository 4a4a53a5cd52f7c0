#!/usr/bin/env python3
"""Plots symcomm-bench JSON Lines: bandwidth and time against size, one line per impl.

    python3 bench/plot.py bench/results/h200x8/rma.jsonl out.png [--op put]
"""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    op = sys.argv[sys.argv.index("--op") + 1] if "--op" in sys.argv else "put"
    series = defaultdict(list)
    with open(src) as f:
        for line in f:
            r = json.loads(line)
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
