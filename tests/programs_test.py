"""The user's own program as a cell: `allocmark run --program NAME='COMMAND ARGS'` and [programs.*].

Real driver, real allocator libraries, real programs (a small C program built beside the tests and a
Python script); standard library only. Run by ctest (tests/CMakeLists.txt).
"""
import html
import json
import os
import re
import tempfile
import unittest

from e2e_test import records, run  # the driver as a subprocess; results.jsonl as a list

PHASE_DEMO = os.environ.get("PHASE_DEMO", "")
HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "numap"]
MIB = 1 << 20


class ProgramTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.access(PHASE_DEMO, os.X_OK), "PHASE_DEMO (the phase_demo test program) is not built: " + PHASE_DEMO)
        self._tmp = tempfile.TemporaryDirectory(prefix="allocmark-programs-")
        self.tmp = self._tmp.name
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        self._tmp.cleanup()

    def write_matrix(self, text):
        matrix = os.path.join(self.tmp, "m.toml")
        with open(matrix, "w") as f:
            f.write(text)
        return matrix

    def assert_refused(self, args, *words):
        """`allocmark run ARGS --out X` exits 2 naming each of `words`, and writes nothing."""
        out = os.path.join(self.tmp, "refused")
        p = run(["run", *args, "--out", out])
        self.assertEqual(p.returncode, 2, p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)
        self.assertFalse(os.path.exists(out))


