#!/usr/bin/env python3
"""Unit tests of bench/selection_rows.py on made-up records (ctest: unit_selection_rows_py).

    python3 bench/test_selection_rows.py [path/to/unit_tests]

With the unit_tests binary, the rows it prints are read back by the library's own parser
(Selection.DISABLED_ParsesTheFileNamedBySYMCOMM_SELECTION_FILE), which must see the same rows.
"""
import glob
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.dont_write_bytecode = True  # (no __pycache__ in the source tree when ctest runs this)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import selection_rows  # noqa: E402

REPO = os.path.dirname(HERE)
# The unit_tests binary, the first argument where one is given (unittest reads the rest).
UNIT_TESTS = sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None


def coll(op, impl, size, time_us, ranks=4, buffers="symmetric", **extra):
    r = {"bench": "coll", "op": op, "impl": impl, "dtype": "bytes", "bytes": size,
         "ranks": ranks, "time_us": time_us, "buffers": buffers, "machine": f"h200x{ranks}"}
    r.update(extra)
    return r


# An all-reduce where ll wins small sizes, sm the middle (within the margin of twoshot at
# 1 MiB), twoshot the largest; an all-gather whose bench sizes are received bytes; records
# that must be ignored (auto, NCCL, graphs, all-to-all-v, other rank counts); and plain buffers.
RECORDS = [
    {"command": "symcomm-bench coll --json x.jsonl", "date": "d", "commit": "c"},
    coll("allreduce", "symcomm:ll", 1024, 4.0), coll("allreduce", "symcomm:sm", 1024, 6.0),
    coll("allreduce", "symcomm:ll", 65536, 5.0), coll("allreduce", "symcomm:sm", 65536, 6.0),
    coll("allreduce", "symcomm:sm", 1 << 20, 10.0), coll("allreduce", "symcomm:twoshot", 1 << 20, 9.8),
    coll("allreduce", "symcomm:sm", 1 << 24, 100.0), coll("allreduce", "symcomm:twoshot", 1 << 24, 80.0),
    coll("allreduce", "symcomm:auto", 1 << 24, 1.0), coll("allreduce", "nccl", 1 << 24, 1.0),
    coll("allreduce", "symcomm:ll", 1 << 24, 1.0, launch="graph"),
    coll("allreduce", "symcomm:ll", 1 << 24, 1.0, ranks=8),
    coll("alltoallv", "symcomm:ll", 1024, 1.0),
    coll("allgather", "symcomm:ll", 4096, 3.0), coll("allgather", "symcomm:sm", 4096, 5.0),
    coll("allgather", "symcomm:ll", 1 << 20, 30.0), coll("allgather", "symcomm:sm", 1 << 20, 20.0),
    coll("broadcast", "symcomm:ll", 100, 3.0, buffers="plain"),
    coll("broadcast", "symcomm:sm", 100, 5.0, buffers="plain"),
]

SOURCE = "bench/results/h200x4/made_up.jsonl"
EXPECTED = [
    ("allgather", "4", "1KiB", "symmetric", "ll"),  # 4096 received / 4 ranks
    ("allgather", "4", "any", "symmetric", "sm"),
    ("allreduce", "4", "64KiB", "symmetric", "ll"),
    ("allreduce", "4", "1MiB", "symmetric", "sm"),  # twoshot only 2% faster: sm kept
    ("allreduce", "4", "any", "symmetric", "twoshot"),
    ("broadcast", "4", "any", "any", "ll"),
]


def run_script(path, *args):
    out = io.StringIO()
    with redirect_stdout(out):
        selection_rows.main([path, *args])
    return out.getvalue()


class Rows(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "made_up.jsonl")
        with open(self.path, "w") as f:
            for r in RECORDS:
                f.write(json.dumps(r) + "\n")

    def tearDown(self):
        self.dir.cleanup()

    def data_lines(self, text):
        return [line for line in text.splitlines() if line and not line.startswith("#")]

    def test_rows_merge_ranges_and_honour_the_margin(self):
        got = selection_rows.rows([r for r in RECORDS if "command" not in r], ranks=4)
        self.assertEqual(got, EXPECTED)

    def test_a_larger_margin_keeps_the_preferred_algorithm(self):
        got = selection_rows.rows([r for r in RECORDS if "command" not in r], ranks=4, margin=0.5)
        self.assertIn(("allreduce", "4", "any", "symmetric", "sm"), got)
        self.assertNotIn("twoshot", [r[4] for r in got])

    def test_output_is_the_data_format(self):
        text = run_script(self.path, "--ranks", "4")
        self.assertTrue(text.startswith("# Rows for src/coll/selection/h200x4.txt: "), text)
        lines = self.data_lines(text)
        self.assertEqual([tuple(line.split()) for line in lines],
                         [row + (self.path,) for row in EXPECTED])
        # Aligned columns: every row's algorithm starts where the header's does.
        header = [line for line in text.splitlines() if line.startswith("# op")][0]
        for line in lines:
            starts = [m.start() for m in re.finditer(r"\S+", line)]
            self.assertEqual(starts[4], header.index("algorithm"), line)

    def test_sources_inside_the_repository_are_cited_from_its_root(self):
        self.assertEqual(selection_rows.source_name(os.path.join(REPO, SOURCE)), SOURCE)

    def test_byte_bounds(self):
        self.assertEqual([selection_rows.format_bytes(b) for b in (32, 1536, 1 << 10, 1 << 20, 3 << 30)],
                         ["32", "1536", "1KiB", "1MiB", "3GiB"])

    @unittest.skipUnless(UNIT_TESTS, "no unit_tests binary given")
    def test_the_library_parses_what_it_writes(self):
        text = run_script(self.path, "--ranks", "4")
        data = os.path.join(self.dir.name, "h200x4.txt")
        with open(data, "w") as f:
            f.write(text)
        env = dict(os.environ, SYMCOMM_SELECTION_FILE=data)
        p = subprocess.run([UNIT_TESTS, "--gtest_also_run_disabled_tests",
                            "--gtest_filter=Selection.DISABLED_ParsesTheFileNamedBySYMCOMM_SELECTION_FILE"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        parsed = [tuple(line.split()[1:]) for line in p.stdout.splitlines() if line.startswith("row ")]
        # As the library reads them: bytes as counts, "any" as 0.
        expected = [(op, team, str(0 if b == "any" else int(b[:-3]) << {"K": 10, "M": 20, "G": 30}[b[-3]]),
                     buffers, algo) for op, team, b, buffers, algo in EXPECTED]
        self.assertEqual(parsed, expected, p.stdout)


class CommittedData(unittest.TestCase):
    def test_every_row_cites_a_results_file_that_exists(self):
        files = glob.glob(os.path.join(REPO, "src", "coll", "selection", "*.txt"))
        self.assertTrue(files)
        for path in files:
            with open(path) as f:
                for number, line in enumerate(f, 1):
                    cols = line.split("#", 1)[0].split()
                    if cols:
                        self.assertTrue(os.path.isfile(os.path.join(REPO, cols[-1])),
                                        f"{path}:{number}: {cols[-1]} does not exist")


if __name__ == "__main__":
    unittest.main()
