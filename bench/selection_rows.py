#!/usr/bin/env python3
"""Selection-table rows for src/coll/selection.cc from a `symcomm-bench coll` JSON Lines file.

For each operation, the fastest symcomm algorithm (by median time; "symcomm:auto" and NCCL
itself excluded) at every measured size, merged into runs of sizes with the same winner;
each run becomes one row bounded by its largest size (the last row of an operation has no
bound). Prints C++ initialisers to paste into selection_table(), with the source of each.
Another algorithm displaces the preferred one (--prefer, the registry's first) only where it
is faster by more than --margin (3%), so that run-to-run noise does not split the ranges.

  python3 bench/selection_rows.py bench/results/h200x8/coll.jsonl [--ranks 8]

bytes in the bench follow nccl-tests (recv size for all-gather); the library indexes the
table by the bytes one rank contributes, so all-gather sizes are divided by the rank count.
"""
import argparse
import json
import sys
from collections import defaultdict

# The operations the table has rows for. Not all-to-all-v: the table is indexed by the bytes
# a rank contributes, which for all-to-all-v differ between members, so a row could give
# members different algorithms (src/coll/selection.cc); nor the bench's barrier and
# counts-on-the-device lines, which have one algorithm each.
OPS = {"alltoall": "AllToAll", "allgather": "AllGather", "reducescatter": "ReduceScatter",
       "allreduce": "AllReduce", "broadcast": "Broadcast"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--ranks", type=int, default=0, help="only records of this many ranks")
    ap.add_argument("--prefer", default="sm", help="the algorithm the registry picks first")
    ap.add_argument("--margin", type=float, default=0.03, help="how much faster another must be")
    args = ap.parse_args()
    best = defaultdict(dict)  # (op, ranks) -> bytes -> (time, algorithm)
    preferred = defaultdict(dict)  # (op, ranks) -> bytes -> time of --prefer
    source = None
    with open(args.jsonl) as f:
        for line in f:
            r = json.loads(line)
            if "command" in r:
                source = r
                continue
            if r.get("bench") != "coll" or not r.get("impl", "").startswith("symcomm:"):
                continue
            if r.get("launch", "eager") != "eager":  # the table is for calls from the host
                continue
            algo = r["impl"].split(":", 1)[1]
            if algo == "auto" or r["op"] not in OPS or (args.ranks and r["ranks"] != args.ranks):
                continue
            key = (r["op"], r["ranks"])
            b = r["bytes"] // r["ranks"] if r["op"] == "allgather" else r["bytes"]
            if algo == args.prefer:
                preferred[key][b] = r["time_us"]
            cur = best[key].get(b)
            if cur is None or r["time_us"] < cur[0]:
                best[key][b] = (r["time_us"], algo)
    if not best:
        sys.exit("no symcomm coll records in " + args.jsonl)
    where = args.jsonl + (f" ({source.get('date', '')}, commit {source.get('commit', '?')})" if source else "")
    for (op, ranks), sizes in sorted(best.items()):
        runs = []  # [algorithm, largest size]
        for b in sorted(sizes):
            time, algo = sizes[b]
            mine = preferred[(op, ranks)].get(b)
            if mine is not None and mine <= time * (1 + args.margin):
                algo = args.prefer
            if runs and runs[-1][0] == algo:
                runs[-1][1] = b
            else:
                runs.append([algo, b])
        for i, (algo, top) in enumerate(runs):
            bound = 0 if i == len(runs) - 1 else top
            print(f'      {{CollOp::{OPS[op]}, {ranks}, {bound}, "{algo}", "{where}"}},')


if __name__ == "__main__":
    main()
