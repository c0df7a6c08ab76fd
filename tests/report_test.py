"""`allocmark report` (issue 9, docs/report.md): the HTML report of each committed fixture folder,
opened in a real headless Chromium (Debian's `chromium`, installed by ci/setup.sh). Run with
Debian's /usr/bin/python3:

    cd tests && ALLOCMARK_BIN=../build/bin/allocmark /usr/bin/python3 -m unittest -v report_test

What the rendered page is checked for: every image decoded with a non-zero size, one row of the
per-phase table per summary.json group (workload x threads x allocator x phase), the
recommendation's leaders against `allocmark show`, header clicks sorting the table, the failed and timed-out cells
with their reasons, and no request of any kind leaving the page (Chromium runs behind a proxy on a
closed port; the page's resource timing and CSP violations are collected and must be empty).
Behaviour only, no timings. Chromium missing is a failure naming the package, never a skip.
"""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from plots_test import EXPECTED, FIXTURES, fixture_copy

CHARTS_FROM_RECORDS_ONLY = {"single-allocator": ["contention-size_mix.png"]}

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHROMIUM = "/usr/bin/chromium"


def allocmark_bin():
    path = os.environ.get("ALLOCMARK_BIN") or os.path.join(ROOT, "build", "bin", "allocmark")
    if not os.access(path, os.X_OK):
        raise AssertionError("the driver %s is not built (set ALLOCMARK_BIN or build in build/)" % path)
    return path


def run_allocmark(*args):
    return subprocess.run([allocmark_bin(), *args], capture_output=True, text=True, timeout=600)


# Runs first in the page (injected as the first element of <head>, before the report's own
# Content-Security-Policy takes effect, so violations of it are seen too). After `load` it inspects
# what Chromium rendered, drives the sort by clicking a header, and writes the findings as JSON into
# the DOM, which --dump-dom prints.
PROBE = r"""<script>
(function () {
  var violations = [];
  document.addEventListener("securitypolicyviolation", function (e) { violations.push(e.blockedURI + " " + e.violatedDirective); });
  function rows(id) {
    var t = document.getElementById(id);
    if (!t) return null;
    return Array.prototype.map.call(t.tBodies[0].rows, function (r) {
      return Array.prototype.map.call(r.cells, function (c) {
        return {text: c.textContent, sort: c.hasAttribute("data-sort") ? parseFloat(c.getAttribute("data-sort")) : null};
      });
    });
  }
  function headers(id) {
    var t = document.getElementById(id);
    return t ? Array.prototype.map.call(t.tHead.rows[0].cells, function (c) { return c.textContent; }) : null;
  }
  window.addEventListener("load", function () {
    var out = {};
    out.images = Array.prototype.map.call(document.images, function (img) {
      return {id: img.parentNode.id, complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
              data: img.src.indexOf("data:image/png;base64,") === 0};
    });
    out.resources = performance.getEntriesByType("resource").map(function (e) { return e.name; });
    out.violations = violations;
    out.phase_headers = headers("phase-table");
    out.phases = rows("phase-table");
    out.verdict_headers = headers("recommendation-table");
    out.verdict = rows("recommendation-table");
    out.failures = rows("failure-table");
    out.skipped = Array.prototype.map.call(document.querySelectorAll("ul.skipped li"), function (li) { return li.textContent; });
    // The text a reader sees after opening every folded section (machine, matrix, every phase).
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
    out.text = document.body.innerText;
    // Sort the per-phase table by peak RSS: a click ascending, a second descending.
    var table = document.getElementById("phase-table");
    if (table) {
      var names = headers("phase-table"), column = names.indexOf("peak RSS MiB");
      var th = table.tHead.rows[0].cells[column];
      th.click();
      out.sorted_ascending = {state: th.getAttribute("aria-sort"), rows: rows("phase-table")};
      th.click();
      out.sorted_descending = {state: th.getAttribute("aria-sort"), rows: rows("phase-table")};
      out.sort_column = column;
    }
    var pre = document.createElement("pre");
    pre.id = "probe-result";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  });
})();
</script>"""


