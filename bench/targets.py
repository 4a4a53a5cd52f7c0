#!/usr/bin/env python3
"""Every target of the RMA, collectives, decomposition and network issues against one run's
results.

    python3 bench/targets.py DIR [--commit HASH]

reads DIR/rma_HASH.jsonl, coll_HASH.jsonl, decomp_HASH.jsonl, net_HASH.jsonl (as committed
under bench/results/<machine>/); without --commit DIR/rma.jsonl and so on (as `scripts/gpu-check
benchonly` writes them into $OUT), else, of each kind, the file named exactly
<kind>_<hex commit>.jsonl (no variant suffix such as _graph or _small) whose records have the
latest "date" (ties: the last name); and prints a Markdown table: issue, measure, target,
measured (with the run's NCCL figure where the target is relative), met or missed. The
targets of rma, coll and decomp are stated for 8 x H200; on other machines the table says how
many ranks the run had; those of net for two ranks on two nodes, per memory space (host: on
CPUs; cuda: 2 GPUs). Records with "verified": false are no candidates; decomposition records
count only in the default layout (x fastest; records without a "layout" field are in it).
Exit code 0 whether or not targets are met: the table is the result.
"""
import argparse
import glob
import json
import os
import re
import sys

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            # (The first line of a committed file is the command; the targets are for calls
            # launched from the host, so records of replayed CUDA graphs are left out.)
            if "bench" in r and r.get("launch", "eager") == "eager":
                rows.append(r)
    return rows


def run_date(path):
    """The latest "date" of any line of a results file ("" if none): ISO 8601 strings, which
    compare in time order as text."""
    latest = ""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                d = json.loads(line).get("date")
            except (ValueError, AttributeError):
                continue
            if isinstance(d, str) and d > latest:
                latest = d
    return latest


def pick(directory, kind, commit):
    if commit:
        path = os.path.join(directory, f"{kind}_{commit}.jsonl")
        return path if os.path.exists(path) else None
    plain = os.path.join(directory, f"{kind}.jsonl")  # as scripts/gpu-check writes them
    if os.path.exists(plain):
        return plain
    # A full run is committed as <kind>_<commit>.jsonl; variant runs (<kind>_graph_<commit>,
    # <kind>_small_<commit>, ...) are no candidates. Of the runs, the latest by the dates its
    # records carry (a file's mtime is the checkout's, not the run's).
    named = re.compile(re.escape(kind) + r"_[0-9a-f]{7,40}\.jsonl")
    paths = [p for p in glob.glob(os.path.join(directory, f"{kind}_*.jsonl"))
             if named.fullmatch(os.path.basename(p))]
    return max(paths, key=lambda p: (run_date(p), os.path.basename(p))) if paths else None


class Table:
    def __init__(self):
        self.rows = []

    def add(self, issue, measure, target, measured, met):
        state = "n/a" if met is None else ("met" if met else "MISSED")
        self.rows.append((issue, measure, target, measured, state))

    def print(self):
        print("| issue | measure | target | measured | |")
        print("| --- | --- | --- | --- | --- |")
        for r in self.rows:
            print("| " + " | ".join(r) + " |")


def one(rows, **key):
    found = [r for r in rows if all(r.get(k) == v for k, v in key.items())]
    return found[-1] if found else None


def unverified(r):
    """A record whose result was checked and found wrong (no "verified" field: not checked
    apart, as in records older than the field, which count as verified)."""
    return r.get("verified", True) is not True


