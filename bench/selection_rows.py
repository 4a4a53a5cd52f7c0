#!/usr/bin/env python3
"""Selection rows (src/coll/selection/<card>x<N>.txt) from a `symcomm-bench coll` JSON Lines file.

For each operation, team size and kind of buffers, the fastest symcomm algorithm (by median
time; "symcomm:auto" and NCCL itself excluded) at every measured size, merged into runs of
sizes with the same winner; each run becomes one row bounded by its largest size (the last
row of a group has no bound: "any"). Another algorithm displaces the preferred one (--prefer,
the registry's first) only where it is faster by more than --margin (3%), so that run-to-run
noise does not split the ranges. Prints the rows in the data files' format (src/coll/selection.h),
each citing the run; merging them with the rows of other runs is left to the reader.

  python3 bench/selection_rows.py bench/results/h200x4/coll_a45e7a6.jsonl [--ranks 4]

bytes in the bench follow nccl-tests (recv size for all-gather); the library indexes the
rows by the bytes one rank contributes, so all-gather sizes are divided by the rank count.
Records on symmetric buffers give rows for symmetric buffers only; others, rows for any.
"""
import argparse
import json
import os
import sys
from collections import defaultdict

# The operations that have rows. Not all-to-all-v: the rows are indexed by the bytes a rank
# contributes, which for all-to-all-v differ between members, so a row could give members
# different algorithms (src/coll/selection.h); nor the bench's barrier and
# counts-on-the-device lines, which have one algorithm each.
OPS = ("allgather", "alltoall", "reducescatter", "allreduce", "broadcast")

# The data files' columns, aligned as the committed files are.
COLUMNS = ("op", "team", "bytes", "buffers", "algorithm", "source")
WIDTHS = (14, 5, 7, 10, 10)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def format_bytes(b):
    """A byte bound as the data files write it: 64KiB, 1MiB, 1GiB or a plain count."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b % scale == 0:
            return f"{b // scale}{unit}"
    return str(b)


def format_row(cols):
    """One data-file line of the six columns."""
    cells = [f"{c:<{w}}" for c, w in zip(cols, WIDTHS)] + [str(cols[-1])]
    return " ".join(cells)


def source_name(path):
    """The results file as a row cites it: relative to the repository where it lies inside."""
    full = os.path.abspath(path)
    return os.path.relpath(full, REPO) if full.startswith(REPO + os.sep) else path


def rows(records, ranks=0, prefer="sm", margin=0.03):
    """The rows for `records` (dicts of one run), as tuples of the six columns, in file order."""
    best = defaultdict(dict)  # (op, ranks, buffers) -> bytes -> (time, algorithm)
    preferred = defaultdict(dict)  # (op, ranks, buffers) -> bytes -> time of `prefer`
    for r in records:
        if r.get("bench") != "coll" or not r.get("impl", "").startswith("symcomm:"):
            continue
        if r.get("launch", "eager") != "eager":  # the rows are for calls from the host
            continue
        algo = r["impl"].split(":", 1)[1]
        if algo == "auto" or r["op"] not in OPS or (ranks and r["ranks"] != ranks):
            continue
        buffers = "symmetric" if r.get("buffers") == "symmetric" else "any"
        key = (r["op"], r["ranks"], buffers)
        b = r["bytes"] // r["ranks"] if r["op"] == "allgather" else r["bytes"]
        if algo == prefer:
            preferred[key][b] = r["time_us"]
        cur = best[key].get(b)
        if cur is None or r["time_us"] < cur[0]:
            best[key][b] = (r["time_us"], algo)
    out = []
    # By operation, team, then symmetric rows before those for any buffers (the walk's order
    # within a team: the more particular row first).
    for (op, n, buffers), sizes in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "symmetric")):
        runs = []  # [algorithm, largest size]
        for b in sorted(sizes):
            time, algo = sizes[b]
            mine = preferred[(op, n, buffers)].get(b)
            if mine is not None and mine <= time * (1 + margin):
                algo = prefer
            if runs and runs[-1][0] == algo:
                runs[-1][1] = b
            else:
                runs.append([algo, b])
        for i, (algo, top) in enumerate(runs):
            bound = "any" if i == len(runs) - 1 else format_bytes(top)
            out.append((op, str(n), bound, buffers, algo))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jsonl")
    ap.add_argument("--ranks", type=int, default=0, help="only records of this many ranks")
    ap.add_argument("--prefer", default="sm", help="the algorithm the registry picks first")
    ap.add_argument("--margin", type=float, default=0.03, help="how much faster another must be")
    args = ap.parse_args(argv)
    records, machine = [], None
    with open(args.jsonl) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if "command" not in r:
                records.append(r)
                machine = machine or r.get("machine")
    found = rows(records, args.ranks, args.prefer, args.margin)
    if not found:
        sys.exit("no symcomm coll records in " + args.jsonl)
    source = source_name(args.jsonl)
    kind = f"src/coll/selection/{machine}.txt" if machine else "src/coll/selection/<card>x<N>.txt"
    options = f"{'--ranks %d ' % args.ranks if args.ranks else ''}--prefer {args.prefer} --margin {args.margin}"
    print(f"# Rows for {kind}: bench/selection_rows.py {source} {options}")
    print(format_row(("# " + COLUMNS[0],) + COLUMNS[1:]))
    for row in found:
        print(format_row(row + (source,)))


if __name__ == "__main__":
    main()
