"""Hostile but ordinary input, output side (issue 21, items 4, 10, 11 and 12; docs/reliability.md):
text from records reaches a reader as text, never as markup or terminal control; the same record
read twice counts once; a folder a run is writing says so; charts take any name literally, say
why they fail in one line, and a megabyte-long name does not stall the report.

Run by ctest with Debian's /usr/bin/python3; standard library only. Most tests read hand-made or
committed fixture folders (no cell is run); the others run one tiny cell. Assertions are about
behaviour (exit codes, files, messages, records), never about timings.
"""
import csv
import io
import json
import os
import shutil
import subprocess
import unittest

from e2e_test import TempDirTest, run
from reliability_test import ONE, SMALL, alive, children_of, lines, records, wait_for

ALLOCMARK = os.environ["ALLOCMARK_BIN"]
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "results-small")

MARKUP = '<img src=x onerror=alert(1)>'
SCRIPT = '<script>alert(2)</script>'
CLEAR = "evil\x1b[2J\x1b]0;owned\x07name"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: reverses the rest of the line it is on


def fixture_copy(tmp, name="folder"):
    """A writable copy of the committed results-small folder (11 records of a 3-allocator run) with
    its summary.json (kept under golden/)."""
    dst = os.path.join(tmp, name)
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns("golden"))
    shutil.copy(os.path.join(FIXTURE, "golden", "summary.json"), dst)
    return dst


def rewrite_records(folder, change):
    """Applies change(index, record) to every record of folder/results.jsonl."""
    path = os.path.join(folder, "results.jsonl")
    with open(path) as f:
        recs = [json.loads(line) for line in f]
    for i, r in enumerate(recs):
        change(i, r)
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    return recs


def hostile_folder(tmp):
    """The fixture with an allocator named as markup, one named with terminal controls, a phase
    named as a script and a failed cell whose error is markup and control sequences."""
    folder = fixture_copy(tmp, "hostile")

    def change(i, r):
        if r["allocator"] == "jemalloc":
            r["allocator"] = MARKUP
        elif r["allocator"] == "mimalloc":
            r["allocator"] = CLEAR
        for ph in r.get("phases") or []:
            if ph["name"] == "churn":
                ph["name"] = SCRIPT
        if i == 0:
            r["status"] = "failed"
            r["error"] = "boom " + SCRIPT + " \x1b[31mred\x1b[0m"
    rewrite_records(folder, change)
    return folder


