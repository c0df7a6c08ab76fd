#!/usr/bin/python3
"""Allocation traces (issue 26; docs/traces.md) on real programs: `trace record` under glibc and
another allocator, single- and multi-threaded, with phase marks; `trace show`; damaged files
refused with their offset; and the replay workload under every allocator. Behaviour only: counts,
statuses and equalities, never timings."""
import hashlib
import json
import os
import shutil
import subprocess
import unittest

from e2e_test import TempDirTest, records, run

# A deterministic single-threaded program: the same calls whatever serves them.
PYTHON_WORK = (
    "import os\n"
    "def phase(n):\n"
    "    fd = int(os.environ.get('ALLOCMARK_PHASE_FD', '-1'))\n"
    "    if fd >= 0:\n"
    "        os.write(fd, ('phase ' + n + '\\n').encode()); os.read(fd, 16)\n"
    "phase('build')\n"
    "d = {str(i): [i] * 8 for i in range(60000)}\n"
    "phase('drop')\n"
    "for k in list(d)[::2]: del d[k]\n"
    "print(len(d))\n"
)
# Python's small objects come from its own arenas unless PYTHONMALLOC=malloc sends every one to malloc.
ENV = dict(os.environ, PYTHONHASHSEED="0", PYTHONMALLOC="malloc")


def trace_json(path):
    p = run(["trace", "show", path, "--json"])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


