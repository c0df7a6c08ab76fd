"""The gate and baseline on hostile but ordinary input (issue 21 items 3, 4, 9, 11, 12; docs/gate.md).

A results folder gated in CI may be an artifact of anyone's pull request: `gate --confirm` must not
run what its records name, its text must not become markup or terminal control, and a gate must
not pass on what it did not judge. Run by ctest with Debian's /usr/bin/python3; assertions on exit
codes, messages and files, never timings.
"""
import fcntl
import json
import os
import shutil
import tempfile
import unittest

from e2e_test import TempDirTest, records, run

# A program cell that holds a 32 MiB buffer: a peak far above one huge page, in a few milliseconds.
PROGRAM = "tool=dd if=/dev/zero of=/dev/null bs=32M count=1"


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_text(path):
    with open(path) as f:
        return f.read()


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f)
    return path


def edit_records(folder, change):
    """Rewrites folder's results.jsonl with change(record) applied to every record."""
    path = os.path.join(folder, "results.jsonl")
    with open(path) as f:
        recorded = [json.loads(line) for line in f]
    for r in recorded:
        change(r)
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in recorded)


def inflate_peaks(record, factor=2.0):
    for phase in record["phases"]:
        phase["peak_rss_bytes"] = int(phase["peak_rss_bytes"] * factor)


