"""Ordinary but careless programs as cells (issue 21, items 5-8; docs/programs.md): the driver
survives them and records each cell truthfully. A program that writes phase marks and never reads
the answers, bytes that are not UTF-8 in what a program prints or is called with, children that
outlive the program, and a program that drops the allocator's preload.

Run by ctest with Debian's /usr/bin/python3; standard library only. Assertions are about behaviour
(exit codes, records, the process table), never about timings.
"""
import json
import os
import signal
import subprocess
import unittest

from e2e_test import ALLOCMARK, TempDirTest, records

PYTHON = "/usr/bin/python3"


def run(args, timeout=300):
    # Program output and arguments may hold any bytes: decoded leniently, compared as text.
    return subprocess.run([ALLOCMARK] + args, capture_output=True, timeout=timeout, text=True, errors="replace")


def processes_with(marker):
    """PIDs of live processes whose command line holds `marker` (from /proc/*/cmdline)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


class UnreadPhaseAnswers(TempDirTest):
    def test_marks_written_without_reading_the_answers_are_recorded(self):
        # The shell writes two marks and exits at once, closing its end of the phase socket before
        # the driver answers: the driver used to die of SIGPIPE (exit 141, nothing recorded) in
        # about two tries of three. Six cells: all of them must be recorded.
        marks = "marks=/bin/sh -c 'echo \"phase a\" >&$ALLOCMARK_PHASE_FD; echo \"phase b\" >&$ALLOCMARK_PHASE_FD'"
        p = run(["run", "-a", "glibc,jemalloc", "-r", "3", "--out", self.out, "--program", marks])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        recs = records(self.out)
        self.assertEqual(len(recs), 6, p.stderr)
        for r in recs:
            self.assertEqual(r["status"], "ok", r["error"])
            self.assertEqual([ph["name"] for ph in r["phases"]], ["startup", "a", "b"], r["allocator"])
            self.assertEqual(r["phase_mark_errors"], [])


    def test_a_mark_repeated_or_named_startup_is_a_phase_of_its_own(self):
        # Readers pool phases of one name as repetitions: `load` marked twice was "load ... 2 ok" per
        # cell, and with -r 2 the baseline held n=4 and the gate judged what had only 2 (issue 41).
        marks = ("marks=/bin/sh -c 'm() { echo \"phase $1\" >&$ALLOCMARK_PHASE_FD; read -r _ <&$ALLOCMARK_PHASE_FD; }; "
                 "m load; m load; m startup'")
        p = run(["run", "-a", "glibc", "-r", "2", "--out", self.out, "--program", marks])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        recs = records(self.out)
        self.assertEqual(len(recs), 2)
        for r in recs:
            self.assertEqual(r["status"], "ok", r["error"])
            self.assertEqual([ph["name"] for ph in r["phases"]], ["startup", "load", "load#2", "startup#2"])
        p = run(["show", self.out, "--format", "json", "--by", "phase"])
        self.assertEqual(p.returncode, 0, p.stderr)
        cells = {g["phase"]: g["cells"] for g in json.loads(p.stdout)["groups"] if "phase" in g}
        self.assertEqual(cells.get("load"), 2, cells)
        self.assertEqual(cells.get("load#2"), 2, cells)
        baseline = os.path.join(self.tmp, "b.json")
        p = run(["baseline", self.out, "-o", baseline])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(baseline) as f:
            by_phase = {c["phase"]: c for c in json.load(f)["cells"]}
        self.assertEqual(len(by_phase["load"]["values"]["peak_rss_bytes"]), 2)
        self.assertEqual(len(by_phase["load#2"]["values"]["peak_rss_bytes"]), 2)
        # Two repetitions are below the gate's minimum of 3: not judged (exit 2), never a pass.
        p = run(["gate", baseline, self.out, "--phase", "load"])
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("fewer than 3 repetitions (baseline 2, results 2)", p.stdout)


class NotUtf8(TempDirTest):
    def test_bytes_that_are_not_utf8_are_recorded_and_resume_completes(self):
        tail_cut = "cut=" + PYTHON + " -c 'import sys; sys.stderr.buffer.write(b\"\\xc3\\xa9\" * 300 + b\"!\"); sys.exit(4)'"
        programs = [
            # A failing program's stderr tail with stray bytes.
            "stderr=/bin/sh -c 'printf \"bad \\377\\376 bytes\" >&2; exit 3'",
            # 601 bytes of stderr: the 400-byte tail starts in the middle of an e-acute.
            tail_cut,
            # A phase mark whose name is not UTF-8, and one whose name is (and valid).
            "mark=/bin/sh -c 'printf \"phase caf\\351\\n\" >&$ALLOCMARK_PHASE_FD; read -r _ <&$ALLOCMARK_PHASE_FD;"
            " printf \"phase caf\\303\\251\\n\" >&$ALLOCMARK_PHASE_FD; read -r _ <&$ALLOCMARK_PHASE_FD'",
        ]
        args = ["run", "-a", "glibc", "-r", "1", "--out", self.out]
        for prog in programs:
            args += ["--program", prog]
        p = run(args)
        self.assertEqual(p.returncode, 1, p.stderr)  # two programs fail on purpose
        self.assertNotIn("could not record", p.stderr)
        by = {r["workload"]: r for r in records(self.out)}
        self.assertEqual(set(by), {"program:stderr", "program:cut", "program:mark"}, p.stderr)

        self.assertEqual(by["program:stderr"]["status"], "failed")
        self.assertIn("exit code 3: bad \ufffd\ufffd bytes", by["program:stderr"]["error"])

        cut = by["program:cut"]["error"]
        self.assertEqual(by["program:cut"]["status"], "failed")
        self.assertIn("...\u00e9\u00e9", cut, "the tail starts at a character boundary")
        self.assertNotIn("\ufffd", cut)
        self.assertTrue(cut.endswith("\u00e9!"), cut)

        mark = by["program:mark"]
        self.assertEqual(mark["status"], "ok", mark["error"])
        self.assertEqual([ph["name"] for ph in mark["phases"]], ["startup", "caf\u00e9"])
        self.assertEqual(mark["phase_mark_errors"], ["phase caf\ufffd"])

        # The folder reads back, and a resume finds every cell recorded.
        again = run(args + ["--resume"])
        self.assertEqual(again.returncode, 1, again.stderr)  # the folder still holds the two failed cells
        self.assertIn("3 of 3 cells already recorded; running 0", again.stderr)
        self.assertEqual(len(records(self.out)), 3)
        show = run(["show", self.out])
        self.assertEqual(show.returncode, 0, show.stderr)


class OutlivingChildren(TempDirTest):
    MARKERS = ("61.4159", "62.6535")

    def tearDown(self):
        for marker in self.MARKERS:  # what an unfixed driver leaves behind
            for pid in processes_with(marker):
                os.kill(pid, signal.SIGKILL)
        super().tearDown()

    def test_the_cell_ends_with_the_program_and_so_does_everything_it_started(self):
        # One child in the program's process group, one in a session of its own that holds the
        # program's descriptors (stdout, the report pipe, the phase socket) and marks a phase two
        # seconds later: neither may outlive the cell, and that late mark is not the cell's.
        daemon = self.write("daemon.py", "import os, sys, time\ntime.sleep(2)\nos.write(4, b'phase late\\n')\n"
                                         "time.sleep(float(sys.argv[1]))\n")
        prog = "daemon=/bin/sh -c 'sleep 61.4159 & setsid " + PYTHON + " " + daemon + " 62.6535 & echo started'"
        p = run(["run", "-a", "glibc", "-r", "1", "--out", self.out, "--program", prog])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for marker in self.MARKERS:
            self.assertEqual(processes_with(marker), [], "a process of the cell outlived `allocmark run`: " + marker)
        (r,) = records(self.out)
        self.assertEqual(r["status"], "ok", r["error"])
        self.assertEqual(r["outlived_by"], 2)
        self.assertEqual([ph["name"] for ph in r["phases"]], ["run"], "the cell ended when the program exited")
        with open(r["stdout"]) as f:
            self.assertEqual(f.read(), "started\n")

    def test_a_program_that_leaves_nothing_behind_says_so(self):
        p = run(["run", "-a", "glibc", "-r", "1", "--out", self.out, "--program", "plain=/bin/sh -c 'echo hi'"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        (r,) = records(self.out)
        self.assertEqual(r["status"], "ok", r["error"])
        self.assertEqual(r["outlived_by"], 0)


class DroppedPreload(TempDirTest):
    def test_a_program_whose_measured_image_dropped_the_preload_fails(self):
        cells = {
            "unset": "/usr/bin/env -u LD_PRELOAD /bin/sleep 0.1",
            "shexec": "/bin/sh -c 'exec /usr/bin/env -u LD_PRELOAD /bin/sleep 0.1'",
            # Fine: the preload is kept through exec, the shell's _exit, Python's os._exit.
            "keep": "/usr/bin/env /bin/sleep 0.1",
            "keepexec": "/bin/sh -c 'exec /bin/sleep 0.1'",
            "dash": "/bin/sh -c 'sleep 0.1; echo done'",
            "osexit": PYTHON + " -c 'import os; os._exit(0)'",
        }
        args = ["run", "-a", "jemalloc", "-r", "1", "--out", self.out]
        for name, command in cells.items():
            args += ["--program", name + "=" + command]
        p = run(args)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        by = {r["workload"].split(":", 1)[1]: r for r in records(self.out)}
        self.assertEqual(set(by), set(cells))
        for name in ("unset", "shexec"):
            self.assertEqual(by[name]["status"], "failed", name)
            self.assertIn("no preload proof", by[name]["error"], name)
        for name in ("keep", "keepexec", "dash", "osexit"):
            r = by[name]
            self.assertEqual(r["status"], "ok", (name, r["error"]))
            self.assertTrue(os.path.basename(r["library"]).startswith("libjemalloc.so"), (name, r["library"]))
        # The shell leaves by _exit, and that exit is reported too: its last phase's peak is exact.
        self.assertTrue(by["dash"]["phases"][-1]["peak_rss_exact"])


if __name__ == "__main__":
    unittest.main()
