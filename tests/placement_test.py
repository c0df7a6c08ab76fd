"""Placement per node (issue 11): pinning policies, per-phase `nodes`, meta.json's topology, and
`allocmark topology`, on the real driver, worker and kernel.

This machine has one NUMA node and two CPUs, so what is tested here is what is real here: every
thread on the CPU asked for or allowed, one node entry whose resident bytes agree with the phase's
RSS, and a local fraction of 1.0 (every page is on node 0). Multi-node placement is tested in the
NUMA lab; the planning of every policy on multi-node topologies in harness/placement/placement_test.cpp.
Standard library only.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

ALLOCMARK = os.environ["ALLOCMARK_BIN"]
SMALL = ["--workloads", "size_mix", "--reps", "1", "--set", "size_mix.live_mib=16", "--set", "size_mix.ops=20000"]


def run(args, prefix=(), timeout=300):
    return subprocess.run(list(prefix) + [ALLOCMARK] + args, capture_output=True, text=True, timeout=timeout)


def records(out):
    with open(os.path.join(out, "results.jsonl")) as f:
        return [json.loads(line) for line in f]


class TempDir(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="allocmark-placement-")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def out(self, name):
        return os.path.join(self.tmp, name)


def allowed_cpus():
    return sorted(os.sched_getaffinity(0))


class Pinning(TempDir):
    def test_taskset_is_honoured(self):
        if 1 not in allowed_cpus():
            self.fail("this test needs CPU 1 in the allowed set (have %s)" % allowed_cpus())
        if not shutil.which("taskset"):
            self.fail("taskset (util-linux) is missing")
        out = self.out("taskset")
        p = run(["run", "-a", "glibc", "-t", "2", "--out", out] + SMALL, prefix=["taskset", "-c", "1"])
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = records(out)
        self.assertEqual(r["status"], "ok", r.get("error"))
        self.assertEqual(r["pinned_cpus"], [1, 1], "compact within the allowed set {1}: both threads on CPU 1")
        self.assertEqual(r["placement"]["allowed"]["cpus"], "1")
        self.assertTrue(r["placement"]["oversubscribed"], "two threads on one allowed CPU")
        for ph in r["phases"]:
            self.assertEqual(ph["thread_cpus"], [1, 1], ph["name"])
            self.assertEqual(ph["thread_nodes"], [0, 0], ph["name"])
        with open(os.path.join(out, "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual(meta["allowed"]["cpus"], "1")
        self.assertEqual(meta["allowed"]["mem_nodes"], "0")

    def test_cpu_lists_are_recorded(self):
        for cpu in (0, 1):
            with self.subTest(cpu=cpu):
                out = self.out("pin%d" % cpu)
                p = run(["run", "-a", "glibc", "-t", "1,2", "--pin", str(cpu), "--out", out] + SMALL)
                self.assertEqual(p.returncode, 0, p.stderr)
                recs = records(out)
                self.assertEqual(len(recs), 2)
                for r in recs:
                    self.assertEqual(r["pinned_cpus"], [cpu] * r["threads"])
                    self.assertEqual(r["placement"]["pin"], str(cpu))
                    for ph in r["phases"]:
                        self.assertEqual(ph["thread_cpus"], [cpu] * r["threads"])
                with open(os.path.join(out, "meta.json")) as f:
                    self.assertEqual(json.load(f)["matrix"]["pin"], str(cpu))

    def test_cpu_outside_the_allowed_set_is_a_usage_error(self):
        out = self.out("pin5")
        p = run(["run", "-a", "glibc", "-t", "1", "--pin", "5", "--out", out] + SMALL)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("CPU 5 is not allowed", p.stderr)
        self.assertFalse(os.path.exists(out), "nothing written for a bad placement")

    def test_bad_values_and_the_no_pin_alias(self):
        for args, expected in ((["--pin", "spread"], "not none, compact, scatter or a CPU list"),
                               (["--nodes", "7"], "node 7 does not exist"),
                               (["--pin", "none", "--nodes", "0"], "needs pinning"),
                               (["--no-pin", "--pin", "0"], "choose one")):
            with self.subTest(args=args):
                p = run(["run", "-a", "glibc", "-t", "1", "--dry-run"] + args + SMALL)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(expected, p.stderr)
        out = self.out("nopin")
        p = run(["run", "-a", "glibc", "-t", "1", "--no-pin", "--out", out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = records(out)
        self.assertIsNone(r["pinned_cpus"])
        self.assertEqual(r["placement"]["pin"], "none")

    def test_matrix_keys_and_the_old_boolean(self):
        def matrix(name, body):
            path = os.path.join(self.tmp, name)
            with open(path, "w") as f:
                f.write('[matrix]\nallocators = ["glibc"]\nworkloads = ["size_mix"]\nthreads = [1]\nreps = 1\n' + body)
            return path
        p = run(["run", matrix("new.toml", 'pin = "scatter"\nnodes = [0]\n'), "--dry-run"])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["run", matrix("old.toml", "pin_threads = false\n"), "--dry-run"])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run(["run", matrix("both.toml", 'pin_threads = true\npin = "compact"\n'), "--dry-run"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("both.toml:6:1", p.stderr)
        p = run(["run", matrix("bad.toml", 'pin = "everywhere"\n'), "--dry-run"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("bad.toml:6:7", p.stderr)
        p = run(["run", matrix("figures.toml", 'node_figures = "no"\n'), "--dry-run"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("figures.toml:6:16: 'node_figures' must be true or false", p.stderr)

    def test_node_figures_off(self):
        # From the matrix and from the flag: no per-node reading after the phases, said so in the
        # record; resuming the folder with them on is another matrix.
        path = os.path.join(self.tmp, "off.toml")
        with open(path, "w") as f:
            f.write('[matrix]\nallocators = ["glibc"]\nthreads = [1]\nnode_figures = false\n')
        for name, args in (("matrix", [path] + SMALL), ("flag", ["-a", "glibc", "-t", "1", "--no-node-figures"] + SMALL)):
            with self.subTest(name):
                out = self.out(name)
                p = run(["run", "--out", out] + args)
                self.assertEqual(p.returncode, 0, p.stderr)
                for ph in records(out)[0]["phases"]:
                    self.assertIsNone(ph["nodes"])
                    self.assertIn("node figures off", ph["nodes_absent"])
                    self.assertNotIn("placement_cost", ph)
                    self.assertEqual(ph["thread_nodes"], [0], "where the threads ran is still recorded")
                with open(os.path.join(out, "meta.json")) as f:
                    self.assertFalse(json.load(f)["runs"][0]["matrix"]["node_figures"])
        p = run(["run", "-a", "glibc", "-t", "1", "--out", self.out("flag"), "--resume"] + SMALL)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("node_figures", p.stderr)


class NodeFigures(TempDir):
    def test_one_node_entry_per_phase_with_rss_and_local_fraction(self):
        out = self.out("nodes")
        p = run(["run", "-a", "glibc,jemalloc", "-t", "2", "--out", out] + SMALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        for r in records(out):
            self.assertEqual(r["status"], "ok", r.get("error"))
            for ph in r["phases"]:
                where = "%s %s" % (r["allocator"], ph["name"])
                self.assertEqual(len(ph["nodes"]), 1, where)
                n = ph["nodes"][0]
                self.assertEqual(n["node"], 0)
                self.assertEqual(n["threads"], [0, 1], where)
                self.assertEqual(n["ops"], ph["ops"], where)
                # numa_maps counts the pages mapped in the process's page tables and VmRSS its
                # resident pages; they differ by the pages of mappings numa_maps leaves out
                # (vsyscall, vvar) and what changed between the two reads right after the phase:
                # within 5 % or 1 MiB here.
                self.assertGreater(n["resident_bytes"], 0, where)
                self.assertLessEqual(abs(n["resident_bytes"] - ph["end_rss_bytes"]),
                                     max(0.05 * ph["end_rss_bytes"], 1 << 20), where)
                if ph["name"] == "fill":
                    # Blocks sampled while filling are live at its end: a resident sample exists.
                    self.assertGreater(n["sampled_blocks"], 0, where)
                if n["sampled_blocks"]:
                    self.assertEqual(n["local_fraction"], 1.0, where + ": one node, every page is local")
                self.assertIn("numa_maps_ns", ph["placement_cost"])
                # One node: its share of the timed calls is all of them.
                for kind in ("malloc", "free"):
                    self.assertEqual(n["latency"][kind]["samples"], ph["contention"]["latency"][kind]["samples"], where)
                    self.assertEqual(n["latency"][kind]["p99_ns"], ph["contention"]["latency"][kind]["p99_ns"], where)
        with open(os.path.join(out, "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual([n["id"] for n in meta["topology"]["nodes"]], [0])
        self.assertEqual(meta["topology"]["nodes"][0]["cpus"], "0-%d" % (os.cpu_count() - 1))
        # The model's node dimension: show and summary.json carry the per-node figures.
        p = run(["show", out, "--format", "json", "--by", "allocator,phase,node"])
        self.assertEqual(p.returncode, 0, p.stderr)
        groups = json.loads(p.stdout)["groups"]
        self.assertTrue(groups and all(g["node"] == 0 for g in groups), groups)
        fill = [g for g in groups if g["phase"] == "fill"]
        self.assertEqual(len(fill), 2)
        for g in fill:
            self.assertEqual(g["metrics"]["local_fraction"]["median"], 1.0)
            self.assertGreater(g["metrics"]["numa_resident_bytes"]["median"], 0)
            self.assertEqual(g["metrics"]["node_threads"]["median"], 2)
            self.assertGreater(g["metrics"]["alloc_p99_ns"]["median"], 0, "latency per node")
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertTrue(all("node" in g for g in summary["node_groups"]))
        # One node: every page is local, so the placement chart is skipped saying why (the lab
        # fixture below draws it).
        p = run(["plot", out, "--only", "placement"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("skipped placement: one NUMA node", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "charts", "placement.png")), p.stdout + p.stderr)


    def test_pool_threads_and_large_blocks_give_every_seed_workload_a_local_fraction(self):
        # arena_churn allocates in pool threads it starts itself, hash_build mostly in blocks of
        # 64 KiB and more: both used to have no sampled block (local_fraction null).
        out = self.out("seed")
        p = run(["run", "-a", "glibc", "-t", "2", "-r", "1", "--out", out, "-w", "arena_churn,hash_build",
                 "--set", "hash_build.scale=0.05", "--set", "arena_churn.scale=0.1"])
        self.assertEqual(p.returncode, 0, p.stderr)
        for r in records(out):
            self.assertEqual(r["status"], "ok", r.get("error"))
            first = r["phases"][0]
            n = first["nodes"][0]
            where = "%s %s" % (r["workload"], first["name"])
            self.assertGreater(n["sampled_blocks"], 0, where)
            self.assertEqual(n["local_fraction"], 1.0, where)
            if r["workload"] == "arena_churn":
                # the pool's 16+ threads each have a ring: more than the crew's 2 x 256
                self.assertGreater(first["placement_cost"]["sampled_addresses"], 2 * 256, where)
                self.assertEqual(n["latency"]["malloc"]["samples"], first["contention"]["latency"]["malloc"]["samples"], where)

    def test_a_lab_run_shows_and_draws_every_node(self):
        # A real 8-node lab run (tests/fixtures/lab-8node/README.md): 4 threads scattered over
        # nodes 0-3, arena_churn's pool threads anywhere.
        folder = self.out("lab")
        shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "lab-8node"), folder)
        p = run(["show", folder, "--format", "json", "--by", "workload,allocator,phase,node"])
        self.assertEqual(p.returncode, 0, p.stderr)
        groups = json.loads(p.stdout)["groups"]
        churn = [g for g in groups if g["workload"] == "size_mix" and g["phase"] == "churn" and g["allocator"] == "glibc"]
        self.assertEqual(sorted(g["node"] for g in churn), list(range(8)))
        for g in churn:
            # Latency on exactly the nodes whose CPUs ran a crew thread (scatter: nodes 0-3).
            has_threads = g["metrics"]["node_threads"]["median"] > 0
            self.assertEqual("alloc_p99_ns" in g["metrics"] and g["metrics"]["alloc_p99_ns"]["n"] > 0, has_threads, g)
            self.assertEqual(has_threads, g["node"] < 4, g)
        pool = [g for g in groups if g["workload"] == "arena_churn" and g["phase"] == "burst" and g["allocator"] == "glibc"]
        self.assertGreater(sum(1 for g in pool if g["metrics"]["node_threads"]["median"] == 0
                               and g["metrics"].get("alloc_p99_ns", {}).get("n")), 0,
                           "arena_churn's pool threads are timed on nodes without crew threads")
        p = run(["plot", folder, "--only", "contention,placement"])
        self.assertEqual(p.returncode, 0, p.stderr)
        for chart in ("contention-size_mix.png", "contention-arena_churn.png", "contention-nodes.png", "placement.png"):
            self.assertGreater(os.path.getsize(os.path.join(folder, "charts", chart)), 10000, chart)
        self.assertNotIn("contention per NUMA node", p.stderr)


class TopologyCommand(TempDir):
    def test_prints_this_machine_and_reads_it_back(self):
        p = run(["topology"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("[[node]]", p.stdout)
        path = os.path.join(self.tmp, "here.toml")
        with open(path, "w") as f:
            f.write(p.stdout)
        again = run(["topology", path])
        self.assertEqual(again.returncode, 0, again.stderr)
        # Saved and read back: the same nodes, CPUs and distances (memory is the kernel's MemTotal,
        # which a balloon driver may move between two reads).
        def stable(text):
            return [l for l in text.split("\n")[1:] if not l.startswith("memory")]
        self.assertEqual(stable(again.stdout), stable(p.stdout))
        j = run(["topology", "--json"])
        self.assertEqual(json.loads(j.stdout)["nodes"][0]["id"], 0)

    def test_bad_file_exits_2_with_where(self):
        path = os.path.join(self.tmp, "bad.toml")
        with open(path, "w") as f:
            f.write('name = "x"\n[[node]]\nid = 0\ncpus = "0"\nmemory = "1G"\ndistances = [12]\n')
        p = run(["topology", path])
        self.assertEqual(p.returncode, 2)
        self.assertIn(path + ":", p.stderr)
        self.assertEqual(p.stdout, "")


if __name__ == "__main__":
    unittest.main()
