"""End-to-end tests: the real allocmark binary, real worker processes, real allocator libraries.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3; standard library only.
Assertions are about behaviour (statuses, libraries, options, files), never about timings.
"""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

ALLOCMARK = os.environ["ALLOCMARK_BIN"]
SMALL = ["--set", "size_mix.live_mib=8", "--set", "size_mix.ops=20000"]
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def run(args, timeout=300, **kw):
    return subprocess.run([ALLOCMARK] + args, capture_output=True, text=True, timeout=timeout, **kw)


def records(out):
    with open(os.path.join(out, "results.jsonl")) as f:
        return [json.loads(line) for line in f]


@contextlib.contextmanager
def mounted_tmpfs(path, size):
    """A tmpfs of `size` (mount's syntax) at the new folder `path`, unmounted afterwards; needs root."""
    os.mkdir(path)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path])


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="allocmark-e2e-")
        self.tmp = self._tmp.name
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        self._tmp.cleanup()

    def assert_usage_error(self, args, *needles):
        p = run(args + ["--out", self.out])
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)
        self.assertFalse(os.path.exists(self.out), "nothing may be written for bad input")

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path


class OneRunPerClass(TempDirTest):
    """For tests that read a real run's records, not how it was made: `RUN` (`allocmark run`'s
    arguments but --out) runs once for the class, when a test first asks, and each test gets a copy
    of its folder under its own name, to change as it likes. A test that needs two different runs
    makes the second itself."""
    RUN = None

    @classmethod
    def setUpClass(cls):
        cls._runs = tempfile.TemporaryDirectory(prefix="allocmark-run-")
        cls._made = None

    @classmethod
    def tearDownClass(cls):
        cls._runs.cleanup()

    def class_run(self, name):
        cls = type(self)
        if cls._made is None:
            made = os.path.join(cls._runs.name, "run")
            p = run(["run"] + cls.RUN + ["--out", made])
            self.assertEqual(p.returncode, 0, p.stderr)
            cls._made = made
        return shutil.copytree(cls._made, os.path.join(self.tmp, name))


