"""What a results folder promises (docs/ARCHITECTURE.md), tested against the real driver:
nothing lost, nothing mixed, under concurrent runs, changed matrices, corrupt lines, a full disk,
a killed driver, duplicates, a polluted environment and bad input (issue 8; docs/reliability.md).

Run by ctest with Debian's /usr/bin/python3; standard library only; root for the tmpfs test.
Assertions are about behaviour (exit codes, files, messages), never about timings.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from e2e_test import TempDirTest as TempDir, mounted_tmpfs  # a fresh temporary folder per test, self.out inside it

ALLOCMARK = os.environ["ALLOCMARK_BIN"]
SMALL = ["--set", "size_mix.live_mib=8", "--set", "size_mix.ops=20000"]
ONE = ["-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "1"] + SMALL
HANG = ["-w", "fault_inject", "--set", "fault_inject.mode=hang", "-t", "1", "-r", "1"]


def run(args, timeout=300, env=None):
    return subprocess.run([ALLOCMARK] + args, capture_output=True, text=True, timeout=timeout, env=env)


def lines(out):
    with open(os.path.join(out, "results.jsonl")) as f:
        return f.read().splitlines()


def records(out):
    return [json.loads(line) for line in lines(out)]


def children_of(pid):
    """PIDs whose parent is pid (from /proc/*/stat)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            kids.append(int(entry))
    return kids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(predicate, limit=120, what="condition"):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Folder(TempDir):
    def start_hanging_run(self, out, extra=()):
        """A run whose second cell hangs; returns the driver once that cell's worker is running."""
        proc = subprocess.Popen([ALLOCMARK, "run", "-a", "glibc", "-w", "size_mix,fault_inject", "--set",
                                 "fault_inject.mode=hang", "-t", "1", "-r", "1", "--timeout", "120", "--out", out,
                                 *SMALL, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        path = os.path.join(out, "results.jsonl")
        wait_for(lambda: os.path.exists(path) and len(lines(out)) >= 1 and children_of(proc.pid), what="the hanging cell")
        return proc

    def test_a_second_run_into_the_same_folder_is_refused_naming_the_holder(self):
        first = self.start_hanging_run(self.out)
        try:
            for extra in ([], ["--resume"]):
                p = run(["run"] + ONE + ["--out", self.out] + extra)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("in use by another allocmark run", p.stderr)
                self.assertIn(f"pid {first.pid}", p.stderr)
        finally:
            first.send_signal(signal.SIGINT)
            first.communicate(timeout=60)
        self.assertEqual(len(records(self.out)), 1, "the refused runs recorded nothing")

    def test_resume_refuses_a_changed_matrix_and_extend_adds_it_on_purpose(self):
        self.assertEqual(run(["run"] + ONE + ["--out", self.out]).returncode, 0)
        with open(os.path.join(self.out, "meta.json")) as f:
            meta_before = f.read()
        changed = ["-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "1", "--set", "size_mix.live_mib=16",
                   "--set", "size_mix.ops=20000", "--out", self.out]
        p = run(["run"] + changed + ["--resume"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn('live_mib "8" -> "16"', p.stderr)
        p = run(["run", "-a", "glibc,jemalloc"] + ONE[2:] + ["--out", self.out, "--resume"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("+jemalloc", p.stderr)
        with open(os.path.join(self.out, "meta.json")) as f:
            self.assertEqual(f.read(), meta_before, "a refused resume leaves meta.json as it was")
        self.assertEqual(len(records(self.out)), 1)
        p = run(["run"] + changed + ["--extend"])
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual([r["params"]["live_mib"] for r in recs], ["8", "16"])
        self.assertNotEqual(recs[0]["key"], recs[1]["key"])
        with open(os.path.join(self.out, "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual([r["mode"] for r in meta["runs"]], ["run", "extend"])
        self.assertEqual(meta["runs"][1]["matrix"]["workloads"][0]["params"]["live_mib"], "16")

    def test_a_corrupt_middle_line_stops_resume_until_the_user_decides(self):
        args = ["run", "-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "3", "--out", self.out] + SMALL
        self.assertEqual(run(args).returncode, 0)
        good = lines(self.out)
        with open(os.path.join(self.out, "results.jsonl"), "w") as f:
            f.write(good[0] + "\n" + good[1][:50] + "\n" + good[2] + "\n")
        p = run(args + ["--resume"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("line 2 is not a valid record", p.stderr)
        self.assertEqual(len(lines(self.out)), 3, "nothing changed")
        p = run(args + ["--resume", "--discard-corrupt-lines"])
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual(sorted(r["rep"] for r in recs), [1, 2, 3], "the damaged cell ran again, the others did not")
        with open(os.path.join(self.out, "results.corrupt.jsonl")) as f:
            self.assertEqual(f.read(), good[1][:50] + "\n")

    def test_a_cut_short_last_line_is_dropped_on_resume(self):
        args = ["run", "-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "2", "--out", self.out] + SMALL
        self.assertEqual(run(args).returncode, 0)
        good = lines(self.out)
        with open(os.path.join(self.out, "results.jsonl"), "w") as f:
            f.write(good[0] + "\n" + good[1][:100])
        p = run(args + ["--resume"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("cut short", p.stderr)
        self.assertEqual(sorted(r["rep"] for r in records(self.out)), [1, 2])

    def test_a_full_disk_leaves_only_whole_records_and_resume_completes(self):
        self.assertEqual(os.geteuid(), 0, "this test mounts a tmpfs: run the suite as root (CI does)")
        with mounted_tmpfs(os.path.join(self.tmp, "small"), "96k") as mnt:
            out = os.path.join(mnt, "out")
            args = ["run", "-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "30", "--out", out] + SMALL
            p = run(args)
            self.assertEqual(p.returncode, 3, p.stdout[-2000:] + p.stderr[-2000:])
            self.assertIn("error:", p.stderr)
            recorded = [json.loads(line) for line in lines(out)]  # every line whole
            self.assertLess(len(recorded), 30)
            subprocess.run(["mount", "-o", "remount,size=16m", mnt], check=True)
            p = run(args + ["--resume"])
            self.assertEqual(p.returncode, 0, p.stderr)
            recs = records(out)
            self.assertEqual(sorted(r["rep"] for r in recs), list(range(1, 31)))
            self.assertEqual(recs[:len(recorded)], recorded)

    def test_a_killed_driver_takes_its_worker_with_it(self):
        driver = self.start_hanging_run(self.out)
        workers = children_of(driver.pid)
        self.assertEqual(len(workers), 1)
        driver.kill()
        driver.communicate(timeout=60)
        wait_for(lambda: not alive(workers[0]), limit=30, what="the orphaned worker to die")
        p = run(["run", "-a", "glibc", "-w", "size_mix,fault_inject", "--set", "fault_inject.mode=hang", "-t", "1",
                 "-r", "1", "--timeout", "1", "--out", self.out, "--resume"] + SMALL)
        self.assertEqual(p.returncode, 1, p.stderr)  # the folder is free again; the hanging cell times out
        self.assertEqual([r["status"] for r in records(self.out)], ["ok", "timeout"])

    def test_duplicate_axis_values_run_once(self):
        p = run(["run", "-a", "glibc", "-w", "size_mix,size_mix", "-t", "1,1", "-r", "1", "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("threads 1 is named twice", p.stderr)
        self.assertEqual(len(records(self.out)), 1)

    def test_retry_failed_reruns_failed_cells_as_a_new_attempt(self):
        args = ["run", "-a", "glibc", "-w", "size_mix,fault_inject", "--set", "fault_inject.mode=exit", "-t", "1", "-r", "1",
                "--out", self.out] + SMALL
        self.assertEqual(run(args).returncode, 1)
        p = run(args + ["--resume"])
        self.assertEqual(p.returncode, 1, "the folder still holds a failed cell of this matrix")
        self.assertIn("--retry-failed", p.stdout)
        self.assertEqual(len(records(self.out)), 2)
        p = run(args + ["--resume", "--retry-failed"])
        self.assertEqual(p.returncode, 1)
        recs = records(self.out)
        self.assertEqual([(r["workload"], r.get("attempt", 1)) for r in recs],
                         [("size_mix", 1), ("fault_inject", 1), ("fault_inject", 2)])


class WorkerEnvironment(TempDir):
    def test_allocator_settings_in_the_driver_environment_never_reach_a_worker(self):
        profiles = os.path.join(self.tmp, "prof")
        env = dict(os.environ, HEAPPROFILE=profiles, HEAPCHECK="normal", HEAP_PROFILE_ALLOCATION_INTERVAL="1",
                   MALLOC_CONF="narenas:1", JE_MALLOC_CONF="narenas:1", MALLOC_ARENA_MAX="1",
                   MIMALLOC_VERBOSE="1", TCMALLOC_RELEASE_RATE="100", PERFTOOLS_VERBOSE="1")
        p = run(["run", "-a", "tcmalloc,jemalloc,glibc", "-w", "size_mix", "-t", "2", "-r", "1", "--out", self.out] + SMALL,
                env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith("prof")], [], "no heap profile was written")
        by = {r["allocator"]: r for r in records(self.out)}
        self.assertGreater(by["jemalloc"]["allocator_options"]["opt.narenas"], 1)
        self.assertGreater(by["glibc"]["alloc_stats"]["arenas"], 1)
        with open(os.path.join(self.out, "meta.json")) as f:
            stripped = json.load(f)["stripped_environment"]
        for name in ["HEAPPROFILE", "HEAPCHECK", "MALLOC_CONF", "JE_MALLOC_CONF", "MALLOC_ARENA_MAX", "MIMALLOC_VERBOSE"]:
            self.assertTrue(any(s.startswith(name + "=") for s in stripped), name)

    def test_environment_names_that_cannot_exist_are_refused(self):
        for key in ['"MALLOC_ARENA_MAX=1"', '"MALLOC_\\nX"', '"MALLOC_\\tX"']:
            m = os.path.join(self.tmp, "env.toml")
            with open(m, "w") as f:
                f.write(f'[allocators.x]\nbackend = "glibc"\nenv = {{ {key} = "2" }}\n[matrix]\nallocators = ["x"]\n')
            p = run(["run", m, "--out", self.out])
            self.assertEqual(p.returncode, 2, key)
            self.assertIn("env.toml:", p.stderr)
            self.assertIn("not a valid variable name", p.stderr)
            self.assertFalse(os.path.exists(self.out))


    def test_progress_outside_a_terminal_is_a_line_per_cell_never_a_redraw(self):
        # A pipe (a CI log), and a terminal whose reader is not one (the lab's guest console, which
        # the lab sets to lines when its own output is a file or pipe): one line per finished cell.
        import pty
        args = [ALLOCMARK, "run", "-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "3"] + SMALL
        piped = subprocess.run(args + ["--out", os.path.join(self.tmp, "piped")], capture_output=True, text=True, timeout=120)
        primary, secondary = pty.openpty()
        try:
            p = subprocess.run(args + ["--out", os.path.join(self.tmp, "console")], stdout=subprocess.DEVNULL, stderr=secondary,
                               env=dict(os.environ, ALLOCMARK_PROGRESS="lines"), timeout=120)
            os.close(secondary)
            console = b""
            while True:
                try:
                    chunk = os.read(primary, 65536)
                except OSError:  # EIO: the writer is gone
                    break
                if not chunk:
                    break
                console += chunk
        finally:
            os.close(primary)
        self.assertEqual(piped.returncode, 0, piped.stderr)
        self.assertEqual(p.returncode, 0, console)
        for what, text in [("pipe", piped.stderr), ("console", console.decode().replace("\r\n", "\n"))]:
            self.assertNotIn("\r", text, what)
            self.assertNotIn("\x1b", text, what)
            cells = [l for l in text.splitlines() if l.startswith("[")]
            self.assertEqual(len(cells), 3, (what, text))
            for i, line in enumerate(cells, 1):
                self.assertRegex(line, r"^\[%d/3\] glibc size_mix .*: ok \(" % i, what)
        bad = run(["run"] + ONE + ["--out", self.out], env=dict(os.environ, ALLOCMARK_PROGRESS="sometimes"))
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("ALLOCMARK_PROGRESS='sometimes'", bad.stderr)
        self.assertFalse(os.path.exists(self.out))


class BadInput(TempDir):
    def assert_usage_error(self, args, *needles):
        p = run(args)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)
        self.assertLess(len(p.stderr), 600, "a message a person can read")
        self.assertFalse(os.path.exists(self.out), "nothing may be written for bad input")
        return p

    def test_each_bad_value_is_named(self):
        base = ["run", "-a", "glibc", "-w", "size_mix", "--out", self.out]
        self.assert_usage_error(["run", self.tmp, "--out", self.out], "matrix: " + self.tmp + " is a folder, not a regular file")
        self.assert_usage_error(base[:-1] + [""], "--out", "empty")
        self.assert_usage_error(base + ["--timeout", "nan"], "--timeout")
        self.assert_usage_error(base + ["--timeout", "inf"], "--timeout")
        self.assert_usage_error(base + ["--threads", ""], "--threads")
        self.assert_usage_error(base + ["--threads", "1,,2"], "--threads")
        self.assert_usage_error(base + ["--reps", "0"], "--reps", "1..")
        self.assert_usage_error(["run", "-a", "glibc", "-w", "arena_churn", "--set", "arena_churn.big_chance=nan",
                                 "--out", self.out], "big_chance", "finite")

    def test_a_fifo_or_folder_where_a_file_is_expected_is_refused_without_waiting(self):
        # Nothing ever writes into the fifo: a reader that opens it waits for ever, and the timeout
        # fails the test. Each input is named with its flag or field, and nothing runs (issue 41).
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        folder = os.path.join(self.tmp, "folder")
        os.mkdir(folder)
        results = os.path.join(self.tmp, "results")  # any results folder: gate reads --confirm-matrix first
        shutil.copytree(os.path.join(os.path.dirname(__file__), "fixtures", "results-small"), results,
                        ignore=shutil.ignore_patterns("golden"))
        baseline = os.path.join(self.tmp, "b.json")
        with open(baseline, "w") as f:
            f.write("{}")

        def matrix(name, text):
            path = os.path.join(self.tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return path

        configs = os.path.join(self.tmp, "configs")  # a config folder whose variants file is a fifo
        os.mkdir(configs)
        os.mkfifo(os.path.join(configs, "variants.toml"))
        seed = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "topologies", "seed-8node.toml")
        replay = ["run", "-a", "glibc", "-w", "replay", "-r", "1", "--out", self.out]
        cases = [  # (what, arguments, environment, what the message says)
            ("trace show", ["trace", "show", fifo], None, "trace show: " + fifo + " is a fifo"),
            ("--set replay.trace", replay + ["--set", "replay.trace=" + fifo], None, "replay.trace: " + fifo + " is a fifo"),
            ("--set replay.trace, --dry-run", replay + ["--set", "replay.trace=" + fifo, "--dry-run"], None, fifo + " is a fifo"),
            ("[traces.x] file", ["run", matrix("traces.toml", '[traces.x]\nfile = "fifo"\n'), "--out", self.out], None,
             "trace x: replay.trace: " + fifo + " is a fifo"),
            ("--confirm-matrix fifo", ["gate", baseline, results, "--confirm", "--confirm-matrix", fifo,
                                       "--confirm-out", self.out], None, "--confirm-matrix: " + fifo + " is a fifo"),
            ("--confirm-matrix folder", ["gate", baseline, results, "--confirm", "--confirm-matrix", folder,
                                         "--confirm-out", self.out], None, "--confirm-matrix: " + folder + " is a folder"),
            ("topology", ["topology", fifo], None, "topology: " + fifo + " is a fifo"),
            ("lab --topology", ["lab", "--topology", fifo, "--out", self.out, "--", "run", "-w", "size_mix"], None,
             "--topology: " + fifo + " is a fifo"),
            ("lab --carry", ["lab", "--topology", seed, "--carry", fifo, "--out", self.out, "--", "run", "-w", "size_mix",
                             "-a", "glibc"], None, "--carry: " + fifo + " is a fifo"),
            ("lab --kernel", ["lab", "--topology", seed, "--kernel", fifo, "--out", self.out, "--", "run", "-w", "size_mix",
                              "-a", "glibc"], None, "--kernel: " + fifo + " is a fifo"),
            ("matrix", ["run", fifo, "--out", self.out], None, "matrix: " + fifo + " is a fifo"),
            ("cell", ["cell", fifo], None, "spec: " + fifo + " is a fifo"),
            ("gate BASELINE", ["gate", fifo, results], None, fifo + " is a fifo"),
            ("[programs.x] input", ["run", matrix("programs.toml", '[programs.x]\ncommand = "cat"\ninput = "fifo"\n'), "--out", self.out],
             None, "program x: input: " + fifo + " is a fifo"),
            ("library", ["run", matrix("library.toml", f'[allocators.x]\nbackend = "jemalloc"\nlibrary = "{fifo}"\n'
                                       '[matrix]\nallocators = ["x"]\nworkloads = ["size_mix"]\n'), "--out", self.out], None,
             "allocator 'x': library: " + fifo + " is a fifo"),
            ("variants file", ["run", "-a", "glibc", "-w", "size_mix", "--dry-run"], dict(os.environ, ALLOCMARK_CONFIG_DIR=configs),
             "the variants file: " + os.path.join(configs, "variants.toml") + " is a fifo"),
        ]
        for what, args, env, needle in cases:
            with self.subTest(input=what):
                p = run(args, timeout=60, env=env)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(needle, p.stderr)
                self.assertFalse(os.path.exists(self.out), "nothing may be written for bad input")

    def test_a_numap_setting_numap_cannot_use_stops_the_run_before_any_cell(self):
        # Preloaded into someone's program, numap warns and keeps its default; in a benchmark the
        # run says so and runs nothing (NUMAP_STRICT=1 in every numap process, the probe's too).
        for key, value, needle in [("NUMAP_DECAY_MSS", "5", "NUMAP_DECAY_MSS"), ("NUMAP_DECAY_MS", "banana", "NUMAP_DECAY_MS='banana'")]:
            m = os.path.join(self.tmp, "numap.toml")
            with open(m, "w") as f:
                f.write(f'[allocators.n]\nbackend = "numap"\nenv = {{ {key} = "{value}" }}\n'
                        '[matrix]\nallocators = ["n"]\nworkloads = ["size_mix"]\n')
            p = self.assert_usage_error(["run", m, "--out", self.out], "allocator 'n'", needle)
        # The variant may still say what it wants: numap's own default leniency, on purpose.
        with open(m, "w") as f:
            f.write('[allocators.n]\nbackend = "numap"\nenv = { NUMAP_STRICT = "0", NUMAP_DECAY_MSS = "5" }\n'
                    '[matrix]\nallocators = ["n"]\nworkloads = ["size_mix"]\nthreads = [1]\nreps = 1\n')
        p = run(["run", m, "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(records(self.out)[0]["alloc_stats"]["option_warnings"], 1)

    def test_an_allocator_configuration_the_allocator_would_ignore_stops_the_run(self):
        # jemalloc and mimalloc say so on stderr and run on their defaults: the run quotes their line.
        # glibc says nothing: the value's form is checked at plan time, at the variant's position.
        m = os.path.join(self.tmp, "conf.toml")
        for backend, key, value, needles in [
                ("jemalloc", "MALLOC_CONF", "dirty_decay_ms:banana", ["<jemalloc>: Invalid conf value: dirty_decay_ms:banana"]),
                ("jemalloc", "MALLOC_CONF", "no_such_option:1", ["<jemalloc>: Invalid conf pair: no_such_option:1"]),
                ("mimalloc", "MIMALLOC_VERBOSE", "banana", ["mimalloc: warning: environment option mimalloc_verbose has an invalid value"]),
                ("glibc", "MALLOC_ARENA_MAX", "banana", ["conf.toml:1:1", "MALLOC_ARENA_MAX=banana: glibc expects an unsigned integer"]),
                ("glibc", "MALLOC_ARENA_MAX", "", ["MALLOC_ARENA_MAX=: glibc expects"]),
                ("glibc", "GLIBC_TUNABLES", "glibc.malloc.arena_max", ["GLIBC_TUNABLES=glibc.malloc.arena_max: glibc expects NAME=VALUE"])]:
            with self.subTest(backend=backend, value=value):
                with open(m, "w") as f:
                    f.write(f'[allocators.v]\nbackend = "{backend}"\nenv = {{ {key} = "{value}" }}\n'
                            '[matrix]\nallocators = ["v"]\nworkloads = ["size_mix"]\nthreads = [1]\nreps = 1\n')
                self.assert_usage_error(["run", m, "--out", self.out] + SMALL, "allocator 'v'", *needles)
        # Values the allocators take run: real cells of each.
        with open(m, "w") as f:
            f.write('[allocators.g]\nbackend = "glibc"\nenv = { MALLOC_ARENA_MAX = "0x2", GLIBC_TUNABLES = "glibc.malloc.trim_threshold=1:glibc.malloc.mxfast=0" }\n'
                    '[allocators.j]\nbackend = "jemalloc"\nenv = { MALLOC_CONF = "dirty_decay_ms:1000" }\n'
                    '[matrix]\nallocators = ["g", "j"]\nworkloads = ["size_mix"]\nthreads = [1]\nreps = 1\n')
        p = run(["run", m, "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(r["status"] for r in records(self.out)), ["ok", "ok"])

    def test_a_tcmalloc_value_gperftools_would_misread_stops_the_run(self):
        # gperftools says nothing and reads the number a value starts with (commandlineflags.h): banana
        # is a release rate of 0 and the smallest thread cache, not the default. Refused at plan time.
        m = os.path.join(self.tmp, "tc.toml")
        for key, value, needle in [
                ("TCMALLOC_RELEASE_RATE", "banana", "TCMALLOC_RELEASE_RATE=banana: tcmalloc expects a decimal number"),
                ("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "banana", "tcmalloc expects a decimal integer"),
                ("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "0x10000000", "would read only the number it starts with"),
                ("TCMALLOC_AGGRESSIVE_DECOMMIT", "banana", "expects a switch")]:
            with self.subTest(key=key, value=value):
                with open(m, "w") as f:
                    f.write(f'[allocators.v]\nbackend = "tcmalloc"\nenv = {{ {key} = "{value}" }}\n'
                            '[matrix]\nallocators = ["v"]\nworkloads = ["size_mix"]\nthreads = [1]\nreps = 1\n')
                self.assert_usage_error(["run", m, "--out", self.out] + SMALL, "tc.toml:1:1", "allocator 'v'", needle)
        # Values of the forms it reads whole run.
        with open(m, "w") as f:
            f.write('[allocators.t]\nbackend = "tcmalloc"\nenv = { TCMALLOC_RELEASE_RATE = "2.5", '
                    'TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES = "268435456", TCMALLOC_AGGRESSIVE_DECOMMIT = "true" }\n'
                    '[matrix]\nallocators = ["t"]\nworkloads = ["size_mix"]\nthreads = [1]\nreps = 1\n')
        p = run(["run", m, "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([r["status"] for r in records(self.out)], ["ok"])

    def test_a_matrix_over_an_hour_says_its_estimate_and_starts_only_when_told(self):
        # 10000 repetitions at the full size: days by the catalogue's typical cell times. Its cells are
        # made tiny, so that a run started by mistake costs nothing; the estimate is the catalogue's.
        tiny = ["--set", "size_mix.ops=1000", "--set", "size_mix.live_mib=4"]
        long = ["-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "10000", "--size", "full"] + tiny
        p = run(["run"] + long + ["--dry-run"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"estimate: 10000 cells at size full, about [0-9.]+ days")
        # Not at a terminal (CI): refused with the estimate, nothing written.
        p = subprocess.run([ALLOCMARK, "run"] + long + ["--out", self.out], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("the matrix plans 10000 cells at size full, about", p.stderr)
        self.assertIn("--yes", p.stderr)
        self.assertFalse(os.path.exists(self.out))
        m = os.path.join(self.tmp, "long.toml")
        with open(m, "w") as f:
            f.write('[matrix]\nexpect_hours = 1\nreps = 10000\nsize = "full"\nthreads = [1]\n')
        self.assert_usage_error(["run", m, "-a", "glibc", "-w", "size_mix", "--out", self.out] + tiny,
                                "long.toml:2:16: 'expect_hours' is 1, but the matrix plans 10000 cells")
        self.assert_usage_error(["run", "-a", "glibc,jemalloc", "-w", "size_mix,hash_build", "-t", "1,2,3", "-r", "10000",
                                 "--out", self.out], "plans 120000 cells, more than the 100000")
        # Told to go on (--yes, or an expect_hours the estimate fits): it starts; stopped after a cell.
        with open(m, "w") as f:
            f.write('[matrix]\nexpect_hours = 1000\nreps = 10000\nsize = "full"\nthreads = [1]\n')
        for i, args in enumerate([["run"] + long + ["--yes"], ["run", m, "-a", "glibc", "-w", "size_mix"] + tiny]):
            out = os.path.join(self.tmp, "started-%d" % i)
            proc = subprocess.Popen([ALLOCMARK] + args + ["--out", out], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            try:
                wait_for(lambda: os.path.exists(os.path.join(out, "results.jsonl")) and lines(out), limit=60,
                         what="the first cell of %s" % args)
            finally:
                proc.send_signal(signal.SIGINT)
                _, err = proc.communicate(timeout=60)
            self.assertEqual(proc.returncode, 130, err)
            self.assertIn("the matrix plans 10000 cells at size full, about", err)  # said before it starts

    def test_bad_numbers_in_a_matrix_file_point_at_their_position(self):
        for text, needle in [("[matrix]\ntimeout_s = nan\n", "m.toml:2:13"), ("[matrix]\nreps = 100000000000\n", "m.toml:2:8"),
                             ("[matrix]\ntimeout_s = inf\n", "finite")]:
            m = os.path.join(self.tmp, "m.toml")
            with open(m, "w") as f:
                f.write(text)
            self.assert_usage_error(["run", m, "--out", self.out], needle)


class CellUnit(TempDir):
    """`allocmark cell`: the unit an executor runs on the cell's own host gives the same record."""

    def test_one_described_cell_runs_here_and_writes_its_record(self):
        self.assertEqual(run(["run"] + ONE + ["--out", self.out]).returncode, 0)
        local = records(self.out)[0]
        cell = {"allocator": {"name": "glibc", "backend": "glibc", "library": "", "env": {}},
                "workload": "size_mix", "threads": 1, "rep": 1, "params": local["params"]}
        spec = os.path.join(self.tmp, "cell.json")
        with open(spec, "w") as f:
            json.dump({"cell": cell, "settings": {"timeout_s": 60, "sample_ms": 10}, "log": os.path.join(self.tmp, "cell.log")}, f)
        record_path = os.path.join(self.tmp, "record.json")
        p = run(["cell", spec, "--record", record_path])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(record_path) as f:
            rec = json.load(f)
        self.assertEqual(rec["status"], "ok")
        self.assertEqual(rec["key"], local["key"], "the same cell has the same identity wherever it runs")
        self.assertEqual([ph["name"] for ph in rec["phases"]], ["fill", "churn", "release"])
        self.assertGreater(len(rec["timeline"]), 0)
        with open(spec, "w") as f:
            json.dump({"cell": dict(cell, workload="nope")}, f)
        p = run(["cell", spec])
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown workload 'nope'", p.stderr)


if __name__ == "__main__":
    unittest.main()
