"""The Slurm executor against a real Slurm (issue 14): Debian's munged, slurmctld and slurmd, started
for this module on this machine as a one-node cluster (tests/slurm_cluster.py). Where the daemons
cannot start, every test here fails with the reason and the daemons' logs; nothing is skipped.

Run by ctest with Debian's /usr/bin/python3 as root; standard library only. Assertions are about
behaviour (records, statuses, exit codes, files), never timings.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from slurm_cluster import ClusterError, SlurmCluster

ALLOCMARK = os.environ["ALLOCMARK_BIN"]
SMALL = ["--set", "size_mix.live_mib=8", "--set", "size_mix.ops=20000"]
MATRIX = ["-a", "glibc,jemalloc", "-w", "size_mix", "-t", "1", "-r", "2"] + SMALL
# Cells of a few seconds each, so that a task can be cancelled while it runs its second cell.
SLOW = ["-a", "glibc", "-w", "size_mix", "-t", "1", "-r", "4", "--set", "size_mix.live_mib=8",
        "--set", "size_mix.ops=4000000"]
SLOW_ONE = SLOW[:6] + ["-r", "1"] + SLOW[8:]
HOST = socket.gethostname()

cluster = None
cluster_error = None
cluster_root = None


def setUpModule():
    global cluster, cluster_error, cluster_root
    cluster_root = tempfile.mkdtemp(prefix="allocmark-slurm-")
    cluster = SlurmCluster(cluster_root)
    try:
        cluster.start()
    except ClusterError as e:
        cluster_error = str(e)


def tearDownModule():
    if cluster:
        cluster.stop()
    if cluster_root:
        shutil.rmtree(cluster_root, ignore_errors=True)


def run(args, env=None, timeout=300):
    return subprocess.run([ALLOCMARK] + args, capture_output=True, text=True, timeout=timeout,
                          env=env or cluster.env())


def records(out):
    with open(os.path.join(out, "results.jsonl")) as f:
        return [json.loads(line) for line in f.read().splitlines()]


def task_outputs(out):
    """What each Slurm task of `out` printed: the first thing to read when a test here fails."""
    text = []
    slurm = os.path.join(out, "slurm")
    for sub in sorted(os.listdir(slurm)) if os.path.isdir(slurm) else []:
        for name in sorted(os.listdir(os.path.join(slurm, sub))):
            if name.startswith("task-"):
                with open(os.path.join(slurm, sub, name), errors="replace") as f:
                    text.append(f"--- {sub}/{name}\n{f.read()[-3000:]}")
    return "\n".join(text) or "(no task output)"


def status(out):
    p = run(["status", out, "--json"])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


class ClusterTest(unittest.TestCase):
    def setUp(self):
        if cluster_error:
            self.fail(cluster_error)
        self._tmp = tempfile.TemporaryDirectory(prefix="allocmark-slurm-test-")
        self.tmp = self._tmp.name

    def tearDown(self):
        if not cluster_error:
            # Nothing of this test may outlive it in the queue.
            subprocess.run(["scancel", "--name=allocmark"], env=cluster.env(), capture_output=True)
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def wait_until_idle(self, out, limit=120):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            s = status(out)
            if s["running"] == 0 and s["pending"] == 0:
                return s
            time.sleep(0.5)
        self.fail(f"the Slurm tasks of {out} still run after {limit} s: {status(out)}")


class SlurmExecutor(ClusterTest):
    def test_a_matrix_through_slurm_has_the_shape_of_a_local_run(self):
        local, slurm = self.path("local"), self.path("slurm")
        p = run(["run"] + MATRIX + ["-o", local])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["run"] + MATRIX + ["-o", slurm, "--executor", "slurm", "--cells-per-task", "3"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("submitted Slurm job", p.stderr)

        a, b = records(local), records(slurm)
        self.assertEqual(sorted(r["key"] for r in a), sorted(r["key"] for r in b))
        self.assertEqual(len(b), 4)
        self.assertEqual({r["status"] for r in b}, {"ok"})
        by_key = {r["key"]: r for r in a}
        for r in b:
            self.assertEqual(set(r), set(by_key[r["key"]]), r["key"])
            self.assertEqual(r["host"], HOST)
            self.assertEqual(r["attempt"], 1)
            # The same per-cell unit: preload proven on the node, exact per-phase peaks, a sampled timeline.
            self.assertEqual(r["library"], by_key[r["key"]]["library"])
            self.assertTrue(all(ph["peak_rss_exact"] for ph in r["phases"]))
            self.assertGreater(len(r["timeline"]), 0)
        # The array: ceil(4 / 3) tasks, one submission, nothing left in parts/.
        with open(os.path.join(slurm, "slurm", "s1", "cells.json")) as f:
            self.assertEqual(sorted({c["task"] for c in json.load(f)}), [0, 1])
        self.assertEqual(os.listdir(os.path.join(slurm, "parts", "s1")), [])
        with open(os.path.join(slurm, "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual(list(meta["machines"]), [HOST])
        s = status(slurm)
        self.assertEqual((s["cells"], s["ok"], s["failed"], s["running"], s["pending"], s["missing"]), (4, 4, 0, 0, 0, 0))
        self.assertEqual(s["hosts"], {HOST: {"ok": 4, "failed": 0, "running": 0}})
        p = run(["show", slurm, "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_a_task_cancelled_midway_keeps_its_finished_cells_and_resume_completes_without_duplicates(self):
        out = self.path("out")
        # Two tasks of two cells each, returning at once.
        p = run(["run"] + SLOW + ["-o", out, "--executor", "slurm", "--cells-per-task", "2", "--no-wait"])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "slurm", "s1", "job_id")) as f:
            job = f.read().strip()
        with open(os.path.join(out, "slurm", "s1", "cells.json")) as f:
            submitted = json.load(f)
        second_of_task0 = next(c for c in submitted if c["index"] == 1)

        # Task 0 has finished its first cell and runs its second: cancel that task.
        first = os.path.join(out, "parts", "s1", "0.json")
        deadline = time.monotonic() + 120
        while not os.path.exists(first):
            self.assertLess(time.monotonic(), deadline, f"task 0 wrote no record: {status(out)}")
            time.sleep(0.1)
        s = status(out)
        # Each of the two tasks runs one cell at a time; the rest of its cells wait.
        self.assertIn(s["running"], (1, 2), s)
        self.assertEqual(s["running"] + s["pending"] + s["ok"], 4, s)
        subprocess.run(["scancel", f"{job}_0"], env=cluster.env(), check=True)
        s = self.wait_until_idle(out)

        # Its finished cell is intact, the one it was running is missing, task 1's are done.
        self.assertEqual((s["cells"], s["ok"], s["missing"], s["failed"]), (4, 3, 1, 0), f"{s}\n{task_outputs(out)}")
        self.assertEqual(s["missing_cells"], [second_of_task0["label"]])

        p = run(["run"] + SLOW + ["-o", out, "--executor", "slurm", "--resume"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("3 of 4 cells already recorded; running 1", p.stderr)
        with open(os.path.join(out, "slurm", "s2", "cells.json")) as f:
            self.assertEqual([c["key"] for c in json.load(f)], [second_of_task0["key"]])
        recs = records(out)
        self.assertEqual(len(recs), 4)
        self.assertEqual(len({r["key"] for r in recs}), 4)
        self.assertEqual({r["status"] for r in recs}, {"ok"})
        p = run(["show", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("duplicate", p.stderr)
        s = status(out)
        self.assertEqual((s["ok"], s["missing"]), (4, 0))

    def late_squeue(self, out):
        """The environment of a command whose squeue answers only once `out`'s array has left the
        real queue: whatever the command read before asking squeue predates the task's end."""
        with open(os.path.join(out, "slurm", "s1", "job_id")) as f:
            job = f.read().strip()
        env = cluster.env()
        real = shutil.which("squeue", path=env["PATH"])
        late = self.path("late")
        os.makedirs(late, exist_ok=True)
        with open(os.path.join(late, "squeue"), "w") as f:
            # At most 2 minutes, so that it never outlives the test.
            f.write(f"#!/bin/sh\nn=0\nwhile [ $n -lt 600 ] && [ -n \"$({real} -h -j {job} 2>/dev/null)\" ]; do\n"
                    f"  sleep 0.2; n=$((n + 1))\ndone\nexec {real} \"$@\"\n")
        os.chmod(os.path.join(late, "squeue"), 0o755)
        env["PATH"] = late + os.pathsep + env["PATH"]
        return env

    # status and --resume read the queue and the records at two moments. The task that finishes
    # between them must count as recorded (or running): neither missing nor to be run again.
    def test_a_cell_that_ends_while_status_reads_the_folder_is_never_called_missing(self):
        out = self.path("out")
        p = run(["run"] + SLOW_ONE + ["-o", out, "--executor", "slurm", "--no-wait"])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["status", out, "--json"], env=self.late_squeue(out), timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.loads(p.stdout)
        self.assertEqual((s["cells"], s["ok"], s["missing"], s["running"]), (1, 1, 0, 0), f"{s}\n{task_outputs(out)}")

    def test_a_cell_that_ends_while_resume_opens_the_folder_is_not_run_again(self):
        out = self.path("out")
        p = run(["run"] + SLOW_ONE + ["-o", out, "--executor", "slurm", "--no-wait"])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["run"] + SLOW_ONE + ["-o", out, "--resume"], env=self.late_squeue(out), timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("1 of 1 cells already recorded", p.stderr)
        recs = records(out)
        self.assertEqual(len(recs), 1, task_outputs(out))
        self.assertEqual(recs[0]["host"], HOST)
        self.assertEqual(os.listdir(os.path.join(out, "parts", "s1")), [])

    def start_waiting_run(self, out, extra=()):
        """A `run` that follows its array, and the array's job id once it is submitted."""
        proc = subprocess.Popen([ALLOCMARK, "run"] + SLOW + ["-o", out, "--executor", "slurm", "--cells-per-task", "2",
                                                            *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.env())
        job_file = os.path.join(out, "slurm", "s1", "job_id")
        deadline = time.monotonic() + 60
        while not os.path.exists(job_file):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                self.fail(f"no submission: {proc.communicate()}")
            time.sleep(0.1)
        with open(job_file) as f:
            return proc, f.read().strip()

    def wait_for_record(self, out, index):
        deadline = time.monotonic() + 120
        while True:
            # Gathered into results.jsonl by a waiting run, or still a part file.
            if os.path.exists(os.path.join(out, "parts", "s1", f"{index}.json")):
                return
            try:
                if any(r["key"] == self.key_of(out, index) for r in records(out)):
                    return
            except (FileNotFoundError, json.JSONDecodeError):  # not created yet, or a line being appended
                pass
            self.assertLess(time.monotonic(), deadline, f"cell {index} wrote no record: {status(out)}")
            time.sleep(0.1)

    def key_of(self, out, index):
        with open(os.path.join(out, "slurm", "s1", "cells.json")) as f:
            return next(c["key"] for c in json.load(f) if c["index"] == index)

    def test_a_waiting_run_whose_task_is_killed_exits_3_with_its_finished_cells_recorded(self):
        out = self.path("out")
        proc, job = self.start_waiting_run(out)
        self.wait_for_record(out, 0)
        subprocess.run(["scancel", f"{job}_0"], env=cluster.env(), check=True)
        stdout, stderr = proc.communicate(timeout=180)
        self.assertEqual(proc.returncode, 3, stderr)
        self.assertIn(f"1 of 4 cells of Slurm job {job} ended without a record", stderr)
        recs = records(out)
        self.assertEqual(sorted(r["key"] for r in recs),
                         sorted(self.key_of(out, i) for i in (0, 2, 3)))
        p = run(["run"] + SLOW + ["-o", out, "--executor", "slurm", "--resume"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(records(out)), 4)
        self.assertEqual(len({r["key"] for r in records(out)}), 4)

    def test_ctrl_c_cancels_the_array_and_keeps_what_finished(self):
        out = self.path("out")
        proc, job = self.start_waiting_run(out)
        self.wait_for_record(out, 0)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=180)
        self.assertEqual(proc.returncode, 130, stderr)
        self.assertIn(f"cancelled Slurm job {job}", stderr)
        queue = subprocess.run(["squeue", "-h", "-j", job], env=cluster.env(), capture_output=True, text=True)
        self.assertEqual(queue.stdout.strip(), "")
        recorded = {r["key"] for r in records(out)}
        self.assertIn(self.key_of(out, 0), recorded)
        self.assertLess(len(recorded), 4)
        self.assertEqual(status(out)["missing"], 4 - len(recorded))

    def test_resume_while_the_array_still_runs_is_refused(self):
        out = self.path("out")
        p = run(["run"] + SLOW + ["-o", out, "--executor", "slurm", "--no-wait"])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["run"] + SLOW + ["-o", out, "--resume"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("still runs cells of", p.stderr)
        # merge makes the same check, in the same words: a merged copy would miss the cells to come.
        merged = self.path("merged")
        p = run(["merge", out, self.path("other"), "-o", merged])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("still runs cells of", p.stderr)
        self.assertIn("then merge it", p.stderr)
        self.assertFalse(os.path.exists(merged))


class Merging(ClusterTest):
    def test_two_runs_merged_read_as_one_folder_separated_by_host(self):
        local, slurm, other, merged = (self.path(n) for n in ("local", "slurm", "other", "merged"))
        self.assertEqual(run(["run"] + MATRIX + ["-o", local]).returncode, 0)
        p = run(["run"] + MATRIX + ["-o", slurm, "--executor", "slurm", "--cells-per-task", "4"])
        self.assertEqual(p.returncode, 0, p.stderr)

        # Two runs of this host merged: one host, every record once per run.
        p = run(["merge", local, slurm, "-o", merged])
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(merged)
        self.assertEqual(len(recs), 8)
        self.assertEqual({r["origin"] for r in recs}, {os.path.realpath(local), os.path.realpath(slurm)})
        with open(os.path.join(merged, "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual(list(meta["machines"]), [HOST])
        self.assertEqual(len(meta["merged_from"]), 2)
        p = run(["show", merged, "--by", "host", "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("duplicate", p.stderr)

        p = run(["plot", merged, "--only", "peak_rss"])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["report", merged, "-o", self.path("merged.html")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.getsize(self.path("merged.html")) > 0)
        p = run(["compare", local, slurm])
        self.assertIn(p.returncode, (0, 1), p.stderr)
        p = run(["baseline", merged, "-o", self.path("baseline.json")])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["gate", "--baseline", self.path("baseline.json"), "--results", merged])
        self.assertIn(p.returncode, (0, 1), p.stderr)

        # A run from a second host (this machine's records under another name, as a second node
        # would write them): merged, `--by host` separates the hosts and nothing pools across them.
        shutil.copytree(slurm, other)
        with open(os.path.join(other, "results.jsonl"), "w") as f:
            for r in records(slurm):
                r["host"] = "node2"
                f.write(json.dumps(r) + "\n")
        with open(os.path.join(other, "meta.json")) as f:
            meta = json.load(f)
        meta["machines"] = {"node2": dict(meta["machines"][HOST], host="node2")}
        meta["machine"]["host"] = "node2"
        with open(os.path.join(other, "meta.json"), "w") as f:
            json.dump(meta, f)
        merged2 = self.path("merged2")
        p = run(["merge", local, other, "-o", merged2])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(merged2, "meta.json")) as f:
            self.assertEqual(sorted(json.load(f)["machines"]), sorted([HOST, "node2"]))
        p = run(["show", merged2, "--by", "host", "--format", "json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        groups = json.loads(p.stdout)["groups"]
        self.assertEqual(sorted(g["host"] for g in groups), sorted([HOST, "node2"]))
        self.assertEqual([g["cells"] for g in groups], [4, 4])
        # Grouped as usual, the host still keeps the rows apart: 2 allocators x 3 phases x 2 hosts, n = 2 each.
        p = run(["show", merged2, "--format", "json"])
        rows = json.loads(p.stdout)["groups"]
        self.assertEqual(len(rows), 12)
        self.assertEqual({g["metrics"]["peak_rss_bytes"]["n"] for g in rows}, {2})

        p = run(["report", merged2, "-o", self.path("merged2.html")])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.path("merged2.html")) as f:
            html = f.read()
        self.assertIn("node2", html)

        # The same host described differently by two folders: refused, nothing written.
        meta["machines"] = {HOST: dict(meta["machines"]["node2"], host=HOST, kernel="another kernel")}
        meta["machine"] = meta["machines"][HOST]
        with open(os.path.join(other, "meta.json"), "w") as f:
            json.dump(meta, f)
        with open(os.path.join(other, "results.jsonl"), "w") as f:
            for r in records(slurm):
                f.write(json.dumps(r) + "\n")
        p = run(["merge", local, other, "-o", self.path("refused")])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("described differently", p.stderr)
        self.assertFalse(os.path.exists(self.path("refused")))


class SlurmBadInput(ClusterTest):
    def assert_refused(self, args, message, env=None):
        out = self.path("out")
        p = run(["run"] + MATRIX + ["-o", out] + args, env=env)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(message, p.stderr)
        self.assertFalse(os.path.exists(out), "a refused run wrote its folder")

    def test_each_bad_value_is_named_and_nothing_is_written(self):
        self.assert_refused(["--executor", "pbs"], "--executor")
        self.assert_refused(["--executor", "slurm", "--cells-per-task", "0"], "--cells-per-task: must be at least 1")
        self.assert_refused(["--executor", "slurm", "--cells-per-task", "two"], "--cells-per-task")
        self.assert_refused(["--cells-per-task", "2"], "need --executor slurm")
        self.assert_refused(["--executor", "slurm", "--slurm-opt", "--array=0-3"], "is allocmark's to set")
        self.assert_refused(["--executor", "slurm", "--slurm-opt", "--partition='x"], "cannot split")
        self.assert_refused(["--executor", "slurm", "--slurm-opt", "--partition=nosuchpartition"], "sbatch refuses")
        env = dict(cluster.env(), PATH=self.tmp)
        self.assert_refused(["--executor", "slurm"], "sbatch not found on PATH", env=env)

    def test_status_and_merge_of_what_is_not_a_results_folder(self):
        p = run(["status", self.path("nowhere")])
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such results folder", p.stderr)
        p = run(["merge", self.path("a"), self.path("b"), "-o", self.path("m")])
        self.assertEqual(p.returncode, 2)
        self.assertFalse(os.path.exists(self.path("m")))


if __name__ == "__main__":
    unittest.main()
