"""Gate, compare and baseline output fit for a pull request, in one style (issue 23; docs/gate.md,
"Output"): the verdict first, changed parameters as a diff, passes folded, the real change on rows
that were not judged, the metric table's names everywhere, and one argument style.

Built on the committed fixture results-small (glibc, jemalloc, mimalloc on size_mix, 1 thread, 3
repetitions) and copies of it with planted changes; tests/fixtures/baseline-format1.json is that
fixture's baseline as allocmark wrote it before format 2 (`allocmark baseline
tests/fixtures/results-small -o ...` at bbf637b). Nothing runs a workload; no timings asserted.

    cd tests && ALLOCMARK_BIN=.../build/bin/allocmark /usr/bin/python3 -m unittest -v gate_output_test
"""
import json
import os
import re
import shutil
import statistics
import tomllib
import unittest

from compare_test import FIXTURE, planted
from e2e_test import TempDirTest, records, run
from hostile_gate_test import edit_records, read_json, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
FORMAT1 = os.path.join(HERE, "fixtures", "baseline-format1.json")
GATED = {"peak_rss_bytes", "rss_above_idle_over_live", "end_rss_bytes", "ops_per_s", "anon_huge_bytes"}
# The fixture's records predate the huge-page readings: its baselines and verdicts have the others.
FIXTURE_GATED = GATED - {"anon_huge_bytes"}
OLD_NAMES = ("peak_rss", "rss_over_live", "end_rss")


class FixtureTest(TempDirTest):
    def baseline(self, folder=FIXTURE, name="base.json"):
        path = os.path.join(self.tmp, name)
        p = run(["baseline", folder, "-o", path])
        self.assertEqual(p.returncode, 0, p.stderr)
        return path

    def copy(self, name):
        out = os.path.join(self.tmp, name)
        shutil.copytree(FIXTURE, out, ignore=shutil.ignore_patterns("golden"))
        return out

    def gate(self, baseline, results, *extra):
        return run(["gate", "--baseline", baseline, "--results", results, *extra])

    def metric_column(self, markdown):
        """The metric column of every table row of a markdown report."""
        return {line.split(" | ")[2] for line in markdown.splitlines() if line.startswith("| ") and " | cell | " not in line}