def render(test, html_path, tmp):
    """The report as Chromium rendered it: the probe's findings."""
    if not os.access(CHROMIUM, os.X_OK):
        raise AssertionError("%s not found: install Debian's package `chromium` (ci/setup.sh does)" % CHROMIUM)
    with open(html_path, encoding="utf-8") as f:
        page = f.read()
    test.assertEqual(page.count("<head>"), 1)
    probed = os.path.join(tmp, "probed-" + os.path.basename(os.path.dirname(html_path)) + ".html")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(page.replace("<head>", "<head>" + PROBE, 1))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + os.path.join(tmp, "chromium-profile"),
         # Anything the page fetched would go through a proxy on a closed port and fail.
         "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
         "--virtual-time-budget=10000", "--enable-logging=stderr", "--dump-dom", "file://" + probed],
        capture_output=True, text=True, timeout=120)
    test.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
    m = re.search(r'<pre id="probe-result">(.*?)</pre>', proc.stdout, re.S)
    console = "\n".join(l for l in proc.stderr.splitlines() if "CONSOLE" in l)
    test.assertIsNotNone(m, "the probe wrote nothing (page not loaded, or a script error):\n" + console)
    import html as htmllib
    return json.loads(htmllib.unescape(m.group(1)))


def external_references(page):
    """Every place in the markup that could load something from elsewhere (attribute names whole:
    a workload parameter such as fill_fraction=0.9 is text, not an action= attribute)."""
    found = []
    found += re.findall(r"https?://[^\s\"'<>]+", page)
    found += [s for s in re.findall(r"""(?<![\w-])(?:src|href|action|poster|srcset)\s*=\s*["']?([^"'\s>]+)""", page, re.I)
              if not s.startswith("data:") and not s.startswith("#")]
    found += re.findall(r"url\(\s*['\"]?(?!data:)[^)]*\)", page, re.I)
    found += re.findall(r"@import[^;]*", page, re.I)
    found += re.findall(r"""["'(]\s*//[a-z0-9.-]+""", page, re.I)  # protocol-relative
    return found


def summary_groups(folder):
    proc = run_allocmark("show", folder, "--format", "json")
    if proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return json.loads(proc.stdout)["groups"]


def all_failed_copy(tmp):
    """results-small with only its failed and timed-out cells: a run where nothing finished ok."""
    dst = os.path.join(tmp, "all-failed")
    os.makedirs(dst)
    shutil.copy(os.path.join(FIXTURES, "results-small", "meta.json"), dst)
    with open(os.path.join(FIXTURES, "results-small", "results.jsonl")) as f, \
            open(os.path.join(dst, "results.jsonl"), "w") as out:
        for line in f:
            if json.loads(line)["status"] != "ok":
                out.write(line)
    return dst


