"""numap on a real NUMA kernel (issue 11; allocators/numap/README.md, docs/validation.md): ONE boot of
the lab's seed 8-node guest (512 MiB per node, Debian's kernel under qemu) runs
allocators/numap/tests/numa_probe.cpp's scenarios with libnumap.so preloaded, as a prefix of the
guest's allocmark command (--under), then numap under every seed workload at 8 threads pinned one
per node (--pin scatter) and the differential stress (numap_stress, 8 threads) as a program cell:
numap's own setting, a real multi-node kernel, where issue 41 found the worker killed by SIGSEGV
(a refused page move had left its destination unmapped). Every cell must be ok, and numap's memory
must be on several nodes in the kernel's view (each phase's nodes[].resident_bytes).

Each scenario asserts from the kernel's view (move_pages, sysfs free memory, /proc RSS) and prints
PASS or FAIL on the guest console, which comes back as lab-console.log. An OOM kill shows as a
missing PASS, a FAIL line and a "Killed process" line in the guest's dmesg. The one kill allowed
is `bind`'s contrast: glibc under the same one-node MPOL_BIND, named glibc-contrast, its outcome on
an INFO line (recorded, not asserted). The PASS/FAIL/INFO lines are printed (ctest -V shows them).
Needs what the lab needs (qemu-system-x86, linux-image-amd64, busybox-static, cpio; ci/setup.sh):
a missing piece is the lab's exit 2 naming it, a failure here. No timings are asserted.
"""
import json
import os
import tempfile
import subprocess
import unittest

