#!/usr/bin/python3
"""Transparent huge pages per phase (issue 25): the process's anonymous huge-page bytes at each
phase end and the system's THP events during it, in every record and in `show`, on real runs."""
import json
import os
import unittest

from e2e_test import TempDirTest, records, run

# hash_build at a tenth of its quick size: about 50 MiB, filled by a few large regions.
MATRIX = """
[allocators."jemalloc:thp"]
backend = "jemalloc"
env = { MALLOC_CONF = "thp:always" }
[matrix]
allocators = ["glibc", "jemalloc:thp"]
workloads = ["hash_build"]
threads = [1]
reps = 1
size = "quick"
[params.hash_build]
scale = 0.1
"""


def thp_mode():
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        return f.read().split("[")[1].split("]")[0]


class PerPhase(TempDirTest):
    def test_huge_pages_of_an_allocator_that_asks_for_them_and_of_one_that_does_not(self):
        path = os.path.join(self.tmp, "thp.toml")
        with open(path, "w") as f:
            f.write(MATRIX)
        p = run(["run", path, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        mode = thp_mode()
        with open(os.path.join(self.out, "meta.json")) as f:
            self.assertIn(mode, json.load(f)["machine"]["thp_enabled"])
        by = {r["allocator"]: r for r in records(self.out)}
        for r in by.values():
            for ph in r["phases"]:
                where = (r["allocator"], ph["name"])
                self.assertIsNotNone(ph["anon_huge_bytes"], where)
                self.assertEqual(ph["anon_huge_bytes"] % (2 << 20), 0, where)  # whole huge pages
                self.assertLessEqual(ph["anon_huge_bytes"], ph["end_rss_bytes"], where)
                for event in ("fault_alloc", "fault_fallback", "collapse_alloc", "split_page"):
                    self.assertGreaterEqual(ph["thp_events"][event], 0, where)
        built = {a: next(ph for ph in r["phases"] if ph["name"] == "build") for a, r in by.items()}
        # glibc never asks for huge pages: under madvise (and never) it has none.
        if mode in ("madvise", "never"):
            self.assertEqual(built["glibc"]["anon_huge_bytes"], 0)
        # jemalloc with thp:always madvises its extents: huge pages unless the machine forbids them.
        if mode == "never":
            self.assertEqual(built["jemalloc:thp"]["anon_huge_bytes"], 0)
        else:
            self.assertGreaterEqual(built["jemalloc:thp"]["anon_huge_bytes"], 8 << 20)
            self.assertGreater(built["jemalloc:thp"]["thp_events"]["fault_alloc"], 0)
        # The model reads them: show's column and summary.json's metric.
        p = run(["show", self.out, "--metric", "anon_huge_bytes,thp_fault_alloc", "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        shown = {(g["allocator"], g["phase"]): g["metrics"] for g in json.loads(p.stdout)["groups"]}
        self.assertEqual(shown[("jemalloc:thp", "build")]["anon_huge_bytes"]["median"], built["jemalloc:thp"]["anon_huge_bytes"])
        p = run(["show", self.out, "--metric", "anon_huge_bytes"])
        self.assertIn("huge MiB", p.stdout)


if __name__ == "__main__":
    unittest.main()
