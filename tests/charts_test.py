"""Charts an expert would draw (issue 23, docs/charts.md): the structure of what `allocmark plot`
draws, read back from its --describe file and the PNG headers, never from pixels.

    cd tests && ALLOCMARK_BIN=../build/bin/allocmark /usr/bin/python3 -m unittest -v charts_test

Small multiples per workload with the phases whose ops/s is a speed, timelines on each allocator's
own phase clock, the oversubscription warning, no per-node chart on one node, percall's ns/op per
benchmark, and no chart wider than the cap. Built on the committed fixtures and one tiny run.
"""
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True

from e2e_test import SMALL, run  # noqa: E402
from plots_test import FIXTURES, fixture_copy  # noqa: E402

# plots/style.py MAX_WIDTH_IN at 100 dpi: the report's column less its padding.
MAX_WIDTH_PX = 1300


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


class Plotted(unittest.TestCase):
    """`allocmark plot FOLDER --describe` into a temporary folder, kept for the class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="allocmark-charts-")
        cls.plotted = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def plot(self, folder, *args):
        """(process, description, charts folder) of `allocmark plot folder`, once per folder and args."""
        key = (folder,) + args
        if key not in self.plotted:
            out = os.path.join(self.tmp, "charts-%d" % len(self.plotted))
            describe = out + ".json"
            p = run(["plot", folder, "--out", out, "--describe", describe] + list(args), timeout=600)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(describe) as f:
                self.plotted[key] = (p, json.load(f), out)
        return self.plotted[key]

    def fixture(self, name):
        dst = os.path.join(self.tmp, name)
        if not os.path.exists(dst):
            fixture_copy(name, self.tmp)
        return dst

    def assert_every_png_within_the_cap(self, described, out):
        files = sorted(f for f in os.listdir(out) if f.endswith(".png"))
        self.assertTrue(files)
        self.assertEqual(sorted(described["charts"]), files)
        for f in files:
            width, height = png_size(os.path.join(out, f))
            self.assertLessEqual(width, MAX_WIDTH_PX, f)
            self.assertEqual((width, height), (described["charts"][f]["width_px"], described["charts"][f]["height_px"]), f)


class SmallMultiples(Plotted):
    def test_throughput_has_one_panel_per_workload_and_leaves_idle_phases_out(self):
        # The lab fixture: size_mix and arena_churn, glibc and numap, 4 threads; arena_churn's idle
        # phase does no operations.
        proc, described, out = self.plot(self.fixture("lab-8node"))
        chart = described["charts"]["throughput.png"]
        panels = [(p["info"]["workload"], p["info"]["threads"]) for p in chart["panels"]]
        self.assertEqual(panels, [("size_mix", 4), ("arena_churn", 4)])
        by_workload = {p["info"]["workload"]: p["info"]["phases"] for p in chart["panels"]}
        self.assertEqual(by_workload["size_mix"], ["fill", "churn", "release"])
        self.assertEqual(by_workload["arena_churn"], ["burst", "steady"])
        self.assertIn({"workload": "arena_churn", "phase": "idle", "why": "did no operations"}, chart["info"]["left_out"])
        self.assertIn("left out: arena_churn idle: did no operations", chart["note"])
        # Contention: a figure per workload, not one grid of every workload.
        for wl in ("size_mix", "arena_churn"):
            panels = described["charts"]["contention-%s.png" % wl]["panels"]
            self.assertEqual({p["info"]["workload"] for p in panels}, {wl})
            self.assertIn("malloc call latency", [p["title"] for p in panels])
        self.assertNotIn("contention.png", described["charts"])
        self.assert_every_png_within_the_cap(described, out)

    def test_every_fixture_chart_fits_the_width_cap(self):
        for name in ("results-small", "threads-sweep", "variants", "single-allocator", "lab-8node"):
            with self.subTest(fixture=name):
                _, described, out = self.plot(self.fixture(name))
                self.assert_every_png_within_the_cap(described, out)


# AlignedTimelines and Oversubscription draw only the kind they read: `--only` describes a chart
# exactly as the full draw does, and SmallMultiples draws every chart of the same fixtures.
class AlignedTimelines(Plotted):
    def test_each_allocator_on_its_own_phase_clock_cut_at_its_last_phase(self):
        _, described, _ = self.plot(self.fixture("threads-sweep"), "--only", "timeline")
        with open(os.path.join(FIXTURES, "threads-sweep", "timelines.jsonl")) as f:
            cells = [json.loads(line) for line in f]
        for t in (1, 2, 4):
            chart = described["charts"]["timeline-size_mix-t%d.png" % t]
            self.assertEqual([p["info"]["allocator"] for p in chart["panels"]], ["glibc", "jemalloc"])
            for panel in chart["panels"]:
                info = panel["info"]
                reps = [c for c in cells if c["threads"] == t and c["allocator"] == info["allocator"]]
                bold = [c for c in reps if c["rep"] == info["bold_rep"]][0]
                # The panel's clock starts at this allocator's own first phase start ...
                self.assertEqual(info["phase_start_ms"], bold["phases"][0]["start_ms"])
                self.assertEqual([p["name"] for p in info["phases"]], ["fill", "churn", "release"])
                self.assertEqual(info["phases"][0]["start"], 0.0)
                # ... and every repetition's line runs from its own first phase start to its own
                # last phase end: the worker's exit after it is not drawn.
                self.assertEqual(info["line_starts"], [0.0] * len(reps))
                lengths = [c["phases"][-1]["end_ms"] - c["phases"][0]["start_ms"] for c in reps]
                for got, want in zip(info["line_ends"], lengths):
                    self.assertAlmostEqual(got, want, places=6)
                self.assertEqual(panel["xlim"][0], 0.0)


class Oversubscription(Plotted):
    def test_a_warning_on_the_chart_when_threads_outnumber_usable_cpus(self):
        _, described, _ = self.plot(self.fixture("threads-sweep"), "--only", "contention")  # 1, 2 and 4 threads on 2 usable CPUs
        warnings = described["charts"]["contention-size_mix.png"]["warnings"]
        self.assertTrue(any(w.startswith("4 threads on 2 usable CPUs (oversubscribed)") for w in warnings), warnings)

    def test_no_warning_within_the_cpus(self):
        _, described, _ = self.plot(self.fixture("results-small"), "--only", "contention")  # 1 thread on 2 usable CPUs
        warnings = described["charts"]["contention-size_mix.png"]["warnings"]
        self.assertFalse([w for w in warnings if "oversubscribed" in w], warnings)


class TinyRun(Plotted):
    """One two-allocator run on this machine (one NUMA node): percall and size_mix at tiny sizes."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = os.path.join(cls.tmp, "tiny")
        cls.proc = run(["run", "-a", "glibc,jemalloc", "-w", "percall,size_mix", "-t", "1", "-r", "1",
                        "--set", "percall.min_time=0.002", "--out", cls.folder] + SMALL, timeout=600)

    def setUp(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)

    def test_no_per_node_chart_on_one_node(self):
        proc, described, out = self.plot(self.folder)
        self.assertFalse(os.path.exists(os.path.join(out, "placement.png")))
        reason = [s for s in described["skipped"] if s.startswith("placement:")]
        self.assertEqual(len(reason), 1, described["skipped"])
        self.assertIn("one NUMA node", reason[0])
        self.assertIn("allocmark_plots: skipped placement: one NUMA node", proc.stderr)

    def test_percall_ns_per_op_per_benchmark_against_the_baseline(self):
        _, described, out = self.plot(self.folder)
        chart = described["charts"]["percall-t1.png"]
        phases = [p["info"]["phase"] for p in chart["panels"]]
        self.assertEqual(phases, ["malloc_free", "batch", "realloc", "aligned", "cross_thread", "release"])
        with open(os.path.join(self.folder, "summary.json")) as f:
            groups = json.load(f)["groups"]
        for panel in chart["panels"]:
            g = [g for g in groups if g["workload"] == "percall" and g["allocator"] == "glibc"
                 and g["phase"] == panel["info"]["phase"]][0]
            self.assertEqual(panel["info"]["benchmarks"],
                             [k[len("ns_per_op."):] for k in g["workload_metrics"] if k.startswith("ns_per_op.")])
            self.assertIn("relative to glibc", panel["ylabel"])
            # The baseline's own min-max is drawn at 1 for every benchmark: a ratio is only as sure
            # as the median under it.
            self.assertEqual(panel["info"]["baseline_band"], panel["info"]["benchmarks"])
        self.assert_every_png_within_the_cap(described, out)

    def test_throughput_leaves_out_what_the_workload_says_is_not_a_speed(self):
        _, described, _ = self.plot(self.folder)
        with open(os.path.join(self.folder, "summary.json")) as f:
            groups = json.load(f)["groups"]
        percall = [g for g in groups if g["workload"] == "percall"]
        self.assertTrue(percall)
        for g in percall:
            self.assertIn("ns per operation per benchmark", g["ops_per_s_not_a_speed"])
        self.assertFalse([g for g in groups if g["workload"] == "size_mix" and "ops_per_s_not_a_speed" in g])
        chart = described["charts"]["throughput.png"]
        self.assertEqual([p["info"]["workload"] for p in chart["panels"]], ["size_mix"])
        left_out = {(x["workload"], x["phase"]) for x in chart["info"]["left_out"]}
        self.assertEqual(left_out, {("percall", g["phase"]) for g in percall})


if __name__ == "__main__":
    unittest.main()
