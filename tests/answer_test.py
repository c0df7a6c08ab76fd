"""The answer first (issue 23): one recommendation, computed once in C++ (harness/results/
recommendation.h), on the report's first screen, at the end of `allocmark run` and in `advise`.

The page is rendered by Debian's headless Chromium at the widths a reader uses (1400 and 900 px);
advise runs on two planted programs built here: one whose peak RSS differs by backend (2 M
16-byte blocks: glibc's chunks are 32 bytes, jemalloc's size class 16) and one whose memory comes
from mmap alone, where no allocator can make a difference. Run with ALLOCMARK_BIN set (ctest does).
"""
import html as htmllib
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from e2e_test import ALLOCMARK, SMALL, TempDirTest, run
from plots_test import fixture_copy
from report_test import CHROMIUM

HERE = os.path.dirname(os.path.abspath(__file__))

# Runs in the page after load: where the recommendation sits, whether anything is wider than the
# window, and the recommendation table's cells; written into the DOM for --dump-dom.
PROBE = r"""<script>
window.addEventListener("load", function () {
  var out = {width: window.innerWidth, height: window.innerHeight,
             scroll_width: document.documentElement.scrollWidth};
  function top(id) { var e = document.getElementById(id); return e ? e.getBoundingClientRect().top + window.scrollY : null; }
  out.recommendation_top = top("recommendation");
  out.table_top = top("recommendation-table");
  var t = document.getElementById("recommendation-table");
  if (t) {
    var first = t.tBodies[0].rows[0];
    out.first_row_bottom = first ? first.getBoundingClientRect().bottom + window.scrollY : null;
    out.headers = Array.prototype.map.call(t.tHead.rows[0].cells, function (c) { return c.textContent; });
    out.rows = Array.prototype.map.call(t.tBodies[0].rows, function (r) {
      return Array.prototype.map.call(r.cells, function (c) { return c.textContent; });
    });
  }
  out.machine_is_folded = !!document.querySelector("details#machine:not([open])");
  out.phases_are_folded = !!document.querySelector("details#phases:not([open])");
  // Elements that stick out of the window on the right: what a reader would have to scroll to.
  out.overflowing = [];
  document.querySelectorAll("body *").forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > window.innerWidth + 1 && !e.closest(".table-box"))
      out.overflowing.push(e.tagName + (e.id ? "#" + e.id : "") + " " + Math.round(r.right));
  });
  var pre = document.createElement("pre");
  pre.id = "probe-result";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def render(test, page_path, tmp, width, height=1000, probe=PROBE):
    """What Chromium laid out for the page at this window size (the probe's findings: a script that
    writes its JSON into <pre id="probe-result">)."""
    test.assertTrue(os.access(CHROMIUM, os.X_OK), "%s not found: install Debian's package `chromium`" % CHROMIUM)
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    probed = os.path.join(tmp, "probed-%d.html" % width)
    with open(probed, "w", encoding="utf-8") as f:
        f.write(page.replace("<head>", "<head>" + probe, 1))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--user-data-dir=" + os.path.join(tmp, "chromium-%d" % width), "--window-size=%d,%d" % (width, height),
         "--virtual-time-budget=10000", "--dump-dom", "file://" + probed],
        capture_output=True, text=True, timeout=120)
    test.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
    m = re.search(r'<pre id="probe-result">(.*?)</pre>', proc.stdout, re.S)
    test.assertIsNotNone(m, "the probe wrote nothing (page not loaded, or a script error)")
    return json.loads(htmllib.unescape(m.group(1)))


class FirstScreen(unittest.TestCase):
    """The report of a committed fixture (three thread counts, two allocators, 3 repetitions)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="allocmark-answer-")
        cls.folder = fixture_copy("threads-sweep", cls.tmp)
        cls.proc = subprocess.run([ALLOCMARK, "report", cls.folder], capture_output=True, text=True, timeout=600)
        cls.page = os.path.join(cls.folder, "report.html")
        cls.laid_out = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)

    def layout(self, width):
        """The page's layout at this window width, rendered once for the class: the page, the probe
        and the window are the same for every test that reads it."""
        if width not in self.laid_out:
            self.laid_out[width] = render(self, self.page, self.tmp, width)
        return self.laid_out[width]

    def test_the_recommendation_is_inside_the_first_viewport_at_1400px(self):
        out = self.layout(1400)
        self.assertEqual(out["width"], 1400)
        self.assertIsNotNone(out["recommendation_top"], "no element with id=recommendation")
        self.assertIsNotNone(out.get("first_row_bottom"), "the recommendation table has no row")
        self.assertLess(out["first_row_bottom"], out["height"], out)
        # What it rests on comes after, folded.
        self.assertTrue(out["machine_is_folded"] and out["phases_are_folded"], out)

    def test_nothing_overflows_horizontally_at_900px(self):
        out = self.layout(900)
        self.assertEqual(out["width"], 900)
        self.assertLessEqual(out["scroll_width"], out["width"], out["overflowing"])
        self.assertEqual(out["overflowing"], [])

    def test_the_recommendation_agrees_with_show(self):
        out = self.layout(1400)
        proc = subprocess.run([ALLOCMARK, "show", self.folder, "--by", "workload,threads,allocator", "--format", "json"],
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        groups = json.loads(proc.stdout)["groups"]
        col = {h: out["headers"].index(h) for h in ("workload", "threads", "figure", "leader", "lead", "the others")}
        checked = 0
        for figure, metric in (("peak RSS", "peak_rss_bytes"), ("held RSS (end)", "end_rss_bytes")):
            for row in out["rows"]:
                if row[col["figure"]] != figure:
                    continue
                mine = sorted((g for g in groups if g["workload"] == row[col["workload"]]
                               and g["threads"] == int(row[col["threads"]]) and metric in g.get("metrics", {})),
                              key=lambda g: g["metrics"][metric]["median"])
                self.assertTrue(row[col["leader"]].startswith(mine[0]["allocator"]), (row, mine[0]))
                lead = mine[1]["metrics"][metric]["median"] / mine[0]["metrics"][metric]["median"] - 1
                self.assertEqual(row[col["lead"]], "%.1f%%" % (100 * lead), row)
                self.assertIn(mine[1]["allocator"], row[col["the others"]])
                checked += 1
        self.assertEqual(checked, 6)  # 3 thread counts x 2 figures
        # One unit per column: the lead is a percentage on every row.
        for row in out["rows"]:
            self.assertRegex(row[col["lead"]], r"^(\d+\.\d%|-)$", row)


class TerminalSummary(TempDirTest):
    def test_run_ends_with_the_answer_per_workload_not_every_phase(self):
        p = run(["run", "-a", "glibc,jemalloc", "-w", "size_mix", "-t", "1", "-r", "2", *SMALL, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("Recommendation", p.stdout)
        self.assertIn("size_mix, 1 thread, 2 repetitions", p.stdout)
        lines = p.stdout.splitlines()
        peak = [l for l in lines if l.strip().startswith("peak RSS")]
        self.assertEqual(len(peak), 1, p.stdout)
        self.assertRegex(peak[0], r"(glibc|jemalloc) [\d.]+ MiB  (clear, by|within noise)")
        self.assertRegex(peak[0], r"\| (glibc|jemalloc) \+")
        self.assertIn("time (geomean of", p.stdout)
        # Not the per-phase table: size_mix's phases are named nowhere.
        for phase in ("fill", "churn", "release"):
            self.assertNotRegex(p.stdout, r"\b%s\b" % phase)
        self.assertIn("allocmark show " + self.out, p.stdout)
        # Where the machine hands free memory to its hypervisor (meta.json says which), the answer's
        # times carry a note on cell order; elsewhere no such note.
        with open(os.path.join(self.out, "meta.json")) as f:
            reporting = json.load(f)["machine"]["free_page_reporting"]
        self.assertIsInstance(reporting["active"], bool)
        if reporting["active"]:
            self.assertIn("Note on time: the machine these cells ran on hands memory", p.stdout)
        else:
            self.assertNotIn("Note on time", p.stdout)


class Advise(TempDirTest):
    @classmethod
    def setUpClass(cls):
        cls.bin_dir = tempfile.mkdtemp(prefix="allocmark-planted-")
        cls.planted = os.path.join(cls.bin_dir, "planted_rss")
        subprocess.run(["cc", "-O2", "-o", cls.planted, os.path.join(HERE, "programs", "planted_rss.c")], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.bin_dir, ignore_errors=True)

    def advise(self, mode):
        p = run(["advise", "--reps", "3", "--allocators", "glibc,jemalloc,jemalloc:bg", "--no-report", "--out", self.out,
                 "--", self.planted, mode])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # advise's own recommendation, once: not also the one `run` ends with.
        self.assertNotIn("Recommendation: medians over ok repetitions", p.stdout)
        self.assertEqual(p.stdout.count("=> "), 1, p.stdout)
        return p.stdout

    def test_a_backend_that_holds_less_is_recommended_with_its_setting(self):
        out = self.advise("small-blocks")
        # The backends' real spread, with how sure.
        self.assertRegex(out, r"backends by peak RSS: jemalloc [\d.]+ MiB, glibc [\d.]+ MiB \+\d+\.\d% \(clear\)")
        # jemalloc, or its variant where the variant's repetitions were all faster: a sub-second
        # program's wall time on a shared machine, which this test does not assert (a loaded clean
        # clone once had jemalloc:bg 4.9% faster in every repetition, and advise rightly took it).
        chosen = re.search(r"=> use (jemalloc(?::bg)?): peak RSS ", out)
        self.assertIsNotNone(chosen, out)
        self.assertRegex(out, r"\n  setting: LD_PRELOAD=\S*libjemalloc\.so\.2( MALLOC_CONF=background_thread:true)?\n")
        if chosen.group(1) == "jemalloc:bg":
            self.assertIn("variant jemalloc:bg beats jemalloc on wall time", out)
        # The variant's purging changes nothing this program holds: it never beats jemalloc on memory.
        self.assertNotRegex(out, r"variant jemalloc:bg beats jemalloc on (peak|held) RSS")
        # Every comparing line says how sure it is.
        for line in out.splitlines():
            if line.startswith("  backends by"):
                self.assertRegex(line, r"\((clear|within noise|one repetition)\)$", line)

    def test_nothing_to_gain_keeps_the_default(self):
        out = self.advise("mmap-only")
        self.assertIn("=> keep the default (glibc)", out)
        self.assertIn("setting: none", out)
        self.assertNotIn("=> use", out)
