#!/usr/bin/python3
"""Transparent huge pages per phase (issue 25): the process's anonymous huge-page bytes at each
phase end and the system's THP events during it, in every record and in `show`, on real runs."""
import json
import os
import signal
import subprocess
import time
import unittest

from e2e_test import ALLOCMARK, TempDirTest, records, run

# hash_build at a tenth of its quick size: about 50 MiB, filled by a few large regions.
MATRIX = """
[allocators."jemalloc:thp"]
backend = "jemalloc"
env = { MALLOC_CONF = "thp:always" }
[matrix]
allocators = ["glibc", "jemalloc:thp"]
workloads = ["hash_build"]
threads = [1]
reps = 1
size = "quick"
[params.hash_build]
scale = 0.1
"""


def thp_mode():
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        return f.read().split("[")[1].split("]")[0]


def pmd_size():
    # The size of a transparent huge page (2 MiB on x86-64): node meminfo's AnonHugePages counts them whole.
    with open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") as f:
        return int(f.read())


class PerPhase(TempDirTest):
    def test_huge_pages_of_an_allocator_that_asks_for_them_and_of_one_that_does_not(self):
        path = os.path.join(self.tmp, "thp.toml")
        with open(path, "w") as f:
            f.write(MATRIX)
        p = run(["run", path, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        mode = thp_mode()
        with open(os.path.join(self.out, "meta.json")) as f:
            self.assertIn(mode, json.load(f)["machine"]["thp_enabled"])
        by = {r["allocator"]: r for r in records(self.out)}
        for r in by.values():
            for ph in r["phases"]:
                where = (r["allocator"], ph["name"])
                self.assertIsNotNone(ph["anon_huge_bytes"], where)
                self.assertEqual(ph["anon_huge_bytes"] % (2 << 20), 0, where)  # whole huge pages
                self.assertLessEqual(ph["anon_huge_bytes"], ph["end_rss_bytes"], where)
                for event in ("fault_alloc", "fault_fallback", "collapse_alloc", "split_page"):
                    self.assertGreaterEqual(ph["thp_events"][event], 0, where)
                # The whole system's huge pages on each node (node meminfo): whole PMD-sized pages,
                # and the process's are among them.
                self.assertTrue(ph["nodes"], where)
                for n in ph["nodes"]:
                    sys_huge = n["system_anon_huge_bytes"]
                    self.assertIsInstance(sys_huge, int, (where, n["node"]))
                    self.assertGreaterEqual(sys_huge, 0, (where, n["node"]))
                    self.assertEqual(sys_huge % pmd_size(), 0, (where, n["node"]))
                self.assertGreaterEqual(sum(n["system_anon_huge_bytes"] for n in ph["nodes"]), ph["anon_huge_bytes"], where)
        built = {a: next(ph for ph in r["phases"] if ph["name"] == "build") for a, r in by.items()}
        # glibc never asks for huge pages: under madvise (and never) it has none.
        if mode in ("madvise", "never"):
            self.assertEqual(built["glibc"]["anon_huge_bytes"], 0)
        # jemalloc with thp:always madvises its extents: huge pages unless the machine forbids them.
        if mode == "never":
            self.assertEqual(built["jemalloc:thp"]["anon_huge_bytes"], 0)
        else:
            self.assertGreaterEqual(built["jemalloc:thp"]["anon_huge_bytes"], 8 << 20)
            self.assertGreater(built["jemalloc:thp"]["thp_events"]["fault_alloc"], 0)
        # The model reads them: show's column and summary.json's metric.
        p = run(["show", self.out, "--metric", "anon_huge_bytes,thp_fault_alloc", "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        shown = {(g["allocator"], g["phase"]): g["metrics"] for g in json.loads(p.stdout)["groups"]}
        self.assertEqual(shown[("jemalloc:thp", "build")]["anon_huge_bytes"]["median"], built["jemalloc:thp"]["anon_huge_bytes"])
        p = run(["show", self.out, "--metric", "anon_huge_bytes"])
        self.assertIn("huge MiB", p.stdout)
        # Per node where node figures are shown: the node rows of `show --by ...,node`.
        p = run(["show", self.out, "--by", "allocator,phase,node", "--metric", "system_anon_huge_bytes", "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {(g["allocator"], g["phase"], g["node"]): g["metrics"]["system_anon_huge_bytes"]["median"]
                for g in json.loads(p.stdout)["groups"]}
        for n in built["jemalloc:thp"]["nodes"]:
            self.assertEqual(rows[("jemalloc:thp", "build", n["node"])], n["system_anon_huge_bytes"])
        p = run(["show", self.out, "--by", "allocator,phase,node", "--metric", "system_anon_huge_bytes"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("sys huge MiB", p.stdout)

    def test_a_program_cells_phases_carry_the_systems_huge_pages_per_node(self):
        # Read by the driver at the mark, by the companion as the program exits for the last phase.
        p = run(["run", "-a", "glibc", "--program",
                 "marks=/bin/sh -c 'echo \"phase work\" >&$ALLOCMARK_PHASE_FD; read -r _ <&$ALLOCMARK_PHASE_FD; exec /bin/true'",
                 "-r", "1", "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = records(self.out)
        self.assertEqual(r["status"], "ok", r.get("error"))
        self.assertEqual([ph["name"] for ph in r["phases"]], ["startup", "work"])
        for ph in r["phases"]:
            for n in ph["nodes"]:
                sys_huge = n["system_anon_huge_bytes"]
                self.assertIsInstance(sys_huge, int, (ph["name"], n))
                self.assertEqual(sys_huge % pmd_size(), 0, (ph["name"], n))

    def test_the_gate_judges_huge_pages(self):
        # One allocator name, its setting changed between two runs: thp:always madvises its
        # extents, so its phases go from no huge page to many; the gate's huge-page metric says so.
        self.assertIn(thp_mode(), ("madvise", "always"))
        runs = {}
        for name, conf in (("before", "thp:never"), ("after", "thp:always")):
            path = os.path.join(self.tmp, name + ".toml")
            with open(path, "w") as f:
                f.write(MATRIX.replace('allocators = ["glibc", "jemalloc:thp"]', 'allocators = ["jemalloc:thp"]')
                        .replace("thp:always", conf).replace("reps = 1", "reps = 3"))
            runs[name] = os.path.join(self.tmp, name)
            p = run(["run", path, "--out", runs[name]])
            self.assertEqual(p.returncode, 0, p.stderr)
        base = os.path.join(self.tmp, "base.json")
        p = run(["baseline", runs["before"], "-o", base])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(base) as f:
            for cell in json.load(f)["cells"]:
                self.assertEqual(cell["values"]["anon_huge_bytes"], [0, 0, 0], cell["phase"])
                self.assertNotIn("thp_how", cell, cell["phase"])  # off the axis: the machine's mode
        p = run(["gate", base, runs["after"], "--metric", "anon_huge_bytes", "--format", "json"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        verdicts = {v["phase"]: v for v in json.loads(p.stdout)["verdicts"]}
        self.assertEqual(verdicts["build"]["verdict"], "regressed")
        self.assertEqual(verdicts["build"]["baseline"]["median"], 0)
        p = run(["gate", base, runs["before"], "--metric", "anon_huge_bytes"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


class ThpAxis(TempDirTest):
    """The thp axis (issue 25): `never` per cell by PR_SET_THP_DISABLE, the machine's own mode as
    it is, anything else refused before a cell runs."""

    def test_never_cells_get_no_huge_pages_where_the_machines_mode_gives_them(self):
        mode = thp_mode()
        # A machine without THP for madvised memory cannot show the difference this test is about.
        self.assertIn(mode, ("madvise", "always"), "this test needs THP madvise or always, the machine has " + mode)
        path = os.path.join(self.tmp, "thp.toml")
        with open(path, "w") as f:
            f.write(MATRIX.replace('reps = 1', 'reps = 1\nthp = ["never", "%s"]' % mode))
        p = run(["run", path, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        by = {r["allocator"]: r for r in records(self.out)}
        self.assertEqual(sorted(by), sorted(a + "@thp=" + m for a in ("glibc", "jemalloc:thp") for m in ("never", mode)))
        for name, r in by.items():
            wanted = name.split("@thp=")[1]
            self.assertEqual(r["thp"], {"mode": wanted, "how": "prctl" if wanted == "never" else "machine"}, name)
        never = by["jemalloc:thp@thp=never"]
        asked = by["jemalloc:thp@thp=" + mode]
        # jemalloc with thp:always madvises its extents MADV_HUGEPAGE: huge pages under the
        # machine's mode, none at all in a process whose THP is disabled.
        self.assertGreaterEqual(max(ph["anon_huge_bytes"] for ph in asked["phases"]), 8 << 20)
        for ph in never["phases"] + by["glibc@thp=never"]["phases"]:
            self.assertEqual(ph["anon_huge_bytes"], 0, ph["name"])
        # The two modes are two rows wherever results are read.
        p = run(["show", self.out, "--metric", "anon_huge_bytes"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("jemalloc:thp@thp=never", p.stdout)
        self.assertIn("jemalloc:thp@thp=" + mode, p.stdout)
        # A baseline keeps how each cell got its mode, read from the records: what the gate decides
        # a machine's other mode by (never from the name).
        base = os.path.join(self.tmp, "base.json")
        p = run(["baseline", self.out, "-o", base])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(base) as f:
            for cell in json.load(f)["cells"]:
                self.assertEqual(cell["thp_how"], "prctl" if cell["allocator"].endswith("@thp=never") else "machine", cell)

    def test_a_program_cell_inherits_never(self):
        p = run(["run", "-a", "glibc", "--thp", "never", "--program", "status=grep THP_enabled /proc/self/status",
                 "-r", "1", "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = records(self.out)
        self.assertEqual(r["status"], "ok", r.get("error"))
        self.assertEqual(r["thp"], {"mode": "never", "how": "prctl"})
        logs = os.path.join(self.out, "logs")
        out = [n for n in os.listdir(logs) if n.endswith(".stdout")]
        with open(os.path.join(logs, out[0])) as f:
            self.assertRegex(f.read(), r"THP_enabled:\s+0")

    def test_a_mode_the_machine_is_not_in_is_refused_before_anything_runs(self):
        other = next(m for m in ("always", "madvise") if m != thp_mode())
        p = run(["run", "-a", "glibc", "-w", "size_mix", "--thp", "never," + other, "--out", self.out])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--thp: %s: the transparent huge pages of this machine" % other, p.stderr)
        self.assertIn("allocmark lab", p.stderr)
        self.assertFalse(os.path.exists(self.out))
        p = run(["run", "-a", "glibc", "-w", "size_mix", "--thp", "sometimes", "--out", self.out])
        self.assertEqual(p.returncode, 2)
        self.assertIn("'sometimes' is not a transparent huge page mode (valid: never, madvise, always)", p.stderr)


THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


class SystemWide(TempDirTest):
    """`run --system-thp MODE`: the machine's mode for one run, put back however the run ends."""

    def setUp(self):
        super().setUp()
        self.original = thp_mode()
        self.other = "always" if self.original != "always" else "madvise"

    def tearDown(self):
        # Whatever a failed assertion left, the machine gets its mode back before the next test.
        if thp_mode() != self.original:
            with open(THP_ENABLED, "w") as f:
                f.write(self.original)
        super().tearDown()

    def wait_for_mode(self, mode, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if thp_mode() == mode:
                return True
            time.sleep(0.05)
        return False

    def test_the_cells_run_under_the_mode_and_the_machine_gets_its_own_back(self):
        p = run(["run", "-a", "glibc", "-w", "size_mix", "--set", "size_mix.live_mib=4", "--set", "size_mix.ops=1000",
                 "-t", "1", "-r", "1", "--system-thp", self.other, "--thp", self.other + ",never", "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("transparent huge pages set to '%s' for the whole machine while this run lasts (was '%s'"
                      % (self.other, self.original), p.stderr)
        self.assertEqual(thp_mode(), self.original)
        with open(os.path.join(self.out, "meta.json")) as f:
            machine = json.load(f)["machine"]
        self.assertEqual(machine["thp_enabled"], self.other)
        self.assertEqual(machine["thp_enabled_set_by_run"], {"mode": self.other, "was": self.original})
        self.assertEqual(sorted(r["thp"]["mode"] for r in records(self.out)), sorted([self.other, "never"]))

    def test_put_back_after_sigint_sigterm_and_sigkill_of_the_driver(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            out = os.path.join(self.tmp, "out-%d" % sig)
            # A cell that hangs until the driver is stopped; its worker dies with the driver.
            driver = subprocess.Popen([ALLOCMARK, "run", "-a", "glibc", "-w", "fault_inject", "--set", "fault_inject.mode=hang",
                                       "-t", "1", "-r", "1", "--timeout", "120", "--system-thp", self.other, "--out", out],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                self.assertTrue(self.wait_for_mode(self.other), "the run never set the mode (%s)" % sig)
                time.sleep(0.5)  # the cell is running
                driver.send_signal(sig)
                driver.wait(timeout=60)
            finally:
                if driver.poll() is None:
                    driver.kill()
                    driver.wait()
            self.assertNotEqual(driver.returncode, 0, sig)
            self.assertTrue(self.wait_for_mode(self.original, 10), "mode left at %s after %s" % (thp_mode(), sig))

    def test_put_back_after_a_killed_worker(self):
        p = run(["run", "-a", "glibc", "-w", "fault_inject", "--set", "fault_inject.mode=kill", "-t", "1", "-r", "1",
                 "--system-thp", self.other, "--out", self.out])
        self.assertEqual(p.returncode, 1, p.stderr)
        (r,) = records(self.out)
        self.assertEqual(r["status"], "crashed")
        self.assertEqual(thp_mode(), self.original)

    def test_a_second_switch_while_one_runs_is_refused_and_the_machine_gets_its_first_mode_back(self):
        # Two real runs: the first holds the machine at `other` while its cell hangs; the second asks
        # for `never` meanwhile. Whatever happens, the machine gets the mode it started in.
        start = thp_mode()
        first = None
        try:
            first = subprocess.Popen([ALLOCMARK, "run", "-a", "glibc", "-w", "fault_inject", "--set", "fault_inject.mode=hang",
                                      "-t", "1", "-r", "1", "--timeout", "120", "--system-thp", self.other,
                                      "--out", os.path.join(self.tmp, "first")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.assertTrue(self.wait_for_mode(self.other), "the first run never set the mode")
            second_mode = "never" if self.other != "never" else "madvise"
            second_out = os.path.join(self.tmp, "second")
            p = run(["run", "-a", "glibc", "-w", "size_mix", "--set", "size_mix.ops=1000", "--set", "size_mix.live_mib=4",
                     "-t", "1", "-r", "1", "--system-thp", second_mode, "--out", second_out])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("another allocmark run holds this machine's transparent huge page mode (pid %d" % first.pid, p.stderr)
            self.assertFalse(os.path.exists(second_out))
            self.assertEqual(thp_mode(), self.other)  # the second changed nothing
            first.send_signal(signal.SIGINT)
            first.wait(timeout=60)
            self.assertTrue(self.wait_for_mode(start, 10), "mode left at %s" % thp_mode())
            # Once the first has ended, a switch is free again.
            p = run(["run", "-a", "glibc", "-w", "size_mix", "--set", "size_mix.ops=1000", "--set", "size_mix.live_mib=4",
                     "-t", "1", "-r", "1", "--system-thp", second_mode, "--out", second_out])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(thp_mode(), start)
        finally:
            if first is not None and first.poll() is None:
                first.kill()
                first.wait()
            self.wait_for_mode(start, 10)
            if thp_mode() != start:
                with open(THP_ENABLED, "w") as f:
                    f.write(start)

    def test_bad_input_changes_nothing(self):
        p = run(["run", "-a", "glibc", "-w", "size_mix", "--system-thp", "sometimes", "--out", self.out])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--system-thp", p.stderr)
        self.assertFalse(os.path.exists(self.out))
        self.assertEqual(thp_mode(), self.original)


if __name__ == "__main__":
    unittest.main()