class PullRequestMarkdown(FixtureTest):
    def test_the_verdict_comes_first_then_the_problems_then_the_passes_folded(self):
        after = os.path.join(self.tmp, "after")
        planted(FIXTURE, after, {("glibc", "churn"): ("peak_rss_bytes", 1.5)})
        p = self.gate(self.baseline(), after, "--format", "markdown")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0], "**gate: FAIL (1 regressed, 8 pass)**")
        regressed = [i for i, line in enumerate(lines) if line.startswith("| regressed |")]
        passes = [i for i, line in enumerate(lines) if line.startswith("| pass |")]
        self.assertEqual(len(regressed), 1, p.stdout)
        self.assertIn("glibc size\\_mix t1 churn", lines[regressed[0]])
        self.assertEqual(len(passes), 8, p.stdout)
        opened, closed = lines.index("<details><summary>8 pass</summary>"), lines.index("</details>")
        self.assertLess(regressed[0], opened)
        self.assertTrue(all(opened < i < closed for i in passes), p.stdout)
        self.assertEqual(lines[opened + 1], "", "GitHub renders markdown inside <details> only after a blank line")

        # A terminal gets every row, problems first, and the verdict as its last line.
        p = self.gate(self.baseline(), after)
        self.assertEqual(p.returncode, 1)
        rows = p.stdout.strip().splitlines()
        self.assertEqual(rows[-1], "gate: FAIL (1 regressed, 8 pass)")
        labels = [row.split()[0] for row in rows[1:] if row.split() and row.split()[0] in ("regressed", "pass")]
        self.assertEqual(labels, ["regressed"] + ["pass"] * 8)

        # compare's markdown in the same style: its conclusion first, unmoved figures folded.
        p = run(["compare", FIXTURE, after, "--format", "markdown", "--metric", "peak_rss_bytes"])
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertTrue(lines[0].startswith("**compare: 1 of 9 cell-phase-metrics moved"), lines[0])
        self.assertIn("<details><summary>8 same</summary>", lines)
        self.assertLess(next(i for i, line in enumerate(lines) if line.startswith("| worse |")),
                        lines.index("<details><summary>8 same</summary>"))

    def test_changed_parameters_are_a_diff_not_the_whole_parameter_set(self):
        changed = self.copy("changed")
        edit_records(changed, lambda r: r["params"].update(live_mib="5"))
        p = self.gate(self.baseline(), changed, "--format", "markdown")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("- glibc size\\_mix t1, jemalloc size\\_mix t1, mimalloc size\\_mix t1: params live\\_mib 4 -> 5\n",
                      p.stdout)
        self.assertEqual(p.stdout.count("live\\_mib 4 -> 5"), 1, "said once, not on every row")
        for unchanged in ("16-256", "remote", '"ops"'):  # the other parameters are not repeated
            self.assertNotIn(unchanged, p.stdout)
        p = self.gate(self.baseline(), changed, "--format", "json")
        for v in json.loads(p.stdout)["verdicts"]:
            self.assertEqual(v["under_test_diff"], ["params live_mib 4 -> 5"], v["cell"])
            self.assertEqual(v["changed_under_test"]["params"][1]["live_mib"], "5")  # bots' field kept
        p = self.gate(self.baseline(), changed)
        self.assertIn("glibc size_mix t1, jemalloc size_mix t1, mimalloc size_mix t1: params live_mib 4 -> 5", p.stdout)

    def test_rows_that_were_not_judged_show_the_medians_change(self):
        after = os.path.join(self.tmp, "after")
        planted(FIXTURE, after, {("glibc", "churn"): ("peak_rss_bytes", 1.5)})
        # A baseline with only two repetitions of glibc's churn phase: too few to judge. (A format 1
        # file, which every version reads, keyed by the old name.)
        base = read_json(FORMAT1)
        churn = next(c for c in base["cells"] if c["allocator"] == "glibc" and c["phase"] == "churn")
        kept = churn["values"]["peak_rss"][:2]
        churn["values"]["peak_rss"] = kept
        short = write_json(os.path.join(self.tmp, "short.json"), base)
        after_values = [phase["peak_rss_bytes"] for r in records(after) if r["allocator"] == "glibc"
                        for phase in r["phases"] if phase["name"] == "churn"]
        expected = statistics.median(after_values) / statistics.median(kept) - 1

        p = self.gate(short, after, "--format", "json")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        row = next(v for v in json.loads(p.stdout)["verdicts"] if v["cell"] == "glibc size_mix t1 churn")
        self.assertEqual(row["verdict"], "not comparable")
        self.assertAlmostEqual(row["change"], expected, places=6)
        p = self.gate(short, after, "--format", "markdown")
        line = next(line for line in p.stdout.splitlines() if line.startswith("| not comparable | glibc size\\_mix t1 churn"))
        self.assertIn(" | %+.1f%% (not judged) | - | - | fewer than 3 repetitions" % (100 * expected), line)

        # compare: the second run has two repetitions of glibc; its churn moved ~50%.
        fewer = os.path.join(self.tmp, "fewer")
        planted(FIXTURE, fewer, {("glibc", "churn"): ("peak_rss_bytes", 1.5)})
        kept_records = [r for r in records(fewer) if not (r["allocator"] == "glibc" and r["rep"] == 3)]
        with open(os.path.join(fewer, "results.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in kept_records)
        p = run(["compare", FIXTURE, fewer, "--format", "json", "--metric", "peak_rss_bytes"])
        self.assertEqual(p.returncode, 0, p.stderr)
        row = next(c for c in json.loads(p.stdout)["changes"] if c["cell"] == "glibc size_mix t1 churn")
        self.assertEqual(row["direction"], "not comparable")
        self.assertGreater(row["change"], 0.4)
        p = run(["compare", FIXTURE, fewer, "--metric", "peak_rss_bytes"])
        line = next(line for line in p.stdout.splitlines() if line.startswith("not comparable") and "glibc size_mix t1 churn" in line)
        self.assertIn("%+.1f%% (not judged)" % (100 * row["change"]), line)
        self.assertNotIn("+0.0%", line)


class OneMetricName(FixtureTest):
    def test_verdicts_comparisons_and_new_baselines_use_the_metric_tables_names(self):
        base = self.baseline()
        written = read_json(base)
        self.assertEqual(written["allocmark_baseline"], 2)
        self.assertEqual({k for c in written["cells"] for k in c["values"]}, FIXTURE_GATED)
        everything = ["--metric", ",".join(sorted(GATED))]
        p = self.gate(base, FIXTURE, "--format", "json", *everything)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual({v["metric"] for v in json.loads(p.stdout)["verdicts"]}, FIXTURE_GATED)
        p = self.gate(base, FIXTURE, "--format", "markdown", *everything)
        self.assertEqual(self.metric_column(p.stdout), FIXTURE_GATED)
        p = run(["compare", FIXTURE, FIXTURE, "--format", "json"])
        compared = json.loads(p.stdout)
        self.assertEqual(set(compared["metrics"]), GATED)
        self.assertEqual({c["metric"] for c in compared["changes"]}, FIXTURE_GATED)
        p = run(["compare", FIXTURE, FIXTURE, "--format", "markdown"])
        self.assertEqual(self.metric_column(p.stdout), FIXTURE_GATED)
        p = run(["compare", FIXTURE, FIXTURE])
        for old in OLD_NAMES:
            self.assertIsNone(re.search(r"\b%s\b" % old, p.stdout), old)

    def test_format_1_baselines_read_as_before_and_judge_the_same(self):
        self.assertEqual(read_json(FORMAT1)["allocmark_baseline"], 1)
        everything = ["--metric", ",".join(sorted(GATED)), "--format", "json"]
        old = self.gate(FORMAT1, FIXTURE, *everything)
        self.assertEqual(old.returncode, 0, old.stdout + old.stderr)
        self.assertIn("note: %s is a baseline of format 1 (values under the metrics' old names), read as before; "
                      "`allocmark baseline` now writes format 2" % FORMAT1, old.stderr)
        new = self.gate(self.baseline(), FIXTURE, *everything)
        judged = lambda p: [(v["cell"], v["metric"], v["verdict"], v["baseline"]["median"]) for v in json.loads(p.stdout)["verdicts"]]
        self.assertEqual(judged(old), judged(new))
        self.assertEqual({v["metric"] for v in json.loads(old.stdout)["verdicts"]}, FIXTURE_GATED)

        # A format 2 file keyed by an old name is a hand edit mixing the formats: refused, naming both.
        mixed = read_json(self.baseline())
        mixed["cells"][0]["values"]["peak_rss"] = mixed["cells"][0]["values"].pop("peak_rss_bytes")
        p = self.gate(write_json(os.path.join(self.tmp, "mixed.json"), mixed), FIXTURE)
        self.assertEqual(p.returncode, 2)
        self.assertIn("mixed.json: cells[0] (glibc size_mix t1 fill).values: unknown metric 'peak_rss'", p.stderr)
        self.assertIn("format 1 files name it peak_rss, format 2 files peak_rss_bytes", p.stderr)
        # One metric under both its names in a format 1 file: refused rather than pooled.
        both = read_json(FORMAT1)
        both["cells"][0]["values"]["peak_rss_bytes"] = both["cells"][0]["values"]["peak_rss"]
        p = self.gate(write_json(os.path.join(self.tmp, "both.json"), both), FIXTURE)
        self.assertEqual(p.returncode, 2)
        self.assertIn("'peak_rss' and 'peak_rss_bytes' are one metric; give its values once", p.stderr)
        future = dict(mixed, allocmark_baseline=3)
        p = self.gate(write_json(os.path.join(self.tmp, "future.json"), future), FIXTURE)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not an allocmark baseline of format 1 to 2", p.stderr)


    def test_the_projects_own_baseline_is_format_2_and_ci_gate_uses_todays_names(self):
        committed = os.path.join(HERE, "..", "ci", "baselines", "gate-matrix.json")
        self.assertEqual(read_json(committed)["allocmark_baseline"], 2)
        # Read without a note or a format error; its cells are not the fixture's, so every one of
        # its cell-phases with a peak is missing from the fixture (exit 1).
        p = run(["gate", committed, FIXTURE, "--format", "json"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertNotIn("note", p.stderr)
        verdicts = json.loads(p.stdout)["verdicts"]
        self.assertEqual({v["verdict"] for v in verdicts}, {"missing"})
        self.assertEqual(len(verdicts), sum("peak_rss_bytes" in c["values"] for c in read_json(committed)["cells"]))
        with open(os.path.join(HERE, "..", "ci", "gate.sh")) as f:
            invocation = next(line for line in f if line.startswith('"$allocmark" gate '))
        self.assertIn('gate "$baseline" "$out" --metric peak_rss_bytes ', invocation)


class ArgumentStyle(FixtureTest):
    def test_gate_takes_baseline_and_results_in_order_like_compare(self):
        base = self.baseline()
        positional = run(["gate", base, FIXTURE, "--format", "json"])
        self.assertEqual(positional.returncode, 0, positional.stdout + positional.stderr)
        flags = self.gate(base, FIXTURE, "--format", "json")
        self.assertEqual(json.loads(positional.stdout), json.loads(flags.stdout))
        p = run(["gate", base])
        self.assertEqual(p.returncode, 2)
        self.assertIn("results", p.stderr)
        p = run(["gate", base, FIXTURE, "--baseline", base])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--baseline and baseline: both given; give it once, as baseline", p.stderr)
        p = run(["gate", FIXTURE, base])  # swapped: said, not misread
        self.assertEqual(p.returncode, 2)
        self.assertIn("RESULTS (--results) %s: a file; RESULTS takes the results folder to judge and comes second (`gate BASELINE RESULTS`)" % base, p.stderr)

    def test_compares_page_has_its_own_flag_and_the_old_o_still_works_with_a_note(self):
        # A copy: the page's writer refreshes the folders' summary files, and FIXTURE is committed.
        folder = self.copy("run")
        page = os.path.join(self.tmp, "page.html")
        p = run(["compare", folder, folder, "--report", page])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("note", p.stderr)
        with open(page) as f:
            self.assertIn("compared with", f.read())
        old = os.path.join(self.tmp, "old.html")
        p = run(["compare", folder, folder, "-o", old])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("allocmark: note: compare -o: now called --report (the old name still works)\n", p.stderr)
        self.assertTrue(os.path.isfile(old))
        p = run(["compare", folder, folder, "-o", old, "--report", page])
        self.assertEqual(p.returncode, 2)
        self.assertIn("-o and --report: both name the HTML page; give it once, as --report", p.stderr)
        help_text = run(["compare", "--help"]).stdout
        self.assertIn("--report", help_text)
        self.assertIn("HTML page", help_text)
        self.assertNotIn("-o,--out", help_text)
        self.assertNotIn("Excludes", help_text)

    def test_help_says_what_each_command_produces_and_where_defaults_come_from(self):
        self.assertRegex(run(["baseline", "--help"]).stdout, r"-o,--out TEXT REQUIRED\s+the baseline file it writes")
        gate_help = run(["gate", "--help"]).stdout
        self.assertRegex(gate_help, r"Usage: .*gate \[OPTIONS\] baseline results")
        # Each input is listed once: the old flags work but are not a second spelling in the help.
        self.assertEqual(len(re.findall(r"^\s+baseline TEXT REQUIRED", gate_help, re.M)), 1, gate_help)
        self.assertNotIn("--baseline", gate_help)
        self.assertNotIn("--results", gate_help)
        self.assertIn("print the verdicts", gate_help)
        with open(os.path.join(HERE, "..", "configs", "quick.toml"), "rb") as f:
            quick_reps = tomllib.load(f)["matrix"]["reps"]
        reps = next(line for line in run(["run", "--help"]).stdout.splitlines() if "--reps" in line)
        self.assertIn("(default 3, or the matrix file's reps; configs/quick.toml, which a plain `run` runs: %d)" % quick_reps, reps)


if __name__ == "__main__":
    unittest.main()