class AllBackends(TempDirTest):
    def test_tiny_matrix_over_all_four_backends(self):
        p = run(["run", "--allocators", "glibc,jemalloc,tcmalloc,mimalloc,jemalloc:bg", "--workloads", "size_mix",
                 "--threads", "1,2", "--reps", "1", "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual(len(recs), 10)
        expected_lib = {"glibc": "libc.so.6", "jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc.so.4",
                        "mimalloc": "libmimalloc.so.2"}
        for r in recs:
            self.assertEqual(r["status"], "ok", r)
            self.assertTrue(os.path.basename(r["library"]).startswith(expected_lib[r["backend"]]), r["library"])
            self.assertEqual([ph["name"] for ph in r["phases"]], ["fill", "churn", "release"])
            for ph in r["phases"]:
                self.assertTrue(ph["peak_rss_exact"])
                self.assertGreaterEqual(ph["peak_rss_bytes"], ph["end_rss_bytes"])
                self.assertGreater(ph["ops"], 0)
            # Live accounting: everything allocated was freed by the end of release.
            self.assertEqual(r["phases"][-1]["end_live_bytes"], 0)
            self.assertGreater(max(ph["peak_live_bytes"] for ph in r["phases"]), 4 << 20)
            self.assertGreater(max(ph["peak_rss_bytes"] for ph in r["phases"]), r["idle_rss_bytes"])
            self.assertGreater(len(r["timeline"]), 0)
            # The figures records carry for their readers (schema version 3, issue 41): the model's
            # metrics, the same values `show` gives (below).
            self.assertEqual(r["schema_version"], 3)
            self.assertEqual(r["totals"]["ops"], sum(ph["ops"] for ph in r["phases"]))
        # One repetition per cell: each group's median is the cell's own value.
        per_cell = json.loads(run(["show", self.out, "--by", "workload,threads,allocator", "--format", "json"]).stdout)["groups"]
        per_phase = json.loads(run(["show", self.out, "--format", "json"]).stdout)["groups"]
        for r in recs:
            g = next(g for g in per_cell if (g["allocator"], g["threads"]) == (r["allocator"], r["threads"]))
            for field, metric in (("peak_rss_bytes", "peak_rss_bytes"), ("peak_live_bytes", "peak_live_bytes"),
                                  ("fragmentation_ratio", "rss_above_idle_over_live")):
                self.assertEqual(r[field], g["metrics"][metric]["median"], (r["allocator"], field))
            self.assertEqual(r["totals"]["ops_per_s"], g["metrics"]["ops_per_s"]["median"])
            for ph in r["phases"]:
                g = next(g for g in per_phase if (g["allocator"], g["threads"], g["phase"]) == (r["allocator"], r["threads"], ph["name"]))
                self.assertEqual(ph["ops_per_s"], g["metrics"]["ops_per_s"]["median"], (r["allocator"], ph["name"]))
        je = [r for r in recs if r["allocator"] == "jemalloc"]
        self.assertGreater(je[0]["alloc_stats"]["stats.active"], 0)
        self.assertGreater(je[0]["phases"][1]["alloc_stats"]["stats.active"], 0)
        self.assertIn("num_ops", je[0]["phases"][1]["contention"])
        # The variant's environment really reached the worker's allocator.
        for r in recs:
            if r["backend"] == "jemalloc":
                self.assertEqual(r["allocator_options"]["opt.background_thread"], r["allocator"] == "jemalloc:bg")
        tc = [r for r in recs if r["backend"] == "tcmalloc"][0]
        self.assertGreater(tc["alloc_stats"]["generic.current_allocated_bytes"], 0)
        gl = [r for r in recs if r["backend"] == "glibc"][0]
        self.assertIn("uordblks", gl["alloc_stats"])
        # Files a user reads.
        with open(os.path.join(self.out, "meta.json")) as f:
            meta = json.load(f)
        self.assertIn("kernel", meta["machine"])
        self.assertIn("thp_enabled", meta["machine"])
        self.assertEqual(meta["matrix"]["cells"], 10)
        versions = {a["name"]: a["version"] for a in meta["allocators"]}
        self.assertTrue(versions["jemalloc"].startswith("5."))
        with open(os.path.join(self.out, "summary.csv")) as f:
            self.assertEqual(len(f.read().strip().splitlines()), 1 + 10 * 3)
        shown = run(["show", self.out])
        self.assertEqual(shown.returncode, 0)
        self.assertIn("jemalloc:bg", shown.stdout)

    def test_variant_options_reach_each_allocator(self):
        p = run(["run", "--allocators", "glibc:arena1,jemalloc:nodecay,tcmalloc:release,mimalloc:eager",
                 "--workloads", "size_mix", "--threads", "2", "--reps", "1", "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        by = {r["allocator"]: r for r in records(self.out)}
        self.assertEqual(by["glibc:arena1"]["alloc_stats"]["arenas"], 1)
        self.assertEqual(by["jemalloc:nodecay"]["allocator_options"]["opt.dirty_decay_ms"], 0)
        self.assertEqual(by["tcmalloc:release"]["allocator_options"]["tcmalloc.aggressive_memory_decommit"], 1)
        self.assertEqual(by["mimalloc:eager"]["allocator_options"]["decommit_delay"], 0)
        self.assertEqual(by["mimalloc:eager"]["allocator_options"]["page_reset"], 1)


class NumapCells(TempDirTest):
    """numap cells through the harness: the worker's reader must see numap's own figures, with values
    that show numap served the workload (not merely that the keys exist)."""

    def test_numap_cells_report_real_stats_and_contention(self):
        p = run(["run", "--allocators", "numap,numap:keep", "--workloads", "size_mix", "--threads", "2",
                 "--reps", "1", "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        by = {r["allocator"]: r for r in records(self.out)}
        self.assertEqual(set(by), {"numap", "numap:keep"})
        for name, r in by.items():
            self.assertEqual(r["status"], "ok", r)
            self.assertEqual(os.path.basename(r["library"]), "libnumap.so", r["library"])
            churn = r["phases"][1]
            self.assertEqual(churn["name"], "churn")
            st = churn["alloc_stats"]
            # Calls really went through numap: allocations counted, memory charged and in use,
            # thread caches hit, and per-class entries with allocations in them.
            self.assertGreater(st["allocs"], 20000, name)
            self.assertGreater(st["in_use_bytes"], 1 << 20, name)
            self.assertGreaterEqual(st["mapped_bytes"], st["in_use_bytes"] // 2, name)
            self.assertGreater(st["tcache_hits"], 0, name)
            self.assertGreater(st["mmap_calls"], 0, name)
            self.assertTrue(any(c["allocs"] > 0 for c in st["classes"].values()), name)
            # Contention: numap's own locks were taken; waits cannot exceed acquisitions.
            ct = churn["contention"]
            self.assertGreater(ct["num_ops"], 0, name)
            self.assertLessEqual(ct["num_wait"], ct["num_ops"], name)
            self.assertGreater(len(ct["mutexes"]), 0, name)
            self.assertLessEqual(sum(m["num_ops"] for m in ct["mutexes"].values()), ct["num_ops"], name)
            # At the end of release the live set is gone: numap's in-use figure is small.
            end = r["phases"][-1]["alloc_stats"]
            self.assertLess(end["in_use_bytes"], st["in_use_bytes"], name)
        # The variant's environment reached the worker's numap (the options table it reports).
        self.assertEqual(by["numap"]["allocator_options"]["decay_ms"], 1000)
        self.assertEqual(by["numap"]["allocator_options"]["exchange_ms"], 100)
        self.assertEqual(by["numap:keep"]["allocator_options"]["decay_ms"], 0)
        self.assertEqual(by["numap:keep"]["allocator_options"]["exchange_ms"], 0)
        self.assertEqual(by["numap:keep"]["phases"][-1]["alloc_stats"]["decay_bytes"], 0)
        self.assertEqual(by["numap"]["allocator_options"]["free_percent"], 12)
        self.assertEqual(by["numap:keep"]["allocator_options"]["free_percent"], 0)
        self.assertEqual(by["numap:keep"]["phases"][-1]["alloc_stats"]["limited_bytes"], 0)
        self.assertEqual(by["numap"]["allocator_options"]["move_pieces"], 8192)
        self.assertEqual(by["numap:keep"]["allocator_options"]["move_pieces"], 0)
        self.assertEqual(by["numap:keep"]["phases"][-1]["alloc_stats"]["moved_bytes"], 0)

    def test_capacity_smaller_than_the_workload_fails_the_cell_naming_numap_capacity(self):
        # Issue 41: "killed by signal 6" with an empty log, or "terminate called without an active
        # exception". A workload's malloc refused (size_mix) and operator new's bad_alloc in a
        # workload thread (hash_build's tables) both fail the cell with numap's reason.
        m = self.write("m.toml", """
[matrix]
allocators = ["numap:tiny"]
workloads = ["size_mix", "hash_build"]
threads = [1]
reps = 1
[allocators."numap:tiny"]
backend = "numap"
env = { NUMAP_CAPACITY = "4M" }
""")
        p = run(["run", m, "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 1, p.stderr)
        by = {r["workload"]: r for r in records(self.out)}
        for w, asked in (("size_mix", "a request of "), ("hash_build", "a request (operator new")):
            r = by[w]
            self.assertEqual(r["status"], "failed", r.get("error"))
            self.assertIsNone(r.get("exit_signal"), r.get("error"))
            for needle in ("numap's capacity was exhausted", "NUMAP_CAPACITY=4M allows 4194304 bytes", asked,
                           "was refused (ENOMEM)"):
                self.assertIn(needle, r["error"], w)
            with open(r["log"]) as f:
                self.assertIn("numap's capacity was exhausted", f.read(), w)


class FailureIsolation(TempDirTest):
    def test_non_allocator_library_fails_its_cell_only(self):
        m = self.write("m.toml", f"""
[matrix]
allocators = ["glibc", "zlib", "jemalloc"]
workloads = ["size_mix"]
threads = [1]
reps = 1
[params.size_mix]
live_mib = 8
ops = 10000
[allocators.zlib]
backend = "generic"
library = "{LIBDIR}/libz.so.1"
""")
        p = run(["run", m, "--out", self.out])
        self.assertEqual(p.returncode, 1, p.stderr)
        by = {r["allocator"]: r for r in records(self.out)}
        self.assertEqual(by["glibc"]["status"], "ok")
        self.assertEqual(by["jemalloc"]["status"], "ok")
        self.assertEqual(by["zlib"]["status"], "failed")
        self.assertIn("preload did not take", by["zlib"]["error"])
        self.assertIn("libz.so.1", by["zlib"]["error"])

    def test_crash_abort_and_exit_are_recorded_and_the_matrix_goes_on(self):
        statuses = {}
        for mode, status, reason in [("segv", "crashed", "signal 11"), ("abort", "crashed", "signal 6"),
                                     ("exit", "failed", "exit code 7"), ("kill", "crashed", "OOM killer")]:
            out = os.path.join(self.tmp, mode)
            p = run(["run", "--allocators", "glibc,jemalloc", "--workloads", "fault_inject,size_mix", "--threads", "1",
                     "--reps", "1", "--set", f"fault_inject.mode={mode}", "--out", out] + SMALL)
            self.assertEqual(p.returncode, 1, p.stderr)
            recs = records(out)
            self.assertEqual(len(recs), 4)
            for r in recs:
                if r["workload"] == "fault_inject":
                    self.assertEqual(r["status"], status, r)
                    self.assertIn(reason, r["error"])
                else:
                    self.assertEqual(r["status"], "ok", r)
            statuses[mode] = status
        self.assertEqual(len(statuses), 4)

    def test_hang_is_killed_at_the_timeout(self):
        p = run(["run", "--allocators", "glibc", "--workloads", "fault_inject,size_mix", "--threads", "1", "--reps", "1",
                 "--set", "fault_inject.mode=hang", "--timeout", "2", "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 1, p.stderr)
        by = {r["workload"]: r for r in records(self.out)}
        self.assertEqual(by["fault_inject"]["status"], "timeout")
        self.assertEqual(by["size_mix"]["status"], "ok")

    def test_interrupt_keeps_finished_cells_and_resume_runs_only_the_rest(self):
        args = ["run", "--allocators", "glibc,jemalloc", "--workloads", "size_mix,fault_inject", "--threads", "1",
                "--reps", "1", "--set", "fault_inject.mode=hang", "--out", self.out] + SMALL
        proc = subprocess.Popen([ALLOCMARK] + args + ["--timeout", "120"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        path = os.path.join(self.out, "results.jsonl")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if os.path.exists(path) and len(open(path).read().splitlines()) >= 2:
                break
            time.sleep(0.1)
        time.sleep(0.5)  # the first fault_inject cell is now hanging
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn("--resume", err)
        first = records(self.out)
        self.assertEqual([r["workload"] for r in first], ["size_mix", "size_mix"])
        p = run(args + ["--timeout", "1"])
        self.assertEqual(p.returncode, 2, "a folder with results needs --resume")
        p = run(args + ["--timeout", "1", "--resume"])
        self.assertEqual(p.returncode, 1, p.stderr)
        recs = records(self.out)
        self.assertEqual(len(recs), 4)
        self.assertEqual(len({r["key"] for r in recs}), 4)
        self.assertEqual(recs[:2], first)
        self.assertEqual([r["status"] for r in recs[2:]], ["timeout", "timeout"])


class BadInput(TempDirTest):
    def test_unknown_names(self):
        self.assert_usage_error(["run", "--allocators", "jemalloc,jemaloc", "--workloads", "size_mix"],
                                "unknown allocator 'jemaloc'", "jemalloc:bg")
        self.assert_usage_error(["run", "--allocators", "glibc", "--workloads", "sizemix"],
                                "unknown workload 'sizemix'", "size_mix")
        self.assert_usage_error(["run", "--allocators", "glibc", "--workloads", "size_mix", "--set", "size_mix.nope=1"],
                                "unknown parameter 'nope'", "live_mib")
        self.assert_usage_error(["run", "--allocators", "glibc", "--threads", "1,x"], "--threads", "'x'")
        self.assert_usage_error(["run", "--bogus-flag"], "bogus")

    def test_malformed_toml_names_line_and_column(self):
        m = self.write("bad.toml", "[matrix]\nreps = 2\nthreads = [1, \n")
        self.assert_usage_error(["run", m], "bad.toml:3:")
        m = self.write("key.toml", "[matrix]\nrep = 2\n")
        self.assert_usage_error(["run", m], "key.toml:2:1", "unknown key 'rep'")
        self.assert_usage_error(["run", os.path.join(self.tmp, "missing.toml")], "missing.toml")

    def test_library_that_is_missing_or_not_of_its_kind(self):
        m = self.write("lib.toml", """
[matrix]
allocators = ["old"]
[allocators.old]
kind = "jemalloc"
library = "/opt/jemalloc-4.5/lib/libjemalloc.so.2"
""")
        self.assert_usage_error(["run", m], "lib.toml:6:11", "does not exist")
        m = self.write("kind.toml", f"""
[matrix]
allocators = ["fake"]
[allocators.fake]
kind = "jemalloc"
library = "{LIBDIR}/libtcmalloc.so.4"
""")
        self.assert_usage_error(["run", m], "not a jemalloc library", "mallctl")


class EveryWorkload(TempDirTest):
    """Each non-diagnostic workload finishes its quick preset within a generous per-cell bound (a
    budget check, not a benchmark), reporting its documented phases in order. Each runs on one of
    two allocators, alternating in name order, so that both ways a worker gets its allocator run
    every time: glibc (nothing preloaded) and tcmalloc preloaded (the quickest of the others at quick
    size, 2026-12-05). Running each on both checked no more: a workload's phases and live-byte
    accounting are its own, not the allocator's, and how it does on each allocator is what
    e2e.AllBackends, percall, rocksdb.EveryBackend and ci.Gate's matrix (four of these workloads at
    this preset, on glibc and a preloaded jemalloc) check."""

    def test_quick_preset_runs_with_documented_phases(self):
        listing = json.loads(run(["list", "--json"]).stdout)
        # A workload that runs only where named (replay: it needs a trace) has no quick preset to run.
        workloads = {w["name"]: w["phases"] for w in listing["workloads"] if not w["diagnostic"] and not w["named_only"]}
        counts_live = {w["name"]: w["live_bytes"] for w in listing["workloads"]}
        self.assertIn("size_mix", workloads)
        names = sorted(workloads)
        recs = []
        for allocator, share in (("glibc", names[0::2]), ("tcmalloc", names[1::2])):
            out = os.path.join(self.tmp, allocator)
            p = run(["run", "--allocators", allocator, "--workloads", ",".join(share), "--threads", "2",
                     "--reps", "1", "--size", "quick", "--timeout", "120", "--out", out], timeout=1800)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            got = records(out)
            self.assertEqual(sorted((r["allocator"], r["workload"]) for r in got), [(allocator, w) for w in share])
            recs += got
        for r in recs:
            self.assertEqual(r["status"], "ok", r.get("error"))
            self.assertEqual([ph["name"] for ph in r["phases"]], workloads[r["workload"]])
            for ph in r["phases"]:
                if counts_live[r["workload"]]:
                    self.assertGreaterEqual(ph["end_live_bytes"], 0, (r["workload"], ph["name"]))
                else:  # memory allocated inside a library (rocksdb): said to be unknown, not 0
                    self.assertIsNone(ph["end_live_bytes"], (r["workload"], ph["name"]))


class Listing(unittest.TestCase):
    def test_list_json_has_backends_variants_and_workloads(self):
        p = run(["list", "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        l = json.loads(p.stdout)
        names = {a["name"]: a for a in l["allocators"]}
        for b in ["glibc", "jemalloc", "tcmalloc", "mimalloc"]:
            self.assertTrue(names[b]["available"], names[b])
            self.assertTrue(names[b]["version"])
        self.assertEqual(names["jemalloc:bg"]["env"], {"MALLOC_CONF": "background_thread:true"})
        sm = [w for w in l["workloads"] if w["name"] == "size_mix"][0]
        self.assertIn("live_mib", [p["name"] for p in sm["params"]])

    def test_help_on_every_subcommand(self):
        for sub in ["list", "run", "show"]:
            p = run([sub, "--help"])
            self.assertEqual(p.returncode, 0)
            self.assertIn("--help", p.stdout)


class Showing(TempDirTest):
    """`show` over the committed fixture folder: no cell is run, so this is quick."""
    FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "results-small")

    def golden(self, name):
        with open(os.path.join(self.FIXTURE, "golden", name)) as f:
            return f.read()

    def test_every_format_matches_its_golden_file(self):
        for fmt, golden in [("table", "show.table"), ("csv", "show.csv"), ("json", "show.json"),
                            ("markdown", "show.md")]:
            p = run(["show", self.FIXTURE, "--format", fmt])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, self.golden(golden), fmt)
            self.assertEqual(p.stderr, "")
        p = run(["show", "--by", "allocator", "--metric", "peak_rss_bytes,wall_s", self.FIXTURE])
        self.assertEqual(p.stdout, self.golden("show-by-allocator.table"))
        summary = json.loads(run(["show", self.FIXTURE, "--format", "json"]).stdout)
        self.assertEqual(summary["schema_version"], 1)
        self.assertEqual(summary["group_by"], ["workload", "threads", "allocator", "phase"])

    def test_unknown_names_are_usage_errors_that_list_the_choices(self):
        for args, needles in [(["--format", "xml"], ["--format", "'xml'", "markdown"]),
                              (["--by", "allocator,zone"], ["--by", "'zone'", "backend"]),
                              (["--metric", "peak_rss"], ["--metric", "'peak_rss'", "peak_rss_bytes"])]:
            p = run(["show", self.FIXTURE] + args)
            self.assertEqual(p.returncode, 2, args)
            for n in needles:
                self.assertIn(n, p.stderr)

    def test_missing_or_malformed_results_name_the_file(self):
        p = run(["show", os.path.join(self.tmp, "nowhere")])
        self.assertEqual(p.returncode, 2)
        self.assertIn("nowhere", p.stderr)
        os.makedirs(self.out)
        p = run(["show", self.out])
        self.assertEqual(p.returncode, 2)
        self.assertIn("results.jsonl", p.stderr)
        self.write("out/results.jsonl", '{"allocator": "glibc", "workload": "w", "threads": [2], "status": "ok"}\n')
        p = run(["show", self.out])
        self.assertEqual(p.returncode, 2)
        self.assertIn("results.jsonl:1: 'threads'", p.stderr)
        self.assertNotIn("json.exception", p.stderr)

    def test_corrupt_lines_and_duplicates_are_warnings_on_stderr(self):
        with open(os.path.join(self.FIXTURE, "results.jsonl")) as f:
            lines = f.read().splitlines(keepends=True)
        os.makedirs(self.out)
        self.write("out/results.jsonl", "".join(lines[:2] + ["not json\n"] + lines[2:] + [lines[0], '{"cut']))
        p = run(["show", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("results.jsonl:3: not a JSON object", p.stderr)
        self.assertIn("last line cut short", p.stderr)
        self.assertIn("line 13 repeats line 1", p.stderr)
        self.assertNotIn("warning", p.stdout)
        self.assertIn("3 ok", p.stdout)


if __name__ == "__main__":
    unittest.main()
