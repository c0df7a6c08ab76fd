"""The percall workload end to end: Google Benchmark inside the real worker, every backend.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3; standard library only.
Assertions are about behaviour (every benchmark ran and was recorded, the model carries the
figures), never about which allocator is faster.
"""
import json
import os
import unittest

from e2e_test import TempDirTest, records, run

PHASES = ["malloc_free", "batch", "realloc", "aligned", "cross_thread", "release"]
SIZES = [str(8 << i) for i in range(20)]  # 8 B .. 4 MiB
BENCHMARKS = {
    "malloc_free": ["malloc_free_" + s for s in SIZES],
    "batch": ["batch_" + s for s in ["16", "64", "256", "1024", "4096", "16384"]],
    "realloc": ["realloc_double_65536", "realloc_step_4096"],
    "aligned": ["aligned_64", "aligned_4096", "aligned_65536"],
    "cross_thread": ["cross_thread_" + s for s in ["16", "64", "256", "1024", "4096", "65536"]],
    "release": ["release_4194304"],  # named by the live set's bytes (release_live below)
}
TAIL = ["p50_ns", "p99_ns", "p999_ns", "max_ns"]
TINY = ["--set", "percall.min_time=0.002", "--set", "percall.batch=100", "--set", "percall.release_live=4M"]
BACKENDS = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "numap"]


class EveryBackend(TempDirTest):
    def test_every_benchmark_is_timed_under_every_backend_and_reaches_the_model(self):
        # 3 threads on this 2-core machine: the oversubscribed case, and a ring of three for cross_thread.
        p = run(["run", "--allocators", ",".join(BACKENDS), "--workloads", "percall", "--threads", "1,3", "--reps", "1",
                 "--timeout", "120", "--out", self.out] + TINY)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        recs = records(self.out)
        self.assertEqual(sorted((r["backend"], r["threads"]) for r in recs),
                         sorted((b, t) for b in BACKENDS for t in (1, 3)))
        listed = {w["name"]: w for w in json.loads(run(["list", "--json"]).stdout)["workloads"]}
        self.assertEqual(listed["percall"]["phases"], PHASES)
        for r in recs:
            self.assertEqual(r["status"], "ok", r.get("error"))
            self.assertEqual([ph["name"] for ph in r["phases"]], PHASES)
            for ph in r["phases"]:
                where = (r["allocator"], r["threads"], ph["name"])
                ns = ph["workload_metrics"]["ns_per_op"]
                self.assertEqual(sorted(ns), sorted(BENCHMARKS[ph["name"]]), where)
                for name, value in ns.items():
                    self.assertGreater(value, 0, where + (name,))
                # Only the release row has free()'s latency figures, ordered as percentiles are.
                tails = ph["workload_metrics"].get("free_latency", {})
                self.assertEqual(sorted(tails), BENCHMARKS["release"] if ph["name"] == "release" else [], where)
                for name, tail in tails.items():
                    self.assertEqual(sorted(tail), sorted(TAIL + ["samples"]), where)
                    figures = [tail[k] for k in TAIL]
                    self.assertEqual(figures, sorted(figures), where + (name,))
                    self.assertGreater(tail["max_ns"], 0, where)
                    self.assertGreater(tail["samples"], 0, where)
                # The sampler is not needed where every call is timed; the record says so.
                self.assertIsNone(ph["contention"]["latency"], where)
                self.assertIn("times every call itself", ph["contention"]["latency_absent"], where)
                # Every thread ran the benchmarks: each thread's operations are counted.
                self.assertGreater(ph["ops"], 0, where)
                self.assertIsNone(ph["peak_live_bytes"], where)  # not counted, so not a made-up 0

        # The model carries each figure: summary.json and `show` per allocator and phase.
        with open(os.path.join(self.out, "summary.json")) as f:
            summary = json.load(f)
        for r in recs:
            for ph in r["phases"]:
                group = [g for g in summary["groups"] if g["allocator"] == r["allocator"] and g["threads"] == r["threads"]
                         and g["phase"] == ph["name"]]
                self.assertEqual(len(group), 1)
                for name, value in ph["workload_metrics"]["ns_per_op"].items():
                    spread = group[0]["workload_metrics"]["ns_per_op." + name]
                    self.assertEqual(spread["n"], 1)
                    self.assertAlmostEqual(spread["median"], value)
        p = run(["show", self.out, "--by", "threads,allocator,phase", "--metric", "wall_s", "--format", "csv",
                 "--workload-metric", "ns_per_op.cross_thread_*"])
        self.assertEqual(p.returncode, 0, p.stderr)
        header = p.stdout.splitlines()[0].split(",")
        medians = [h[:-len("_median")] for h in header if h.endswith("_median") and h.startswith("ns_per_op.")]
        # Only what was asked for, in the workload's own order (sizes compare as numbers).
        self.assertEqual(medians, ["ns_per_op." + b for b in BENCHMARKS["cross_thread"]])
        self.assertNotIn("ns_per_op.malloc_free_64_median", header)
        p = run(["show", self.out, "--by", "threads,allocator,phase", "--metric", "wall_s", "--format", "csv",
                 "--workload-metric", "free_latency.*"])
        self.assertEqual(p.returncode, 0, p.stderr)
        header = p.stdout.splitlines()[0].split(",")
        self.assertEqual(sorted(h for h in header if h.endswith("_median") and h.startswith("free_latency.")),
                         sorted("free_latency.release_4194304.%s_median" % k for k in TAIL + ["samples"]))
        p = run(["show", self.out, "--workload-metric", "ns_per_op.free_*"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("'ns_per_op.free_*'", p.stderr)
        self.assertIn("ns_per_op.malloc_free_64", p.stderr)


class BadParameters(TempDirTest):
    def test_bad_parameters_exit_2_before_anything_is_written(self):
        for setting, needle in [("percall.min_time=0", "min_time"), ("percall.min_time=fast", "min_time"),
                                ("percall.repetitions=0", "repetitions"), ("percall.batch=0", "batch"),
                                ("percall.batch=1.5", "batch"), ("percall.release_live=1K", "release_live"),
                                ("percall.release_sizes=16-8:1", "release_sizes")]:
            p = run(["run", "--allocators", "glibc", "--workloads", "percall", "--threads", "1", "--reps", "1",
                     "--set", setting, "--out", self.out])
            self.assertEqual(p.returncode, 2, (setting, p.stderr))
            self.assertIn(needle, p.stderr, setting)
            self.assertFalse(os.path.exists(self.out), setting)


if __name__ == "__main__":
    unittest.main()
