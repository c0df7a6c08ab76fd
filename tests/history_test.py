"""The results history end to end (issue 44; docs/history.md): `history add` and `history show` on
real runs, adding twice, two adds at once from two processes, refused files left as they were, and
`gate --history`, `history changes` on series of planted steps. Run by ctest with Debian's /usr/bin/python3 (standard library only: its sqlite3
module plays the other program or the newer allocmark); assertions on contents and exit codes,
never timings."""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import unittest

from e2e_test import ALLOCMARK, OneRunPerClass, TempDirTest, run

MATRIX = ["-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "3", "--set", "size_mix.ops=20000"]


def make_run(tmp, name):
    out = os.path.join(tmp, name)
    p = run(["run"] + MATRIX + ["--out", out])
    assert p.returncode == 0, p.stderr
    return out


class MatrixRun(OneRunPerClass):
    """MATRIX's run, made once for the class: each of its tests read a copy of it (make_run's, per
    test, were the same matrix each time)."""
    RUN = MATRIX


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


class HistoryCommands(MatrixRun):
    def test_add_then_show_gives_each_series_newest_first(self):
        first, second = self.class_run("first"), make_run(self.tmp, "second")
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
        folder = self.class_run("once")
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
        folder = self.class_run("f")
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


class HistoryFiles(MatrixRun):
    def test_two_adds_at_once_both_land(self):
        folders = [self.class_run("job0"), make_run(self.tmp, "job1")]
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
        folder = self.class_run("f")
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
        folder = self.class_run("f")
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
        folder = self.class_run("f")
        other = os.path.join(self.tmp, "other.db")
        with sqlite3.connect(other) as c:
            c.execute("CREATE TABLE accounts(id INTEGER)")
        p = run(["history", "add", other, folder, "--commit", "abcdef0"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("without allocmark's history tables", p.stderr)
        with sqlite3.connect(other) as c:
            self.assertEqual([r[0] for r in c.execute("SELECT name FROM sqlite_master")], ["accounts"])


class HistoryChanges(MatrixRun):
    def test_a_clean_series_has_no_change(self):
        source = self.class_run("real")
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
        source = self.class_run("real")
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
        source = self.class_run("real")
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


class GateHistory(MatrixRun):
    def test_gate_adds_the_judged_run(self):
        before = self.class_run("before")
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
        source = self.class_run("real")
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

    def test_a_history_of_fewer_commits_than_a_segment_judges_no_creep(self):
        """Two commits are not yet a series: their repetitions hold no commit-to-commit spread, so a
        run's ordinary move from one machine to the next would read as creep (ci.Gate failed so at
        +5.1% over one committed run, 2026-12-07). Creep waits for the change-point method's
        minimum segment (3 commits), says so, and then judges as ever."""
        source = self.class_run("real")
        baseline = os.path.join(self.tmp, "base.json")
        self.assertEqual(run(["baseline", source, "-o", baseline]).returncode, 0)
        folder = scaled_copy(source, os.path.join(self.tmp, "now"), 1.04)  # within the baseline's 5%
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [0.95] * 2)  # +9% over both commits: creep, were it judged
        p = run(["gate", baseline, folder, "--tolerance", "5%", "--format", "json", "--history", db,
                 "--commit", sha(9), "--time", when(9), "--testbed", "ci"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("cumulative", p.stdout)
        self.assertRegex(p.stderr, r"creep not judged for \d+ series: the history holds fewer than 3 commits")
        # The run was added: a third commit, and the next run's series is judged.
        again = run(["gate", baseline, folder, "--tolerance", "5%", "--format", "json", "--history", db,
                     "--commit", sha(10), "--time", when(10), "--testbed", "ci"])
        self.assertNotIn("creep not judged", again.stderr)
        self.assertIn(again.returncode, (0, 1), again.stderr)

    def confirmed_creep(self, segment_factor, baseline_factor, results_factor, fmt):
        """Gates a scaled copy of a real run with --history and --confirm against a history of four
        commits at `segment_factor` and a baseline at `baseline_factor` of the run, fill phase only
        (its peak is the live set; gate_test.py says why); the first reading, without --confirm, on
        a copy of the same history, must flag creep. The rerun is real: the baseline's cells as
        configured, at the run's own level (1.0). Returns (first reading, confirmed, rerun folder)."""
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [segment_factor] * 4)
        baseline = os.path.join(self.tmp, "base.json")
        based = scaled_copy(source, os.path.join(self.tmp, "based"), baseline_factor)
        self.assertEqual(run(["baseline", based, "-o", baseline]).returncode, 0)
        folder = scaled_copy(source, os.path.join(self.tmp, "now"), results_factor)
        gate = ["gate", baseline, folder, "--phase", "fill", "--tolerance", "5%", "--testbed", "ci", "--commit", sha(9)]
        probe = os.path.join(self.tmp, "probe.db")
        shutil.copy(db, probe)
        first = run(gate + ["--format", "json", "--history", probe])
        self.assertEqual(first.returncode, 1, first.stdout + first.stderr)
        [crept] = [v for v in json.loads(first.stdout)["verdicts"] if v["verdict"] == "regressed"]
        self.assertRegex(crept["reason"], r"^cumulative \+\d+\.\d% since " + sha(1)[:12])
        self.assertTrue(crept["regressed_by_creep"])
        self.assertEqual((crept["creep"]["since_commit"], crept["creep"]["segment_values"], crept["creep"]["verdict"]),
                         (sha(1), 12, "regressed"))
        rerun = os.path.join(self.tmp, "rerun")
        p = run(gate + ["--format", fmt, "--history", db, "--confirm", "--confirm-out", rerun])
        self.assertIn("allocmark gate: added", p.stderr)
        with open(os.path.join(rerun, "results.jsonl")) as f:
            self.assertEqual(sorted(json.loads(line)["rep"] for line in f), [1, 2, 3])
        return first, p, rerun

    def test_confirm_clears_a_creep_its_rerun_does_not_show(self):
        """A first reading 8% over a quiet segment (3.8% over the baseline: a pass there) is creep;
        the rerun, at the segment's own level, does not show it, so the verdict is a pass saying so."""
        first, p, _ = self.confirmed_creep(1.0, 1.04, 1.08, "json")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        [v] = json.loads(p.stdout)["verdicts"]
        self.assertEqual((v["verdict"], v["regressed_by_creep"], v["creep"]["verdict"]), ("pass", False, "regressed"))
        self.assertRegex(v["reason"], r"^first run cumulative \+\d+\.\d% since " + sha(1)[:12] + r" \(p = [0-9.]+\), "
                         r"creep not confirmed by the rerun: [-+]\d+\.\d% against the same segment \(pass(, p = [0-9.]+)?, n = 3[;)]")
        self.assertIn("after a confirming rerun of 1 flagged verdicts", json.loads(p.stdout)["summary"])
        # The same in a terminal's table, the verdict line last.
        table = run(["gate", os.path.join(self.tmp, "base.json"), os.path.join(self.tmp, "now"), "--phase", "fill",
                     "--history", os.path.join(self.tmp, "probe.db"), "--commit", sha(9), "--testbed", "ci", "--confirm",
                     "--confirm-out", os.path.join(self.tmp, "rerun-table")])
        self.assertEqual(table.returncode, 0, table.stdout + table.stderr)
        row = [line for line in table.stdout.splitlines() if "size_mix t1 fill" in line]
        self.assertEqual(len(row), 1, table.stdout)
        self.assertTrue(row[0].startswith("pass "), row)
        self.assertIn("creep not confirmed by the rerun", row[0])
        self.assertTrue(table.stdout.splitlines()[-1].startswith("gate: PASS (1 pass) after a confirming rerun"), table.stdout)

    def test_confirm_keeps_a_creep_its_rerun_shows(self):
        """A run at the baseline's level, 8.7% over a segment 8% lower: creep on the first reading,
        and on the rerun's, so the regression stands and the pull-request comment says it was
        confirmed."""
        first, p, _ = self.confirmed_creep(0.92, 1.0, 1.0, "markdown")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        lines = p.stdout.splitlines()
        self.assertTrue(lines[0].startswith("**gate: FAIL (1 regressed) after a confirming rerun of 1 flagged verdicts"), lines)
        [row] = [line for line in lines if line.startswith("| regressed |")]
        self.assertIn("size\\_mix t1 fill", row)
        self.assertRegex(row, r"\| cumulative \+\d+\.\d% since " + sha(1)[:12] + r" \(the history's last stable segment, "
                         r"12 values; band 5\.0%, p = [0-9.]+\); creep confirmed by the rerun: \+\d+\.\d% against the same "
                         r"segment \(regressed, p = [0-9.]+, n = 3\) \|$")

    def test_gate_history_flags_are_checked_before_judging(self):
        before = self.class_run("before")
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


def git(repo, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.invalid")
    p = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, (args, p.stderr)
    return p.stdout.strip()


def subject_repo(tmp, n):
    """A git repository of n empty commits whose subjects are 'subject 1'..: real commits for a history."""
    repo = os.path.join(tmp, "repo")
    os.mkdir(repo)
    git(repo, "init", "-q")
    for i in range(1, n + 1):
        git(repo, "commit", "-q", "--allow-empty", "-m", "subject %d" % i)
    return repo, git(repo, "rev-list", "--reverse", "HEAD").split()


def shown_metrics(db):
    """The metrics `history show` prints by default (the gated ones the history holds)."""
    p = run(["history", "show", db])
    assert p.returncode == 0, p.stderr
    return set(re.findall(r", phase [^,]+, (\w+) \[", p.stdout))


class HistoryReport(MatrixRun):
    def test_the_trend_page_shows_the_planted_change_and_every_series(self):
        source = self.class_run("real")
        repo, shas = subject_repo(self.tmp, 16)
        db = os.path.join(self.tmp, "history.db")
        for i, factor in enumerate([1.0] * 7 + [1.10] * 9, start=1):
            folder = scaled_copy(source, os.path.join(self.tmp, "c%d" % i), factor * (1 + JITTER[i % len(JITTER)]))
            p = run(["history", "add", db, folder, "--commit", shas[i - 1], "--time", when(i), "--testbed", "ci"])
            self.assertEqual(p.returncode, 0, p.stderr)
        page = os.path.join(self.tmp, "trend.html")
        p = run(["history", "report", db, "-o", page], cwd=repo)  # in the checkout: subjects from git
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), page)
        with open(page) as f:
            text = f.read()
        phases = {s["phase"] for s in show_json(db, "--metric", "peak_rss_bytes")["series"]}
        self.assertGreaterEqual(len(phases), 3)
        # The change on the first screen: its table comes before any chart, at commit 8, 7..8, about +10%.
        changes = text[text.index('id="changes-table"'):text.index('id="series"')]
        self.assertIn(shas[7][:12], changes)
        self.assertIn("%s..%s" % (shas[6][:7], shas[7][:7]), changes)
        self.assertIn("subject 8", changes)
        self.assertRegex(changes, r"\+(9\.\d|10\.\d)%")
        for phase in phases:  # every phase stepped at once: each is a row
            self.assertIn("glibc size_mix t1, phase %s, peak_rss_bytes (main, ci)" % phase, changes)
        # The series: one chart per cell and metric (the gated ones, as `history show` prints them), every
        # phase a panel, embedded; a metric that is 0 everywhere (no huge pages) is not drawn, and said so.
        every = show_json(db)["series"]
        zero = [s for s in every if s["metric"] in shown_metrics(db) and not any(v for p in s["points"] for v in p["values"])]
        charts = len({s["metric"] for s in every if s["metric"] in shown_metrics(db) and s not in zero})
        self.assertGreaterEqual(charts, 1)
        if zero:
            self.assertIn("%d series %s 0 at every commit, not drawn" % (len(zero), "is" if len(zero) == 1 else "are"), text)
        self.assertEqual(text.count('<img src="data:image/png;base64,'), charts)
        for i in range(charts):
            self.assertIn("trend-%03d.png" % i, text)
        # Self-contained: nothing loaded from elsewhere, only data: images and in-page anchors.
        self.assertIsNone(re.search(r'(src|href)\s*=\s*"(?!data:|#)', text))
        self.assertNotIn("url(", text)
        # The commits, newest first, with their subjects.
        commits = text[text.index('id="commits-table"'):]
        self.assertLess(commits.index(shas[15][:12]), commits.index(shas[0][:12]))
        self.assertIn("subject 16", commits)
        self.assertEqual(len(re.findall(r"<tr><td>[0-9a-f]{12}</td>", commits)), 16)

    def test_what_is_drawn_is_computed_from_the_history(self):
        """What plots/history_plots.py is given is computed in C++: each point is the commit's median and
        min-max in MiB, and the change's commit range is marked with its size. A copy of plots/ (through
        ALLOCMARK_PLOTS_DIR) keeps the JSON it was given, then draws as ever."""
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0] * 6 + [1.2] * 6)  # 4 + 4 is too short to be sure at alpha 0.01
        plots = os.path.join(self.tmp, "plots")
        shutil.copytree(os.path.join(os.path.dirname(STEP), "..", "plots"), plots)
        kept = os.path.join(self.tmp, "given.json")
        with open(os.path.join(plots, "history_plots.py"), "r+") as f:
            script = f.read().replace("def main(argv):\n", "def main(argv):\n    import shutil; shutil.copy(argv[0], %r)\n" % kept)
            f.seek(0)
            f.write(script)
        page = os.path.join(self.tmp, "p.html")
        p = run(["history", "report", db, "-o", page, "--metric", "peak_rss_bytes,wall_s"],
                env=dict(os.environ, ALLOCMARK_PLOTS_DIR=plots))
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(kept) as f:
            given = json.load(f)["charts"]
        self.assertEqual([c["file"] for c in given], ["trend-000", "trend-001"])
        peak = given[0]  # the chart that stepped comes first
        self.assertIn("peak_rss_bytes", peak["title"])
        self.assertEqual([t["label"] for t in peak["ticks"]], ["%s\n%s" % (sha(i)[:7], when(i)[:10]) for i in range(1, 13)])
        shown = {s["phase"]: s for s in show_json(db, "--metric", "peak_rss_bytes")["series"]}
        for panel in peak["panels"]:
            series = shown[panel["title"].replace("phase ", "")]
            oldest_first = series["points"][::-1]
            self.assertEqual([pt["x"] for pt in panel["points"]], list(range(12)))
            for pt, want in zip(panel["points"], oldest_first):
                self.assertAlmostEqual(pt["median"], want["median"] / 2**20, places=6)
                self.assertAlmostEqual(pt["low"], want["min"] / 2**20, places=6)
                self.assertAlmostEqual(pt["high"], want["max"] / 2**20, places=6)
            self.assertEqual(len(panel["changes"]), 1, panel["changes"])
            change = panel["changes"][0]
            self.assertEqual((change["x_from"], change["x_to"], change["worse"]), (5, 6, True))
            self.assertRegex(change["label"], r"^\+(19|20|21)\.\d% ")
            self.assertIn("%s..%s" % (sha(6)[:7], sha(7)[:7]), change["label"])
        self.assertTrue(all(not panel["changes"] for panel in given[1]["panels"]))  # wall_s did not move
        with open(page) as f:
            self.assertEqual(f.read().count('<img src="data:image/png;base64,'), 2)

    def test_a_short_history_draws_its_series_and_says_none_was_judged(self):
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0, 1.0, 1.2])
        page = os.path.join(self.tmp, "p.html")
        p = run(["history", "report", db, "-o", page, "--metric", "peak_rss_bytes"])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(page) as f:
            text = f.read()
        self.assertEqual(text.count('<img src="data:image/png;base64,'), 1)
        self.assertIn("No change point in 0 series judged", text)
        self.assertIn("too short to judge", text)

    def test_bad_input_is_exit_2_and_writes_nothing(self):
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0] * 2)
        with open(db, "rb") as f:
            before = f.read()
        page = os.path.join(self.tmp, "p.html")
        for args, said in (([os.path.join(self.tmp, "none.db"), "-o", page], "no such history"),
                           ([db, "-o", page, "--metric", "peak_rs"], "--metric: 'peak_rs' is not in"),
                           ([db, "-o", page, "--workload", "nope"], "--workload: no cell of"),
                           ([db, "-o", page, "--testbed", "nope"], "--testbed: no cell of"),
                           ([db, "-o", os.path.join(self.tmp, "no", "p.html")], "-o"),
                           ([db, "-o", db], "is the history itself"),
                           ([db], "-o"),
                           ([db, "-o", page, "--colour", "red"], "--colour")):
            p = run(["history", "report", *args])
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(said, p.stderr)
            self.assertFalse(os.path.exists(page))
        with open(db, "rb") as f:
            self.assertEqual(f.read(), before)


