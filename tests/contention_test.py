"""Contention figures for every allocator (issue 11): sampled malloc/free latency percentiles,
voluntary context switches per million operations and run-queue wait, per phase, on real runs.

Assertions are about what is recorded and how the figures relate (sample counts against operations,
percentiles in order), never about how fast anything was.
"""
import json
import os
import unittest

# The driver as a subprocess, results.jsonl as a list, a temporary folder per test, a tiny size_mix.
from e2e_test import SMALL, TempDirTest, records, run

BACKENDS = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "numap"]
THREADS = 2


class EveryBackend(TempDirTest):
    def check_calls(self, calls, where):
        self.assertGreater(calls["samples"], 0, where)
        self.assertLessEqual(calls["p50_ns"], calls["p99_ns"], where)
        self.assertLessEqual(calls["p99_ns"], calls["p999_ns"], where)
        self.assertLessEqual(calls["p999_ns"], calls["max_ns"], where)

    def test_latency_sleeps_and_runqueue_per_phase(self):
        every = 32
        p = run(["run", "--allocators", ",".join(BACKENDS), "--workloads", "size_mix", "--threads", str(THREADS),
                 "--reps", "1", "--latency-every", str(every), "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = records(self.out)
        self.assertEqual(sorted(r["backend"] for r in recs), sorted(BACKENDS))
        with open(os.path.join(self.out, "meta.json")) as f:
            self.assertEqual(json.load(f)["matrix"]["latency_every"], every)
        for r in recs:
            self.assertEqual(r["status"], "ok", r.get("error"))
            for ph in r["phases"]:
                where = (r["allocator"], ph["name"])
                c = ph["contention"]
                lat = c["latency"]
                self.assertIsNotNone(lat, (where, c.get("latency_absent")))
                self.assertEqual(lat["every"], every)
                # Each thread times its every-th malloc: fill and churn allocate once per
                # operation, so the samples are ops / N, give or take one per thread.
                if ph["name"] in ("fill", "churn"):
                    self.check_calls(lat["malloc"], where)
                    self.assertLessEqual(abs(lat["malloc"]["samples"] - ph["ops"] / every), THREADS, where)
                else:  # release frees every block (its ops count the thread's own) and allocates nothing
                    self.assertEqual(lat["malloc"]["samples"], 0, where)
                    self.assertIsNone(lat["malloc"]["p99_ns"], where)
                    self.assertGreaterEqual(lat["free"]["samples"], ph["ops"] // every - THREADS, where)
                if lat["free"]["samples"]:
                    self.check_calls(lat["free"], where)
                self.assertGreaterEqual(c["runqueue_wait_ns"], 0, where)
                self.assertGreaterEqual(c["run_ns"], 0, where)
                # The crew and the worker's main thread, at least.
                self.assertGreaterEqual(c["runqueue_threads"], THREADS + 1, where)
                # Beside them, for the record's readers, the share and the rate as the model's metrics give them (below).
                self.assertIn("runqueue_wait_share", c, where)
                self.assertIn("voluntary_ctx_switches_per_mop", c, where)
            if r["backend"] in ("jemalloc", "numap"):  # their own lock counters stay beside the new figures
                self.assertIn("num_ops", r["phases"][1]["contention"], r["allocator"])

        # The model reads them: show, summary.json, and the contention chart for every backend.
        metrics = "alloc_p50_ns,alloc_p99_ns,alloc_p999_ns,free_p99_ns,vol_ctx_switches_per_mop,runqueue_wait_share"
        p = run(["show", self.out, "--metric", metrics])
        self.assertEqual(p.returncode, 0, p.stderr)
        for header in ("malloc p50 ns", "malloc p99 ns", "malloc p99.9 ns", "free p99 ns", "vol cs/Mop", "runqueue share"):
            self.assertIn(header, p.stdout)
        with open(os.path.join(self.out, "summary.json")) as f:
            summary = json.load(f)
        for name in metrics.split(","):
            self.assertIn(name, summary["metrics"])
        churn = [g for g in summary["groups"] if g.get("phase") == "churn"]
        self.assertEqual(sorted(g["allocator"] for g in churn), sorted(BACKENDS))
        churn_records = {r["allocator"]: next(ph for ph in r["phases"] if ph["name"] == "churn") for r in records(self.out)}
        for g in churn:
            self.assertEqual(g["metrics"]["alloc_p99_ns"]["n"], 1, g["allocator"])
            ph = churn_records[g["allocator"]]
            c = ph["contention"]
            self.assertAlmostEqual(g["metrics"]["vol_ctx_switches_per_mop"]["median"],
                                   ph["voluntary_ctx_switches"] / ph["ops"] * 1e6, places=6, msg=g["allocator"])
            share = g["metrics"]["runqueue_wait_share"]["median"]
            self.assertAlmostEqual(share, c["runqueue_wait_ns"] / (c["runqueue_wait_ns"] + c["run_ns"]), places=9, msg=g["allocator"])
            self.assertTrue(0 <= share <= 1, g["allocator"])
            self.assertEqual(c["runqueue_wait_share"], share, g["allocator"])
            self.assertEqual(c["voluntary_ctx_switches_per_mop"], g["metrics"]["vol_ctx_switches_per_mop"]["median"], g["allocator"])
        p = run(["plot", self.out, "--only", "contention"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.out, "charts", "contention-size_mix.png")), p.stderr)

    def test_sampling_off_records_no_latency_and_says_why(self):
        p = run(["run", "--allocators", "glibc,tcmalloc", "--workloads", "size_mix", "--threads", "1", "--reps", "1",
                 "--latency-every", "0", "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        for r in records(self.out):
            for ph in r["phases"]:
                c = ph["contention"]
                self.assertIsNone(c["latency"])
                self.assertIn("latency_every = 0", c["latency_absent"])
                self.assertGreaterEqual(c["runqueue_wait_ns"], 0)
        p = run(["show", self.out, "--metric", "alloc_p99_ns", "--format", "csv"])
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [line.split(",") for line in p.stdout.splitlines()]
        n = rows[0].index("alloc_p99_ns_n")
        self.assertTrue(all(row[n] == "0" for row in rows[1:]), p.stdout)

    def test_default_is_one_in_64(self):
        p = run(["run", "--allocators", "mimalloc", "--workloads", "size_mix", "--threads", "1", "--reps", "1",
                 "--out", self.out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        churn = records(self.out)[0]["phases"][1]
        self.assertEqual(churn["contention"]["latency"]["every"], 64)
        self.assertLessEqual(abs(churn["contention"]["latency"]["malloc"]["samples"] - churn["ops"] / 64), 1)


class BadSettings(TempDirTest):
    def test_flag(self):
        base = ["run", "--allocators", "glibc", "--workloads", "size_mix"]
        for value in ("-1", "1.5", "abc", "4294967296"):
            self.assert_usage_error(base + ["--latency-every=" + value], "--latency-every", "'%s'" % value)

    def test_matrix_key(self):
        for value, needle in (("-1", "must be in 0.."), ("1.5", "must be an integer"), ('"64"', "must be an integer")):
            path = self.write("m.toml", '[matrix]\nallocators = ["glibc"]\nworkloads = ["size_mix"]\nlatency_every = %s\n' % value)
            self.assert_usage_error(["run", path], "m.toml:4:", "'latency_every'", needle)


if __name__ == "__main__":
    unittest.main()
