"""`allocmark compare` on committed fixture runs with planted differences (issue 9): exactly the
planted cells move, in the planted direction; bad input is a usage error. No timings asserted."""
import json
import os
import re
import shutil

from e2e_test import TempDirTest, run

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "results-small")


def planted(src, dst, plants):
    """A copy of the results folder src with plants[(allocator, phase)] = (field, factor) applied to
    every repetition's phase record."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("golden"))
    with open(os.path.join(src, "results.jsonl")) as f:
        records = [json.loads(line) for line in f]
    for r in records:
        for phase in r["phases"]:
            field_factor = plants.get((r["allocator"], phase["name"]))
            if field_factor:
                field, factor = field_factor
                phase[field] = phase[field] * factor
    with open(os.path.join(dst, "results.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)


class Compare(TempDirTest):
    def compare(self, before, after, *extra):
        p = run(["compare", before, after, "--format", "json", *extra])
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_a_run_compared_with_itself_moves_nowhere(self):
        c = self.compare(FIXTURE, FIXTURE)
        self.assertEqual(c["moved"], 0)
        self.assertEqual({ch["direction"] for ch in c["changes"]}, {"same"})
        self.assertEqual({ch["metric"] for ch in c["changes"]}, {"peak_rss_bytes", "rss_above_idle_over_live", "end_rss_bytes", "ops_per_s"})

    def test_exactly_the_planted_cells_move(self):
        after = os.path.join(self.tmp, "after")
        # glibc's churn phase holds 50% more at its peak; mimalloc's fill phase runs at half speed
        # (twice the wall time for the same operations: ops/s is the model's, from ops and wall_s).
        planted(FIXTURE, after, {("glibc", "churn"): ("peak_rss_bytes", 1.5), ("mimalloc", "fill"): ("wall_s", 2.0)})
        c = self.compare(FIXTURE, after)
        moved = [ch for ch in c["changes"] if ch["moved"]]
        self.assertEqual({ch["cell"] for ch in moved}, {"glibc size_mix t1 churn", "mimalloc size_mix t1 fill"})
        by_metric = {(ch["cell"], ch["metric"]): ch for ch in moved}
        peak = by_metric[("glibc size_mix t1 churn", "peak_rss_bytes")]
        self.assertEqual(peak["direction"], "worse")
        self.assertAlmostEqual(peak["change"], 0.5, places=6)
        self.assertLessEqual(peak["change_low"], peak["change"])
        self.assertGreaterEqual(peak["change_high"], peak["change"])
        self.assertEqual(by_metric[("mimalloc size_mix t1 fill", "ops_per_s")]["direction"], "worse")
        self.assertEqual(c["changes"][0]["moved"], True, "moved cells come first")
        # The reverse comparison sees the same cells get better.
        back = self.compare(after, FIXTURE)
        self.assertEqual({(ch["cell"], ch["metric"], ch["direction"]) for ch in back["changes"] if ch["moved"]},
                         {(cell, metric, "better") for cell, metric in by_metric})
        # Text and markdown say the same.
        md = run(["compare", FIXTURE, after, "--format", "markdown"])
        self.assertEqual(md.returncode, 0, md.stderr)
        self.assertIn("| worse | glibc size\\_mix t1 churn | peak_rss_bytes |", md.stdout)
        self.assertIn(f"{len(moved)} of ", md.stdout)

    def test_charts_of_a_comparison(self):
        before, after, charts = (os.path.join(self.tmp, n) for n in ("before", "after", "charts"))
        shutil.copytree(FIXTURE, before, ignore=shutil.ignore_patterns("golden"))
        planted(FIXTURE, after, {("glibc", "churn"): ("peak_rss_bytes", 1.5)})
        p = run(["compare", before, after, "--format", "json", "--charts", charts])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["moved"], 2)  # stdout stays one JSON document
        with open(os.path.join(charts, "compare.json")) as f:
            written = json.load(f)
        self.assertEqual([(o["allocator"], o["workload"], o["threads"]) for o in written["overlay"]], [("glibc", "size_mix", 1)])
        for name in ("compare-changes.png", "compare-rss-glibc-size_mix-t1.png"):
            path = os.path.join(charts, name)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", name)
            self.assertGreater(os.path.getsize(path), 10000, name)
        # Nothing moved: the overlay is skipped with its reason, the change chart still drawn.
        p = run(["compare", before, before, "--charts", os.path.join(self.tmp, "same")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("allocmark_plots: skipped compare overlay: no cell's RSS moved", p.stderr)
        self.assertTrue(os.path.isfile(os.path.join(self.tmp, "same", "compare-changes.png")))

    def test_the_comparison_page_in_a_real_browser(self):
        import report_test
        before, after, page = os.path.join(self.tmp, "before"), os.path.join(self.tmp, "after"), os.path.join(self.tmp, "cmp", "c.html")
        shutil.copytree(FIXTURE, before, ignore=shutil.ignore_patterns("golden"))
        planted(FIXTURE, after, {("glibc", "churn"): ("peak_rss_bytes", 1.5)})
        os.makedirs(os.path.dirname(page))
        p = run(["compare", before, after, "--report", page])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(page, encoding="utf-8") as f:
            markup = f.read()
        self.assertEqual(report_test.external_references(markup), [])
        out = report_test.render(self, page, self.tmp)
        self.assertEqual(out["resources"], [])
        self.assertEqual(out["violations"], [])
        self.assertEqual(len(out["images"]), 2)  # the change chart and glibc's RSS overlay
        for img in out["images"]:
            self.assertTrue(img["complete"] and img["data"] and img["width"] > 200 and img["height"] > 200, img)
        with open(os.path.join(self.tmp, "c.json"), "w") as f:
            f.write(run(["compare", before, after, "--format", "json"]).stdout)
        with open(os.path.join(self.tmp, "c.json")) as f:
            changes = json.load(f)["changes"]
        self.assertIn("2 of %d cell-phase figures moved" % len(changes), out["text"])
        # One table row per figure, the moved ones first.
        m = re.search(r'<table id="changes".*?<tbody>(.*?)</tbody>', markup, re.S)
        self.assertIsNotNone(m)
        rows = re.findall(r"<tr>(.*?)</tr>", m.group(1), re.S)
        self.assertEqual(len(rows), len(changes))
        self.assertTrue(all("worse" in r for r in rows[:2]))
        # A page that cannot be written is refused before any work.
        p = run(["compare", before, after, "--report", os.path.join(self.tmp, "nowhere", "c.html")])
        self.assertEqual(p.returncode, 2)
        self.assertIn("does not exist", p.stderr)

    def test_cells_on_one_side_only_are_listed(self):
        fewer = os.path.join(self.tmp, "fewer")
        shutil.copytree(FIXTURE, fewer, ignore=shutil.ignore_patterns("golden"))
        with open(os.path.join(FIXTURE, "results.jsonl")) as f:
            kept = [line for line in f if json.loads(line)["allocator"] != "jemalloc"]
        with open(os.path.join(fewer, "results.jsonl"), "w") as f:
            f.writelines(kept)
        c = self.compare(FIXTURE, fewer, "--metric", "peak_rss_bytes")
        self.assertEqual({ch["cell"].split()[0] for ch in c["changes"] if ch["direction"] == "only before"}, {"jemalloc"})
        c = self.compare(fewer, FIXTURE, "--metric", "peak_rss_bytes")
        self.assertEqual({ch["cell"].split()[0] for ch in c["changes"] if ch["direction"] == "only after"}, {"jemalloc"})

    def test_bad_input_is_a_usage_error(self):
        for args, message in [([FIXTURE, os.path.join(self.tmp, "nowhere")], "nowhere"),
                              ([FIXTURE, FIXTURE, "--metric", "rss"], "unknown metric 'rss'"),
                              ([FIXTURE, FIXTURE, "--format", "html"], "--format"),
                              ([FIXTURE, FIXTURE, "--charts", "x", "--chart-format", "gif"], "--chart-format"),
                              ([FIXTURE], "after")]:
            p = run(["compare", *args])
            self.assertEqual(p.returncode, 2, (args, p.stdout))
            self.assertIn(message, p.stderr)


if __name__ == "__main__":
    import unittest
    unittest.main()
