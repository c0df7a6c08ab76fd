"""The RSS gate end to end: real runs, a planted regression, each refusal (issue 10).
Run by ctest with Debian's /usr/bin/python3; assertions on verdicts and exit codes, never timings."""
import json
import os
import unittest

from e2e_test import ALLOCMARK, TempDirTest, run

MATRIX = ["-a", "glibc,jemalloc", "-w", "size_mix", "-t", "2", "-r", "3", "--set", "size_mix.ops=20000"]


class Gate(TempDirTest):
    def make_run(self, name, live_mib):
        out = os.path.join(self.tmp, name)
        p = run(["run"] + MATRIX + ["--set", f"size_mix.live_mib={live_mib}", "--out", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def make_baseline(self, run_dir):
        """The baseline file of run_dir, and its parsed content."""
        baseline = os.path.join(self.tmp, "base.json")
        self.assertEqual(run(["baseline", run_dir, "-o", baseline]).returncode, 0)
        with open(baseline) as f:
            return baseline, json.load(f)

    def gate(self, baseline, results, *extra):
        return run(["gate", "--baseline", baseline, "--results", results, "--format", "json", *extra])

    def test_a_planted_regression_trips_the_gate_and_a_rerun_does_not(self):
        before = self.make_run("before", 32)
        baseline, base = self.make_baseline(before)
        self.assertIn("cpu_model", base["machine"])
        self.assertEqual(len(base["cells"][0]["values"]["peak_rss"]), 3)

        same = self.gate(baseline, before)
        self.assertEqual(same.returncode, 0, same.stdout)
        self.assertEqual({v["verdict"] for v in json.loads(same.stdout)["verdicts"]}, {"pass"})

        # 12.5% more live data: the fill phase's peak RSS grows by ~4 MiB for every allocator.
        after = self.make_run("after", 36)
        p = self.gate(baseline, after, "--phase", "fill")
        self.assertEqual(p.returncode, 1, p.stdout)
        verdicts = json.loads(p.stdout)["verdicts"]
        self.assertEqual(sorted(v["cell"] for v in verdicts if v["verdict"] == "regressed"),
                         ["glibc size_mix t2 fill", "jemalloc size_mix t2 fill"])
        for v in verdicts:
            self.assertEqual(v["changed_under_test"]["params"][1]["live_mib"], "36", "what changed is listed")
        p = self.gate(baseline, after, "--phase", "fill", "--strict")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--strict", p.stdout)

    def test_not_comparable_and_bad_baselines(self):
        before = self.make_run("before", 16)
        baseline, base = self.make_baseline(before)
        base["machine"]["cpu_model"] = "another CPU"
        other = os.path.join(self.tmp, "other.json")
        with open(other, "w") as f:
            json.dump(base, f)
        p = self.gate(other, before)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertTrue(all(v["verdict"] == "not comparable" and "machine differs" in v["reason"]
                            for v in json.loads(p.stdout)["verdicts"]))
        self.assertEqual(self.gate(other, before, "--allow-mismatch").returncode, 0)
        with open(baseline) as f:
            text = f.read()
        with open(other, "w") as f:
            f.write(text[:len(text) // 2])
        p = self.gate(other, before)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not valid JSON", p.stderr)
        p = run(["gate", "--baseline", baseline, "--results", before, "--metric", "rss"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown metric 'rss'", p.stderr)
        p = run(["gate", "--baseline", baseline, "--results", before, "--tolerance", "five"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--tolerance", p.stderr)


if __name__ == "__main__":
    unittest.main()
