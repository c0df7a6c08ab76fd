#!/usr/bin/python3
"""Allocation traces (issue 26; docs/traces.md) on real programs: `trace record` under glibc and
another allocator, single- and multi-threaded, with phase marks; `trace show`; damaged files
refused with their offset; and the replay workload under every allocator. Behaviour only: counts,
statuses and equalities, never timings."""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

from e2e_test import ALLOCMARK, TempDirTest, mounted_tmpfs, records, run

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


HERE = os.path.dirname(os.path.abspath(__file__))


# Hostile traces, built from the real format (harness/trace/encoding.h) and compressed by the real
# zstd: what a damaged or crafted file may say, each refused or read at a cost bounded by its size.
def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def event(op, *fields):  # op 1: malloc (dt, id, size); 30: free (dt, id, size)
    return bytes([op]) + b"".join(varint(f) for f in fields)


def chunk(thread, events):
    return b"C" + varint(thread) + varint(len(events)) + events


END = b"E" + varint(0) + varint(0)


def write_trace(path, stream, header=b'{"program": "hostile"}'):
    """A trace file of `stream` (a record stream; bytes, or a callable writing it to a file)."""
    raw = path + ".stream"
    with open(raw, "wb") as f:
        if callable(stream):
            stream(f)
        else:
            f.write(stream)
    body = subprocess.run(["zstd", "-q", "-c", "-1", raw], capture_output=True, check=True).stdout
    os.unlink(raw)
    with open(path, "wb") as f:
        f.write(b"AMTRACE\0" + struct.pack("<IIQQ", 1, 0, len(body), len(header)) + body + header)