class EveryBackend(ProgramTest):
    def test_c_and_python_programs_with_phase_marks(self):
        p = run(["run", "--allocators", ",".join(BACKENDS), "--reps", "1", "--out", self.out,
                 "--program", "cdemo=" + PHASE_DEMO,
                 "--program", "pydemo=/usr/bin/python3 " + os.path.join(HERE, "programs", "phase_demo.py")])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        recs = records(self.out)
        self.assertEqual(len(recs), 2 * len(BACKENDS))
        expected_lib = {"glibc": "libc.so.6", "jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc.so.4",
                        "mimalloc": "libmimalloc.so.2", "numap": "libnumap.so"}
        for r in recs:
            self.assertEqual(r["status"], "ok", r.get("error"))
            # The preload proof, made inside the program by the companion library.
            self.assertTrue(os.path.basename(r["library"]).startswith(expected_lib[r["backend"]]), r["library"])
            self.assertEqual(r["exit_code"], 0)
            self.assertTrue(all(ph["peak_live_bytes"] is None for ph in r["phases"]))
            self.assertGreater(len(r["timeline"]), 0)
            self.assertGreater(sum(ph["user_s"] + ph["sys_s"] for ph in r["phases"]), 0)
            for ph in r["phases"]:
                self.assertTrue(ph["peak_rss_exact"], (r["allocator"], ph))
                # No sampled call latency inside a program: absent with its reason, never made up.
                self.assertIsNone(ph["contention"]["latency"])
                self.assertIn("program cell", ph["contention"]["latency_absent"])
            # Run-queue wait is read from /proc/PID/task at each mark; the last phase ends with the
            # program, whose threads are gone by then.
            for ph in r["phases"][:-1]:
                self.assertGreaterEqual(ph["contention"]["runqueue_wait_ns"], 0, (r["allocator"], ph["name"]))
                self.assertGreaterEqual(ph["contention"]["runqueue_threads"], 1, (r["allocator"], ph["name"]))
            self.assertIsNone(r["phases"][-1]["contention"]["runqueue_wait_ns"])
            # Resident bytes per NUMA node at each phase end: numa_maps read by the driver at a
            # mark, by the companion inside the program at its exit (the last phase). One node
            # here: all of the end RSS, to within the pages numa_maps leaves out.
            for ph in r["phases"]:
                where = (r["allocator"], r["workload"], ph["name"])
                self.assertEqual([n["node"] for n in ph["nodes"]], [0], where)
                node = ph["nodes"][0]
                self.assertIsNone(node["threads"], "allocmark does not see a program's threads")
                self.assertIsNone(node["local_fraction"])
                self.assertGreater(node["resident_bytes"], 0, where)
                # The whole system's huge pages on the node, read with numa_maps (issue 25).
                self.assertIsInstance(node["system_anon_huge_bytes"], int, where)
                self.assertGreaterEqual(node["system_anon_huge_bytes"], 0, where)
                if ph["end_rss_bytes"] is not None:
                    self.assertLessEqual(abs(node["resident_bytes"] - ph["end_rss_bytes"]),
                                         max(0.05 * ph["end_rss_bytes"], 1 << 20), where)
            if r["backend"] != "glibc":
                self.assertTrue(r["alloc_stats"], r["allocator"])  # native statistics from the program's exit
        for r in recs:
            names = [ph["name"] for ph in r["phases"]]
            peaks = {ph["name"]: ph["peak_rss_bytes"] for ph in r["phases"]}
            if r["workload"] == "program:cdemo":
                self.assertEqual(names, ["startup", "small", "large", "after"])
                self.assertGreaterEqual(peaks["large"], 96 * MIB, r["allocator"])
                self.assertGreaterEqual(peaks["small"], 8 * MIB, r["allocator"])
                self.assertLess(peaks["small"], peaks["large"], r["allocator"])
            else:
                self.assertEqual(names, ["startup", "build", "drop"])
                self.assertGreater(peaks["build"], peaks["startup"], r["allocator"])
        # Same program, same output under every allocator: one checksum each, nothing flagged.
        for w in ("program:cdemo", "program:pydemo"):
            self.assertEqual(len({r["stdout_checksum"] for r in recs if r["workload"] == w}), 1, w)
        self.assertNotIn("output differs", p.stderr)

    def test_a_program_without_marks_is_one_phase_from_a_matrix_file(self):
        with open(os.path.join(self.tmp, "input.txt"), "w") as f:
            f.write("3\n1\n2\n")
        matrix = os.path.join(self.tmp, "m.toml")
        with open(matrix, "w") as f:
            f.write('[matrix]\nallocators = ["glibc", "jemalloc"]\nreps = 1\n'
                    '[programs.sorter]\ncommand = "sort -n"\ninput = "input.txt"\nenv = { LC_ALL = "C" }\n')
        p = run(["run", matrix, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for r in records(self.out):
            self.assertEqual(r["status"], "ok", r.get("error"))
            self.assertEqual([ph["name"] for ph in r["phases"]], ["run"])
            with open(r["stdout"]) as f:
                self.assertEqual(f.read(), "1\n2\n3\n")

    def test_workloads_pick_programs_of_a_matrix_by_their_cell_name(self):
        matrix = self.write_matrix('[matrix]\nallocators = ["glibc"]\nreps = 1\n'
                                   '[programs.one]\ncommand = "echo one"\n[programs.two]\ncommand = "echo two"\n')
        for picked in (["program:two"], ["program:one", "program:two"]):
            out = os.path.join(self.tmp, "-".join(picked))
            p = run(["run", matrix, "-w", ",".join(picked), "--out", out])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(sorted(r["workload"] for r in records(out)), picked)
        self.assert_refused([matrix, "-w", "program:three"],
                            "workload 'program:three' names no program of this matrix (program:one, program:two)")
        self.assert_refused([matrix, "-w", "two"], "unknown workload 'two'", "did you mean program:two?")

    def test_a_matrix_file_picks_its_programs_and_leaves_the_others_unchecked(self):
        # The file's own workloads list picks too, beside a built-in workload; a program left out
        # may name an executable this machine lacks.
        matrix = self.write_matrix('[matrix]\nallocators = ["glibc"]\nreps = 1\nthreads = [1]\nsize = "quick"\n'
                                   'workloads = ["program:one", "scatter_free"]\n'
                                   '[programs.one]\ncommand = "echo one"\n[programs.elsewhere]\ncommand = "/no/such/tool"\n')
        p = run(["run", matrix, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(sorted(r["workload"] for r in records(self.out)), ["program:one", "scatter_free"])
        self.assertIn("not run: program:elsewhere", p.stdout + p.stderr)
        # Picked, the missing executable is refused before anything runs.
        self.assert_refused([matrix, "-w", "program:elsewhere"], "/no/such/tool")

    def test_a_program_runs_on_the_cpus_and_nodes_its_placement_chose(self):
        # The program reports what the kernel let it use; the record says what was chosen.
        script = os.path.join(self.tmp, "where.py")
        with open(script, "w") as f:
            f.write("import os\nprint(sorted(os.sched_getaffinity(0)))\n"
                    "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('Mems_allowed_list')][0])\n")
        last = max(os.sched_getaffinity(0))
        everything = sorted(os.sched_getaffinity(0))
        for name, args, cpus, membind in (("list", ["--pin", str(last)], [last], None),
                                          ("nodes", ["--nodes", "0"], everything, "0"),
                                          ("none", ["--pin", "none"], everything, None)):
            with self.subTest(name):
                out = os.path.join(self.tmp, name)
                p = run(["run", "-a", "glibc", "-r", "1", "--out", out, "--program", "where=/usr/bin/python3 " + script] + args)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                (r,) = records(out)
                with open(r["stdout"]) as f:
                    seen = f.read().splitlines()
                self.assertEqual(seen[0], str(cpus))
                self.assertEqual(seen[1], "0")
                self.assertEqual(r["placement"]["membind"], membind)
                self.assertEqual(r["placement"]["program_cpus"], None if name == "none" else ",".join(map(str, cpus))
                                 if len(cpus) == 1 else "%d-%d" % (cpus[0], cpus[-1]))
                self.assertIsNone(r["placement"]["thread_cpus"], "the kernel places a program's threads")


class Outcomes(ProgramTest):
    def test_crash_hang_and_exit_code_are_recorded(self):
        p = run(["run", "--allocators", "glibc,jemalloc", "--reps", "1", "--timeout", "5", "--out", self.out,
                 "--program", "crash=" + PHASE_DEMO + " crash", "--program", "hang=" + PHASE_DEMO + " hang",
                 "--program", "exit3=" + PHASE_DEMO + " exit3"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        by = {(r["workload"], r["allocator"]): r for r in records(self.out)}
        for a in ("glibc", "jemalloc"):
            crash, hang, exit3 = by[("program:crash", a)], by[("program:hang", a)], by[("program:exit3", a)]
            self.assertEqual(crash["status"], "crashed")
            self.assertEqual(crash["exit_signal"], 11)
            self.assertIn("signal 11", crash["error"])
            self.assertEqual(hang["status"], "timeout")
            self.assertEqual(exit3["status"], "failed")
            self.assertEqual(exit3["exit_code"], 3)
            self.assertIn("exit code 3", exit3["error"])
            # The phases measured before the end are kept.
            self.assertEqual([ph["name"] for ph in crash["phases"]][:4], ["startup", "small", "large", "after"])
            # No exit report from a crashed program: its last phase's peak is not claimed exact.
            self.assertFalse(crash["phases"][-1]["peak_rss_exact"])
            self.assertTrue(crash["phases"][2]["peak_rss_exact"])

    def test_output_that_differs_between_allocators_is_flagged(self):
        # The output names the preloaded library: different under each allocator by construction.
        p = run(["run", "--allocators", "glibc,jemalloc", "--reps", "1", "--out", self.out,
                 "--program", "leaky=/bin/sh -c 'echo $LD_PRELOAD'"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        recs = records(self.out)
        self.assertEqual(len({r["stdout_checksum"] for r in recs}), 2)
        self.assertIn("output differs", p.stderr)
        self.assertIn("program:leaky", p.stderr)
        s = run(["show", self.out])
        self.assertIn("output differs", s.stderr + s.stdout)


class Advise(ProgramTest):
    def test_advise_on_a_small_program_prints_its_recommendation(self):
        p = run(["advise", "--reps", "2", "--allocators", "glibc,jemalloc,tcmalloc", "--out", self.out, "--", PHASE_DEMO])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        recs = records(self.out)
        self.assertEqual(len(recs), 6)
        self.assertEqual({r["allocator"] for r in recs}, {"glibc", "jemalloc", "tcmalloc"})
        self.assertIn("recommendation (", p.stdout)
        self.assertRegex(p.stdout, r"backends by peak RSS: (glibc|jemalloc|tcmalloc) [\d.]+ MiB, ")
        choice = re.search(r"\n  => ((keep the default|use) .*)\n", p.stdout)
        self.assertIsNotNone(choice, p.stdout)
        self.assertRegex(p.stdout, r"\n  setting: ")
        for a in ("glibc", "jemalloc", "tcmalloc"):
            self.assertRegex(p.stdout, r"\n  " + a + r" +2/2 ")
        # The report of the same folder, its path printed, with the recommendation's table on it.
        report = os.path.join(self.out, "report.html")
        self.assertIn("report: " + report, p.stdout)
        with open(report, encoding="utf-8") as f:
            page = f.read()
        table = re.search(r'<table[^>]*id="advice-table".*?</table>', page, re.S)
        self.assertIsNotNone(table, "no advice-table in " + report)
        for a in ("glibc", "jemalloc", "tcmalloc"):
            self.assertRegex(table.group(0), r"<td[^>]*>" + a + r"</td>\s*<td[^>]*>2/2</td>")
        # The page escapes as html.cpp does (&#39; for a quote).
        escaped = html.escape(choice.group(1), quote=True).replace("&#x27;", "&#39;")
        self.assertIn('<p class="choice">' + escaped + "</p>", page)
        self.assertLess(page.index('id="advice"'), page.index('id="recommendation"'))

    def test_advise_writes_the_report_where_asked(self):
        report = os.path.join(self.tmp, "advice.html")
        p = run(["advise", "--reps", "1", "--allocators", "glibc", "--out", self.out, "--report", report, "--", PHASE_DEMO])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("report: " + report, p.stdout)
        self.assertTrue(os.path.isfile(report))
        self.assertFalse(os.path.exists(os.path.join(self.out, "report.html")))

    def test_a_report_that_cannot_be_drawn_keeps_the_recommendation(self):
        # No plotting scripts where ALLOCMARK_PLOTS_DIR points: the page cannot be drawn.
        env = dict(os.environ, ALLOCMARK_PLOTS_DIR=os.path.join(self.tmp, "no-plots"))
        p = run(["advise", "--reps", "1", "--allocators", "glibc,jemalloc", "--out", self.out, "--", PHASE_DEMO], env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"backends by peak RSS: (glibc|jemalloc) ")
        self.assertIn("the report was not written", p.stderr)
        self.assertNotIn("report: ", p.stdout)

    def test_advise_with_an_unwritable_report_path_runs_nothing(self):
        p = run(["advise", "--out", self.out, "--report", os.path.join(self.tmp, "missing", "r.html"), "--", PHASE_DEMO])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--report", p.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_advise_without_a_command_is_a_usage_error(self):
        p = run(["advise", "--out", self.out])
        self.assertEqual(p.returncode, 2)
        self.assertFalse(os.path.exists(self.out))


class BadInput(unittest.TestCase):
    def test_rejected_before_anything_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            for flag, words in [("nope=/no/such/program", "not an executable"),
                                ("x=echo 'unbalanced", "syntax error"),
                                ("x=echo $(id)", "command substitution"),
                                ("=echo hi", "expected NAME="),
                                ("bad name=echo hi", "must be letters")]:
                p = run(["run", "--allocators", "glibc", "--out", out, "--program", flag])
                self.assertEqual(p.returncode, 2, (flag, p.stderr))
                self.assertIn(words, p.stderr, flag)
                self.assertFalse(os.path.exists(out), flag)
            matrix = os.path.join(tmp, "m.toml")
            with open(matrix, "w") as f:
                f.write('[programs.p]\ncommand = "true"\ninput = "missing.txt"\n')
            p = run(["run", matrix, "--allocators", "glibc", "--out", out])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("m.toml", p.stderr)
            self.assertIn("missing.txt", p.stderr)


if __name__ == "__main__":
    unittest.main()