def not_ok_records(folder):
    with open(os.path.join(folder, "results.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["status"] != "ok"]


class Rendered(unittest.TestCase):
    """Each fixture's report, generated by the driver and rendered by Chromium."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="allocmark-report-")
        cls.folders, cls.pages, cls.procs = {}, {}, {}
        for name in list(EXPECTED) + ["all-failed"]:
            folder = all_failed_copy(cls.tmp) if name == "all-failed" else fixture_copy(name, cls.tmp)
            cls.folders[name] = folder
            cls.procs[name] = run_allocmark("report", folder)
        cls.rendered = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def page(self, name):
        proc = self.procs[name]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        path = os.path.join(self.folders[name], "report.html")
        self.assertEqual(proc.stdout.strip(), path, "the report's path is printed")
        if name not in self.rendered:
            self.rendered[name] = render(self, path, self.tmp)
        return self.rendered[name]

    def test_every_chart_is_embedded_and_decoded(self):
        for name, (charts, skipped) in EXPECTED.items():
            with self.subTest(fixture=name):
                out = self.page(name)
                # The report draws what results.jsonl holds (the model renders the summaries anew):
                # single-allocator's committed summary.json predates its records' context-switch
                # figure, which gives it a contention chart that plots_test's summary-only run lacks.
                charts = charts + CHARTS_FROM_RECORDS_ONLY.get(name, [])
                skipped = [k for k in skipped if "%s-" % k not in "".join(CHARTS_FROM_RECORDS_ONLY.get(name, []))]
                self.assertEqual(sorted(i["id"] for i in out["images"]),
                                 sorted("chart-" + os.path.splitext(c)[0] for c in charts))
                for img in out["images"]:
                    self.assertTrue(img["data"], img)
                    self.assertTrue(img["complete"], img)
                    self.assertGreater(img["width"], 200, img)
                    self.assertGreater(img["height"], 200, img)
                kinds = sorted({s.split(":")[0] for s in out["skipped"]})
                # No fixture has per-node figures: chart 6's per-node view and the placement chart
                # are skipped, each saying why.
                self.assertEqual(kinds, sorted(set(skipped) | {"contention per NUMA node", "placement"}), out["skipped"])
                for s in out["skipped"]:
                    self.assertGreater(len(s.split(":", 1)[1].strip()), 10, "no reason: " + s)

    def test_one_phase_row_per_summary_group(self):
        for name in list(EXPECTED) + ["all-failed"]:
            with self.subTest(fixture=name):
                out = self.page(name)
                groups = summary_groups(self.folders[name])
                self.assertEqual(out["phase_headers"][:4], ["workload", "threads", "allocator", "phase"])
                got = sorted((r[0]["text"], int(r[1]["text"]), r[2]["text"], r[3]["text"]) for r in out["phases"])
                want = sorted((g["workload"], g["threads"], g["allocator"], g["phase"]) for g in groups)
                self.assertEqual(got, want)
                # The medians are the model's: peak RSS of each row against show's json.
                column = out["phase_headers"].index("peak RSS MiB")
                by_key = {(g["workload"], g["threads"], g["allocator"], g["phase"]): g for g in groups}
                for r in out["phases"]:
                    g = by_key[(r[0]["text"], int(r[1]["text"]), r[2]["text"], r[3]["text"])]
                    peak = g.get("metrics", {}).get("peak_rss_bytes")
                    if peak:
                        self.assertEqual(r[column]["sort"], peak["median"])
                        self.assertIn("%.1f" % (peak["median"] / 2**20), r[column]["text"])
                    else:
                        self.assertIsNone(r[column]["sort"])

    def test_clicking_a_header_sorts_the_table(self):
        for name in ("threads-sweep", "results-small"):
            with self.subTest(fixture=name):
                out = self.page(name)
                column = out["sort_column"]
                for key, state, ordered in (("sorted_ascending", "ascending", lambda v: v == sorted(v)),
                                            ("sorted_descending", "descending", lambda v: v == sorted(v, reverse=True))):
                    rows = out[key]["rows"]
                    self.assertEqual(out[key]["state"], state)
                    self.assertEqual(len(rows), len(out["phases"]))
                    values = [r[column]["sort"] for r in rows if r[column]["sort"] is not None]
                    self.assertGreater(len(set(values)), 2)
                    self.assertTrue(ordered(values), values)
                    # Rows without a figure (failed cells) stay after the measured ones.
                    flags = [r[column]["sort"] is None for r in rows]
                    self.assertEqual(flags, sorted(flags))
                    self.assertNotEqual([r[column]["sort"] for r in out["phases"]], [r[column]["sort"] for r in rows],
                                        "the order did not change")

    def test_verdict_names_the_leader_the_model_computes(self):
        for name in ("results-small", "threads-sweep", "variants"):
            with self.subTest(fixture=name):
                out = self.page(name)
                proc = run_allocmark("show", self.folders[name], "--by", "workload,threads,allocator", "--format", "json")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                groups = [g for g in json.loads(proc.stdout)["groups"] if g.get("metrics")]
                headers = out["verdict_headers"]
                col = {h: headers.index(h) for h in ("workload", "threads", "figure", "leader", "lead", "the others")}
                checked = 0
                for metric, figure in (("peak_rss_bytes", "peak RSS"), ("rss_above_idle_over_live", "RSS-idle/live")):
                    for r in out["verdict"]:
                        if r[col["figure"]]["text"] != figure or r[col["leader"]]["text"] == "-":
                            continue
                        mine = [g for g in groups if g["workload"] == r[col["workload"]]["text"]
                                and g["threads"] == int(r[col["threads"]]["text"]) and metric in g["metrics"]]
                        ranked = sorted(mine, key=lambda g: g["metrics"][metric]["median"])
                        self.assertTrue(r[col["leader"]]["text"].startswith(ranked[0]["allocator"]), r)
                        self.assertTrue(r[col["the others"]]["text"].startswith(ranked[1]["allocator"] + " +"), r)
                        a, b = ranked[0]["metrics"][metric]["median"], ranked[1]["metrics"][metric]["median"]
                        self.assertAlmostEqual(r[col["lead"]]["sort"], b / a - 1, places=9)
                        checked += 1
                self.assertGreaterEqual(checked, 1)

    def test_failed_and_timed_out_cells_with_their_reasons(self):
        for name in ("results-small", "all-failed"):
            with self.subTest(fixture=name):
                out = self.page(name)
                records = not_ok_records(self.folders[name])
                self.assertEqual({r["status"] for r in records}, {"failed", "timeout"})
                rows = out["failures"]
                self.assertIsNotNone(rows, "no table of failed cells")
                got = sorted((r[2]["text"], r[5]["text"], r[6]["text"]) for r in rows)
                want = sorted((r["allocator"], r["status"], r["error"]) for r in records)
                self.assertEqual(got, want)

    def test_a_run_where_every_cell_failed_says_so(self):
        out = self.page("all-failed")
        self.assertIn("Every cell failed", out["text"])
        self.assertEqual(out["images"], [])
        self.assertIn("No recommendation", out["text"])
        self.assertIn("no chart", out["text"].lower())

    def test_machine_and_matrix_from_meta_json(self):
        for name in EXPECTED:
            with self.subTest(fixture=name):
                out = self.page(name)
                with open(os.path.join(self.folders[name], "meta.json")) as f:
                    meta = json.load(f)
                for value in (meta["machine"]["cpu_model"], meta["machine"]["kernel"], meta["machine"]["glibc_version"],
                              meta["machine"]["thp_enabled"]):
                    self.assertIn(value, out["text"])
                for a in meta["allocators"]:
                    self.assertIn(a["name"], out["text"])
                    self.assertIn(a["version"], out["text"])

    def test_nothing_is_requested_from_anywhere(self):
        for name in list(EXPECTED) + ["all-failed"]:
            with self.subTest(fixture=name):
                out = self.page(name)
                self.assertEqual(out["resources"], [])
                self.assertEqual(out["violations"], [])
                with open(os.path.join(self.folders[name], "report.html"), encoding="utf-8") as f:
                    self.assertEqual(external_references(f.read()), [])


class BrokenChart(unittest.TestCase):
    """A chart that fails to draw: the report is still written, names it, and exits 1."""

    def test_failed_chart_is_named_and_exit_1(self):
        tmp = tempfile.mkdtemp(prefix="allocmark-report-broken-")
        try:
            plots = os.path.join(tmp, "plots")
            shutil.copytree(os.path.join(ROOT, "plots"), plots)
            with open(os.path.join(plots, "chart_contention.py"), "a") as f:
                f.write("\n\ndef draw(run, opts, out_dir, fmt):\n    raise RuntimeError('planted failure')\n")
            folder = fixture_copy("threads-sweep", tmp)
            proc = subprocess.run([allocmark_bin(), "report", folder], capture_output=True, text=True, timeout=600,
                                  env=dict(os.environ, ALLOCMARK_PLOTS_DIR=plots))
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn("planted failure", proc.stderr)
            out = render(self, os.path.join(folder, "report.html"), tmp)
            self.assertIn("Charts that failed to draw", out["text"])
            self.assertIn("chart contention failed: planted failure", out["text"])
            ids = [i["id"] for i in out["images"]]
            self.assertNotIn("chart-contention", ids)
            self.assertIn("chart-scaling-size_mix", ids)  # the others are still there
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Probe(unittest.TestCase):
    """The checks above can fail: a page that fetches from elsewhere or has a broken image is caught."""

    def test_an_external_image_and_stylesheet_are_caught(self):
        tmp = tempfile.mkdtemp(prefix="allocmark-report-probe-")
        try:
            folder = os.path.join(tmp, "bad")
            os.makedirs(folder)
            path = os.path.join(folder, "report.html")
            with open(path, "w") as f:
                f.write('<!DOCTYPE html><html><head><link rel="stylesheet" href="https://example.com/a.css">'
                        '</head><body><figure id="x"><img src="http://example.com/x.png"></figure>'
                        '<figure id="y"><img src="data:image/png;base64,AAAA"></figure></body></html>')
            out = render(self, path, tmp)
            self.assertEqual(sorted(out["resources"]), ["http://example.com/x.png", "https://example.com/a.css"])
            self.assertEqual([i["width"] for i in out["images"]], [0, 0])
            with open(path) as f:
                self.assertEqual(len(external_references(f.read())), 4)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class BadInput(unittest.TestCase):
    """Exit 2 with a clear message, and no file left behind."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="allocmark-report-bad-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assert_refused(self, args, words, leftovers_in):
        before = {d: sorted(os.listdir(d)) for d in leftovers_in}
        proc = run_allocmark("report", *args)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        for w in words:
            self.assertIn(w, proc.stderr)
        self.assertEqual(proc.stdout, "")
        for d in leftovers_in:
            self.assertEqual(sorted(os.listdir(d)), before[d], "files left behind in " + d)

    def test_missing_folder(self):
        self.assert_refused([os.path.join(self.tmp, "nope")], ["nope", "no such folder"], [self.tmp])

    def test_not_a_results_folder(self):
        self.assert_refused([self.tmp], [self.tmp, "not a results folder"], [self.tmp])

    def test_empty_results_file(self):
        open(os.path.join(self.tmp, "results.jsonl"), "w").close()
        self.assert_refused([self.tmp], ["no finished cell"], [self.tmp])

    def test_unwritable_or_impossible_output(self):
        folder = fixture_copy("single-allocator", self.tmp)
        locked = os.path.join(self.tmp, "locked")
        os.makedirs(locked)
        os.chmod(locked, 0o555)
        cases = [([folder, "-o", os.path.join(self.tmp, "missing", "r.html")], ["does not exist"]),
                 ([folder, "-o", self.tmp], ["is a folder"])]
        if os.geteuid() != 0:  # root writes anywhere: only the kernel's refusal below applies to it
            cases.append(([folder, "-o", os.path.join(locked, "r.html")], ["not writable"]))
        for args, words in cases:
            with self.subTest(args=args):
                self.assert_refused(args, words, [self.tmp, folder, locked])
        # A path the kernel refuses at write time even for root: a file under /proc.
        self.assert_refused([folder, "-o", "/proc/allocmark-report.html"], ["/proc/allocmark-report.html"],
                            [self.tmp, folder])


if __name__ == "__main__":
    unittest.main()


class PageReporting(unittest.TestCase):
    """A folder whose machine handed free memory to its hypervisor (meta.json machine.free_page_reporting,
    docs/benchmarks.md "Free page reporting") gets the note on times under the header and a line in the
    machine's facts, and `show` and `compare` a note on stderr; one whose machine did not, or an older
    folder without the field, gets none of them."""

    def test_the_note_follows_the_machines_field(self):
        with tempfile.TemporaryDirectory(prefix="allocmark-reporting-") as tmp:
            for state in ("active", "inactive", "absent"):
                with self.subTest(state=state):
                    folder = fixture_copy("single-allocator", tempfile.mkdtemp(dir=tmp))
                    meta_path = os.path.join(folder, "meta.json")
                    with open(meta_path) as f:
                        meta = json.load(f)
                    self.assertNotIn("free_page_reporting", meta["machine"])  # a folder from before the field
                    if state != "absent":
                        meta["machine"]["free_page_reporting"] = (
                            {"active": True, "block_bytes": 2 << 20} if state == "active" else {"active": False})
                    with open(meta_path, "w") as f:
                        json.dump(meta, f)
                    proc = run_allocmark("report", folder)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    with open(os.path.join(folder, "report.html")) as f:
                        page = f.read()
                    noted = "Times: the machine these cells ran on hands memory that stays free for about 2 s back to its hypervisor" in page
                    listed = "active, blocks of 2048 KiB and up" in page
                    self.assertEqual((noted, listed), (state == "active", state == "active"))
                    # show and compare, the other readers of times, say it on stderr, naming the folder;
                    # compare against a folder without it too, in either order.
                    plain = fixture_copy("single-allocator", tempfile.mkdtemp(dir=tmp))
                    for command in (["show", folder], ["compare", folder, plain], ["compare", plain, folder]):
                        proc = run_allocmark(*command)
                        self.assertEqual(proc.returncode, 0, proc.stderr)
                        self.assertEqual("allocmark: note on time (%s): the machine these cells ran on hands memory" % folder in proc.stderr,
                                         state == "active", (command, proc.stderr))
                        self.assertNotIn("note on time", proc.stdout)
                    self.assertNotIn("note on time", run_allocmark("show", plain).stderr)


class Versions(unittest.TestCase):
    """Releases of one allocator (issue 43, docs/report.md "Versions"): a real seed-004 folder
    (tests/fixtures/versions: insert_phases under jemalloc 4.4.0, 5.0.1, 5.2.1, 5.2.1:bg, 5.3.1 and
    Debian's jemalloc, 2 repetitions each) gets a section with the versions in version order and the
    change from each to the one before, and a version chart; one without releases gets neither."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="allocmark-versions-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def report(self, folder):
        proc = run_allocmark("report", folder)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(folder, "report.html")) as f:
            return f.read()

    def section(self, page):
        start = page.find('id="versions"')
        self.assertGreater(start, 0, "no Versions section")
        return page[start:page.find("<h2", start)]

    def test_versions_in_version_order_whatever_the_file_order(self):
        folder = fixture_copy("versions", tempfile.mkdtemp(dir=self.tmp))
        results = os.path.join(folder, "results.jsonl")
        with open(results) as f:
            lines = f.readlines()
        # Newest first in the file: the section still reads 4.4.0 -> 5.3.1.
        with open(results, "w") as f:
            f.writelines(reversed(lines))
        page = self.report(folder)
        section = self.section(page)
        for table in ("versions-jemalloc-peak_rss_bytes", "versions-jemalloc-ops_per_s"):
            start = section.find('id="%s"' % table)
            self.assertGreater(start, 0, table)
            head = section[start:section.find("</thead>", start)]
            headers = re.findall(r"<th(?:\s[^>]*)?>([^<]*)", head)
            self.assertEqual(headers, ["workload", "threads", "phase", "4.4.0", "5.0.1", "5.2.1", "5.3.1"], head)
        # :bg ran in one release only, Debian's jemalloc in none: neither is a line of versions.
        self.assertNotIn("jemalloc:bg:", section)
        # Each version after the first carries its change from the one before.
        body = section[section.find("versions-jemalloc-peak_rss_bytes"):]
        row = body[body.find("<tr", body.find("<tbody")):body.find("</tr>", body.find("<tbody"))]
        self.assertEqual(len(re.findall(r"[+-]\d+\.\d%", row)), 3, row)
        self.assertIn('href="#versions"', page, "the contents link to the section")

    def test_version_chart_in_version_order(self):
        folder = fixture_copy("versions", tempfile.mkdtemp(dir=self.tmp))
        out, describe = os.path.join(self.tmp, "charts"), os.path.join(self.tmp, "charts.json")
        proc = run_allocmark("plot", folder, "--only", "versions", "--out", out, "--describe", describe)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(describe) as f:
            chart = json.load(f)["charts"]["versions-jemalloc.png"]
        self.assertEqual({tuple(p["info"]["versions"]) for p in chart["panels"]}, {("4.4.0", "5.0.1", "5.2.1", "5.3.1")})
        self.assertIn("chart-versions-jemalloc", self.report(folder))

    def test_no_section_without_releases(self):
        folder = fixture_copy("variants", tempfile.mkdtemp(dir=self.tmp))
        page = self.report(folder)
        self.assertNotIn('id="versions', page[:page.find('id="charts"')], "no Versions section")
        self.assertNotIn('id="chart-versions-', page, "no version chart")

    def two_runs(self):
        """The fixture as two runs: the first ran 5.2.1, 5.2.1:bg, 5.3.1 and Debian's jemalloc, the
        second the older 4.4.0 and 5.0.1; and the folder `allocmark merge` makes of them."""
        tmp = tempfile.mkdtemp(dir=self.tmp)
        source = os.path.join(FIXTURES, "versions")
        runs = {"newer": [], "older": []}
        with open(os.path.join(source, "results.jsonl")) as f:
            for line in f:
                older = json.loads(line)["allocator"] in ("jemalloc@4.4.0", "jemalloc@5.0.1")
                runs["older" if older else "newer"].append(line)
        folders = []
        for name in ("newer", "older"):
            folder = os.path.join(tmp, name)
            os.mkdir(folder)
            shutil.copy(os.path.join(source, "meta.json"), folder)
            with open(os.path.join(folder, "results.jsonl"), "w") as f:
                f.writelines(runs[name])
            folders.append(folder)
        merged = os.path.join(tmp, "merged")
        proc = run_allocmark("merge", *folders, "-o", merged)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return folders, merged

    @staticmethod
    def releases_in(allocators):
        """The releases among `allocators`, each once, in the order first listed (Debian's
        jemalloc, not a release, keeps its own place and is left out)."""
        out = []
        for a in allocators:
            if "@" in a and a not in out:
                out.append(a)
        return out

    def test_show_summary_and_gate_list_releases_in_version_order_whatever_the_runs_order(self):
        folders, merged = self.two_runs()
        in_order = ["jemalloc@4.4.0", "jemalloc@5.0.1", "jemalloc@5.2.1", "jemalloc@5.2.1:bg", "jemalloc@5.3.1"]
        for name, args in (("merged folder", [merged]), ("two folders read together", folders)):
            with self.subTest(name):
                proc = run_allocmark("show", *args, "--format", "csv")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                rows = list(csv.DictReader(io.StringIO(proc.stdout)))
                self.assertEqual(self.releases_in(r["allocator"] for r in rows), in_order, proc.stdout[:2000])
        with open(os.path.join(merged, "summary.json")) as f:
            groups = json.load(f)["groups"]
        self.assertEqual(self.releases_in(g["allocator"] for g in groups), in_order)
        # The version chart keeps summary.json's order.
        describe = os.path.join(os.path.dirname(merged), "charts.json")
        proc = run_allocmark("plot", merged, "--only", "versions", "--out", describe + ".d", "--describe", describe)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(describe) as f:
            panels = json.load(f)["charts"]["versions-jemalloc.png"]["panels"]
        self.assertEqual({tuple(p["info"]["versions"]) for p in panels}, {("4.4.0", "5.0.1", "5.2.1", "5.3.1")})
        baseline = os.path.join(os.path.dirname(merged), "baseline.json")
        proc = run_allocmark("baseline", merged, "-o", baseline)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # Two repetitions are too few to judge: every verdict is "not comparable" (exit 2), listed all the same.
        proc = run_allocmark("gate", baseline, merged, "--format", "json")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        verdicts = json.loads(proc.stdout)["verdicts"]
        self.assertEqual({v["verdict"] for v in verdicts}, {"not comparable"})
        self.assertEqual(self.releases_in(v["allocator"] for v in verdicts), in_order)