def run_measured(args, **kw):
    """allocmark's result, and its peak resident memory in MiB (the children's rusage of a wrapper
    that ran only it)."""
    wrapper = ("import resource, subprocess, sys\n"
               "p = subprocess.run(sys.argv[1:])\n"
               "sys.stderr.write('\\npeak_kib=%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "sys.exit(p.returncode)\n")
    p = subprocess.run(["/usr/bin/python3", "-c", wrapper, ALLOCMARK] + args, capture_output=True, text=True, timeout=120, **kw)
    peak = int(p.stderr.rsplit("peak_kib=", 1)[1]) / 1024
    return p, peak


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

    def test_outputs_are_checked_before_the_program_runs(self):
        # Issue 41: `-o F/results.jsonl` replaced the results; a missing folder, a folder or '' lost
        # the recording at the end. Now exit 2 before the program starts (it would make `ran`).
        results = os.path.join(self.tmp, "F")
        os.mkdir(results)
        with open(os.path.join(results, "results.jsonl"), "w") as f:
            f.write("{}\n")
        ran = os.path.join(self.tmp, "ran")
        for out, needle in ((os.path.join(results, "results.jsonl"), "results folder"),
                            (os.path.join(self.tmp, "nosuch", "x.trace"), "does not exist"),
                            (results, "is a folder"), ("", "empty")):
            p = run(["trace", "record", "--out", out, "--", "touch", ran])
            self.assertEqual(p.returncode, 2, (out, p.stderr))
            self.assertIn(needle, p.stderr)
            self.assertFalse(os.path.exists(ran), f"the program ran before {out!r} was refused")
        with open(os.path.join(results, "results.jsonl")) as f:
            self.assertEqual(f.read(), "{}\n")

    def test_a_full_disk_is_exit_3_and_leaves_nothing(self):
        self.assertEqual(os.geteuid(), 0, "this test mounts a tmpfs: run the suite as root (CI does)")
        with mounted_tmpfs(os.path.join(self.tmp, "small"), "64k") as mnt:
            with open(os.path.join(mnt, "fill"), "wb") as f:
                f.write(b"\0" * 60000)
            p = run(["trace", "record", "--out", os.path.join(mnt, "x.trace"), "--", "python3", "-c",
                     "x = [str(i) for i in range(100000)]"], env=ENV)
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertIn("No space left", p.stderr)
            self.assertEqual(os.listdir(mnt), ["fill"], "a partial trace was left behind")

    def test_a_program_using_descriptor_3_keeps_it(self):
        # The recording was on descriptor 3: `exec 3>file` sent the recorder's bytes into the file
        # and cut the trace. It is on a high descriptor now.
        mine = os.path.join(self.tmp, "mine.txt")
        path, p = self.record("sh.trace", ["sh", "-c", f"exec 3>{mine}; echo hi >&3"])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(mine) as f:
            self.assertEqual(f.read(), "hi\n")
        self.assertTrue(trace_json(path)["ended"])

    def test_writes_to_the_recording_descriptor_are_explained(self):
        # Was: the program killed, "record stream offset 4: unknown chunk tag 104". Now the program
        # runs on, and the error says who wrote where and how to avoid it: exit 1, no trace.
        path, p = self.record("w.trace", ["bash", "-c", 'echo hi >&$ALLOCMARK_TRACE_FD; echo after'])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout, "after\n", "the program ran to its end")
        self.assertIn("did not write", p.stderr)
        self.assertIn("descriptor 1000 (ALLOCMARK_TRACE_FD)", p.stderr)
        self.assertIn("no trace written", p.stderr)
        self.assertFalse(os.path.exists(path))

    def test_closing_the_recording_descriptor_is_an_incomplete_trace(self):
        path, p = self.record("c.trace", ["bash", "-c", "exec 1000>&-; x=$(echo a); echo $x"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout, "a\n")
        self.assertIn("cut off", p.stderr)
        self.assertFalse(trace_json(path)["ended"])

    def test_an_exec_into_an_unrecorded_image_is_named(self):
        # Was: a 0-event trace, exit 0. busybox-static takes no LD_PRELOAD.
        path, p = self.record("x.trace", ["sh", "-c", "echo x; exec /bin/busybox true"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("/bin/busybox", p.stderr)
        self.assertIn("was not recorded", p.stderr)
        self.assertFalse(os.path.exists(path))

    def test_calls_after_a_threads_end_are_recorded(self):
        # 64 threads each free a block in a pthread key's destructor, after the recorder's own
        # end-of-thread hook: those 64 frees were lost without a word.
        program = os.path.join(self.tmp, "thread_keys")
        subprocess.run(["cc", "-O2", "-pthread", "-o", program, os.path.join(HERE, "programs", "thread_keys.c")], check=True)
        path, p = self.record("k.trace", [program])
        self.assertEqual(p.returncode, 0, p.stderr)
        s = trace_json(path)
        self.assertEqual(s["lost_events"], 0)
        calls = {c["function"]: c for c in s["calls"]}
        self.assertGreaterEqual(calls["free"]["calls"], 64 * 101)
        self.assertEqual(sum(1 for c in s["sizes"] if c["up_to_bytes"] == 128 and c["allocations"] >= 64), 1)

    def test_calls_the_recorder_could_not_keep_are_counted_and_exit_1(self):
        # Out of memory under a 60 MB address-space limit, the recorder cannot grow its address
        # table: those calls are lost, said, counted in the header, and the status is 1.
        path, p = self.record("oom.trace", ["prlimit", "--as=60000000", "python3", "-c",
                                            "x = []\ntry:\n    while True: x.append(bytearray(8))\nexcept MemoryError: pass\n"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("allocation calls were not recorded", p.stderr)
        self.assertGreater(trace_json(path)["lost_events"], 0)

    def test_threads_past_the_limit_are_counted_as_lost(self):
        # A trace holds at most 4096 threads (encoding.h): the recorder records no more, counts their
        # calls as lost (exit 1), and what it wrote reads back.
        program = os.path.join(self.tmp, "many_threads")
        subprocess.run(["cc", "-O2", "-pthread", "-o", program, os.path.join(HERE, "programs", "many_threads.c")], check=True)
        path, p = self.record("threads.trace", [program, "4100"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("a thread came after the 4096 a trace holds", p.stderr)
        s = trace_json(path)
        self.assertEqual(s["threads"], 4096)
        self.assertGreater(s["lost_events"], 0)

    def test_phase_marks_past_the_limit_are_answered_error(self):
        # A trace holds at most 128 marks: the recorder answers `error` to the 129th and later, so
        # what it records always reads back (20,000 marks pushed the driver to 1.4 GB).
        script = ("import os\n"
                  "fd = int(os.environ['ALLOCMARK_PHASE_FD'])\n"
                  "answers = []\n"
                  "for k in range(130):\n"
                  "    os.write(fd, b'phase p%d\\n' % k)\n"
                  "    answers.append(os.read(fd, 16))\n"
                  "print(answers.count(b'ok\\n'), answers.count(b'error\\n'))\n")
        path, p = self.record("marks.trace", ["python3", "-c", script], "--phases")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "128 2\n")
        self.assertEqual(len(trace_json(path)["phases"]), 129)  # startup and 128 marks


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

    def test_a_zstd_bomb_is_refused_by_its_size(self):
        # 512 MiB of valid events in a ~40 KB file: took 1.8 GB and 22 s (a 1.8 GB bomb) before it
        # was refused. The frame's size is judged against the body's before anything decompresses.
        path = os.path.join(self.tmp, "bomb.trace")
        size = 512 << 20

        def stream(f):
            f.write(b"C" + varint(0) + varint(size))
            block = bytes([1]) * (1 << 20)  # malloc, dt 1, id 1, size 1: four bytes of 1
            for _ in range(size >> 20):
                f.write(block)
        write_trace(path, stream)
        self.assertLess(os.path.getsize(path), 200_000)
        p, peak = run_measured(["trace", "show", path])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("bomb.trace: file offset 32", p.stderr)
        self.assertIn("content size", p.stderr)
        self.assertNotIn("bad_alloc", p.stderr)
        self.assertLess(peak, 200, "MiB to refuse a bomb")

    def test_an_object_id_of_2_31_costs_what_the_trace_holds(self):
        # 94 bytes naming object 2^31 took 2.1 GB in `show` and at plan time, a 16 GB id table in the
        # worker: ids are renumbered 1..objects.
        path = os.path.join(self.tmp, "id.trace")
        write_trace(path, chunk(0, event(1, 1, 1 << 31, 8) + event(30, 1, 1 << 31, 8)) + END)
        p, peak = run_measured(["trace", "show", path, "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout.split("\npeak_kib")[0])["objects"], 1)
        self.assertLess(peak, 200, "MiB for a one-object trace")
        p, peak = run_measured(["run", "-a", "glibc", "-w", "replay", "--set", f"replay.trace={path}", "-r", "1",
                                "--out", self.out])
        self.assertEqual(p.returncode, 0, p.stderr)
        (rec,) = records(self.out)
        self.assertEqual(rec["status"], "ok")
        self.assertLess(rec["idle_rss_bytes"], 200 << 20, "the worker's id table")

    def test_a_thread_numbered_999999_is_one_thread(self):
        # `show` printed a million lines for it.
        path = os.path.join(self.tmp, "thread.trace")
        write_trace(path, chunk(999999, event(1, 1, 1, 8)) + END)
        p = run(["trace", "show", path])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(len(p.stdout.splitlines()), 60)
        self.assertEqual(trace_json(path)["threads"], 1)

    def test_phase_marks_past_the_limit_are_refused_where_they_are(self):
        # 20,000 marks in a 195 KB trace pushed the driver to 1.4 GB and a results line to 31 MB.
        path = os.path.join(self.tmp, "marks.trace")
        marks = b"".join(b"P" + varint(k) + varint(k) + varint(6) + b"p%05d" % k for k in range(1, 20001))
        write_trace(path, marks + chunk(0, event(1, 1, 1, 8)) + END)
        p, peak = run_measured(["trace", "show", path])
        self.assertEqual(p.returncode, 2, p.stderr)
        offset = len(b"".join(b"P" + varint(k) + varint(k) + varint(6) + b"p%05d" % k for k in range(1, 129)))
        self.assertIn(f"marks.trace: record stream offset {offset}: phase mark 129: a trace holds at most 128", p.stderr)
        self.assertLess(peak, 200)

    def test_threads_past_the_limit_are_refused_where_they_are(self):
        # The threads were renumbered densely, but not counted: 100,000 one-event threads in a 500 KB
        # trace took 500 MB in `show`, a table row each in the plan and the worker, a replay thread each.
        path = os.path.join(self.tmp, "threads.trace")
        chunks = [chunk(k, event(1, 1, k + 1, 8)) for k in range(100000)]
        write_trace(path, b"".join(chunks) + END)
        p, peak = run_measured(["trace", "show", path])
        self.assertEqual(p.returncode, 2, p.stderr)
        offset = len(b"".join(chunks[:4096]))
        self.assertIn(f"threads.trace: record stream offset {offset}: thread 4096 is the trace's thread 4097: "
                      "a trace holds at most 4096 threads", p.stderr)
        self.assertLess(peak, 200)
        p = run(["run", "-a", "glibc", "-w", "replay", "--set", f"replay.trace={path}", "--dry-run"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("a trace holds at most 4096 threads", p.stderr)

    def test_an_implausible_time_is_refused_naming_the_field(self):
        path = os.path.join(self.tmp, "time.trace")
        write_trace(path, chunk(0, event(1, 1, 1, 8) + event(1, 1 << 60, 2, 8)) + END)
        p = run(["trace", "show", path])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("time.trace: record stream offset 7: event time", p.stderr)

    def test_a_traces_texts_reach_no_terminal_raw(self):
        # A header's program and a phase mark's name are the file's: `show` printed them raw (an
        # escape cleared the screen), a name that is not UTF-8 made `show --json` fail.
        path = os.path.join(self.tmp, "texts.trace")
        write_trace(path, chunk(0, event(1, 1, 1, 8)) + END, header=b'{"program": "\\u001b[2Jevil"}')
        p = subprocess.run([ALLOCMARK, "trace", "show", path], capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn(b"\x1b", p.stdout)
        self.assertIn(b"evil", p.stdout)
        self.assertIn("evil", trace_json(path)["program"])
        write_trace(path, b"P" + varint(1) + varint(0) + varint(3) + b"a\xffb" + chunk(0, event(1, 1, 1, 8)) + END)
        p = run(["trace", "show", path, "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["phases"][1]["name"], "a\ufffdb")
        mark = b"P" + varint(1) + varint(0) + varint(3) + b"a\x1bb"
        write_trace(path, mark + chunk(0, event(1, 1, 1, 8)) + END)
        p = run(["trace", "show", path])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("texts.trace: record stream offset 0: phase mark 1: the name holds a control character", p.stderr)


class Replay(TempDirTest):
    ALLOCATORS = "glibc,jemalloc,tcmalloc,mimalloc,numap"

    @classmethod
    def setUpClass(cls):
        """Two different recordings of one program (1000 and 3000 blocks), made once for the tests
        that need two traces: they only read or copy them."""
        cls._traces = tempfile.TemporaryDirectory(prefix="allocmark-traces-")
        cls.recorded = []
        for name, n in (("first", 1000), ("second", 3000)):
            path = os.path.join(cls._traces.name, name + ".trace")
            p = run(["trace", "record", "--out", path, "--", "python3", "-c", f"x = [bytearray(100) for i in range({n})]"], env=ENV)
            cls.recorded.append((path, p))

    @classmethod
    def tearDownClass(cls):
        cls._traces.cleanup()

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

    def two_traces(self):
        """The class's two recordings (setUpClass): paths of first and second."""
        for _, p in self.recorded:
            self.assertEqual(p.returncode, 0, p.stderr)
        return tuple(path for path, _ in self.recorded)

    def test_a_trace_replaced_at_its_path_is_another_cell(self):
        # A replay cell is its trace's contents: the path stored absolute, the SHA-256 in the key, so
        # a file replaced at the same path is never pooled with the first (issue 41).
        first, second = self.two_traces()
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

    def test_the_gate_and_compare_never_judge_one_trace_against_another(self):
        # A baseline of one trace and results of another replayed from the same path: another
        # workload, not comparable without --strict (a changed library is what a gate is for; a
        # changed input is not). The gate passed it at +0.6% before (issue 41).
        first, second = self.two_traces()
        app = os.path.join(self.tmp, "app.trace")
        folders = {}
        for name, source in (("base", first), ("same", first), ("other", second)):
            shutil.copy(source, app)
            folders[name] = os.path.join(self.tmp, name)
            p = run(["run", "-a", "glibc", "-w", "replay", "--set", f"replay.trace={app}", "-r", "3", "--out", folders[name]])
            self.assertEqual(p.returncode, 0, p.stderr)
        baseline = os.path.join(self.tmp, "base.json")
        p = run(["baseline", folders["base"], "-o", baseline])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["gate", baseline, folders["other"]])
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        short = lambda path: hashlib.sha256(open(path, "rb").read()).hexdigest()[:12]
        self.assertIn(f"another input, so another workload: trace_sha256 {short(first)} -> {short(second)}", p.stdout)
        self.assertIn("gate: NOT COMPARABLE", p.stdout)
        p = run(["compare", folders["base"], folders["other"], "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(all(c["direction"] == "not comparable" for c in json.loads(p.stdout)["changes"]), p.stdout)
        p = run(["gate", baseline, folders["same"]])  # the same trace again is judged
        self.assertNotIn("another input", p.stdout)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)

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