ALLOCMARK = os.environ["ALLOCMARK_BIN"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.environ.get("NUMAP_NUMA_PROBE", "")
LIBNUMAP = os.environ.get("NUMAP_LIBRARY", "")
STRESS = os.environ.get("NUMAP_STRESS", "")
SEED8 = os.path.join(ROOT, "configs", "topologies", "seed-8node.toml")
SCENARIOS = ["overflow", "huge", "membind", "metadata", "limit", "bind"]
CONTRAST = "(glibc-contrast)"  # bind's glibc run: the only process the guest's OOM killer may kill
SEEDS = ["arena_churn", "hash_build", "insert_phases", "orc_scan", "rss_budget", "size_mix"]
# The seed workloads at 8 threads, sized for the emulated guest (one cell under TCG takes tens of
# seconds): size_mix with issue 41's live set (numap crashed in 2 of 3 such cells on 618abae, at
# 100000 calls per thread) and 30000 calls per thread, which still makes hundreds of page moves,
# the path that crashed (asserted below; 100000 took two thirds of the test's CPU), the others a
# few MiB per thread, each phase still run. The stress: 2000 checked calls per thread.
MATRIX = """
[matrix]
allocators = ["numap"]
workloads = [{workloads}]
threads = [8]
reps = 1
size = "quick"
pin = "scatter"

[params.size_mix]
ops = 30000
live_mib = 32
[params.arena_churn]
pool_threads = 8
burst_requests = 20
steady_requests = 20
long_lived_per_slot = 32
idle_ms = 200
[params.hash_build]
keys = 20000
probes = 20000
[params.rss_budget]
budget_mib = 64
[params.orc_scan]
target = "64M"
volume = "32M"
class_bytes = "4M"
classes = "128K-128K,4K-400K,1M-2M"
huge_sizes = "2M,4M"
stripe_bytes = "2M"
max_read = "1M"
streams = 8
[params.insert_phases]
rows = 20000
rows_i1 = 10000
write_buffer = "1M"
block_cache = "4M"
merge_buf = "512K"
combine_read = "512K"
q_queries = 1000
q_seconds = 0.2
idle_s = 0.2

[programs.numap_stress]
command = "{stress} --ops 2000 --threads 8"
"""


def nodes_holding(record, at_least=1 << 20):
    """The most nodes that held at least `at_least` bytes of the cell's memory in one phase, from the
    kernel's view (nodes[].resident_bytes: move_pages samples, numa_maps for a program)."""
    return max(sum(1 for n in (ph.get("nodes") or []) if (n.get("resident_bytes") or 0) >= at_least)
               for ph in record["phases"])


class NumapOnRealKernel(unittest.TestCase):
    def test_probes_every_seed_workload_at_8_threads_and_the_stress_in_the_8node_guest(self):
        for name, path in (("NUMAP_NUMA_PROBE", PROBE), ("NUMAP_LIBRARY", LIBNUMAP), ("NUMAP_STRESS", STRESS)):
            self.assertTrue(path and os.path.exists(path),
                            f"{name}={path!r}: build numap_numa_probe, numap and numap_stress (ctest sets them)")
        with tempfile.TemporaryDirectory(prefix="numap-lab-test-") as tmp:
            out = os.path.join(tmp, "out")
            matrix = os.path.join(tmp, "numap-seeds.toml")
            with open(matrix, "w") as f:
                f.write(MATRIX.format(workloads=", ".join(f'"{w}"' for w in SEEDS), stress=STRESS))
            under = " ".join([PROBE, "--preload", LIBNUMAP] + SCENARIOS + ["--then"])
            p = subprocess.run([ALLOCMARK, "lab", "--topology", SEED8, "--under", under, "--timeout", "1500",
                                "--out", out, "--", "run", matrix],
                               capture_output=True, text=True, timeout=1600)
            with open(os.path.join(out, "results.jsonl")) if os.path.exists(out) else open(os.devnull) as f:
                recs = [json.loads(line) for line in f]
            # Every cell ok: a crashed one names its signal and the guest's kernel log says where.
            not_ok = [(r["workload"], r["status"], r.get("error")) for r in recs if r["status"] != "ok"]
            self.assertEqual(p.returncode, 0, f"{not_ok}\n" + p.stdout[-3000:] + p.stderr[-3000:])
            with open(os.path.join(out, "lab-console.log"), errors="replace") as f:
                console = f.read().replace("\r", "")
            lines = [line for line in console.splitlines() if line.startswith(("PASS ", "FAIL ", "INFO "))]
            report = "\n".join(lines) or console[-3000:]
            self.assertFalse([line for line in lines if line.startswith("FAIL ")], report)
            for s in SCENARIOS:
                self.assertTrue(any(line.startswith(f"PASS {s}:") for line in lines), f"no PASS {s}:\n{report}")
            with open(os.path.join(out, "lab-dmesg.log"), errors="replace") as f:
                killed = [line for line in f if "Killed process" in line]
            self.assertFalse([line for line in killed if CONTRAST not in line], report)
            print(report)
            # The matrix after the probe ran numap in the same guest: every seed workload at 8
            # threads and the stress, each ok, numap's memory on several of the 8 nodes.
            self.assertEqual(sorted(r["workload"] for r in recs), sorted(SEEDS + ["program:numap_stress"]))
            for r in recs:
                self.assertEqual((r["allocator"], r["status"]), ("numap", "ok"), r.get("error"))
                self.assertTrue(os.path.basename(r["library"]) == "libnumap.so", r["library"])
                if r["workload"] != "program:numap_stress":
                    self.assertEqual(r["threads"], 8)
                    self.assertTrue(r["phases"][-1]["alloc_stats"]["numa_enabled"], r["workload"])
            by = {r["workload"]: r for r in recs}
            spread = {w: nodes_holding(r) for w, r in by.items()}
            print("nodes holding >= 1 MiB of the cell's memory (the most in a phase):", spread)
            # One thread per node: size_mix's threads each fill their own node.
            self.assertEqual(spread["size_mix"], 8, spread)
            # Issue 41's path ran: numap moved pages (mremap) under size_mix's churn in this kernel.
            moves = by["size_mix"]["phases"][-1]["alloc_stats"]["mremap_calls"]
            print("size_mix: numap's page moves (mremap calls):", moves)
            self.assertGreater(moves, 0)
            for w, n in spread.items():
                self.assertGreaterEqual(n, 2, (w, spread))


if __name__ == "__main__":
    unittest.main()