class Record(TempDirTest):
    def record(self, name, command, *flags):
        path = os.path.join(self.tmp, name)
        p = run(["trace", "record", "--out", path, *flags, "--", *command], env=ENV)
        return path, p

    def test_a_single_threaded_program_with_phases(self):
        path, p = self.record("py.trace", ["python3", "-c", PYTHON_WORK], "--phases")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "30000")  # the program's output is its own
        s = trace_json(path)
        self.assertTrue(s["ended"])
        self.assertEqual(s["threads"], 1)
        self.assertEqual([ph["name"] for ph in s["phases"]], ["startup", "build", "drop"])
        calls = {c["function"]: c["calls"] for c in s["calls"]}
        self.assertGreater(calls.get("malloc", 0), 60000)
        self.assertGreater(calls.get("free", 0), 30000)
        build = s["phases"][1]["peak_live_bytes"]
        self.assertGreater(build, 60000 * 8 * 8)  # the lists' items alone
        self.assertEqual(s["cross_thread_frees"], 0)

    def test_the_same_program_without_the_recorder_prints_the_same(self):
        plain = subprocess.run(["python3", "-c", PYTHON_WORK], capture_output=True, text=True, env=ENV)
        _, p = self.record("py.trace", ["python3", "-c", PYTHON_WORK])
        self.assertEqual(p.stdout, plain.stdout)

    def test_a_multi_threaded_program_and_another_allocator(self):
        data = os.path.join(self.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(1 << 20) * 6)
        path, p = self.record("xz.trace", ["xz", "-T2", "-1", "-k", "-f", data], "--allocator", "jemalloc")
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        s = trace_json(path)
        self.assertGreaterEqual(s["threads"], 2)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"AMTRACE\0")
        p = run(["trace", "show", path])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("threads:", p.stdout)

    def test_a_program_that_fails_gives_its_exit_status_and_its_trace(self):
        path, p = self.record("f.trace", ["python3", "-c", "import sys; x = [0] * 1000; sys.exit(3)"])
        self.assertEqual(p.returncode, 3)
        self.assertTrue(trace_json(path)["ended"])

    def test_a_program_the_recorder_cannot_enter_is_refused(self):
        # busybox-static (the lab's package) is linked statically: no LD_PRELOAD reaches it.
        path = os.path.join(self.tmp, "static.trace")
        p = run(["trace", "record", "--out", path, "--", "/bin/busybox", "true"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("nothing recorded", p.stderr)
        self.assertFalse(os.path.exists(path))

    def test_bad_input_is_refused(self):
        p = run(["trace", "record", "--out", os.path.join(self.tmp, "x.trace"), "--allocator", "nosuch", "--", "true"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("nosuch", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x.trace")))
        p = run(["trace", "show", os.path.join(self.tmp, "missing.trace")])
        self.assertEqual(p.returncode, 2)
        self.assertIn("missing.trace", p.stderr)


class Damaged(TempDirTest):
    def test_a_corrupt_or_cut_trace_is_refused_naming_the_offset(self):
        path = os.path.join(self.tmp, "py.trace")
        p = run(["trace", "record", "--out", path, "--", "python3", "-c", "print(sum(range(1000)))"], env=ENV)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(path, "rb") as f:
            good = f.read()
        damaged = [
            (good[:-5], "cut off"),
            (good[:40] + bytes([good[40] ^ 0xFF]) + good[41:], "file offset 32"),
            (b"XX" + good[2:], "not an allocmark trace"),
        ]
        for data, needle in damaged:
            bad = os.path.join(self.tmp, "bad.trace")
            with open(bad, "wb") as f:
                f.write(data)
            for args in (["trace", "show", bad], ["run", "-a", "glibc", "-w", "replay", "--set", f"replay.trace={bad}",
                                                  "-t", "1", "-r", "1", "--out", os.path.join(self.tmp, "o")]):
                p = run(args)
                self.assertEqual(p.returncode, 2, (needle, args, p.stderr))
                self.assertIn(needle, p.stderr)
                self.assertIn("bad.trace", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "o")))


class Replay(TempDirTest):
    ALLOCATORS = "glibc,jemalloc,tcmalloc,mimalloc,numap"

    def test_every_allocator_replays_the_same_live_bytes(self):
        path = os.path.join(self.tmp, "py.trace")
        p = run(["trace", "record", "--out", path, "--phases", "--", "python3", "-c", PYTHON_WORK], env=ENV)
        self.assertEqual(p.returncode, 0, p.stderr)
        shown = trace_json(path)
        p = run(["run", "-a", self.ALLOCATORS, "-w", "replay", "--set", f"replay.trace={path}", "-r", "1", "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual(sorted(r["allocator"] for r in recs), sorted(self.ALLOCATORS.split(",")))
        peaks = {}
        for r in recs:
            self.assertEqual(r["status"], "ok", r.get("error"))
            self.assertEqual(r["threads"], 1)  # the trace's, whatever the threads axis says
            self.assertEqual([ph["name"] for ph in r["phases"]], ["startup", "build", "drop"])
            peaks[r["allocator"]] = [ph["peak_live_bytes"] for ph in r["phases"]]
            for ph in r["phases"]:
                self.assertGreater(ph["peak_rss_bytes"], 0)
        self.assertEqual(len({tuple(v) for v in peaks.values()}), 1, peaks)
        # The replay's live bytes are the program's (to the live counter's 64 KiB fold).
        build = peaks["glibc"][1]
        self.assertLessEqual(abs(build - shown["phases"][1]["peak_live_bytes"]), 64 * 1024)

    def test_traces_in_a_matrix_are_named_groups(self):
        path = os.path.join(self.tmp, "py.trace")
        p = run(["trace", "record", "--out", path, "--", "python3", "-c", "x = [bytearray(1000) for i in range(2000)]"], env=ENV)
        self.assertEqual(p.returncode, 0, p.stderr)
        matrix = self.write("m.toml", '[matrix]\nallocators = ["glibc"]\nreps = 1\n'
                            '[traces.first]\nfile = "py.trace"\n'  # relative to the matrix file
                            '[traces.second]\nfile = "py.trace"\ntouch = "none"\n')
        p = run(["run", matrix, "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual(sorted(r["params"]["name"] for r in recs), ["first", "second"])
        self.assertEqual({r["params"]["trace"] for r in recs}, {path})
        p = run(["show", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("replay:first", p.stdout)
        self.assertIn("replay:second", p.stdout)
        p = run(["show", self.out, "--workload", "replay:first"])  # the name a reader sees selects it
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("replay:first", p.stdout)
        self.assertNotIn("replay:second", p.stdout)

    def test_a_trace_replaced_at_its_path_is_another_cell(self):
        # A replay cell is its trace's contents: the path stored absolute, the SHA-256 in the key, so
        # a file replaced at the same path is never pooled with the first (issue 41).
        first, second = os.path.join(self.tmp, "first.trace"), os.path.join(self.tmp, "second.trace")
        for path, n in ((first, 1000), (second, 3000)):
            p = run(["trace", "record", "--out", path, "--", "python3", "-c", f"x = [bytearray(100) for i in range({n})]"], env=ENV)
            self.assertEqual(p.returncode, 0, p.stderr)
        app = os.path.join(self.tmp, "app.trace")
        shutil.copy(first, app)
        args = ["run", "-a", "glibc", "-w", "replay", "--set", "replay.trace=app.trace", "-r", "1", "--out", self.out]
        p = run(args, cwd=self.tmp)  # a relative path, from where allocmark runs
        self.assertEqual(p.returncode, 0, p.stderr)
        (rec,) = records(self.out)
        self.assertEqual(rec["params"]["trace"], app)
        with open(first, "rb") as f:
            self.assertEqual(rec["params"]["trace_sha256"], hashlib.sha256(f.read()).hexdigest())
        shutil.copy(second, app)
        p = run(args + ["--resume"], cwd=self.tmp)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("the matrix differs", p.stderr)
        self.assertIn("trace_sha256", p.stderr)
        self.assertEqual(len(records(self.out)), 1, "a refused resume runs nothing")
        p = run(args + ["--extend"], cwd=self.tmp)  # added on purpose: another cell beside the first
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual(len(recs), 2)
        self.assertNotEqual(recs[0]["key"], recs[1]["key"])
        p = run(["show", self.out, "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(g["cells"] for g in json.loads(p.stdout)["groups"]), [1, 1], "two traces, never pooled")

    def test_a_multi_threaded_trace_replays_with_its_threads(self):
        data = os.path.join(self.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(1 << 20) * 4)
        path = os.path.join(self.tmp, "xz.trace")
        p = run(["trace", "record", "--out", path, "--", "xz", "-T2", "-1", "-k", "-f", data])
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        threads = trace_json(path)["threads"]
        p = run(["run", "-a", "glibc,jemalloc", "-w", "replay", "--set", f"replay.trace={path}", "-t", "1,2", "-r", "1",
                 "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual(len(recs), 2)  # one cell per allocator: the threads axis does not apply
        for r in recs:
            self.assertEqual(r["status"], "ok", r.get("error"))
            self.assertEqual(r["threads"], threads)


if __name__ == "__main__":
    unittest.main()
