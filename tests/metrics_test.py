"""One definition per concept (issue 22): one metric table, one name per metric on every command
(old names still accepted, with a note), and charts that read only what the results model writes.

    cd tests && ALLOCMARK_BIN=.../build/bin/allocmark /usr/bin/python3 -m unittest -v metrics_test
"""
import importlib
import json
import os
import sys
import unittest

from e2e_test import ALLOCMARK, TempDirTest, run

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "results-small")  # three repetitions per cell
# The plots/ of the program under test (its build tree's parent), as `allocmark plot` runs it.
PLOTS = os.environ.get("ALLOCMARK_PLOTS_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(ALLOCMARK)))), "plots")

sys.dont_write_bytecode = True


class MetricNames(TempDirTest):
    def baseline(self):
        path = os.path.join(self.tmp, "baseline.json")
        p = run(["baseline", FIXTURE, "-o", path])
        self.assertEqual(p.returncode, 0, p.stderr)
        return path

    def test_gate_takes_the_name_show_uses_and_the_old_one_with_a_note(self):
        base = self.baseline()
        p = run(["gate", "--baseline", base, "--results", FIXTURE, "--metric", "peak_rss_bytes", "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        verdicts = json.loads(p.stdout)["verdicts"]
        self.assertTrue(verdicts)
        self.assertEqual({v["verdict"] for v in verdicts}, {"pass"})
        self.assertNotIn("now called", p.stderr)
        old = run(["gate", "--baseline", base, "--results", FIXTURE, "--metric", "peak_rss", "--format", "json"])
        self.assertEqual(old.returncode, 0, old.stderr)
        self.assertIn("--metric peak_rss: now called peak_rss_bytes", old.stderr)
        self.assertEqual(json.loads(old.stdout)["verdicts"], verdicts)

    def test_compare_and_show_take_the_same_names(self):
        p = run(["compare", FIXTURE, FIXTURE, "--metric", "rss_above_idle_over_live,end_rss_bytes", "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(len(json.loads(p.stdout)["metrics"]), 2)
        old = run(["compare", FIXTURE, FIXTURE, "--metric", "rss_over_live", "--format", "json"])
        self.assertEqual(old.returncode, 0, old.stderr)
        self.assertIn("--metric rss_over_live: now called rss_above_idle_over_live", old.stderr)
        show = run(["show", FIXTURE, "--metric", "end_rss_bytes", "--format", "csv"])
        self.assertEqual(show.returncode, 0, show.stderr)
        self.assertIn("end_rss_bytes_median", show.stdout.splitlines()[0])

    def test_summary_json_carries_the_metric_table(self):
        out = os.path.join(self.tmp, "out")
        p = run(["run", "-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "1", "--out", out,
                 "--set", "size_mix.live_mib=8", "--set", "size_mix.ops=20000"])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "summary.json")) as f:
            metrics = json.load(f)["metrics"]
        self.assertEqual(metrics["peak_rss_bytes"]["better"], "lower")
        self.assertEqual(metrics["ops_per_s"]["better"], "higher")
        self.assertEqual(metrics["peak_rss_bytes"]["display"], "mib")
        self.assertEqual(metrics["ops_per_s"]["label"], "ops/s")


FLAKY = """#!/bin/sh
# Fails its first run (leaving a mark), then succeeds: a cell with two attempts.
if [ -e "$1" ]; then
  head -c 4000000 /dev/zero | tail -c 1 >/dev/null
  sleep 0.3
  exit 0
fi
touch "$1"
exit 3
"""


class ChartsReadTheModel(TempDirTest):
    def flaky_run(self, name):
        """A one-cell program run whose cell failed once and succeeded on --retry-failed (the same
        command in every run, so that their cells pool)."""
        script = self.write("flaky.sh", FLAKY)
        mark = os.path.join(self.tmp, "flaky.mark")
        if os.path.exists(mark):
            os.remove(mark)
        out = os.path.join(self.tmp, name)
        args = ["run", "-a", "glibc", "-r", "1", "--out", out, "--program", "flaky=/bin/sh %s %s" % (script, mark)]
        self.assertEqual(run(args).returncode, 1)
        p = run(args + ["--resume", "--retry-failed"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(out, "results.jsonl")) as f:
            attempts = [json.loads(line).get("attempt", 1) for line in f]
        self.assertEqual(attempts, [1, 2])
        return out

    def test_charts_of_a_merged_folder_with_retried_cells_agree_with_show(self):
        merged = os.path.join(self.tmp, "merged")
        p = run(["merge", self.flaky_run("a"), self.flaky_run("b"), "-o", merged])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["plot", merged, "--only", "timeline"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

        show = run(["show", merged, "--by", "workload,threads,allocator", "--format", "json"])
        self.assertEqual(show.returncode, 0, show.stderr)
        groups = [g for g in json.loads(show.stdout)["groups"] if g["metrics"]]
        self.assertEqual(len(groups), 1)
        shown = groups[0]["metrics"]["peak_rss_bytes"]
        self.assertEqual(shown["n"], 2)  # one ok repetition from each run

        sys.path.insert(0, PLOTS)
        try:
            data = importlib.import_module("data")
            charted = data.Run(merged).timelines()
        finally:
            sys.path.remove(PLOTS)
            for module in ("data", "style"):
                sys.modules.pop(module, None)
        group = groups[0]
        reps = charted.get((group["workload"], group["threads"], group["allocator"]), [])
        self.assertEqual(len(reps), shown["n"], "the timeline chart draws one line per repetition show counts")
        self.assertEqual(sorted(r["peak_rss_bytes"] for r in reps), [shown["min"], shown["max"]])


if __name__ == "__main__":
    unittest.main()
