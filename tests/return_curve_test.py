"""The return curve (issue 45): RSS read by the worker at +10 ms, +100 ms and the end of an idle settle
after a cell's last phase, recorded in that phase, read by the model, shown by show, the report and
the timeline chart, and named by the recommendation's held RSS.

Assertions are about what is recorded and how the readings relate, never about how long anything took
(a reading's t_ms is only ever later than asked, and the tests hold it to that alone).
"""
import json
import os
import unittest

from answer_test import render
from e2e_test import SMALL, TempDirTest, records, run

CELLS = ["-w", "size_mix", "-t", "1", "-r", "1"] + SMALL
POINTS = [("after_10ms", 10), ("after_100ms", 100), ("settled", None)]

# Run in the report by Chromium: how wide the return curve's table is laid out, and its box (which
# scrolls what does not fit).
TABLE_PROBE = r"""<script>
window.addEventListener("load", function () {
  var t = document.getElementById("return-curve-table");
  var out = {width: window.innerWidth, table_width: t ? t.offsetWidth : null,
             box_width: t ? t.parentElement.clientWidth : null};
  var pre = document.createElement("pre");
  pre.id = "probe-result";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


class ReturnCurve(TempDirTest):
    def report_html(self):
        """The folder's HTML report, written by `allocmark report`."""
        page = os.path.join(self.tmp, "r.html")
        p = run(["report", self.out, "--out", page])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(page) as f:
            return f.read()

    def check_curve(self, record, settle_ms):
        where = record["allocator"]
        *before, last = record["phases"]
        for p in before:  # only the last phase is followed by the settle
            self.assertNotIn("return_curve", p, (where, p["name"]))
        curve = last["return_curve"]
        self.assertEqual(curve["settle_ms"], settle_ms, where)
        times = []
        for name, asked in POINTS:
            point = curve[name]
            # Read when asked or later (never earlier: the worker sleeps to an absolute time).
            self.assertGreaterEqual(point["t_ms"], asked if asked is not None else settle_ms, (where, name))
            # A running process with a loaded allocator holds memory, and no more than its cell's peak.
            self.assertGreater(point["rss_bytes"], 0, (where, name))
            self.assertLessEqual(point["rss_bytes"], max(p["peak_rss_bytes"] for p in record["phases"]), (where, name))
            times.append(point["t_ms"])
        self.assertEqual(times, sorted(times), where)
        # The settle is after the phase: the phase's own clock does not hold it, the cell's does.
        self.assertGreaterEqual(record["wall_s"] * 1000, last["end_ms"] + times[-1], where)
        return curve

    def test_every_cell_has_a_curve_that_show_report_and_chart_read(self):
        # jemalloc with its decay in a background thread gives memory back off the free path; glibc
        # gives size_mix's large blocks back inside free().
        p = run(["run", "-a", "glibc,jemalloc:bg", "--settle-ms", "200", "--out", self.out] + CELLS)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.out, "meta.json")) as f:
            self.assertEqual(json.load(f)["matrix"]["settle_ms"], 200)
        recs = records(self.out)
        self.assertEqual(len(recs), 2)
        for r in recs:
            self.assertEqual(r["status"], "ok", r.get("error"))
            curve = self.check_curve(r, 200)
            # The process is idle during the settle: nothing it does makes memory resident again
            # beyond a few pages of a waking thread's stack (a MiB of slack for that).
            self.assertLessEqual(curve["settled"]["rss_bytes"], curve["after_10ms"]["rss_bytes"] + (1 << 20), r["allocator"])

        # show: the table as it always was, then one line per group with its curve.
        p = run(["show", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("RSS after the last phase, the worker idle (its end -> +10 ms -> +100 ms -> settled):", p.stdout)
        for r in recs:
            c = r["phases"][-1]["return_curve"]
            mib = ["%.1f" % (b / 1048576) for b in (r["phases"][-1]["end_rss_bytes"], c["after_10ms"]["rss_bytes"],
                                                  c["after_100ms"]["rss_bytes"], c["settled"]["rss_bytes"])]
            self.assertIn("return curve, size_mix 1 %s release: %s MiB" % (r["allocator"], " -> ".join(mib)), p.stdout)
        metrics = "end_rss_bytes,rss_after_10ms_bytes,rss_after_100ms_bytes,rss_settled_bytes"
        p = run(["show", self.out, "--by", "workload,threads,allocator", "--metric", metrics, "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        groups = json.loads(p.stdout)["groups"]
        by_alloc = {r["allocator"]: r["phases"][-1]["return_curve"] for r in recs}
        for g in groups:
            curve = by_alloc[g["allocator"]]
            self.assertEqual(g["metrics"]["rss_after_10ms_bytes"]["median"], curve["after_10ms"]["rss_bytes"])
            self.assertEqual(g["metrics"]["rss_after_100ms_bytes"]["median"], curve["after_100ms"]["rss_bytes"])
            self.assertEqual(g["metrics"]["rss_settled_bytes"]["median"], curve["settled"]["rss_bytes"])

        # The report: the return curve's table, and held RSS named by its point.
        html = self.report_html()
        self.assertIn('id="return-curve-table"', html)
        self.assertIn("held RSS (+100 ms)", html)
        self.assertNotIn("held RSS (end)", html)
        # It fits a 900 px window whole: its seven columns once scrolled inside their box there.
        out = render(self, os.path.join(self.tmp, "r.html"), self.tmp, 900, probe=TABLE_PROBE)
        self.assertEqual(out["width"], 900)
        self.assertLessEqual(out["table_width"], out["box_width"], out)

        # The timeline chart's data: the last phase's end, then the three reads, on the timeline's clock.
        with open(os.path.join(self.out, "timelines.jsonl")) as f:
            lines = [json.loads(line) for line in f]
        for line in lines:
            rec = next(r for r in recs if r["allocator"] == line["allocator"])
            last = rec["phases"][-1]
            curve = last["return_curve"]
            self.assertEqual(line["return_curve"],
                             [[last["end_ms"], last["end_rss_bytes"]]] +
                             [[last["end_ms"] + curve[n]["t_ms"], curve[n]["rss_bytes"]] for n, _ in POINTS])

    def test_settle_off_records_no_curve_and_says_so(self):
        p = run(["run", "-a", "glibc", "--settle-ms", "0", "--out", self.out] + CELLS)
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = records(self.out)
        last = r["phases"][-1]
        self.assertIsNone(last["return_curve"])
        self.assertEqual(last["return_curve_absent"], "settle off (settle_ms = 0)")
        p = run(["show", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("return curve", p.stdout)
        p = run(["show", self.out, "--by", "workload,threads,allocator", "--metric", "rss_after_100ms_bytes",
                 "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        (g,) = json.loads(p.stdout)["groups"]
        self.assertNotIn("rss_after_100ms_bytes", g["metrics"])  # absent, not zero
        html = self.report_html()
        self.assertIn("No return curve", html)
        self.assertNotIn('id="return-curve-table"', html)
        with open(os.path.join(self.out, "timelines.jsonl")) as f:
            self.assertNotIn("return_curve", json.loads(f.readline()))
        # A folder recorded without a settle is not resumed with one.
        p = run(["run", "-a", "glibc", "--out", self.out, "--resume"] + CELLS)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("settle_ms", p.stderr)

    def test_a_bad_settle_is_exit_2_naming_the_flag_or_the_key(self):
        for bad in ("50", "-1", "60001", "1.5", "soon"):
            self.assert_usage_error(["run", "-a", "glibc"] + CELLS + ["--settle-ms", bad],
                                    "--settle-ms:", "0 (off) or", "100..60000", "'%s'" % bad)
        path = self.write("m.toml", '[matrix]\nallocators = ["glibc"]\nworkloads = ["size_mix"]\nsettle_ms = 99\n')
        self.assert_usage_error(["run", path], "m.toml:4", "settle_ms", "0 (off) or in 100..60000", "99")


if __name__ == "__main__":
    unittest.main()
