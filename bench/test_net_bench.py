#!/usr/bin/env python3
"""symcomm-bench net on a few sizes, under symrun -n 2 --nodes 2 in the environment the ctest
gives it (tcp on loopback).

Host space (the default): it exits 0, prints its table, and writes one complete JSON record
per point (BENCH_FORMAT's fields, the net fields, every point's data verified).

--space cuda: on a machine with two GPUs (symrun --gpus 0,1), the same with GPU buffers, and
NCCL's rows unless the table says why they were skipped; on a machine without a GPU, the
cuda space is refused cleanly: a nonzero exit (no signal, no time-out) and a message that
names the missing GPU or driver, and no record. Performance is not judged here: that depends
on the machine.

usage: test_net_bench.py SYMRUN SYMCOMM_BENCH [--space cuda]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

COMMON = ["bench", "op", "impl", "dtype", "bytes", "ranks", "time_us", "iters", "warmup",
          "machine", "commit", "date", "provider", "domain", "space", "buffers", "verified"]
SIZES, LAT_SIZES = [1024, 65536], [8, 16384]
RAW, NCCL = "libfabric:fi_write", "nccl"


def fail(why):
    print("test_net_bench: " + why, file=sys.stderr)
    sys.exit(1)


def check(records, space, nccl):
    """The records of a run in `space`, with NCCL's rows where `nccl`."""
    def find(op, impl, size):
        found = [r for r in records if r["op"] == op and r["impl"] == impl and r["bytes"] == size]
        if len(found) != 1:
            fail("%d records of %s %s at %d bytes, expected 1" % (len(found), op, impl, size))
        return found[0]

    gpu = space == "cuda"
    for r in records:
        missing = [f for f in COMMON if f not in r]
        if missing:
            fail("record %s lacks %s" % (r, missing))
        if r["bench"] != "net" or r["ranks"] != 2 or r["space"] != space:
            fail("record %s: not a 2-rank %s-space net record" % (r, space))
        if r["verified"] is not True:
            fail("record %s: its data was not verified" % r)
        want = "gpu" if gpu and r["impl"] != RAW else "host"
        if r["buffers"] != want:
            fail("record %s: buffers %s, expected %s" % (r, r["buffers"], want))
        if r["impl"] in (RAW, NCCL) and "baseline" not in r:
            fail("baseline record %s does not say what it is" % r)
        if r["impl"] == NCCL and not ("nccl_version" in r and r["nccl_env"]["NCCL_NET"]):
            fail("NCCL record %s lacks its version or environment" % r)
    impls = [RAW, NCCL] if nccl else [RAW]
    for size in SIZES:
        sym = find("put", "symcomm:net", size)
        for r in [find("put", i, size) for i in impls] + [sym]:
            if not r["algbw_gbs"] >= 0 or not r["time_us"] > 0:
                fail("put record %s: no bandwidth" % r)
        if not sym["vs_raw"] > 0 or "window" not in find("put", RAW, size):
            fail("put records at %d bytes: no vs_raw or window" % size)
        if nccl != ("vs_nccl" in sym):
            fail("put record %s: vs_nccl %s" % (sym, "missing" if nccl else "without NCCL"))
    for size in LAT_SIZES:
        for i in impls:
            find("pingpong", i, size)
        sym = find("pingpong", "symcomm:put_signal", size)
        if not sym["vs_raw"] > 0 or nccl != ("vs_nccl" in sym):
            fail("the ping-pong at %d bytes has no vs_raw or a wrong vs_nccl" % size)
    target = find("latency_target", "symcomm:put_signal", 8)
    if not target["raw_us"] > 0 or target["meets_target"] not in (True, False):
        fail("latency_target record %s: no raw time or verdict" % target)
    if nccl and not (target["nccl_us"] > 0 and target["meets_nccl_target"] in (True, False)):
        fail("latency_target record %s: no NCCL time or verdict" % target)
    idle = find("idle_cpu", "symcomm:net", 0)
    if not idle["cpu_percent"] >= 0 or len(idle["rank_cpu_percent"]) != 2:
        fail("idle_cpu record %s: no CPU percentages" % idle)
    if gpu:  # a kernel's put-signal through the GPU-to-proxy ring, against the same raw RTT/2
        device = find("latency_device", "symcomm:device_put_signal", 8)
        if not (device["time_us"] > 0 and device["vs_raw"] > 0):
            fail("latency_device record %s: no time or ratio" % device)
    expected = len(impls + ["symcomm"]) * (len(SIZES) + len(LAT_SIZES)) + 2 + gpu
    if len(records) != expected:
        fail("%d records, expected %d" % (len(records), expected))


def gpus():
    """How many GPUs this machine shows (0 without nvidia-smi or a driver)."""
    if not shutil.which("nvidia-smi"):
        return 0
    run = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return len(re.findall(r"^GPU \d+", run.stdout, re.M)) if run.returncode == 0 else 0


def main():
    args = sys.argv[1:]
    space = "host"
    if args[-2:] == ["--space", "cuda"]:
        space, args = "cuda", args[:-2]
    if len(args) != 2:
        fail(__doc__.strip().splitlines()[-1])
    symrun, bench = args
    env = dict(os.environ, SYMCOMM_MEMORY_SPACE=space)
    refused = space == "cuda" and gpus() == 0
    if space == "cuda" and not refused and gpus() < 2:
        print("test_net_bench: the cuda space needs 2 GPUs (one per node); this machine has 1")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "net.jsonl")
        cmd = [symrun, "-n", "2", "--nodes", "2"] + (["--gpus", "0,1"] if space == "cuda" else []) + \
              ["--timeout", "240", bench, "net",
               "--sizes", ",".join(map(str, SIZES)), "--lat-sizes", ",".join(map(str, LAT_SIZES)),
               "--iters", "3", "--warmup", "1", "--rounds", "20", "--idle-s", "0.5",
               "--json", out]
        run = subprocess.run(cmd, capture_output=True, text=True, env=env)
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr)
        if refused:
            # No GPU: symcommInit refuses the cuda space; the bench says so and exits 1.
            if run.returncode in (0, 77) or run.returncode < 0 or run.returncode >= 124:
                fail("without a GPU the cuda space exited %d, expected a refusal (1)" % run.returncode)
            if not re.search(r"cuda|gpu|driver", run.stderr, re.I):
                fail("the refusal does not say that a GPU or driver is missing")
            if os.path.exists(out) and os.path.getsize(out):
                fail("the refused run wrote records")
            print("test_net_bench: the cuda space is refused without a GPU (exit %d)" % run.returncode)
            return
        if run.returncode == 77:
            sys.exit(77)  # this machine cannot run it (no libfabric provider, ...)
        if run.returncode != 0:
            fail("%s exited %d" % (" ".join(cmd), run.returncode))
        lines = ["8-byte put-signal one way", "idle CPU over"]
        for line in lines:
            if line not in run.stdout:
                fail("the table lacks the line '%s'" % line)
        nccl = space == "cuda" and "NCCL's rows are skipped" not in run.stdout
        with open(out) as f:
            records = [json.loads(line) for line in f if line.strip()]
    check(records, space, nccl)
    print("test_net_bench: %d records, all verified (%s space%s)" %
          (len(records), space, ", NCCL's rows included" if nccl else ""))


if __name__ == "__main__":
    main()