def rma_targets(t, rows):
    # Puts carry "verified" (what the receiver got compared with what was sent): a put whose
    # data was wrong is no measurement, and its target is missed.
    wrong = [r for r in rows if unverified(r)]
    rows = [r for r in rows if not unverified(r)]
    def absent(*keys):
        """(measured, met) where no verified record matches any of keys."""
        if any(one(wrong, **k) for k in keys):
            return "unverified: the receiver's data was wrong", False
        return "not in the run", None
    ce = one(rows, op="put", impl="symcomm:ce", bytes=GIB)
    t.add("3 RMA", "CE put GPU0->GPU1, 1 GB", ">= 385 GB/s",
          *((f"{ce['algbw_gbs']:.1f} GB/s", ce["algbw_gbs"] >= 385) if ce
            else absent(dict(op="put", impl="symcomm:ce", bytes=GIB))))
    sm = [r for r in (one(rows, op="put", impl=i, bytes=64 * MIB)
                      for i in ("symcomm:sm", "symcomm:device_block_x32")) if r]
    best = max(sm, key=lambda r: r["algbw_gbs"]) if sm else None
    t.add("3 RMA", "SM put, 64 MB, at most 32 SMs", ">= 340 GB/s",
          *((f"{best['algbw_gbs']:.1f} GB/s ({best['impl']})", best["algbw_gbs"] >= 340) if best
            else absent(*(dict(op="put", impl=i, bytes=64 * MIB)
                          for i in ("symcomm:sm", "symcomm:device_block_x32")))))
    put = one(rows, op="put", impl="symcomm:auto", bytes=8 * KIB)
    t.add("3 RMA", "on-stream put, 8 KB, stream-serialised", "<= 3 us",
          *((f"{put['time_us']:.2f} us", put["time_us"] <= 3) if put
            else absent(dict(op="put", impl="symcomm:auto", bytes=8 * KIB))))
    pp = one(rows, op="pingpong", impl="symcomm:device")
    floor = one(rows, op="pingpong", impl="naive:volatile")
    t.add("3 RMA", "signal ping-pong, one way", "<= 0.65 us",
          (f"{pp['time_us']:.3f} us" + (f" (bare volatile loop {floor['time_us']:.3f})" if floor else ""))
          if pp else "not in the run", pp and pp["time_us"] <= 0.65)
    barriers = [r for r in rows if r.get("op") == "barrier" and r.get("impl") == "symcomm:kernel"]
    b = max(barriers, key=lambda r: r["ranks"]) if barriers else None
    t.add("3 RMA", f"on-stream barrier, {b['ranks'] if b else '?'} GPUs (target: 8)", "<= 6 us",
          f"{b['time_us']:.2f} us" if b else "not in the run", b and b["time_us"] <= 6)


def coll_targets(t, rows):
    rows = [r for r in rows if r.get("buffers", "symmetric") == "symmetric"]
    def series(op, impl):
        return {r["bytes"]: r for r in rows if r["op"] == op and r["impl"] == impl}
    for ops, label in ((("alltoall", "allgather"), "all-to-all and all-gather"),
                       (("reducescatter", "broadcast"), "reduce-scatter and broadcast")):
        worst = None
        for op in ops:
            auto, nccl = series(op, "symcomm:auto"), series(op, "nccl")
            for size in sorted(set(auto) & set(nccl)):
                ratio = nccl[size]["time_us"] / auto[size]["time_us"]
                if worst is None or ratio < worst[0]:
                    worst = (ratio, op, size)
        t.add("4 coll", f"{label} vs NCCL, every size", ">= 1.00x",
              f"lowest {worst[0]:.3f}x ({worst[1]}, {worst[2]} B)" if worst else "not in the run",
              worst and worst[0] >= 1.0)
    worst = None
    for op in ("alltoall", "allgather"):
        for size, r in series(op, "symcomm:auto").items():
            if size <= 64 * KIB and (worst is None or r["time_us"] > worst[0]):
                worst = (r["time_us"], op, size)
    t.add("4 coll", "all-to-all and all-gather up to 64 KB", "<= 10 us",
          f"at most {worst[0]:.2f} us ({worst[1]}, {worst[2]} B)" if worst else "not in the run",
          worst and worst[0] <= 10)
    for size, limit in ((MIB, 15), (16 * MIB, 60)):
        r = series("alltoall", "symcomm:auto").get(size)
        n = series("alltoall", "nccl").get(size)
        t.add("4 coll", f"all-to-all, {size // MIB} MB", f"<= {limit} us",
              (f"{r['time_us']:.2f} us" + (f" (NCCL {n['time_us']:.2f})" if n else "")) if r
              else "not in the run", r and r["time_us"] <= limit)
    for op in ("alltoall", "allgather"):
        r = series(op, "symcomm:auto").get(GIB)
        t.add("4 coll", f"{op}, 1 GB, bus bandwidth", ">= 360 GB/s",
              f"{r['busbw_gbs']:.1f} GB/s" if r else "not in the run", r and r["busbw_gbs"] >= 360)
    worst = None
    for size, r in series("allreduce", "symcomm:auto").items():
        if size <= MIB and (worst is None or r["time_us"] > worst[0]):
            worst = (r["time_us"], size)
    t.add("4 coll", "all-reduce up to 1 MB", "<= 15 us",
          f"at most {worst[0]:.2f} us ({worst[1]} B)" if worst else "not in the run",
          worst and worst[0] <= 15)
    r, n = series("allreduce", "symcomm:auto").get(GIB), series("allreduce", "nccl").get(GIB)
    t.add("4 coll", "all-reduce, 1 GB, bus bandwidth", ">= 0.95 x NCCL",
          f"{r['busbw_gbs']:.1f} GB/s, NCCL {n['busbw_gbs']:.1f} ({r['busbw_gbs'] / n['busbw_gbs']:.3f}x)"
          if r and n else "not in the run", r and n and r["busbw_gbs"] >= 0.95 * n["busbw_gbs"])


DEFAULT_LAYOUT = "x_fastest"  # symcomm-bench decomp without --contiguous


