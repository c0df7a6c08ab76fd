"""One definition per concept (issue 22): the settings table and typed workload parameters.

Each test fails on the program before the table (main at the start of issue 22) and passes with it.
"""
import json
import os
import shutil
import unittest

from e2e_test import SMALL, TempDirTest, records, run

ONE = ["-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "1"] + SMALL
# A bytes-typed parameter (hash_build.payload_max) on a build small enough to take a second.
HASH = ["-a", "glibc", "-w", "hash_build", "-t", "1", "--set", "hash_build.keys=20000", "--set", "hash_build.probes=20000"]


def meta(out):
    with open(os.path.join(out, "meta.json")) as f:
        return json.load(f)


class TypedParameters(TempDirTest):
    def test_two_spellings_of_one_size_are_one_cell(self):
        p = run(["run"] + HASH + ["-r", "1", "--set", "hash_build.payload_max=16K", "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        # The same size written out in bytes: its first repetition is the cell already recorded.
        p = run(["run"] + HASH + ["-r", "2", "--set", "hash_build.payload_max=16384", "--out", self.out, "--extend"])
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual([r["rep"] for r in recs], [1, 2], "16K and 16384 are one cell: only repetition 2 was new")
        self.assertEqual({r["params"]["payload_max"] for r in recs}, {"16K"})
        self.assertEqual(len({r["key"].rsplit("/", 1)[1] for r in recs}), 1)

    def test_a_float_from_a_matrix_file_reads_back_exactly(self):
        path = self.write("m.toml", '[matrix]\nallocators = ["glibc"]\nworkloads = ["size_mix"]\nthreads = [1]\nreps = 1\n'
                                    '[params.size_mix]\nlive_mib = 8\nops = 20000\nremote_free = 0.1234567\n')
        p = run(["run", path, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(records(self.out)[0]["params"]["remote_free"], "0.1234567")
        self.assertEqual(meta(self.out)["matrix"]["workloads"][0]["params"]["remote_free"], "0.1234567")


class SettingsTable(TempDirTest):
    def test_latency_every_has_one_default_also_for_a_described_cell(self):
        self.assertEqual(run(["run"] + ONE + ["--out", self.out]).returncode, 0)
        local = records(self.out)[0]
        self.assertEqual(local["phases"][1]["contention"]["latency"]["every"], 64)
        cell = {"allocator": {"name": "glibc", "backend": "glibc", "library": "", "env": {}},
                "workload": "size_mix", "threads": 1, "rep": 1, "params": local["params"]}
        spec = self.write("cell.json", json.dumps({"cell": cell, "settings": {"timeout_s": 60},
                                                   "log": os.path.join(self.tmp, "cell.log")}))
        record = os.path.join(self.tmp, "record.json")
        p = run(["cell", spec, "--record", record])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(record) as f:
            churn = json.load(f)["phases"][1]
        self.assertEqual(churn["contention"]["latency"]["every"], 64, "a description without latency_every times as run does")

    def test_every_matrix_key_is_a_flag(self):
        p = run(["run"] + ONE + ["--max-timeline-points", "50", "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(meta(self.out)["matrix"]["max_timeline_points"], 50)
        self.assertLessEqual(len(records(self.out)[0]["timeline"]), 50)
        shutil.rmtree(self.out)
        self.assert_usage_error(["run"] + ONE + ["--max-timeline-points=1"], "--max-timeline-points: must be in 2..", "'1'")

    # Issue 41: how much of each block the models write is one setting (`writes`), every seed
    # workload's writes go through it, and a bad value is refused before anything runs.
    # Blocks of 512 KiB-1 MiB, above glibc's mmap threshold while nothing is freed: during the fill
    # each one is a fresh mapping, resident only where the model writes it.
    WRITES = ["-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "1", "--set", "size_mix.live_mib=24",
              "--set", "size_mix.ops=2000", "--set", "size_mix.sizes=512K-1M:1"]

    def writes_fill_peak(self, out):
        return next(p["peak_rss_bytes"] for p in records(out)[0]["phases"] if p["name"] == "fill")

    def test_writes_lines_writes_the_first_bytes_of_each_block_and_is_recorded(self):
        full, lines = os.path.join(self.tmp, "full"), os.path.join(self.tmp, "lines")
        p = run(["run"] + self.WRITES + ["--out", full])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["run"] + self.WRITES + ["--writes", "lines", "--out", lines])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(meta(full)["matrix"]["writes"], "all")
        self.assertEqual(meta(lines)["matrix"]["writes"], "lines")
        # all: every page of 24 MiB written; lines: one page of each block (24-48 blocks).
        self.assertGreater(self.writes_fill_peak(full) - self.writes_fill_peak(lines), 16 << 20,
                           (self.writes_fill_peak(full), self.writes_fill_peak(lines)))
        # A folder recorded with one value is not resumed with another.
        p = run(["run"] + self.WRITES + ["--writes", "page", "--out", lines, "--resume"])
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("writes", p.stderr)

    # A consumer reads what its producer wrote, no more: orc_scan's drivers read each coalesced
    # read's written share. On a kernel without the shared zero page (this project's machines) a
    # read of an unwritten page makes it resident: before, `lines` held 95 of `all`'s 131 MiB here.
    ORC = ["-a", "glibc", "-w", "orc_scan", "-t", "1", "-r", "1", "--set", "orc_scan.scale=0.25"]

    def test_writes_lines_leaves_unwritten_pages_of_a_read_buffer_untouched(self):
        peaks = {}
        for writes in ("all", "lines"):
            out = os.path.join(self.tmp, "orc-" + writes)
            p = run(["run"] + self.ORC + ["--writes", writes, "--out", out])
            self.assertEqual(p.returncode, 0, p.stderr)
            peaks[writes] = next(ph["peak_rss_bytes"] for ph in records(out)[0]["phases"] if ph["name"] == "steady")
        self.assertLess(peaks["lines"], peaks["all"] / 4, peaks)

    def test_writes_a_bad_value_is_exit_2_naming_the_flag_or_the_key(self):
        self.assert_usage_error(["run"] + ONE + ["--writes", "half"], "--writes:", '"lines"', "'half'")
        path = self.write("m.toml", '[matrix]\nallocators = ["glibc"]\nworkloads = ["size_mix"]\nwrites = "most"\n')
        self.assert_usage_error(["run", path], "m.toml:4", "writes", "most")
        path = self.write("n.toml", '[matrix]\nallocators = ["glibc"]\nworkloads = ["size_mix"]\nwrites = 256\n')
        self.assert_usage_error(["run", path], "n.toml:4", "writes", "256")


if __name__ == "__main__":
    unittest.main()
