#!/usr/bin/env python3
"""Unit tests of bench/targets.py on made-up records (ctest: unit_bench_targets_py).

    python3 bench/test_targets.py
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True  # (no __pycache__ in the source tree when ctest runs this)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import targets  # noqa: E402

def transpose(impl, time_us, grid="1x8", n=1024, op="transpose_xy", **extra):
    r = {"bench": "decomp", "op": op, "impl": impl, "dtype": "c32", "bytes": 1 << 20, "ranks": 8,
         "time_us": time_us, "algbw_gbs": 100.0, "n": n, "grid": grid, "buffers": "symmetric",
         "verified": True, "launch": "eager"}
    r.update(extra)
    return r


def autotune(ratio):
    return {"bench": "decomp", "op": "autotune", "impl": "symcomm:sm", "dtype": "c32",
            "bytes": 1 << 20, "ranks": 8, "time_us": -1 if ratio is None else 100.0,
            "shape": "[256,256,256] 2 x 4", "n": 256, "grid": "2x4", "buffers": "symmetric",
            "pick_measured": ratio is not None, "ratio": ratio}


RATIO_1024 = "best backend vs NCCL backend, 1024^3 C32"  # then the grids


def decomp_rows(rows):
    """The decomposition rows of the table for `rows`, by measure (RATIO_1024 for the
    1024^3 ratio, whatever grids its label names)."""
    t = targets.Table()
    targets.decomp_targets(t, rows)
    return {RATIO_1024 if r[1].startswith(RATIO_1024 + ",") else r[1]: r for r in t.rows}


GBS = "best backend, 1024^3 C32, per-GPU bytes sent"
AUTOTUNE = "autotuner's pick vs the best it measured"


class Verified(unittest.TestCase):
    def test_unverified_backend_is_not_best(self):
        rows = [transpose("symcomm:nccl", 300), transpose("symcomm:ce", 200),
                transpose("symcomm:sm", 10, verified=False, algbw_gbs=999.0)]
        got = decomp_rows(rows)
        self.assertIn("lowest 1.50x (1x8 transpose_xy, symcomm:ce)", got[RATIO_1024][3])
        self.assertEqual(got[RATIO_1024][4], "met")
        self.assertIn("100.0 GB/s", got[GBS][3])  # not the wrong sm record's 999

    def test_unverified_baseline_is_missed(self):
        rows = [transpose("symcomm:nccl", 3000, verified=False), transpose("symcomm:sm", 100)]
        got = decomp_rows(rows)[RATIO_1024]
        self.assertEqual(got[4], "MISSED")
        self.assertIn("NCCL baseline unverified", got[3])

    def test_only_unverified_candidates_are_missed(self):
        rows = [transpose("symcomm:nccl", 300), transpose("symcomm:sm", 100, verified=False)]
        got = decomp_rows(rows)
        self.assertEqual(got[RATIO_1024][4], "MISSED")
        self.assertIn("every other backend unverified", got[RATIO_1024][3])
        rows = [transpose("symcomm:sm", 100, verified=False)]
        self.assertEqual(decomp_rows(rows)[GBS][4], "MISSED")

    def test_records_without_the_field_count_as_verified(self):
        rows = [transpose("symcomm:nccl", 300), transpose("symcomm:sm", 100)]
        for r in rows:
            del r["verified"]
        self.assertEqual(decomp_rows(rows)[RATIO_1024][4], "met")

    def test_rma_unverified_put_is_missed(self):
        rows = [{"bench": "rma", "op": "put", "impl": "symcomm:ce", "bytes": 1 << 30, "ranks": 2,
                 "time_us": 2000.0, "algbw_gbs": 500.0, "verified": False}]
        t = targets.Table()
        targets.rma_targets(t, rows)
        self.assertEqual(t.rows[0][4], "MISSED")
        self.assertIn("unverified", t.rows[0][3])


class Autotune(unittest.TestCase):
    def test_null_ratio_is_missed(self):
        got = decomp_rows([autotune(None)])[AUTOTUNE]  # no number to compare
        self.assertEqual(got[4], "MISSED")
        self.assertIn("ratio null", got[3])
        got = decomp_rows([autotune(1.01), autotune(None)])[AUTOTUNE]
        self.assertEqual(got[4], "MISSED")
        self.assertIn("at most 1.0%", got[3])
        self.assertIn("1 of 2 picks not compared", got[3])

    def test_measured_ratio(self):
        self.assertEqual(decomp_rows([autotune(1.01)])[AUTOTUNE][4], "met")
        self.assertEqual(decomp_rows([autotune(1.10)])[AUTOTUNE][4], "MISSED")


class Layout(unittest.TestCase):
    def test_only_the_default_layout(self):
        rows = [transpose("symcomm:nccl", 300), transpose("symcomm:sm", 250),
                transpose("symcomm:nccl", 300, layout="axis_contiguous"),
                transpose("symcomm:sm", 100, layout="axis_contiguous")]
        got = decomp_rows(rows)[RATIO_1024]
        self.assertIn("lowest 1.20x", got[3])
        self.assertEqual(got[4], "MISSED")
        for r in rows[:2]:
            r["layout"] = "x_fastest"
        self.assertIn("lowest 1.20x", decomp_rows(rows)[RATIO_1024][3])


class Grids(unittest.TestCase):
    def test_label_names_the_grids_used(self):
        rows = [transpose("symcomm:nccl", 300, grid="1x4"), transpose("symcomm:sm", 100, grid="1x4")]
        label = decomp_rows(rows)[RATIO_1024][1]
        self.assertTrue(label.endswith(", grids present: 1x4 (target: 1x8 and 2x4)"), label)

    def test_target_grids_only_where_present(self):
        rows = [transpose("symcomm:nccl", 300, grid="2x4"), transpose("symcomm:sm", 100, grid="2x4"),
                transpose("symcomm:nccl", 300, grid="4x2"), transpose("symcomm:sm", 290, grid="4x2")]
        got = decomp_rows(rows)[RATIO_1024]
        self.assertTrue(got[1].endswith(", 2x4 (target: 1x8 and 2x4)"), got[1])
        self.assertIn("lowest 3.00x (2x4", got[3])
        rows += [transpose("symcomm:nccl", 300, grid="1x8"), transpose("symcomm:sm", 200, grid="1x8")]
        got = decomp_rows(rows)[RATIO_1024]
        self.assertTrue(got[1].endswith(", 1x8 and 2x4"), got[1])
        self.assertIn("lowest 1.50x (1x8", got[3])


def write(path, lines, mtime):
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    os.utime(path, (mtime, mtime))


class Selection(unittest.TestCase):
    def test_latest_full_run_by_date_not_mtime(self):
        with tempfile.TemporaryDirectory() as d:
            now = time.time()
            rec = {"bench": "rma", "op": "put", "impl": "symcomm:ce", "bytes": 8, "ranks": 2,
                   "time_us": 1.0}
            write(os.path.join(d, "rma_aaaaaaa.jsonl"),
                  [{"command": "x", "date": "2026-11-21"}, dict(rec, date="2026-11-21T18:00:00Z")],
                  now - 100)
            write(os.path.join(d, "rma_bbbbbbb.jsonl"), [dict(rec, date="2026-11-20T18:00:00Z")], now)
            # variant runs: newer by date and by mtime, never chosen
            write(os.path.join(d, "rma_signal_memop_ccccccc.jsonl"),
                  [dict(rec, date="2026-11-22T18:00:00Z")], now + 100)
            write(os.path.join(d, "rma_graph_ddddddd.jsonl"),
                  [dict(rec, date="2026-11-23T18:00:00Z")], now + 100)
            write(os.path.join(d, "rma_zzzzzzz.jsonl"),  # not hexadecimal: a variant
                  [dict(rec, date="2026-11-24T18:00:00Z")], now + 100)
            self.assertEqual(os.path.basename(targets.pick(d, "rma", None)), "rma_aaaaaaa.jsonl")
            self.assertEqual(os.path.basename(targets.pick(d, "rma", "bbbbbbb")), "rma_bbbbbbb.jsonl")
            self.assertIsNone(targets.pick(d, "coll", None))
            write(os.path.join(d, "rma.jsonl"), [rec], now - 1000)  # as scripts/gpu-check writes
            self.assertEqual(os.path.basename(targets.pick(d, "rma", None)), "rma.jsonl")

def rec(bench, op, impl, nbytes, ranks=4, **fields):
    r = {"bench": bench, "op": op, "impl": impl, "dtype": "bytes", "bytes": nbytes, "ranks": ranks,
         "iters": 20, "warmup": 3, "machine": "made-up", "commit": "1234abc",
         "date": "2026-01-01T00:00:00Z"}
    r.update(fields)
    return r


def coll(op, impl, nbytes, time_us, busbw_gbs=0.0, **fields):
    return rec("coll", op, impl, nbytes, time_us=time_us, busbw_gbs=busbw_gbs,
               **dict({"buffers": "symmetric"}, **fields))


KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
COMMAND = {"command": "symrun -n 4 symcomm-bench ... (a made-up run)", "date": "2026-01-01"}


def net_rows(space, nccl=False, **put_fields):
    """symcomm-bench net's records in `space`: puts at 1 and 256 MiB (vs_raw 0.95 and 0.85;
    with NCCL vs_nccl 1.2 and 1.1), the latency target (12 us, raw 10, NCCL 30) and the idle
    CPU (0.5%)."""
    common = dict(space=space, verified=True, provider="tcp;ofi_rxm", domain="lo")
    def put(nbytes, vs_raw, vs_nccl):
        fields = dict(common, time_us=100.0, algbw_gbs=1.0, vs_raw=vs_raw)
        if nccl:
            fields["vs_nccl"] = vs_nccl
        fields.update(put_fields)
        return rec("net", "put", "symcomm:net", nbytes, ranks=2, **fields)
    target = dict(common, time_us=12.0, raw_us=10.0, ratio_to_raw=1.2)
    if nccl:
        target.update(nccl_us=30.0, ratio_to_nccl=0.4)
    return [put(MIB, 0.95, 1.2), put(256 * MIB, 0.85, 1.1),
            rec("net", "put", "symcomm:net", 64 * KIB, ranks=2, time_us=1.0, vs_raw=0.1,
                vs_nccl=0.1, **common),  # below 1 MiB: no candidate
            rec("net", "latency_target", "symcomm:put_signal", 8, ranks=2, **target),
            rec("net", "idle_cpu", "symcomm:net", 0, ranks=2, cpu_percent=0.5, **common)]


NET_ROWS = {space: (
    f"| 36 net ({space}) | put bandwidth, 1-256 MiB, vs raw fi_write | >= 0.9x | "
    "lowest 0.85x (268435456 B) | MISSED |",) + ((
    "| 36 net (cuda) | put bandwidth, >= 1 MiB, vs NCCL's socket path | >= 1.0x | "
    "lowest 1.10x (268435456 B) | met |",) if space == "cuda" else ()) + (
    f"| 36 net ({space}) | 8-byte put-signal one way vs raw fi_write RTT/2 | <= 1.2x | "
    "12.00 us, raw 10.00 (1.20x) | met |",) + ((
    "| 36 net (cuda) | 8-byte put-signal one way vs NCCL's | < NCCL | 12.00 us, NCCL 30.00 | met |",)
    if space == "cuda" else ()) + (
    f"| 36 net ({space}) | idle rank's CPU | < 2% of a core | 0.50% | met |",)
    for space in ("host", "cuda")}


class Net(unittest.TestCase):
    def table(self, rows):
        t = targets.Table()
        targets.net_targets(t, rows)
        return ["| " + " | ".join(r) + " |" for r in t.rows]

    def test_each_space_its_own_rows(self):
        self.assertEqual(self.table(net_rows("host")), list(NET_ROWS["host"]))
        self.assertEqual(self.table(net_rows("cuda", nccl=True)), list(NET_ROWS["cuda"]))

    def test_cuda_without_nccl(self):
        got = self.table(net_rows("cuda"))
        self.assertIn("| 36 net (cuda) | put bandwidth, >= 1 MiB, vs NCCL's socket path | >= 1.0x | "
                      "not in the run | n/a |", got)
        self.assertIn("| 36 net (cuda) | 8-byte put-signal one way vs NCCL's | < NCCL | "
                      "not in the run (no NCCL) | n/a |", got)

    def test_unverified_puts_are_missed(self):
        got = self.table(net_rows("cuda", nccl=True, verified=False))
        self.assertIn("| 36 net (cuda) | put bandwidth, 1-256 MiB, vs raw fi_write | >= 0.9x | "
                      "unverified: the receiver's data was wrong | MISSED |", got)


class EndToEnd(unittest.TestCase):
    """targets.py as a command on a directory of made-up runs, one of each kind, shaped as
    symcomm-bench writes them (a command line first): every target's row, met or missed."""

    def run_targets(self, *args):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets.py")
        p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        return p.stdout

    def test_every_target(self):
        rma = [
            rec("rma", "put", "symcomm:ce", GIB, ranks=2, time_us=2706.0, algbw_gbs=396.8),
            # a replayed graph's record: no candidate, though it comes last
            rec("rma", "put", "symcomm:ce", GIB, ranks=2, time_us=9.0, algbw_gbs=999.0,
                launch="graph"),
            rec("rma", "put", "symcomm:sm", 64 * MIB, ranks=2, time_us=200.0, algbw_gbs=330.0),
            rec("rma", "put", "symcomm:device_block_x32", 64 * MIB, ranks=2, time_us=190.0,
                algbw_gbs=350.0),
            rec("rma", "put", "symcomm:auto", 8 * KIB, ranks=2, time_us=3.5, algbw_gbs=2.3),
            rec("rma", "pingpong", "symcomm:device", 8, ranks=2, time_us=0.641),
            rec("rma", "pingpong", "naive:volatile", 8, ranks=2, time_us=0.5),
            rec("rma", "barrier", "symcomm:kernel", 0, ranks=2, time_us=3.0),
            rec("rma", "barrier", "symcomm:kernel", 0, ranks=4, time_us=7.0),
        ]
        colls = [
            coll("alltoall", "symcomm:auto", MIB, 12.0), coll("alltoall", "nccl", MIB, 13.0),
            coll("alltoall", "symcomm:auto", 16 * MIB, 50.0),
            coll("alltoall", "nccl", 16 * MIB, 55.0),
            coll("alltoall", "symcomm:auto", GIB, 2000.0, 370.0),
            coll("alltoall", "nccl", GIB, 2100.0, 350.0),
            coll("allgather", "symcomm:auto", 64 * KIB, 8.0),
            coll("allgather", "nccl", 64 * KIB, 9.0),
            coll("allgather", "symcomm:auto", GIB, 2100.0, 350.0),
            # a plain-buffer record: only symmetric buffers count
            coll("alltoall", "symcomm:auto", MIB, 1.0, buffers="plain"),
            coll("reducescatter", "symcomm:auto", MIB, 20.0),
            coll("reducescatter", "nccl", MIB, 19.0),
            coll("allreduce", "symcomm:auto", MIB, 14.0),
            coll("allreduce", "symcomm:auto", GIB, 5000.0, 300.0),
            coll("allreduce", "nccl", GIB, 4700.0, 320.0),
        ]
        decomp = [dict(transpose("symcomm:nccl", 300, grid="2x2"), ranks=4),
                  dict(transpose("symcomm:sm", 200, grid="2x2"), ranks=4),
                  dict(autotune(1.027), ranks=4)]
        net = net_rows("host") + net_rows("cuda", nccl=True)
        with tempfile.TemporaryDirectory() as d:
            for kind, rows in (("rma", rma), ("coll", colls), ("decomp", decomp), ("net", net)):
                write(os.path.join(d, f"{kind}_1234abc.jsonl"), [COMMAND] + rows, time.time())
            out = self.run_targets(d, "--commit", "1234abc")
            self.assertEqual(out, self.run_targets(d))  # the only run, also without --commit
        for kind in ("rma", "coll", "decomp", "net"):
            self.assertIn(f"# {kind}: {os.path.join(d, kind + '_1234abc.jsonl')}\n", out)
        self.assertIn("# the run had 4 ranks; the targets are stated for 8 x H200\n", out)
        self.assertIn("| issue | measure | target | measured | |\n", out)
        for row in (
            "| 3 RMA | CE put GPU0->GPU1, 1 GB | >= 385 GB/s | 396.8 GB/s | met |",
            "| 3 RMA | SM put, 64 MB, at most 32 SMs | >= 340 GB/s | "
            "350.0 GB/s (symcomm:device_block_x32) | met |",
            "| 3 RMA | on-stream put, 8 KB, stream-serialised | <= 3 us | 3.50 us | MISSED |",
            "| 3 RMA | signal ping-pong, one way | <= 0.65 us | "
            "0.641 us (bare volatile loop 0.500) | met |",
            "| 3 RMA | on-stream barrier, 4 GPUs (target: 8) | <= 6 us | 7.00 us | MISSED |",
            "| 4 coll | all-to-all and all-gather vs NCCL, every size | >= 1.00x | "
            "lowest 1.050x (alltoall, 1073741824 B) | met |",
            "| 4 coll | reduce-scatter and broadcast vs NCCL, every size | >= 1.00x | "
            "lowest 0.950x (reducescatter, 1048576 B) | MISSED |",
            "| 4 coll | all-to-all and all-gather up to 64 KB | <= 10 us | "
            "at most 8.00 us (allgather, 65536 B) | met |",
            "| 4 coll | all-to-all, 1 MB | <= 15 us | 12.00 us (NCCL 13.00) | met |",
            "| 4 coll | all-to-all, 16 MB | <= 60 us | 50.00 us (NCCL 55.00) | met |",
            "| 4 coll | alltoall, 1 GB, bus bandwidth | >= 360 GB/s | 370.0 GB/s | met |",
            "| 4 coll | allgather, 1 GB, bus bandwidth | >= 360 GB/s | 350.0 GB/s | MISSED |",
            "| 4 coll | all-reduce up to 1 MB | <= 15 us | at most 14.00 us (1048576 B) | met |",
            "| 4 coll | all-reduce, 1 GB, bus bandwidth | >= 0.95 x NCCL | "
            "300.0 GB/s, NCCL 320.0 (0.938x) | MISSED |",
            "| 5 decomp | best backend vs NCCL backend, 1024^3 C32, grids present: 2x2 "
            "(target: 1x8 and 2x4) | >= 1.3x | lowest 1.50x (2x2 transpose_xy, symcomm:sm); "
            "1 cases | met |",
            "| 5 decomp | best backend vs NCCL backend, 256^3 C32 | >= 2.0x | not in the run | n/a |",
            "| 5 decomp | autotuner's pick vs the best it measured | within 5% | "
            "at most 2.7% ([256,256,256] 2 x 4, symcomm:sm) | met |",
        ) + NET_ROWS["host"] + NET_ROWS["cuda"]:
            self.assertIn(row + "\n", out)

    def test_a_missing_kind_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            write(os.path.join(d, "rma.jsonl"),
                  [rec("rma", "put", "symcomm:ce", GIB, ranks=8, time_us=2706.0,
                       algbw_gbs=380.0)], time.time())
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets.py")
            p = subprocess.run([sys.executable, script, d], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"# no coll results in {d}", p.stderr)
        self.assertIn(f"# no decomp results in {d}", p.stderr)
        self.assertNotIn("the run had", p.stdout)  # 8 ranks: the targets' own
        self.assertIn("| 3 RMA | CE put GPU0->GPU1, 1 GB | >= 385 GB/s | 380.0 GB/s | MISSED |",
                      p.stdout)

if __name__ == "__main__":
    unittest.main()