def decomp_targets(t, rows):
    rows = [r for r in rows if r.get("buffers", "symmetric") == "symmetric" and r.get("dtype") == "c32"
            and r.get("layout", DEFAULT_LAYOUT) == DEFAULT_LAYOUT]
    cases = {}  # (n, grid, op) -> {impl: row}: the verified rows
    wrong = {}  # (n, grid, op) -> {impl: row}: the unverified rows
    for r in rows:
        if r["op"].startswith("transpose_"):
            into = wrong if unverified(r) else cases
            into.setdefault((r["n"], r["grid"], r["op"]), {})[r["impl"]] = r
    def ratios(n):
        """(ratio, grid, op, best row) per case of size n with communication and a verified
        NCCL baseline and backend; and (grid, op, why) per case that lacks either because its
        records are unverified."""
        out, lost = [], []
        for key in sorted(set(cases) | set(wrong)):
            size, grid, op = key
            by, bad = cases.get(key, {}), wrong.get(key, {})
            if size != n or any(r.get("bytes", 1) == 0 for r in list(by.values()) + list(bad.values())):
                continue  # (no communication: a team of one)
            nccl = by.get("symcomm:nccl")
            others = [r for i, r in by.items() if i != "symcomm:nccl"]
            if not nccl and "symcomm:nccl" in bad:
                lost.append((grid, op, "the NCCL baseline unverified"))
            elif not others and any(i != "symcomm:nccl" for i in bad):
                lost.append((grid, op, "every other backend unverified"))
            if not nccl or not others:
                continue
            best = min(others, key=lambda r: r["time_us"])
            out.append((nccl["time_us"] / best["time_us"], grid, op, best))
        return out, lost
    for n, goal, grids in ((1024, 1.3, ("1x8", "2x4")), (256, 2.0, None)):
        rs, lost = ratios(n)
        label = ""
        if grids:
            present = sorted({x[1] for x in rs} | {x[0] for x in lost})
            used = [g for g in grids if g in present]
            if used:  # the target's grids, as many as the run had
                rs = [x for x in rs if x[1] in used]
                lost = [x for x in lost if x[0] in used]
                label = ", " + " and ".join(used)
                if len(used) < len(grids):
                    label += f" (target: {' and '.join(grids)})"
            elif present:  # another machine: every grid with communication, named
                label = f", grids present: {', '.join(present)} (target: {' and '.join(grids)})"
            else:
                label = ", " + " and ".join(grids)
        worst = min(rs, key=lambda x: x[0]) if rs else None
        if worst:
            measured = f"lowest {worst[0]:.2f}x ({worst[1]} {worst[2]}, {worst[3]['impl']}); {len(rs)} cases"
        else:
            measured = "not in the run"
        if lost:
            g, op, why = lost[0]
            measured = ((measured + "; ") if worst else "") + \
                f"{len(lost)} cases without a verified comparison ({g} {op}: {why}" + \
                (", ..." if len(lost) > 1 else "") + ")"
        t.add("5 decomp", f"best backend vs NCCL backend, {n}^3 C32" + label, f">= {goal}x",
              measured, False if lost else (worst and worst[0] >= goal))
    at = [r for by in cases.values() for r in by.values() if r["n"] == 1024 and r.get("algbw_gbs")]
    bad_at = [r for by in wrong.values() for r in by.values() if r["n"] == 1024 and r.get("algbw_gbs")]
    best = max(at, key=lambda r: r["algbw_gbs"]) if at else None
    if best:
        measured, met = f"{best['algbw_gbs']:.1f} GB/s ({best['grid']} {best['op']}, {best['impl']})", \
            best["algbw_gbs"] >= 300
    elif bad_at:
        measured, met = f"no verified record ({len(bad_at)} unverified)", False
    else:
        measured, met = "not in the run", None
    t.add("5 decomp", "best backend, 1024^3 C32, per-GPU bytes sent", ">= 300 GB/s", measured, met)
    picks = [r for r in rows if r["op"] == "autotune" and "ratio" in r]
    # ratio null: the autotuner picked a configuration the bench did not measure (or none was
    # measured to compare with): no evidence that the pick is within 5%.
    def numeric(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    timed = [r for r in picks if numeric(r["ratio"])]
    untimed = [r for r in picks if not numeric(r["ratio"])]
    worst = max(timed, key=lambda r: r["ratio"]) if timed else None
    measured = (f"at most {100 * (worst['ratio'] - 1):.1f}% ({worst['shape']}, {worst['impl']})"
                if worst else "not in the run")
    if untimed:
        u = untimed[0]
        measured = ((measured + "; ") if worst else "") + \
            f"{len(untimed)} of {len(picks)} picks not compared: ratio null, the pick not among " \
            f"the configurations measured ({u.get('shape')}, {u.get('impl')}" + \
            (", ..." if len(untimed) > 1 else "") + ")"
    t.add("5 decomp", "autotuner's pick vs the best it measured", "within 5%", measured,
          False if untimed else (worst and worst["ratio"] <= 1.05))


NET_RAW_RATIO, NET_NCCL_RATIO, NET_LATENCY_RATIO, NET_IDLE_PERCENT = 0.9, 1.0, 1.2, 2.0


def net_targets(t, rows):
    """Issue 36's targets for symcomm-bench net, once per memory space in the run: put
    bandwidth against raw fi_write (both spaces) and against NCCL's socket path (cuda), the
    8-byte put-signal latency against raw fi_write's round trip halved (both) and NCCL's
    (cuda), and an idle rank's CPU."""
    for space in ("host", "cuda"):
        rs = [r for r in rows if r.get("space", "host") == space]
        if not rs:
            continue
        issue = f"36 net ({space})"
        ok = [r for r in rs if not unverified(r)]
        def lowest(key, lo, hi=None):
            """(ratio, bytes) of symcomm's put with the lowest `key` in [lo, hi], or (None,
            why)."""
            def within(r):
                return r["op"] == "put" and r["impl"] == "symcomm:net" and r["bytes"] >= lo and \
                    (hi is None or r["bytes"] <= hi)
            found = [(r[key], r["bytes"]) for r in ok if within(r) and key in r]
            if found:
                return min(found)
            if any(within(r) for r in rs if unverified(r)):
                return None, "unverified: the receiver's data was wrong"
            return None, "not in the run"
        def ratio_row(measure, target, got, goal):
            if got[0] is None:
                t.add(issue, measure, target, got[1], False if got[1].startswith("unverified") else None)
            else:
                t.add(issue, measure, target, f"lowest {got[0]:.2f}x ({got[1]} B)", got[0] >= goal)
        ratio_row("put bandwidth, 1-256 MiB, vs raw fi_write", f">= {NET_RAW_RATIO}x",
                  lowest("vs_raw", MIB, 256 * MIB), NET_RAW_RATIO)
        if space == "cuda":
            ratio_row("put bandwidth, >= 1 MiB, vs NCCL's socket path", f">= {NET_NCCL_RATIO}x",
                      lowest("vs_nccl", MIB), NET_NCCL_RATIO)
        lt = one(ok, op="latency_target", impl="symcomm:put_signal")
        bad = not lt and one([r for r in rs if unverified(r)], op="latency_target")
        if lt and lt.get("raw_us", 0) > 0:
            r = lt["time_us"] / lt["raw_us"]
            t.add(issue, "8-byte put-signal one way vs raw fi_write RTT/2", f"<= {NET_LATENCY_RATIO}x",
                  f"{lt['time_us']:.2f} us, raw {lt['raw_us']:.2f} ({r:.2f}x)", r <= NET_LATENCY_RATIO)
        else:
            t.add(issue, "8-byte put-signal one way vs raw fi_write RTT/2", f"<= {NET_LATENCY_RATIO}x",
                  "unverified" if bad else "not in the run", False if bad else None)
        if space == "cuda":
            if lt and lt.get("nccl_us", 0) > 0:
                t.add(issue, "8-byte put-signal one way vs NCCL's", "< NCCL",
                      f"{lt['time_us']:.2f} us, NCCL {lt['nccl_us']:.2f}",
                      lt["time_us"] < lt["nccl_us"])
            else:
                t.add(issue, "8-byte put-signal one way vs NCCL's", "< NCCL",
                      "unverified" if bad else "not in the run (no NCCL)",
                      False if bad else None)
        idle = one(rs, op="idle_cpu")
        t.add(issue, "idle rank's CPU", f"< {NET_IDLE_PERCENT:g}% of a core",
              f"{idle['cpu_percent']:.2f}%" if idle else "not in the run",
              idle and idle["cpu_percent"] < NET_IDLE_PERCENT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory")
    ap.add_argument("--commit")
    a = ap.parse_args()
    t = Table()
    ranks = set()
    for kind, fill in (("rma", rma_targets), ("coll", coll_targets), ("decomp", decomp_targets),
                       ("net", net_targets)):
        path = pick(a.directory, kind, a.commit)
        if path is None:
            print(f"# no {kind} results in {a.directory}", file=sys.stderr)
            continue
        rows = load(path)
        if kind != "net":  # (net's targets are for two ranks)
            ranks |= {r["ranks"] for r in rows if "ranks" in r}
        print(f"# {kind}: {path}")
        fill(t, rows)
    if ranks and max(ranks) != 8:
        print(f"# the run had {max(ranks)} ranks; the targets are stated for 8 x H200")
    t.print()


if __name__ == "__main__":
    main()