class HistoryExport(MatrixRun):
    def test_bmf_gives_the_newest_commits_figures_as_bencher_reads_them(self):
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0, 1.0, 1.1])
        p = run(["history", "show", db, "--format", "bmf"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("BMF of commit " + sha(3), p.stderr)
        bmf = json.loads(p.stdout)
        shown = show_json(db, "--metric", "peak_rss_bytes")["series"]
        self.assertEqual(set(bmf), {"%s/%s" % (s["cell"], s["phase"]) for s in shown})
        for s in shown:
            newest = s["points"][0]
            self.assertEqual(newest["commit"], sha(3))
            measure = bmf["%s/%s" % (s["cell"], s["phase"])]
            self.assertEqual(set(measure), shown_metrics(db))  # the gated metrics unless --metric
            self.assertEqual(measure["peak_rss_bytes"], {"value": newest["median"], "lower_value": newest["min"],
                                                         "upper_value": newest["max"]})
        # Bencher's schema: benchmark -> measure -> {value (required), lower_value, upper_value}, all numbers.
        for measures in bmf.values():
            for m in measures.values():
                self.assertTrue(set(m) <= {"value", "lower_value", "upper_value"} and "value" in m)
                self.assertTrue(all(isinstance(v, (int, float)) for v in m.values()))
        more = json.loads(run(["history", "show", db, "--format", "bmf", "--metric", "peak_rss_bytes,wall_s"]).stdout)
        self.assertEqual({k for m in more.values() for k in m}, {"peak_rss_bytes", "wall_s"})

    def test_bmf_of_two_testbeds_needs_a_choice(self):
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        for testbed in ("a", "b"):
            os.mkdir(os.path.join(self.tmp, testbed))
            add_series(os.path.join(self.tmp, testbed), db, source, [1.0], testbed=testbed)
        p = run(["history", "show", db, "--format", "bmf"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("choose one with --branch and --testbed", p.stderr)
        self.assertEqual(p.stdout, "")
        p = run(["history", "show", db, "--format", "bmf", "--testbed", "b"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(json.loads(p.stdout))

    def test_show_gate_and_history_write_one_bmf(self):
        """One definition of the benchmark names and figures: a folder's BMF from `show` is its BMF
        from the history it was added to, and `gate --format bmf` gives the judged metrics of it."""
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        self.assertEqual(run(["history", "add", db, source, "--commit", sha(1), "--testbed", "ci"]).returncode, 0)
        shown = run(["show", source, "--format", "bmf"])
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertEqual(json.loads(shown.stdout), json.loads(run(["history", "show", db, "--format", "bmf"]).stdout))
        baseline = os.path.join(self.tmp, "base.json")
        self.assertEqual(run(["baseline", source, "-o", baseline]).returncode, 0)
        gated = run(["gate", baseline, source, "--format", "bmf", "--metric", "peak_rss_bytes,end_rss_bytes"])
        self.assertEqual(gated.returncode, 0, gated.stderr)
        self.assertIn("gate: PASS", gated.stderr)
        only = run(["show", source, "--format", "bmf", "--metric", "peak_rss_bytes,end_rss_bytes"])
        self.assertEqual(json.loads(gated.stdout), json.loads(only.stdout))
        self.assertEqual({m for b in json.loads(only.stdout).values() for m in b}, {"peak_rss_bytes", "end_rss_bytes"})
        one = json.loads(run(["show", source, "--format", "bmf", "--workload", "size_mix", "--allocator", "glibc"]).stdout)
        self.assertEqual(one, json.loads(shown.stdout))
        for args, said in ((["show", source, "--format", "bmf", "--by", "workload"], "--format bmf"),
                           (["show", source, "--format", "bmf", "--allocator", "nope"], "--allocator"),
                           (["gate", baseline, source, "--format", "bmff"], "--format: 'bmff'")):
            p = run(args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(said, p.stderr)
            self.assertEqual(p.stdout, "")

    def test_export_is_the_whole_history_and_stable(self):
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0, 1.05, 1.1])
        p = run(["history", "export", db, "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        exported = json.loads(p.stdout)
        self.assertEqual((exported["allocmark_history_export"], exported["schema_version"]), (1, 1))
        self.assertEqual([r["commit"] for r in exported["runs"]], [sha(1), sha(2), sha(3)])
        with sqlite3.connect(db) as c:
            values = c.execute("SELECT COUNT(*) FROM metric_values").fetchone()[0]
            cells = c.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
        self.assertEqual(len(exported["cells"]), cells)
        held = sum(len(v) for r in exported["runs"] for c in r["cells"] for m in c["values"].values() for v in m.values())
        self.assertEqual(held, values)  # every value, nothing computed
        run0 = exported["runs"][0]
        self.assertEqual((run0["branch"], run0["testbed"], run0["time"]), ("main", "ci", when(1)))
        self.assertIn("cpu_model", run0["machine"])
        # The same content added in another order exports the same (but for when it was added).
        other = os.path.join(self.tmp, "other.db")
        for i in (3, 1, 2):
            p = run(["history", "add", other, os.path.join(self.tmp, "c%d" % i), "--commit", sha(i), "--time", when(i),
                     "--testbed", "ci"])
            self.assertEqual(p.returncode, 0, p.stderr)
        again = json.loads(run(["history", "export", other]).stdout)
        for doc in (exported, again):
            doc.pop("history")
            for r in doc["runs"]:
                r.pop("added")
        self.assertEqual(again, exported)

    def test_bad_input_is_exit_2(self):
        source = self.class_run("real")
        db = os.path.join(self.tmp, "history.db")
        add_series(self.tmp, db, source, [1.0])
        for args, said in ((["export", db, "--format", "csv"], "--format: 'csv'"),
                           (["export", os.path.join(self.tmp, "none.db")], "no such history"),
                           (["show", db, "--format", "bmf", "--metric", "nope"], "--metric: 'nope' is not in"),
                           (["show", db, "--format", "xml"], "--format: 'xml'")):
            p = run(["history", *args])
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(said, p.stderr)
            self.assertEqual(p.stdout, "")


# The bisected program: allocates and touches MIB MiB once; one commit among 16 makes it 20% more.
PROGRAM = """#include <stdlib.h>
#include <string.h>
/* revision %d */
int main(void) {
  size_t bytes = (size_t)%d * 1024 * 1024;
  char *p = malloc(bytes);
  if (!p) return 1;
  memset(p, 1, bytes);
  volatile char last = p[bytes - 1];
  (void)last;
  free(p);
  return 0;
}
"""
BUILD = "cc -O0 -o prog prog.c"
RUN_ARGS = ["--program", "prog=./prog", "-a", "glibc", "--reps", "3"]
STEP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ci", "bisect-step.sh")


class HistoryBisect(TempDirTest):
    def program_repo(self, bad):
        """16 commits of prog.c; from commit `bad` on it allocates 48 MiB instead of 40."""
        repo = os.path.join(self.tmp, "repo")
        os.mkdir(repo)
        git(repo, "init", "-q")
        with open(os.path.join(repo, ".gitignore"), "w") as f:
            f.write("prog\n")
        for i in range(1, 17):
            with open(os.path.join(repo, "prog.c"), "w") as f:
                f.write(PROGRAM % (i, 48 if i >= bad else 40))
            git(repo, "add", "prog.c", ".gitignore")
            git(repo, "commit", "-q", "-m", "commit %d" % i)
        return repo, git(repo, "rev-list", "--reverse", "HEAD").split()

    def test_git_bisect_run_with_the_gate_names_the_commit_that_allocates_more(self):
        repo, shas = self.program_repo(bad=11)
        git(repo, "checkout", "-q", shas[0])
        subprocess.run(BUILD, shell=True, cwd=repo, check=True)
        good = os.path.join(self.tmp, "good")
        p = run(["run", *RUN_ARGS, "--out", good], cwd=repo)
        self.assertEqual(p.returncode, 0, p.stderr)
        baseline = os.path.join(self.tmp, "base.json")
        self.assertEqual(run(["baseline", good, "-o", baseline]).returncode, 0)
        git(repo, "checkout", "-q", shas[-1])
        git(repo, "bisect", "start", shas[-1], shas[0])
        env = dict(os.environ, ALLOCMARK=ALLOCMARK)
        p = subprocess.run(["git", "-C", repo, "bisect", "run", STEP, baseline, BUILD, *RUN_ARGS],
                           capture_output=True, text=True, env=env, timeout=900)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("%s is the first bad commit" % shas[10], p.stdout)
        self.assertIn("commit 11", p.stdout)
        self.assertIn("is bad", p.stderr)
        self.assertIn("is good", p.stderr)

    def test_gate_bisect_exit_codes(self):
        repo, shas = self.program_repo(bad=2)
        subprocess.run(BUILD, shell=True, cwd=repo, check=True)
        one = os.path.join(self.tmp, "one")
        p = run(["run", "--program", "prog=./prog", "-a", "glibc", "--reps", "1", "--out", one], cwd=repo)
        self.assertEqual(p.returncode, 0, p.stderr)
        baseline = os.path.join(self.tmp, "base.json")
        self.assertEqual(run(["baseline", one, "-o", baseline]).returncode, 0)
        plain = run(["gate", baseline, one])
        self.assertEqual(plain.returncode, 2)  # one repetition a side: not comparable, as ever
        p = run(["gate", baseline, one, "--bisect"])
        self.assertEqual(p.returncode, 125, p.stderr)
        self.assertIn("cannot judge this commit", p.stderr)
        p = run(["gate", baseline, os.path.join(self.tmp, "never-ran"), "--bisect"])
        self.assertEqual(p.returncode, 125, p.stderr)
        p = run(["gate", baseline, one, "--bisect", "--tolerance", "lots"])
        self.assertEqual(p.returncode, 2, p.stderr)  # bad usage is still 2 (the step script stops on it)
        p = subprocess.run([STEP, os.path.join(self.tmp, "none.json"), BUILD, *RUN_ARGS], cwd=repo, capture_output=True,
                           text=True, env=dict(os.environ, ALLOCMARK=ALLOCMARK), timeout=300)
        self.assertEqual(p.returncode, 128, p.stderr)
        self.assertIn("stopping the bisection", p.stderr)


# ---- history export --format jsonl and history import; the project's own gate history (ci/gate.sh,
# ci/keep-gate-history.sh; docs/gate.md "A history of the project's own gate").

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE_RUN = os.path.join(ROOT, "tests", "fixtures", "single-allocator")  # a real run, 3 repetitions
COMMITTED = os.path.join("ci", "baselines", "gate-matrix.history.jsonl")


def export_lines(db, *extra):
    p = run(["history", "export", db, "--format", "jsonl", *extra])
    assert p.returncode == 0, p.stderr
    return p.stdout


def fixture_history(tmp, commits):
    """A history of the fixture run under commits 1..n, each a scaled copy (+1% a commit)."""
    db = os.path.join(tmp, "history.db")
    add_series(tmp, db, FIXTURE_RUN, [1.0 + 0.01 * i for i in range(commits)])
    return db


class HistoryImport(TempDirTest):
    def test_what_export_writes_imports_back_to_the_same_lines(self):
        db = fixture_history(self.tmp, 3)
        lines = export_lines(db)
        self.assertEqual(len(lines.splitlines()), 3)
        self.assertEqual([json.loads(line)["commit"] for line in lines.splitlines()], [sha(1), sha(2), sha(3)])
        for line in lines.splitlines():  # a line stands alone: its cells carry their identity
            run0 = json.loads(line)
            self.assertEqual(run0["allocmark_history_export"], 1)
            self.assertTrue(all(c["workload"] and c["allocator"] and c["params"] for c in run0["cells"]))
        copy = os.path.join(self.tmp, "copy.db")
        path = os.path.join(self.tmp, "history.jsonl")
        with open(path, "w") as f:
            f.write(lines)
        p = run(["history", "import", copy, path])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("imported 3 runs", p.stderr)
        self.assertEqual(export_lines(copy), lines)  # "added" and every value kept
        p = run(["history", "import", copy, path])  # again: nothing new
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("imported 0 runs from %s into %s (3 it held already)" % (path, copy), p.stderr)
        self.assertEqual(export_lines(copy), lines)
        # The JSON document imports to the same history.
        document = os.path.join(self.tmp, "history.json")
        with open(document, "w") as f:
            f.write(run(["history", "export", db]).stdout)
        third = os.path.join(self.tmp, "third.db")
        self.assertEqual(run(["history", "import", third, document]).returncode, 0)
        self.assertEqual(export_lines(third), lines)
        self.assertEqual(show_json(third)["series"], show_json(db)["series"])

    def test_metric_filter_and_a_union_merged_file(self):
        db = fixture_history(self.tmp, 3)
        peak = export_lines(db, "--metric", "peak_rss_bytes")
        metrics = {m for line in peak.splitlines() for c in json.loads(line)["cells"]
                   for phase in c["values"].values() for m in phase}
        self.assertEqual(metrics, {"peak_rss_bytes"})
        # Two branches each added a line to commits 1-2; git's union merge keeps both sides' lines,
        # unsorted, and the common ones twice where both touched them.
        first, second, third = peak.splitlines()
        merged = os.path.join(self.tmp, "merged.jsonl")
        with open(merged, "w") as f:
            f.write("\n".join([first, second, third, first, "", second]) + "\n")
        imported = os.path.join(self.tmp, "imported.db")
        p = run(["history", "import", imported, merged])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("imported 3 runs", p.stderr)
        self.assertIn("(2 it held already)", p.stderr)
        self.assertEqual(export_lines(imported, "--metric", "peak_rss_bytes"), peak)  # sorted again
        p = run(["history", "export", db, "--format", "jsonl", "--metric", "no_such_metric"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--metric: 'no_such_metric' is not in", p.stderr)

    def test_bmf_names_longer_than_bencher_takes_are_exit_2(self):
        """Bencher identifies a measure by a name of at most 64 characters and a benchmark by one of
        at most 1024: a history from elsewhere may hold longer ones, which BMF must not write."""
        db = fixture_history(self.tmp, 1)
        line = json.loads(export_lines(db, "--metric", "peak_rss_bytes").splitlines()[0])
        values = line["cells"][0]["values"]
        phase, metrics = next(iter(values.items()))
        long_metric, long_phase = "m" * 65, "p" * 1000
        values[phase][long_metric] = metrics["peak_rss_bytes"]
        values[long_phase] = {"peak_rss_bytes": metrics["peak_rss_bytes"]}
        path = os.path.join(self.tmp, "long.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps(line) + "\n")
        long_db = os.path.join(self.tmp, "long.db")
        self.assertEqual(run(["history", "import", long_db, path]).returncode, 0)
        for extra, said in ((["--metric", long_metric], "the measure name '%s...' is 65 characters; Bencher takes at most 64"
                             % long_metric[:60]),
                            ([], "the benchmark name '%s/ppp" % line["cells"][0]["cell"])):
            p = run(["history", "show", long_db, "--format", "bmf", *extra])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(said, p.stderr)
            self.assertEqual(p.stdout, "")
        self.assertIn("is %d characters; Bencher takes at most 1024" % len(line["cells"][0]["cell"] + "/" + long_phase),
                      run(["history", "show", long_db, "--format", "bmf"]).stderr)
        p = run(["history", "show", long_db, "--format", "bmf", "--metric", "peak_rss_bytes", "--workload",
                 line["cells"][0]["workload"]])
        self.assertEqual(p.returncode, 2)  # the long phase is still a benchmark of that cell
        ok = run(["history", "show", db, "--format", "bmf"])  # allocmark's own names fit
        self.assertEqual(ok.returncode, 0, ok.stderr)

    def test_bad_input_is_exit_2_naming_the_line_and_writes_nothing(self):
        db = fixture_history(self.tmp, 1)
        good = export_lines(db, "--metric", "peak_rss_bytes").splitlines()[0]
        run0 = json.loads(good)

        def changed(edit):
            r = json.loads(good)
            edit(r)
            return json.dumps(r)

        def values(r, v):
            next(iter(r["cells"][0]["values"].values()))["peak_rss_bytes"][0] = v

        cases = [
            ("{not json\n", "line 1: not JSON"),
            (good + "\n<<<<<<< HEAD\n", "line 2: a merge conflict marker"),
            (changed(lambda r: r.update(allocmark_history_export=2)) + "\n", "line 1: export format 2; this allocmark reads format 1"),
            ('{"runs_here": 1}\n', "line 1: not what `allocmark history export` writes"),
            (changed(lambda r: r.pop("commit")) + "\n", 'line 1: no "commit"'),
            (changed(lambda r: r.update(commit="xyz")) + "\n", "line 1: \"commit\": 'xyz' is not a commit"),
            (changed(lambda r: r.update(time="yesterday")) + "\n", "line 1: \"time\": 'yesterday' is not an ISO 8601 time"),
            (changed(lambda r: values(r, "big")) + "\n", "metric 'peak_rss_bytes': repetition 0 is not a finite number"),
            (changed(lambda r: r["cells"].append(r["cells"][0])) + "\n", "twice in one run"),
            (changed(lambda r: r["cells"][0].update(threads=0)) + "\n", '"threads" is not a thread count'),
            (good + "\n" + changed(lambda r: r.update(cells={})) + "\n", 'line 2: "cells" is not a list'),
        ]
        for i, (text, said) in enumerate(cases):
            path = os.path.join(self.tmp, "bad%d.jsonl" % i)
            with open(path, "w") as f:
                f.write(text)
            target = os.path.join(self.tmp, "target%d.db" % i)
            p = run(["history", "import", target, path])
            self.assertEqual(p.returncode, 2, (said, p.stderr))
            self.assertIn(path + " ", p.stderr)
            self.assertIn(said, p.stderr)
            self.assertFalse(os.path.exists(target), said)  # checked before the history is opened
        for args, said in (([os.path.join(self.tmp, "none.jsonl")], "cannot read it"), ([self.tmp], "a folder")):
            p = run(["history", "import", os.path.join(self.tmp, "t.db"), *args])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(said, p.stderr)
        self.assertTrue(run0["cells"])


class GateHistoryInCi(TempDirTest):
    """ci/gate.sh's history path in a throwaway git repository laid out as this one: the project's
    committed history, a baseline of a small real run gated in place of the matrix
    (ALLOCMARK_GATE_RESULTS), and the allocmark under test as the build's."""

    def setUp(self):
        super().setUp()
        self.repo = os.path.join(self.tmp, "repo")
        os.makedirs(os.path.join(self.repo, "ci", "baselines"))
        for script in ("gate.sh", "keep-gate-history.sh"):
            shutil.copy(os.path.join(ROOT, "ci", script), os.path.join(self.repo, "ci", script))
        shutil.copy(os.path.join(ROOT, COMMITTED), os.path.join(self.repo, COMMITTED))
        baseline = os.path.join(self.repo, "ci", "baselines", "gate-matrix.json")
        self.assertEqual(run(["baseline", FIXTURE_RUN, "-o", baseline]).returncode, 0)
        os.makedirs(os.path.join(self.repo, "build", "bin"))
        os.symlink(ALLOCMARK, os.path.join(self.repo, "build", "bin", "allocmark"))
        with open(os.path.join(self.repo, ".gitignore"), "w") as f:
            f.write("/build/\n")
        with open(os.path.join(self.repo, "code.c"), "w") as f:
            f.write("int x;\n")
        git(self.repo, "init", "-q")
        git(self.repo, "add", ".")
        git(self.repo, "commit", "-q", "-m", "the project")
        self.results = os.path.join(self.tmp, "results")
        shutil.copytree(FIXTURE_RUN, self.results)

    def script(self, name):
        return subprocess.run([os.path.join(self.repo, "ci", name)], capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, ALLOCMARK_GATE_RESULTS=self.results))

    def lines(self, path):
        with open(os.path.join(self.repo, path)) as f:
            return f.read().splitlines()

    def land(self, text):
        with open(os.path.join(self.repo, "code.c"), "w") as f:
            f.write(text)
        git(self.repo, "commit", "-q", "-am", "a change")
        return git(self.repo, "rev-parse", "HEAD")

    def test_each_run_adds_one_line_the_developer_carries_into_the_tree(self):
        committed = self.lines(COMMITTED)
        self.assertTrue(committed)  # the project's history loads: real runs of this project
        for landing in range(2):
            head = self.land("int x = %d;\n" % landing)
            p = self.script("gate.sh")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("gate: PASS", p.stdout)
            self.assertIn("imported %d run" % len(committed), p.stderr)
            self.assertIn("allocmark gate: added", p.stderr)
            ran = self.lines(os.path.join("build", "gate-history.jsonl"))
            self.assertEqual(len(ran), len(committed) + 1)
            new = [json.loads(line) for line in ran if line not in committed]
            self.assertEqual(len(new), 1)
            self.assertEqual((new[0]["commit"], new[0]["branch"], new[0]["testbed"]), (head, "main", "ci"))
            self.assertEqual({m for c in new[0]["cells"] for ph in c["values"].values() for m in ph}, {"peak_rss_bytes"})
            # The series the creep judgement read: every landing so far, one point each.
            db = os.path.join(self.repo, "build", "gate-history.db")
            series = show_json(db, "--metric", "peak_rss_bytes", "--testbed", "ci")["series"]
            cells = {c["cell"] for c in new[0]["cells"]}
            self.assertEqual({len(s["points"]) for s in series if s["cell"] in cells}, {landing + 1})
            p = self.script("keep-gate-history.sh")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(self.lines(COMMITTED), ran)
            diff = git(self.repo, "diff", "--numstat", "--", COMMITTED)
            self.assertTrue(diff.startswith("1\t0\t"), diff)  # one line added, none removed
            git(self.repo, "commit", "-q", "-m", "ci: gate history", "--", COMMITTED)
            committed = ran
        p = self.script("keep-gate-history.sh")  # nothing new since
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("holds this run already", p.stdout)

    def test_keeping_refuses_a_run_of_another_tree(self):
        committed = self.lines(COMMITTED)
        p = self.script("keep-gate-history.sh")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no gated run's history", p.stderr)
        self.assertEqual(self.script("gate.sh").returncode, 0)
        measured = git(self.repo, "rev-parse", "HEAD")
        self.land("int x = 1;\n")  # HEAD moved after the run
        p = self.script("keep-gate-history.sh")
        self.assertEqual(p.returncode, 2)
        self.assertIn("the run measured commit %s, but HEAD is" % measured, p.stderr)
        with open(os.path.join(self.repo, "code.c"), "a") as f:
            f.write("int y;\n")  # a change not committed
        self.assertEqual(self.script("gate.sh").returncode, 0)
        p = self.script("keep-gate-history.sh")
        self.assertEqual(p.returncode, 2)
        self.assertIn("the run measured uncommitted changes to code.c", p.stderr)
        git(self.repo, "commit", "-q", "-am", "y")
        self.assertEqual(self.script("gate.sh").returncode, 0)
        # Another landing's line reached the committed file since the run loaded it (a merge).
        other = json.loads(committed[0])
        other.update(commit="ab" * 20, run_ids="another-run")
        with open(os.path.join(self.repo, COMMITTED), "a") as f:
            f.write(json.dumps(other) + "\n")
        p = self.script("keep-gate-history.sh")
        self.assertEqual(p.returncode, 2)
        self.assertIn("lacks 1 of the", p.stderr)
        self.assertEqual(self.lines(COMMITTED), committed + [json.dumps(other)])


if __name__ == "__main__":
    unittest.main()
