#!/usr/bin/env python3
"""symcomm-bench net on a few sizes, under symrun -n 2 --nodes 2 in the environment the ctest
gives it (host space, tcp on loopback): it exits 0, prints its table, and writes one complete
JSON record per point (BENCH_FORMAT's fields, the net fields, every point's data verified).
Performance is not judged here: that depends on the machine.

usage: test_net_bench.py SYMRUN SYMCOMM_BENCH
"""
import json
import os
import subprocess
import sys
import tempfile

COMMON = ["bench", "op", "impl", "dtype", "bytes", "ranks", "time_us", "iters", "warmup",
          "machine", "commit", "date", "provider", "domain", "space", "verified"]
SIZES, LAT_SIZES = [1024, 65536], [8, 16384]


def fail(why):
    print("test_net_bench: " + why, file=sys.stderr)
    sys.exit(1)


def check(records):
    def find(op, impl, size):
        found = [r for r in records if r["op"] == op and r["impl"] == impl and r["bytes"] == size]
        if len(found) != 1:
            fail("%d records of %s %s at %d bytes, expected 1" % (len(found), op, impl, size))
        return found[0]

    for r in records:
        missing = [f for f in COMMON if f not in r]
        if missing:
            fail("record %s lacks %s" % (r, missing))
        if r["bench"] != "net" or r["ranks"] != 2 or r["space"] != "host":
            fail("record %s: not a 2-rank host-space net record" % r)
        if r["verified"] is not True:
            fail("record %s: its data was not verified" % r)
    for size in SIZES:
        raw, sym = find("put", "libfabric:fi_write", size), find("put", "symcomm:net", size)
        for r in (raw, sym):
            if not r["algbw_gbs"] >= 0 or not r["time_us"] > 0:
                fail("put record %s: no bandwidth" % r)
        if not sym["vs_raw"] > 0 or "window" not in raw:
            fail("put records %s, %s: no vs_raw or window" % (raw, sym))
    for size in LAT_SIZES:
        find("pingpong", "libfabric:fi_write", size)
        if not find("pingpong", "symcomm:put_signal", size)["vs_raw"] > 0:
            fail("the ping-pong at %d bytes has no vs_raw" % size)
    target = find("latency_target", "symcomm:put_signal", 8)
    if not target["raw_us"] > 0 or target["meets_target"] not in (True, False):
        fail("latency_target record %s: no raw time or verdict" % target)
    idle = find("idle_cpu", "symcomm:net", 0)
    if not idle["cpu_percent"] >= 0 or len(idle["rank_cpu_percent"]) != 2:
        fail("idle_cpu record %s: no CPU percentages" % idle)
    if len(records) != 2 * len(SIZES) + 2 * len(LAT_SIZES) + 2:
        fail("%d records, expected %d" % (len(records), 2 * len(SIZES) + 2 * len(LAT_SIZES) + 2))


def main():
    if len(sys.argv) != 3:
        fail(__doc__.strip().splitlines()[-1])
    symrun, bench = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "net.jsonl")
        cmd = [symrun, "-n", "2", "--nodes", "2", "--timeout", "240", bench, "net",
               "--sizes", ",".join(map(str, SIZES)), "--lat-sizes", ",".join(map(str, LAT_SIZES)),
               "--iters", "3", "--warmup", "1", "--rounds", "20", "--idle-s", "0.5",
               "--json", out]
        run = subprocess.run(cmd, capture_output=True, text=True)
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr)
        if run.returncode == 77:
            sys.exit(77)  # this machine cannot run it (no libfabric provider, ...)
        if run.returncode != 0:
            fail("%s exited %d" % (" ".join(cmd), run.returncode))
        for line in ("8-byte put-signal one way", "idle CPU over"):
            if line not in run.stdout:
                fail("the table lacks the line '%s'" % line)
        with open(out) as f:
            records = [json.loads(line) for line in f if line.strip()]
    check(records)
    print("test_net_bench: %d records, all verified" % len(records))


if __name__ == "__main__":
    main()
