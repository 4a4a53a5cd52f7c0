#!/usr/bin/env python3
"""Unit tests of bench/targets.py on made-up records (ctest: unit_bench_targets_py).

    python3 bench/test_targets.py
"""
import io
import json
import os
import sys
import tempfile
import time
import unittest
from contextlib import redirect_stdout, redirect_stderr

sys.dont_write_bytecode = True  # (no __pycache__ in the source tree when ctest runs this)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import targets  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "h200x4")


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
        got = decomp_rows([autotune(None)])[AUTOTUNE]  # was a TypeError
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

    def test_committed_results(self):
        if not os.path.isdir(RESULTS):
            self.skipTest("no bench/results/h200x4")
        for kind in ("rma", "coll", "decomp"):
            path = targets.pick(RESULTS, kind, None)
            self.assertRegex(os.path.basename(path), rf"^{kind}_[0-9a-f]{{7,40}}\.jsonl$")
        out, err = io.StringIO(), io.StringIO()
        sys.argv = ["targets.py", RESULTS, "--commit", "b2d194a"]
        with redirect_stdout(out), redirect_stderr(err):
            targets.main()
        text = out.getvalue()
        self.assertIn("| 3 RMA | CE put GPU0->GPU1, 1 GB | >= 385 GB/s | 396.6 GB/s | met |", text)
        self.assertIn("1024^3 C32, grids present: 1x4, 2x2, 4x1 (target: 1x8 and 2x4) | >= 1.3x | "
                      "lowest 1.52x (4x1 transpose_xy, symcomm:sm); 8 cases | met |", text)
        self.assertIn("| within 5% | at most 0.3% ([1024,1024,1024] 4 x 1, symcomm:sm) | met |", text)


if __name__ == "__main__":
    unittest.main()
