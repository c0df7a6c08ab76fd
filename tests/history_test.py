"""The results history end to end (issue 44; docs/history.md): `history add` and `history show` on
real runs, adding twice, two adds at once from two processes, refused files left as they were, and
`gate --history`, `history changes` on series of planted steps. Run by ctest with Debian's /usr/bin/python3 (standard library only: its sqlite3
module plays the other program or the newer allocmark); assertions on contents and exit codes,
never timings."""
import json
import os
import shutil
import sqlite3
import subprocess
import unittest

from e2e_test import ALLOCMARK, TempDirTest, run

MATRIX = ["-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "3", "--set", "size_mix.ops=20000"]


def make_run(tmp, name):
    out = os.path.join(tmp, name)
    p = run(["run"] + MATRIX + ["--out", out])
    assert p.returncode == 0, p.stderr
    return out


def show_json(db, *extra):
    p = run(["history", "show", db, "--format", "json", *extra])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def scaled_copy(source, folder, factor):
    """A copy of a real run's folder whose every peak_rss_bytes is `factor` times the run's: a
    planted step without running again (the records stay the run's in all else)."""
    shutil.copytree(source, folder)
    path = os.path.join(folder, "results.jsonl")
    with open(path) as f:
        recs = [json.loads(line) for line in f]
    for r in recs:
        for holder in [r] + r.get("phases", []):
            if isinstance(holder.get("peak_rss_bytes"), (int, float)):
                holder["peak_rss_bytes"] = int(holder["peak_rss_bytes"] * factor)
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    return folder


def sha(i):
    """Commit i as 40 hex digits whose short form (12) still tells commits apart: 0808...08."""
    return ("%02d" % i) * 20


def when(i):
    return "2026-01-%02dT12:00:00Z" % i


# Commit-to-commit noise of +-0.3%, not a trend: a clean series is never perfectly flat.
JITTER = [0.0, 0.003, -0.002, 0.001, -0.003, 0.002, 0.0, -0.001]


def add_series(tmp, db, source, factors, testbed="ci"):
    """Adds scaled copies of `source` under commits 1.. (one per factor), in time order."""
    for i, factor in enumerate(factors, start=1):
        folder = scaled_copy(source, os.path.join(tmp, "c%d" % i), factor * (1 + JITTER[i % len(JITTER)]))
        p = run(["history", "add", db, folder, "--commit", sha(i), "--time", when(i), "--testbed", testbed])
        assert p.returncode == 0, p.stderr


def changes_json(db, *extra):
    p = run(["history", "changes", db, "--format", "json", *extra])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def commits_in(db):
    with sqlite3.connect(db) as c:
        return sorted(row[0] for row in c.execute("SELECT commit_sha FROM runs"))


class HistoryCommands(TempDirTest):
    def test_add_then_show_gives_each_series_newest_first(self):
        first, second = make_run(self.tmp, "first"), make_run(self.tmp, "second")
        db = os.path.join(self.tmp, "history.db")
        p = run(["history", "add", db, first, "--commit", "aaaaaaa", "--time", "2026-12-01T10:00:00Z", "--testbed", "ci"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("added", p.stderr)
        p = run(["history", "add", db, second, "--commit", "bbbbbbb", "--time", "2026-12-02T10:00:00Z", "--testbed", "ci"])
        self.assertEqual(p.returncode, 0, p.stderr)

        shown = show_json(db)
        self.assertEqual(shown["schema_version"], 1)
        metrics = {s["metric"] for s in shown["series"]}
        # Every metric the model computes per phase, not a chosen few.
        for m in ("peak_rss_bytes", "end_rss_bytes", "ops_per_s", "wall_s", "minor_faults"):
            self.assertIn(m, metrics)
        peak = [s for s in shown["series"] if s["metric"] == "peak_rss_bytes"]
        self.assertTrue(peak)
        for s in peak:
            self.assertEqual((s["workload"], s["allocator"], s["threads"], s["testbed"]), ("size_mix", "glibc", 1, "ci"))
            self.assertEqual([p["commit"] for p in s["points"]], ["bbbbbbb", "aaaaaaa"])
            self.assertEqual([p["n"] for p in s["points"]], [3, 3])
            self.assertEqual(len(s["points"][0]["values"]), 3)
            self.assertLessEqual(s["points"][0]["min"], s["points"][0]["median"])

        table = run(["history", "show", db, "--metric", "peak_rss_bytes", "--workload", "size_mix"])
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("peak_rss_bytes", table.stdout)
        self.assertLess(table.stdout.index("bbbbbbb"), table.stdout.index("aaaaaaa"))
        self.assertNotIn("ops_per_s", table.stdout)

    def test_adding_the_same_folder_twice_is_a_no_op(self):
        folder = make_run(self.tmp, "once")
        db = os.path.join(self.tmp, "history.db")
        args = ["history", "add", db, folder, "--commit", "abcdef0123", "--testbed", "ci"]
        self.assertEqual(run(args).returncode, 0)
        with sqlite3.connect(db) as c:
            values = c.execute("SELECT COUNT(*) FROM metric_values").fetchone()[0]
        again = run(args)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("already holds", again.stderr)
        with sqlite3.connect(db) as c:
            self.assertEqual(c.execute("SELECT COUNT(*) FROM runs").fetchone()[0], 1)
            self.assertEqual(c.execute("SELECT COUNT(*) FROM metric_values").fetchone()[0], values)

    def test_bad_input_is_exit_2(self):
        folder = make_run(self.tmp, "f")
        db = os.path.join(self.tmp, "history.db")
        for bad, said in ((["--commit", "HEAD"], "--commit: 'HEAD' is not a commit"),
                          (["--commit", "abcdef0", "--time", "yesterday"], "--time: 'yesterday'")):
            p = run(["history", "add", db, folder, *bad])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(said, p.stderr)
        self.assertFalse(os.path.exists(db))
        missing = run(["history", "add", db, os.path.join(self.tmp, "nowhere"), "--commit", "abcdef0"])
        self.assertEqual(missing.returncode, 2)
        # The same words `show` says for the same folder.
        self.assertEqual(missing.stderr, run(["show", os.path.join(self.tmp, "nowhere")]).stderr)
        p = run(["history", "show", db])
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such history", p.stderr)


class HistoryFiles(TempDirTest):
    def test_two_adds_at_once_both_land(self):
        folders = [make_run(self.tmp, f"job{i}") for i in range(2)]
        db = os.path.join(self.tmp, "shared.db")
        # Two CI jobs on one new file: each creates, migrates and adds while the other does.
        procs = [subprocess.Popen([ALLOCMARK, "history", "add", db, folder, "--commit", sha, "--testbed", "ci"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for folder, sha in zip(folders, ("1111111", "2222222"))]
        for p in procs:
            _, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, err)
        self.assertEqual(commits_in(db), ["1111111", "2222222"])

    def test_a_newer_schema_is_refused_and_left_alone(self):
        folder = make_run(self.tmp, "f")
        db = os.path.join(self.tmp, "newer.db")
        self.assertEqual(run(["history", "add", db, folder, "--commit", "abcdef0"]).returncode, 0)
        with sqlite3.connect(db) as c:
            c.execute("PRAGMA journal_mode=DELETE")
            c.execute("PRAGMA user_version=7")
        with open(db, "rb") as f:
            before = f.read()
        for args in (["history", "add", db, folder, "--commit", "abcdef1"], ["history", "show", db]):
            p = run(args)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(db, p.stderr)
            self.assertIn("version 7", p.stderr)
            self.assertIn("up to 1", p.stderr)
        with open(db, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_a_text_file_is_refused_and_unchanged(self):
        folder = make_run(self.tmp, "f")
        notes = os.path.join(self.tmp, "notes.txt")
        with open(notes, "w") as f:
            f.write("a text file, not a history\n")
        for args in (["history", "add", notes, folder, "--commit", "abcdef0"], ["history", "show", notes]):
            p = run(args)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(notes + ": not an SQLite database", p.stderr)
        with open(notes) as f:
            self.assertEqual(f.read(), "a text file, not a history\n")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["f", "notes.txt"])

    def test_another_programs_database_is_refused(self):
        folder = make_run(self.tmp, "f")
        other = os.path.join(self.tmp, "other.db")
        with sqlite3.connect(other) as c:
            c.execute("CREATE TABLE accounts(id INTEGER)")
        p = run(["history", "add", other, folder, "--commit", "abcdef0"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("without allocmark's history tables", p.stderr)
        with sqlite3.connect(other) as c:
            self.assertEqual([r[0] for r in c.execute("SELECT name FROM sqlite_master")], ["accounts"])


class HistoryChanges(TempDirTest):
    def test_a_clean_series_has_no_change(self):
        source = make_run(self.tmp, "real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0] * 12)
        found = changes_json(db)
        self.assertEqual(found["changes"], [])
        self.assertEqual(found["metrics"], ["peak_rss_bytes"])
        self.assertEqual(found["series_too_short"], 0)
        self.assertGreaterEqual(found["series_judged"], 3)  # size_mix's phases
        table = run(["history", "changes", db])
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("no change in %d series judged" % found["series_judged"], table.stdout)

    def test_a_step_is_reported_at_its_commit_with_the_series_that_moved_with_it(self):
        source = make_run(self.tmp, "real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0] * 7 + [1.10] * 9)
        found = changes_json(db)
        self.assertEqual(len(found["changes"]), 1, json.dumps(found["changes"], indent=1))
        group = found["changes"][0]
        self.assertEqual((group["commit"], group["commit_index"], group["time"]), (sha(8), 7, when(8)))
        # Every phase's peak scaled at once: the cells moved together, one group.
        self.assertEqual(len(group["series"]), found["series_judged"])
        for s in group["series"]:
            self.assertEqual((s["from_commit"], s["to_commit"], s["metric"]), (sha(7), sha(8), "peak_rss_bytes"))
            self.assertAlmostEqual(s["relative_step"], 0.10, delta=0.01)
            self.assertLessEqual(s["ci_low"], s["relative_step"])
            self.assertGreaterEqual(s["ci_high"], s["relative_step"])
            self.assertLess(s["p"], 0.01)
        table = run(["history", "changes", db])
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("at %s (%s; branch main, testbed ci)" % (sha(8)[:12], when(8)), table.stdout)
        self.assertIn("%s..%s" % (sha(7)[:12], sha(8)[:12]), table.stdout)
        self.assertIn("stepped together", table.stdout)
        # --since: the change is at commit 8, so from 9 on there is none; from 8 on it is there.
        self.assertEqual(changes_json(db, "--since", sha(9))["changes"], [])
        self.assertEqual(len(changes_json(db, "--since", sha(8))["changes"]), 1)

    def test_short_series_are_counted_and_bad_filters_are_exit_2(self):
        source = make_run(self.tmp, "real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0] * 3)
        found = changes_json(db)
        self.assertEqual((found["series_judged"], found["changes"]), (0, []))
        self.assertGreaterEqual(found["series_too_short"], 3)
        table = run(["history", "changes", db])
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("%d series too short to judge (fewer than %d commits)" % (found["series_too_short"],
                                                                              found["min_commits"]), table.stdout)
        for extra, said in ((["--metric", "peak_rs"], "--metric: 'peak_rs' is not in"),
                            (["--branch", "nope"], "--branch: no cell of"),
                            (["--testbed", "nope"], "--testbed: no cell of"),
                            (["--since", "abcdef0"], "--since: no commit of"),
                            (["--since", "0"], "names 3 commits"),
                            (["--format", "xml"], "--format: 'xml'")):
            p = run(["history", "changes", db, *extra])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(said, p.stderr)


class GateHistory(TempDirTest):
    def test_gate_adds_the_judged_run(self):
        before = make_run(self.tmp, "before")
        baseline = os.path.join(self.tmp, "base.json")
        self.assertEqual(run(["baseline", before, "-o", baseline]).returncode, 0)
        db = os.path.join(self.tmp, "history.db")
        plain = run(["gate", baseline, before, "--phase", "fill", "--format", "json"])
        p = run(["gate", baseline, before, "--phase", "fill", "--format", "json", "--history", db, "--commit", "feedbee",
                 "--branch", "pr-7", "--testbed", "ci"])
        self.assertEqual(p.returncode, plain.returncode, p.stderr)
        # What the gate prints is unchanged; the history's line is on stderr.
        self.assertEqual(json.loads(p.stdout), json.loads(plain.stdout))
        self.assertIn("allocmark gate: added", p.stderr)
        shown = show_json(db, "--metric", "peak_rss_bytes")
        self.assertTrue(shown["series"])
        self.assertEqual({s["branch"] for s in shown["series"]}, {"pr-7"})
        self.assertEqual({s["points"][0]["commit"] for s in shown["series"]}, {"feedbee"})

    def test_creep_of_small_steps_fails_the_gate_by_the_fourth(self):
        """Five +2% steps, each within the 5% band against the baseline before it: the gate against
        the history's last stable segment fails by the fourth, saying how far and since when."""
        source = make_run(self.tmp, "real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0] * 6)
        previous = os.path.join(self.tmp, "c6")
        outcomes, tables = [], []
        for k in range(1, 6):
            baseline = os.path.join(self.tmp, "base%d.json" % k)
            self.assertEqual(run(["baseline", previous, "-o", baseline]).returncode, 0)
            folder = scaled_copy(source, os.path.join(self.tmp, "step%d" % k), 1.02 ** k)
            plain = run(["gate", baseline, folder, "--tolerance", "5%", "--format", "json"])
            self.assertEqual(plain.returncode, 0, plain.stdout)  # each step alone passes
            probe = os.path.join(self.tmp, "probe%d.db" % k)  # the same history, for the table
            shutil.copy(db, probe)
            tables.append(run(["gate", baseline, folder, "--history", probe, "--commit", sha(6 + k), "--testbed", "ci"]))
            p = run(["gate", baseline, folder, "--tolerance", "5%", "--format", "json", "--history", db,
                     "--commit", sha(6 + k), "--time", when(6 + k), "--testbed", "ci"])
            self.assertIn(p.returncode, (0, 1), p.stderr)
            self.assertIn("allocmark gate: added", p.stderr)
            outcomes.append((p.returncode, json.loads(p.stdout)))
            previous = folder
        codes = [code for code, _ in outcomes]
        self.assertEqual(codes[:2], [0, 0], codes)  # +2% and +4% are within the band
        first_fail = codes.index(1) + 1
        self.assertLessEqual(first_fail, 4, codes)
        self.assertEqual(codes[first_fail - 1:], [1] * (6 - first_fail), codes)
        verdicts = outcomes[first_fail - 1][1]["verdicts"]
        crept = [v for v in verdicts if v["verdict"] == "regressed"]
        self.assertTrue(crept, verdicts)
        for v in crept:
            self.assertRegex(v["reason"], r"^cumulative \+\d+\.\d% since " + sha(1)[:12])
        self.assertEqual([t.returncode for t in tables], codes)
        self.assertIn("cumulative +", tables[first_fail - 1].stdout)
        self.assertIn("gate: FAIL", tables[first_fail - 1].stdout)

    def test_gate_history_flags_are_checked_before_judging(self):
        before = make_run(self.tmp, "before")
        baseline = os.path.join(self.tmp, "base.json")
        self.assertEqual(run(["baseline", before, "-o", baseline]).returncode, 0)
        db = os.path.join(self.tmp, "history.db")
        for extra, said in ((["--history", db], "--history: needs --commit"),
                            (["--history", db, "--commit", "xyz"], "--commit: 'xyz' is not a commit"),
                            (["--commit", "abcdef0"], "need --history")):
            p = run(["gate", baseline, before, *extra])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(said, p.stderr)
            self.assertEqual(p.stdout, "")
        self.assertFalse(os.path.exists(db))
        notes = os.path.join(self.tmp, "notes.txt")
        with open(notes, "w") as f:
            f.write("not a history\n")
        p = run(["gate", baseline, before, "--history", notes, "--commit", "abcdef0"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(notes + ": not an SQLite database", p.stderr)
        self.assertEqual(p.stdout, "")
        with open(notes) as f:
            self.assertEqual(f.read(), "not a history\n")


if __name__ == "__main__":
    unittest.main()
