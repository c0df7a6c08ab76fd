"""The rocksdb workload end to end: the real driver and worker, Debian's librocksdb, every backend.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3; standard library only.
"""
import json
import os
import tempfile
import unittest

from e2e_test import records, run  # the driver as a subprocess; results.jsonl as a list

PHASES = ["l.i0", "l.x", "idle.x", "l.i1", "q100", "q500", "q1000", "idle.end"]
TINY = ["--set", "rocksdb.rows=20000", "--set", "rocksdb.rows_i1=5000", "--set", "rocksdb.q_seconds=0.2",
        "--set", "rocksdb.idle_s=0.1", "--set", "rocksdb.write_buffer=1M", "--set", "rocksdb.sort_buffer=256K",
        "--set", "rocksdb.block_cache=4M"]


class RocksdbTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="allocmark-rocksdb-")
        self.out = os.path.join(self._tmp.name, "out")

    def tearDown(self):
        self._tmp.cleanup()


class EveryBackend(RocksdbTest):
    def test_tiny_run_under_every_backend(self):
        backends = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "numap"]
        p = run(["run", "--allocators", ",".join(backends), "--workloads", "rocksdb", "--threads", "2", "--reps", "1",
                 "--out", self.out] + TINY)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        recs = records(self.out)
        self.assertEqual(sorted(r["backend"] for r in recs), sorted(backends))
        for r in recs:
            self.assertEqual(r["status"], "ok", r.get("error"))
            self.assertEqual([ph["name"] for ph in r["phases"]], PHASES)
            # RocksDB's allocations are not counted by the harness: absent, never a made-up 0.
            self.assertNotIn("fragmentation_ratio", r)
            by_name = {ph["name"]: ph for ph in r["phases"]}
            for ph in r["phases"]:
                self.assertTrue(ph["peak_rss_exact"])
                self.assertIsNone(ph["peak_live_bytes"])
                # Its malloc calls happen inside librocksdb: no sampled latency, and the record says why.
                self.assertIsNone(ph["contention"]["latency"])
                self.assertIn("does not instrument", ph["contention"]["latency_absent"])
                self.assertGreaterEqual(ph["contention"]["runqueue_wait_ns"], 0)
                m = ph["workload_metrics"]
                for key in ("block_cache_usage_bytes", "block_cache_pinned_usage_bytes", "memtables_bytes",
                            "table_readers_bytes", "rocksdb_accounted_bytes"):
                    self.assertIn(key, m, (r["allocator"], ph["name"]))
                self.assertGreater(m["memtables_bytes"], 0, (r["allocator"], ph["name"]))
                self.assertEqual(m["rocksdb_accounted_bytes"],
                                 m["block_cache_usage_bytes"] + m["memtables_bytes"] + m["table_readers_bytes"])
            self.assertEqual(by_name["l.i0"]["workload_metrics"]["rows_inserted"], 20000)
            self.assertGreaterEqual(by_name["l.x"]["workload_metrics"]["sorted_runs"], 3)
            # index_step = l.x (the default): the load writes no index entry, l.x writes all 3 x rows.
            self.assertNotIn("index_entries", by_name["l.i0"]["workload_metrics"])
            self.assertEqual(by_name["l.x"]["workload_metrics"]["index_entries"], 3 * 20000)
            self.assertEqual(by_name["l.i1"]["workload_metrics"]["rows_deleted"], 5000)
            # The deletes read rows through the block cache, and the q phases read more.
            self.assertGreater(by_name["q1000"]["workload_metrics"]["block_cache_usage_bytes"], 0)
            self.assertGreater(by_name["q1000"]["workload_metrics"]["point_reads"], 0)
            self.assertGreater(by_name["q1000"]["workload_metrics"]["range_reads"], 0)
        self.assertFalse(os.path.exists(os.path.join(self.out, "data")), os.listdir(self.out))

    def test_index_step_l_i0_creates_the_indexes_in_the_load_and_l_x_does_nothing(self):
        # The seed's second experiment: the indexes exist before the load, which writes their entries.
        p = run(["run", "--allocators", "glibc", "--workloads", "rocksdb", "--threads", "2", "--reps", "1",
                 "--out", self.out, "--set", "rocksdb.index_step=l.i0"] + TINY)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        (r,) = records(self.out)
        self.assertEqual(r["status"], "ok", r.get("error"))
        self.assertEqual(r["params"]["index_step"], "l.i0")
        by_name = {ph["name"]: ph["workload_metrics"] for ph in r["phases"]}
        self.assertEqual(by_name["l.i0"]["rows_inserted"], 20000)
        self.assertEqual(by_name["l.i0"]["index_entries"], 3 * 20000)
        for key in ("index_entries", "sorted_runs", "commits"):
            self.assertNotIn(key, by_name["l.x"], key)
        self.assertEqual(by_name["l.i1"]["index_entries"], 3 * 5000)
        self.assertEqual(by_name["l.i1"]["rows_deleted"], 5000)


class DataFolder(RocksdbTest):
    def test_keep_data_keeps_the_database(self):
        p = run(["run", "--allocators", "glibc", "--workloads", "rocksdb", "--threads", "1", "--reps", "1",
                 "--out", self.out, "--keep-data", "--set", "rocksdb.cache=hyper_clock"] + TINY)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        kept = os.listdir(os.path.join(self.out, "data"))
        self.assertEqual(len(kept), 1)
        self.assertIn("CURRENT", os.listdir(os.path.join(self.out, "data", kept[0])))

    def test_a_cell_killed_midway_leaves_nothing(self):
        # A timeout kills the worker in l.x or later, with the database open and files half written.
        p = run(["run", "--allocators", "glibc", "--workloads", "rocksdb", "--threads", "1", "--reps", "1",
                 "--out", self.out, "--timeout", "1", "--set", "rocksdb.rows=20000", "--set", "rocksdb.idle_s=30"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(records(self.out)[0]["status"], "timeout")
        self.assertFalse(os.path.exists(os.path.join(self.out, "data")), os.listdir(self.out))


class BadParameters(RocksdbTest):
    def test_rejected_before_anything_runs(self):
        for setting, words in [("rocksdb.cache=clock", "cache must be lru"),
                               ("rocksdb.compression=brotli", "compression must be"),
                               ("rocksdb.max_write_buffers=1", "max_write_buffers"),
                               ("rocksdb.sort_buffer=1K", "sort_buffer"),
                               ("rocksdb.index_step=l.i1", "index_step must be l.x or l.i0")]:
            p = run(["run", "--allocators", "glibc", "--workloads", "rocksdb", "--out", self.out, "--set", setting])
            self.assertEqual(p.returncode, 2, setting)
            self.assertIn(words, p.stderr)
            self.assertIn("rocksdb", p.stderr)
            self.assertFalse(os.path.exists(self.out), setting)


if __name__ == "__main__":
    unittest.main()