class HostileGate(TempDirTest):
    @classmethod
    def setUpClass(cls):
        """One run of the program cell (3 repetitions) and its baseline, copied by each test."""
        cls._shared = tempfile.TemporaryDirectory(prefix="allocmark-hostile-gate-")
        cls.base_run = os.path.join(cls._shared.name, "base")
        p = run(["run", "--program", PROGRAM, "-a", "glibc", "-r", "3", "--out", cls.base_run])
        assert p.returncode == 0, p.stdout + p.stderr
        cls.base_json = os.path.join(cls._shared.name, "base.json")
        p = run(["baseline", cls.base_run, "-o", cls.base_json])
        assert p.returncode == 0, p.stdout + p.stderr

    @classmethod
    def tearDownClass(cls):
        cls._shared.cleanup()

    def copy_run(self, name):
        out = os.path.join(self.tmp, name)
        shutil.copytree(self.base_run, out)
        return out

    def edited_baseline(self, name, change):
        base = read_json(self.base_json)
        change(base)
        return write_json(os.path.join(self.tmp, name), base)

    def gate(self, baseline, results, *extra):
        return run(["gate", "--baseline", baseline, "--results", results, *extra])

    def assert_refused(self, p, *needles):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)

    # Item 3: code from an untrusted folder.

    def test_confirm_never_runs_a_command_planted_in_the_results(self):
        marker = os.path.join(self.tmp, "marker")
        planted = self.copy_run("planted")

        def plant(r):
            r["params"]["command"] = f"sh -c 'id > {marker}'"
            inflate_peaks(r)  # flagged, so that --confirm reruns it

        edit_records(planted, plant)
        rerun = os.path.join(self.tmp, "rerun")
        p = self.gate(self.base_json, planted, "--confirm", "--confirm-out", rerun, "--format", "json")
        self.assertFalse(os.path.exists(marker), "the gate ran a command taken from the results folder")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        verdicts = json.loads(p.stdout)["verdicts"]
        self.assertEqual([v["verdict"] for v in verdicts], ["not comparable"])
        self.assertIn("--confirm did not rerun it", verdicts[0]["reason"])
        self.assertIn("params command", verdicts[0]["reason"])
        self.assertFalse(os.path.exists(os.path.join(rerun, "results.jsonl")), "nothing is rerun")

        # The same flag on honest records is rerun, with the command the baseline names.
        honest = self.copy_run("honest")
        edit_records(honest, inflate_peaks)
        p = self.gate(self.base_json, honest, "--confirm", "--confirm-out", rerun, "--format", "json")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)  # a one-off: the rerun does not repeat it
        self.assertIn("not confirmed by the rerun", json.loads(p.stdout)["verdicts"][0]["reason"])
        commands = {r["params"]["command"] for r in records(rerun)}
        self.assertEqual(commands, {PROGRAM.split("=", 1)[1]})

    def test_confirm_never_loads_a_library_or_environment_planted_in_the_results(self):
        planted = self.copy_run("planted")
        library = os.path.join(planted, "evil.so")
        shutil.copy("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", library)

        def plant(r):
            r["preload"] = library
            r["env"] = {"LD_LIBRARY_PATH": planted}
            inflate_peaks(r)

        edit_records(planted, plant)
        rerun = os.path.join(self.tmp, "rerun")
        p = self.gate(self.base_json, planted, "--confirm", "--confirm-out", rerun, "--format", "json")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        reason = json.loads(p.stdout)["verdicts"][0]["reason"]
        self.assertIn("--confirm did not rerun it", reason)
        self.assertIn("library", reason)
        self.assertIn("LD_LIBRARY_PATH", reason)
        self.assertFalse(os.path.exists(os.path.join(rerun, "results.jsonl")), "nothing is rerun")

    # Item 9: a gate that passes without judging.

    def test_a_gate_that_compares_nothing_is_an_error(self):
        p = self.gate(self.base_json, self.base_run, "--phase", "nosuchphase")
        self.assert_refused(p, "--phase nosuchphase", "no such phase", "its phases: run")
        self.assertNotIn("PASS", p.stdout)

        failing = os.path.join(self.tmp, "failing")
        self.assertEqual(run(["run", "--program", "bad=false", "-a", "glibc", "-r", "1", "--out", failing]).returncode, 1)
        p = run(["baseline", failing, "-o", os.path.join(self.tmp, "failed.json")])
        self.assert_refused(p, "no ok cell")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "failed.json")))

        def no_cells(b):
            b["cells"] = []

        self.assert_refused(self.gate(self.edited_baseline("none.json", no_cells), self.base_run), "cells: empty")

        def all_failed(b):
            b["cells"] = [dict(b["cells"][0], phase="(cell)", values={}, not_ok=3)]

        self.assert_refused(self.gate(self.edited_baseline("failed.json", all_failed), self.base_run), "no cell holds a value")

        # Still judged: a baseline cell the results lack is reported missing (exit 1).
        def extra_cell(b):
            b["cells"].append(dict(b["cells"][0], allocator="jemalloc"))

        p = self.gate(self.edited_baseline("extra.json", extra_cell), self.base_run, "--format", "json")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("missing", {v["verdict"] for v in json.loads(p.stdout)["verdicts"]})

    def test_absurd_baselines_and_tolerances_are_refused_naming_cell_and_metric(self):
        for label, value in (("zero", 0), ("negative", -1), ("huge", 1e308)):
            def absurd(b, value=value):
                b["cells"][0]["values"]["peak_rss_bytes"] = [value] * 3

            p = self.gate(self.edited_baseline(label + ".json", absurd), self.base_run)
            self.assert_refused(p, "cells[0] (glibc program:tool t1 run).values.peak_rss_bytes[0]", "is not a peak_rss_bytes")

        def duplicated(b):
            b["cells"].append(b["cells"][0])

        p = self.gate(self.edited_baseline("twice.json", duplicated), self.base_run)
        self.assert_refused(p, "cells[1]: the same cell as cells[0]")
        for tolerance in ("200%", "5"):
            self.assert_refused(self.gate(self.base_json, self.base_run, "--tolerance", tolerance), "--tolerance", "above 100%")

    # Item 4: record text in pull-request comments and terminals.

    def test_markdown_and_terminal_output_escape_record_text(self):
        html = self.copy_run("html")

        def mark_up(r):
            r["allocator"] = "<img src=x onerror=alert(1)>"
            r["phases"][0]["name"] = "<script>alert(1)</script>"

        edit_records(html, mark_up)
        baseline = os.path.join(self.tmp, "html.json")
        self.assertEqual(run(["baseline", html, "-o", baseline]).returncode, 0)
        p = self.gate(baseline, html, "--format", "markdown")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("<img", p.stdout)
        self.assertNotIn("<script>", p.stdout)
        self.assertIn("&lt;img src=x onerror=alert(1)&gt;", p.stdout)

        terminal = self.copy_run("terminal")
        edit_records(terminal, lambda r: r.update(allocator="glibc\x1b[2J"))
        baseline = os.path.join(self.tmp, "terminal.json")
        self.assertEqual(run(["baseline", terminal, "-o", baseline]).returncode, 0)
        p = self.gate(baseline, terminal)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("\x1b", p.stdout)
        self.assertIn("glibc\\x1b[2J", p.stdout)

    # Item 11: a folder a run is writing.

    def test_a_folder_being_written_is_refused_unless_asked(self):
        folder = self.copy_run("writing")
        planned = read_json(os.path.join(folder, "cells.json"))
        planned.update({"k4": "glibc program:tool t1 r4", "k5": "glibc program:tool t1 r5"})
        write_json(os.path.join(folder, "cells.json"), planned)
        out = os.path.join(self.tmp, "partial.json")
        with open(os.path.join(folder, ".allocmark.lock"), "w") as lock:
            lock.write("pid 4242 on host h, started 2026-12-01: allocmark run\n")
            lock.flush()
            fcntl.flock(lock, fcntl.LOCK_EX)
            p = run(["baseline", folder, "-o", out])
            self.assert_refused(p, f"{folder}: a run is writing this folder (pid 4242): 3 of 5 cells finished", "--allow-running")
            self.assertFalse(os.path.exists(out))
            self.assert_refused(self.gate(self.base_json, folder), f"{folder}: a run is writing this folder (pid 4242)")
            p = run(["baseline", folder, "-o", out, "--allow-running"])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("a run is still writing", p.stderr)

    # Item 12: messages that say what was expected.

    def test_wrong_paths_and_malformed_baselines_say_what_was_expected(self):
        p = self.gate(self.base_run, self.base_run)
        self.assert_refused(p, "a folder; BASELINE (--baseline) takes the baseline file")
        self.assertNotIn("basic_filebuf", p.stderr)
        self.assert_refused(self.gate(self.base_json, self.base_json), "a file; RESULTS takes the results folder to judge and comes second")

        def bad_threads(b):
            b["cells"][0]["threads"] = "two"

        p = self.gate(self.edited_baseline("bad.json", bad_threads), self.base_run)
        self.assert_refused(p, "bad.json: cells[0].threads: expected an integer")

        # An existing --confirm-out is refused before anything is judged (nothing here is flagged).
        p = self.gate(self.base_json, self.base_run, "--confirm", "--confirm-out", self.base_run)
        self.assert_refused(p, "choose another --confirm-out or remove it")
        self.assertNotIn("--resume", p.stderr)
        self.assertEqual(p.stdout, "")
        self.assert_refused(self.gate(self.base_json, self.base_run, "--confirm", "--confirm-out",
                                      os.path.join(self.base_run, "logs")), "--confirm-out", "logs")
        for own in ("results.jsonl", "summary.csv"):
            copy = self.copy_run("own-" + own)
            before = read_text(os.path.join(copy, own))
            self.assert_refused(run(["baseline", copy, "-o", os.path.join(copy, own)]), "-o")
            self.assertEqual(read_text(os.path.join(copy, own)), before)

    # Issue 41: results held to the baselines' rules; every count and setting of a baseline checked.

    def test_results_are_held_to_the_rules_baselines_are_held_to(self):
        for value in (-5, 0, 1e300):
            bad = self.copy_run("bad-%s" % value)
            edit_records(bad, lambda r, value=value: r["phases"][0].__setitem__("peak_rss_bytes", value))
            p = self.gate(self.base_json, bad)
            self.assert_refused(p, os.path.join(bad, "results.jsonl") + ":1: cell glibc program:tool t1 r1, phases[0] (run): ",
                                "is not a peak_rss_bytes")
            self.assertNotIn("improved", p.stdout + p.stderr)
            self.assertNotIn("0" * 40, p.stdout + p.stderr)
            # The one rule set: the same words for the same value in a baseline.
            rule = p.stderr[p.stderr.index("is not a peak_rss_bytes"):].strip()
            base = self.edited_baseline("b.json", lambda b, value=value: b["cells"][0]["values"].__setitem__("peak_rss_bytes", [value] * 3))
            self.assert_refused(self.gate(base, self.base_run), rule)

    def test_counts_in_a_baseline_are_held_to_what_a_run_records(self):
        rerun = os.path.join(self.tmp, "rerun")
        inflated = self.copy_run("inflated")
        edit_records(inflated, inflate_peaks)  # flagged: --confirm would rerun as many as the baseline holds
        for not_ok, needle in ((1000000000, "cells[0].not_ok: expected an integer from 0 to 10000, found 1000000000"),
                               (9999, "3 values and not_ok 9999: more repetitions than a run records (at most 10000, "
                                      "the limit of --reps)")):
            base = self.edited_baseline("counts.json", lambda b, n=not_ok: b["cells"][0].__setitem__("not_ok", n))
            p = self.gate(base, inflated, "--confirm", "--confirm-out", rerun)
            self.assert_refused(p, base + ": " if not_ok > 10000 else base, needle)
            self.assertFalse(os.path.exists(rerun), "nothing is rerun")
        # Spread over a cell's phases: its (cell) entry's failures count with the phase's values.
        def spread(b):
            b["cells"].append(dict(b["cells"][0], phase="(cell)", values={}, not_ok=9998))
        p = self.gate(self.edited_baseline("spread.json", spread), inflated, "--confirm", "--confirm-out", rerun)
        self.assert_refused(p, "cells[1] (glibc program:tool t1 (cell)).not_ok: cell glibc program:tool t1 holds 3 ok and "
                               "9998 failed repetitions", "at most 10000")
        self.assertFalse(os.path.exists(rerun))

    def test_a_baselines_settings_are_named_as_its_fields_not_as_flags(self):
        rerun = os.path.join(self.tmp, "rerun")
        inflated = self.copy_run("inflated")
        edit_records(inflated, inflate_peaks)
        pinned = self.edited_baseline("pinned.json", lambda b: b["settings"].__setitem__("pin", "0-99999"))
        p = self.gate(pinned, inflated, "--confirm", "--confirm-out", rerun)
        self.assert_refused(p, pinned + ' settings.pin ("0-99999"): CPU ', "is not allowed to this process")
        self.assertNotIn("--pin", p.stderr)
        self.assertFalse(os.path.exists(rerun), "nothing is rerun")
        for key, value in (("timeout_s", -1), ("sample_ms", 0), ("latency_every", 10 ** 12), ("pin", "sometimes")):
            bad = self.edited_baseline("bad-%s.json" % key, lambda b, k=key, v=value: b["settings"].__setitem__(k, v))
            p = self.gate(bad, self.base_run)  # refused as it is read, with or without --confirm
            self.assert_refused(p, bad + ": settings." + key)
            self.assertNotIn("--" + key.replace("_", "-") + ":", p.stderr)


if __name__ == "__main__":
    unittest.main()
