"""Reading commands never pool silently (issue 23): `show --by` says when rows mix values of a
dimension it was not asked to group by, and --workload/--allocator/--threads keep one.

Built on the committed fixtures; the real allocmark binary reads them.
"""
import json
import os
import shutil
import unittest

from e2e_test import TempDirTest, run

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
SWEEP = os.path.join(FIXTURES, "threads-sweep")  # glibc and jemalloc size_mix at 1, 2 and 4 threads


class ShowNeverPoolsSilently(TempDirTest):
    def show(self, *args, folder=SWEEP):
        return run(["show", folder, "--format", "csv"] + list(args))

    def test_dropping_threads_is_said_and_a_filter_keeps_one(self):
        p = self.show("--by", "workload,allocator")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("rows pool threads 1, 2, 4", p.stderr)
        self.assertIn("--threads", p.stderr)
        p = self.show("--by", "workload,allocator", "--threads", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("pool", p.stderr)
        rows = [line for line in p.stdout.splitlines()[1:] if line]
        self.assertEqual(len(rows), 2, p.stdout)  # glibc and jemalloc, 3 cells each, all at 2 threads
        for row in rows:
            self.assertIn(",3,", row, "each row holds the three 2-thread repetitions, not nine cells")

    def test_phases_of_different_workloads_are_not_pooled_silently(self):
        folder = os.path.join(self.tmp, "two-workloads")
        os.mkdir(folder)
        shutil.copy(os.path.join(SWEEP, "meta.json"), folder)
        with open(os.path.join(SWEEP, "results.jsonl")) as f, open(os.path.join(folder, "results.jsonl"), "w") as out:
            for i, line in enumerate(f):
                r = json.loads(line)
                if r["threads"] == 1 and r["allocator"] == "glibc":
                    twin = dict(r, workload="size_mix_twin", key=r["key"].replace("/size_mix/", "/size_mix_twin/"))
                    out.write(json.dumps(twin) + "\n")
                out.write(line)
        p = self.show("--by", "threads,phase,allocator", "--threads", "1", folder=folder)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("rows pool workload size_mix, size_mix_twin", p.stderr)
        p = self.show("--by", "threads,phase,allocator", "--threads", "1", "--workload", "size_mix", folder=folder)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("pool", p.stderr)

    def test_the_default_grouping_pools_nothing(self):
        p = self.show()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("pool", p.stderr)

    def test_a_filter_naming_what_no_cell_has_is_a_usage_error(self):
        for args, needle in ((["--workload", "size_mx"], "--workload: no cell has 'size_mx' (there: size_mix)"),
                             (["--allocator", "tcmalloc"], "--allocator: no cell has 'tcmalloc' (there: glibc, jemalloc)"),
                             (["--threads", "3"], "--threads: no cell has '3' (there: 1, 2, 4)"),
                             (["--threads", "two"], "--threads: 'two' is not a thread count")):
            p = self.show(*args)
            self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
            self.assertIn(needle, p.stderr)
            self.assertEqual(p.stdout, "", "nothing is printed for bad input")


if __name__ == "__main__":
    unittest.main()