class Markup(TempDirTest):
    def test_show_markdown_and_the_report_page_escape_every_record_text(self):
        folder = hostile_folder(self.tmp)
        p = run(["show", folder, "--format", "markdown"])
        self.assertEqual(p.returncode, 0, p.stderr)
        for raw in ("<img", "<script", "\x1b"):
            self.assertNotIn(raw, p.stdout)
        self.assertIn("&lt;img src=x onerror=alert(1)&gt;", p.stdout)
        self.assertIn("&lt;script&gt;alert(2)&lt;/script&gt;", p.stdout)
        self.assertIn("boom &lt;script&gt;", p.stdout)  # the error list under the table
        # The report page escapes them as HTML.
        page = os.path.join(self.tmp, "page.html")
        p = run(["report", folder, "-o", page], timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        with open(page) as f:
            text = f.read()
        self.assertNotIn(MARKUP, text)
        self.assertNotIn(SCRIPT, text)
        self.assertIn("&lt;img src=x onerror=alert(1)&gt;", text)

    def test_compare_markdown_escapes_the_machines_description(self):
        before, after = fixture_copy(self.tmp, "before"), fixture_copy(self.tmp, "after")
        with open(os.path.join(after, "meta.json")) as f:
            meta = json.load(f)
        meta["machine"]["cpu_model"] = SCRIPT + MARKUP
        with open(os.path.join(after, "meta.json"), "w") as f:
            json.dump(meta, f)
        p = run(["compare", before, after, "--format", "markdown"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("The machines differ", p.stdout)
        self.assertNotIn("<script", p.stdout)
        self.assertNotIn("<img", p.stdout)
        self.assertIn("&lt;script&gt;", p.stdout)


class TerminalControls(TempDirTest):
    def test_show_and_status_print_no_control_sequence_from_records(self):
        folder = hostile_folder(self.tmp)
        rewrite_records(folder, lambda i, r: r.__setitem__("host", "node\x1b[2J") if i == 1 else None)
        for args in (["show", folder], ["show", folder, "--by", "allocator,host"], ["status", folder]):
            p = run(args)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertNotIn("\x1b", p.stdout + p.stderr, args)
            self.assertNotIn("\x07", p.stdout + p.stderr, args)
        p = run(["show", folder])
        self.assertIn("evil\\x1b[2J\\x1b]0;owned\\x07name", p.stdout)  # shown, not obeyed
        # CSV and JSON are data, not display: they keep the text exactly.
        groups = json.loads(run(["show", folder, "--format", "json"]).stdout)["groups"]
        self.assertIn(CLEAR, {g["allocator"] for g in groups})
        self.assertIn(SCRIPT, {g["phase"] for g in groups})
        rows = list(csv.DictReader(io.StringIO(run(["show", folder, "--format", "csv"]).stdout)))
        self.assertIn(CLEAR, {r["allocator"] for r in rows})
        self.assertIn(MARKUP, {r["allocator"] for r in rows})

    def test_the_progress_line_shows_a_programs_error_without_its_controls(self):
        # A program that fails with terminal control sequences on its stderr (the record's error).
        p = run(["run", "-a", "glibc", "-r", "1", "--out", self.out,
                 "--program", "loud=/bin/sh -c 'printf \"\\033[2J\\033]0;owned\\007 boom\" >&2; exit 3'"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(records(self.out)[0]["status"], "failed")
        self.assertNotIn("\x1b", p.stderr)
        self.assertNotIn("\x1b", p.stdout)
        self.assertIn("[1/1]", p.stderr)


    def test_a_right_to_left_override_is_shown_not_obeyed(self):
        folder = fixture_copy(self.tmp)
        name = "je" + RLO + "collam-evil"
        rewrite_records(folder, lambda i, r: r.__setitem__("allocator", name) if r["allocator"] == "jemalloc" else None)
        for fmt in ("table", "markdown"):
            p = run(["show", folder, "--format", fmt])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertNotIn(RLO, p.stdout + p.stderr, fmt)
            self.assertIn("je\\u202ecollam-evil" if fmt == "table" else "je\\\\u202ecollam-evil", p.stdout, fmt)
        # The isolates and marks too (U+2066, U+200F), in a phase name.
        rewrite_records(folder, lambda i, r: [ph.__setitem__("name", "\u2066churn\u200f") for ph in r.get("phases") or []
                                              if ph["name"] == "churn"])
        p = run(["show", folder])
        self.assertNotIn("\u2066", p.stdout)
        self.assertIn("\\u2066churn\\u200f", p.stdout)
        # JSON is data: the name as it is.
        groups = json.loads(run(["show", folder, "--format", "json"]).stdout)["groups"]
        self.assertIn(name, {g["allocator"] for g in groups})

class SameRecordTwice(TempDirTest):
    def test_records_carry_their_run_id_and_an_id_of_their_own(self):
        p = run(["run", *ONE, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["run", "-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "2", *SMALL, "--out", self.out, "--extend"])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.out, "meta.json")) as f:
            runs = json.load(f)["runs"]
        recs = records(self.out)
        self.assertEqual([r["run_id"] for r in recs], [runs[0]["run_id"], runs[1]["run_id"]])
        self.assertNotEqual(runs[0]["run_id"], runs[1]["run_id"])
        self.assertEqual(len({r["record_id"] for r in recs}), 2)
        for r in recs:
            self.assertRegex(r["run_id"], "^[0-9a-f]{32}$")

    def test_merging_a_folder_with_its_copy_counts_each_record_once(self):
        p = run(["run", *ONE, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        copy = os.path.join(self.tmp, "copy")
        shutil.copytree(self.out, copy)
        merged = os.path.join(self.tmp, "merged")
        p = run(["merge", self.out, copy, "-o", merged])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("1 record appears in more than one folder; counted once", p.stderr)
        self.assertEqual(len(lines(merged)), 1)
        # A merge merged again with one of its sources: still one.
        again = os.path.join(self.tmp, "again")
        p = run(["merge", merged, self.out, "-o", again])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(lines(again)), 1)
        # Every reader: two folders holding one record are one repetition, and it is said.
        p = run(["show", self.out, copy, "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual({g["cells"] for g in json.loads(p.stdout)["groups"]}, {1})
        self.assertIn("1 record appears in more than one folder; counted once", p.stderr)

    def test_records_of_other_cells_sharing_an_id_are_both_kept_and_said(self):
        # An id is not a record's identity alone: two repetitions given one record_id (an edit, a
        # botched copy) were "line 2 repeats line 1", and merge dropped the second (issue 41).
        p = run(["run", "-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "2", *SMALL, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        first, second = records(self.out)
        second["record_id"] = first["record_id"]
        with open(os.path.join(self.out, "results.jsonl"), "w") as f:
            f.write(json.dumps(first) + "\n" + json.dumps(second) + "\n")
        said = "1 record shares its record_id with a record of another cell or attempt"
        p = run(["show", self.out, "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual({g["cells"] for g in json.loads(p.stdout)["groups"]}, {2})  # each phase's group
        self.assertIn(said, p.stderr)
        self.assertNotIn("repeats", p.stderr)
        other = os.path.join(self.tmp, "other")
        p = run(["run", *ONE, "--out", other])
        self.assertEqual(p.returncode, 0, p.stderr)
        merged = os.path.join(self.tmp, "merged")
        p = run(["merge", self.out, other, "-o", merged])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(said, p.stderr)
        self.assertEqual(len(lines(merged)), 3, "both records of the shared id, and the other folder's")
        p = run(["show", merged, "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual({g["cells"] for g in json.loads(p.stdout)["groups"]}, {3})
        self.assertIn(said, p.stderr)

    def test_records_from_before_ids_are_the_same_record_by_content(self):
        a = fixture_copy(self.tmp, "a")  # the fixture predates record ids
        b = fixture_copy(self.tmp, "b")
        merged = os.path.join(self.tmp, "merged")
        p = run(["merge", a, b, "-o", merged])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("11 records appear in more than one folder; counted once", p.stderr)
        self.assertEqual(len(lines(merged)), 11)
        p = run(["show", a, b, "--format", "json"])
        self.assertEqual(max(g["cells"] for g in json.loads(p.stdout)["groups"]), 3)  # 3 repetitions, not 6


class FolderBeingWritten(TempDirTest):
    def test_every_reader_says_a_run_is_writing_the_folder(self):
        # Two cells: the first finishes, the second hangs until the test ends it (its timeout is far
        # beyond the five readers below, which on a loaded machine took longer than 120 s together).
        driver = subprocess.Popen([ALLOCMARK, "run", "-a", "glibc", "-w", "size_mix,fault_inject", "-t", "1", "-r", "1",
                                   *SMALL, "--set", "fault_inject.mode=hang", "--timeout", "900", "--out", self.out],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: os.path.exists(os.path.join(self.out, "results.jsonl")) and len(lines(self.out)) >= 1
                     and children_of(driver.pid), what="the hanging cell")
            notice = "a run is writing this folder (pid %d): 1 of 2 cells finished" % driver.pid
            other = fixture_copy(self.tmp, "other")
            page = os.path.join(self.tmp, "page.html")
            for args in (["show", self.out], ["status", self.out], ["compare", other, self.out],
                         ["report", self.out, "-o", page], ["plot", self.out, "--out", os.path.join(self.tmp, "charts")]):
                p = run(args, timeout=600)
                self.assertIn(notice, p.stderr, args)
                self.assertIn(p.returncode, (0, 1), args)  # the answer is still given
            with open(page) as f:
                self.assertIn('<p class="banner">' + self.out + ": " + notice, f.read())
        finally:
            workers = children_of(driver.pid)
            driver.kill()
            driver.wait()
        # The hanging worker holds the folder's lock too (on purpose: a worker that outlives its
        # driver keeps the folder marked), and dies of its driver's death a moment later.
        wait_for(lambda: not any(alive(pid) for pid in workers), what="the orphaned worker's end")
        # Once both are gone, nothing is said.
        p = run(["show", self.out])
        self.assertNotIn("a run is writing", p.stderr)


class Charts(TempDirTest):
    def test_plot_into_a_file_is_one_clear_line_before_python_runs(self):
        folder = fixture_copy(self.tmp)
        target = self.write("not-a-folder", "x")
        p = run(["plot", folder, "--out", target])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--out " + target + ": is a file, not a folder", p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        # The script alone says it in one line too.
        script = os.path.join(os.path.dirname(HERE), "plots", "allocmark_plots.py")
        p = subprocess.run(["/usr/bin/python3", script, folder, "--out", target], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertIn("is a file, not a folder", p.stderr)

    def test_names_that_look_like_math_are_drawn_as_they_are(self):
        folder = fixture_copy(self.tmp)
        rewrite_records(folder, lambda i, r: r.__setitem__("allocator", "$x^$" if r["allocator"] == "glibc" else r["allocator"]))
        p = run(["plot", folder, "--out", os.path.join(self.tmp, "charts")], timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("failed", p.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "charts", "peak_rss-size_mix.png")))

    def test_a_chart_that_fails_says_why(self):
        # A chart that cannot be written (its file's name taken by a folder) fails with its reason.
        folder = fixture_copy(self.tmp)
        charts = os.path.join(self.tmp, "charts")
        os.makedirs(os.path.join(charts, "throughput.png"))
        p = run(["plot", folder, "--out", charts], timeout=600)
        self.assertEqual(p.returncode, 1, p.stderr)
        failed = [line for line in p.stderr.splitlines() if "chart throughput failed" in line]
        self.assertEqual(len(failed), 1, p.stderr)
        self.assertRegex(failed[0], r"chart throughput failed: \S+")
        self.assertNotIn("Traceback", p.stderr)

    def test_a_megabyte_long_name_is_cut_and_the_report_finishes(self):
        folder = fixture_copy(self.tmp)
        name = "jemalloc-" + "x" * (1 << 20)
        rewrite_records(folder, lambda i, r: r.__setitem__("allocator", name) if i == 1 else None)
        out = os.path.join(self.tmp, "page.html")
        p = run(["report", folder, "-o", out], timeout=120)  # generous: before, this took minutes
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            page = f.read()
        self.assertIn('<span class="unbroken" title="' + name + '">jemalloc-xxx', page)  # whole in the tooltip
        self.assertIn("&hellip;</span>", page)
        self.assertIn("chart-peak_rss-size_mix", page)  # the charts were drawn


    def test_plot_draws_what_results_jsonl_holds_as_show_and_report_read_it(self):
        folder = fixture_copy(self.tmp)  # with its summary.json, which matches its results.jsonl
        charts = os.path.join(self.tmp, "charts")
        with open(os.path.join(folder, "summary.json")) as f:
            before = f.read()
        # results.jsonl emptied: every reader, plot included, says there is no finished cell.
        empty = fixture_copy(self.tmp, "empty")
        open(os.path.join(empty, "results.jsonl"), "w").close()
        for args in (["show", empty], ["plot", empty, "--out", charts], ["report", empty, "-o", os.path.join(self.tmp, "p.html")]):
            p = run(args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn("holds no finished cell", p.stderr, args)
        self.assertFalse(os.path.exists(charts))
        # jemalloc's records removed by hand: the charts leave it out, and summary.json is written again.
        rewrite_records(folder, lambda i, r: None)
        path = os.path.join(folder, "results.jsonl")
        with open(path) as f:
            kept = [line for line in f if '"allocator": "jemalloc"' not in line]
        with open(path, "w") as f:
            f.writelines(kept)
        p = run(["plot", folder, "--out", charts, "--only", "peak_rss", "--describe", os.path.join(self.tmp, "d.json")], timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("was written before results.jsonl last changed; writing them from it", p.stderr)
        with open(os.path.join(folder, "summary.json")) as f:
            summary = json.load(f)
        self.assertNotEqual(json.dumps(summary), before)
        self.assertEqual({g["allocator"] for g in summary["groups"]}, {"glibc", "mimalloc"})
        with open(os.path.join(self.tmp, "d.json")) as f:
            self.assertNotIn("jemalloc", f.read())
        # Drawn again with nothing changed: nothing to write, nothing said.
        p = run(["plot", folder, "--out", charts, "--only", "peak_rss"], timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("writing them", p.stderr)

# Issue 41, second round: values no measurement gives.

class ImplausibleValues(TempDirTest):
    def test_values_no_measurement_gives_stop_every_reader_naming_line_cell_and_metric(self):
        other = fixture_copy(self.tmp, "other")
        page = os.path.join(self.tmp, "page.html")
        # The fifth record is jemalloc's rep 2; phases[1] is churn.
        for field, value, metric in (("peak_rss_bytes", -5, "peak_rss_bytes"), ("peak_rss_bytes", 0, "peak_rss_bytes"),
                                     ("peak_rss_bytes", 1e300, "peak_rss_bytes"), ("ops", 1e300, "ops_per_s"),
                                     ("end_rss_bytes", -1, "end_rss_bytes")):
            folder = fixture_copy(self.tmp, "bad-%s-%s" % (field, value))
            rewrite_records(folder, lambda i, r: r["phases"][1].__setitem__(field, value) if i == 4 else None)
            where = os.path.join(folder, "results.jsonl") + ":5: cell jemalloc size_mix t1 r2, phases[1] (churn): "
            for args in (["show", folder], ["show", folder, "--format", "json"], ["compare", other, folder],
                         ["report", folder, "-o", page], ["plot", folder, "--out", os.path.join(self.tmp, "charts")],
                         ["baseline", folder, "-o", os.path.join(self.tmp, "b.json")]):
                p = run(args)
                self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
                self.assertIn(where, p.stderr, args)
                self.assertIn("is not a " + metric, p.stderr, args)
                self.assertLess(len(p.stderr), 1000, p.stderr)  # 1e300 is not written out in 300 digits
                self.assertNotIn("0" * 40, p.stdout + p.stderr)
            self.assertFalse(os.path.exists(page))
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "charts")))
        # A run into that folder stops before a cell runs, naming the line (it used to run a cell first).
        folder = fixture_copy(self.tmp, "resume")
        rewrite_records(folder, lambda i, r: r["phases"][1].__setitem__("peak_rss_bytes", -5) if i == 4 else None)
        with open(os.path.join(folder, "results.jsonl")) as f:
            before = f.read()
        p = run(["run", *ONE, "--out", folder, "--extend"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("results.jsonl:5: cell jemalloc size_mix t1 r2, phases[1] (churn): -5 is not a peak_rss_bytes", p.stderr)
        with open(os.path.join(folder, "results.jsonl")) as f:
            self.assertEqual(f.read(), before)
        # A share above one: more lock waits than acquisitions, in a node's figures too.
        folder = fixture_copy(self.tmp, "share")
        rewrite_records(folder, lambda i, r: r["phases"][0].__setitem__("contention", {"num_ops": 10, "num_wait": 11})
                        if i == 1 else None)
        p = run(["show", folder])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("results.jsonl:2: cell jemalloc size_mix t1 r1, phases[0] (fill): 1.1 is not a contended_share", p.stderr)


if __name__ == "__main__":
    unittest.main()
