"""The NUMA lab end to end (docs/lab.md): `allocmark lab` boots Debian's kernel in qemu with the
seed's 8-node topology, runs a tiny matrix there and brings the results folder back; and the
lab's refusals, which never boot.

Needs qemu-system-x86, linux-image-amd64, busybox-static and cpio (ci/setup.sh installs them); a
missing one is a failure naming it, never a skip. Assertions are about what came back (statuses,
the guest kernel's nodes, the lab marking), never about timings: under emulation they mean nothing.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

ALLOCMARK = os.environ["ALLOCMARK_BIN"]
PHASE_DEMO = os.environ.get("PHASE_DEMO", "")  # tests/programs/phase_demo.c, built beside the tests
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED8 = os.path.join(ROOT, "configs", "topologies", "seed-8node.toml")
TINY = ["--set", "size_mix.live_mib=4", "--set", "size_mix.ops=5000"]


def lab(args, timeout=900, env=None):
    return subprocess.run([ALLOCMARK, "lab"] + args, capture_output=True, text=True, timeout=timeout, env=env)


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="allocmark-lab-test-")
        self.tmp = self._tmp.name
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        self._tmp.cleanup()

    def assert_ended(self, p, code, *needles):
        """Exit `code`, every needle in stderr, and nothing at --out."""
        self.assertEqual(p.returncode, code, p.stdout + p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)
        self.assertFalse(os.path.exists(self.out), "something was written")


def read_records(folder):
    with open(os.path.join(folder, "results.jsonl")) as f:
        return [json.loads(line) for line in f]


class ProgramTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.assertTrue(os.access(PHASE_DEMO, os.X_OK), "PHASE_DEMO (the phase_demo test program) is not built: " + PHASE_DEMO)


class Boot(ProgramTest):
    """One boot of the seed's 8-node guest (a TCG boot is most of a lab test's CPU): a built-in
    workload's cells and three program cells in one matrix."""

    def test_prerequisites_are_installed(self):
        for tool, package in [("qemu-system-x86_64", "qemu-system-x86"), ("busybox", "busybox-static"), ("cpio", "cpio"),
                              ("numactl", "numactl")]:
            self.assertIsNotNone(shutil.which(tool), f"{tool} missing: install Debian's {package} (ci/setup.sh)")
        kernels = [f for f in os.listdir("/boot") if f.startswith("vmlinuz-")] if os.path.isdir("/boot") else []
        self.assertTrue(kernels, "no /boot/vmlinuz-*: install Debian's linux-image-amd64 (ci/setup.sh)")

    def test_seed_8node_runs_workloads_and_programs_and_brings_results_back(self):
        # Programs: a C program with phase marks (carried with its libraries), a Debian program
        # reading an input file from its own folder (both carried at their paths), and a shell
        # command line whose commands are busybox's in the guest (docs/lab.md). Naming size_mix
        # keeps every program in (docs/programs.md).
        work = os.path.join(self.tmp, "work dir")
        os.mkdir(work)
        with open(os.path.join(work, "numbers.txt"), "w") as f:
            f.write("3\n1\n2\n")
        matrix = os.path.join(self.tmp, "lab.toml")
        with open(matrix, "w") as f:
            f.write('[matrix]\nallocators = ["glibc", "numap"]\nworkloads = ["size_mix"]\nthreads = [2]\nreps = 1\n'
                    '[params.size_mix]\nlive_mib = 4\nops = 5000\n'
                    f'[programs.cdemo]\ncommand = "{PHASE_DEMO}"\n'
                    f'[programs.sorter]\ncommand = "sort -n"\ncwd = "{work}"\ninput = "numbers.txt"\n'
                    '[programs.shell]\ncommand = "sh -c \'seq 3 | wc -l\'"\n')
        # Under numactl bound to the second group's CPUs: --under reaches the guest's allocmark.
        p = lab(["--topology", SEED8, "--under", "numactl --cpunodebind=4-7", "--out", self.out, "--", "run", matrix])
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        recs = read_records(self.out)
        self.assertEqual(sorted((r["workload"], r["allocator"]) for r in recs),
                         sorted((w, a) for w in ("size_mix", "program:cdemo", "program:sorter", "program:shell")
                                for a in ("glibc", "numap")))
        for r in recs:
            self.assertEqual(r["status"], "ok", (r["workload"], r["allocator"], r.get("error")))
        for r in (r for r in recs if r["workload"] == "size_mix"):
            self.assertTrue(set(r["pinned_cpus"]) <= {4, 5, 6, 7}, r["pinned_cpus"])
        self.check_programs([r for r in recs if r["workload"].startswith("program:")])
        with open(os.path.join(self.out, "meta.json")) as f:
            meta = json.load(f)
        lab_meta = meta["lab"]
        self.assertFalse(lab_meta["stopped_by_timeout"])
        # What the guest kernel itself saw, read in the guest from /sys.
        self.assertEqual(lab_meta["guest"]["nodes_online"], "0-7")
        self.assertEqual(sorted(lab_meta["guest"]["nodes"]), [f"node{i}" for i in range(8)])
        for node in lab_meta["guest"]["nodes"].values():
            self.assertGreater(node["memtotal_kib"], 256 * 1024)
        self.assertEqual(lab_meta["guest"]["numa_balancing"], "0")
        self.assertEqual(len(lab_meta["topology"]["nodes"]), 8)
        self.assertEqual(lab_meta["topology"]["nodes"][0]["distances"], [10, 16, 16, 16, 32, 32, 32, 32])
        self.assertIn(lab_meta["accel"], ("tcg", "kvm"))
        self.assertIn("meaningless", lab_meta["note"])
        # The run itself happened in the guest: its machine description is the guest's.
        self.assertEqual(meta["machine"]["host"], "lab-seed-8node")
        self.assertEqual(meta["machine"]["numa"]["nodes"], 8)
        self.assertEqual(meta["machine"]["cpus_usable"], 4)
        self.assertTrue(lab_meta["guest_command"].startswith("/usr/bin/numactl --cpunodebind=4-7 allocmark run"), lab_meta["guest_command"])
        self.assertTrue(os.path.exists(os.path.join(self.out, "lab-console.log")))
        with open(os.path.join(self.out, "lab-dmesg.log")) as f:
            self.assertIn("Linux version", f.read())
        # Readers say what these figures are worth.
        show = subprocess.run([ALLOCMARK, "show", self.out], capture_output=True, text=True, timeout=60)
        self.assertEqual(show.returncode, 0, show.stderr)
        self.assertIn("lab results from a virtual machine (topology seed-8node, 8 nodes", show.stderr)

    def check_programs(self, recs):
        for r in recs:
            self.assertEqual(r["exit_code"], 0)
            # The preload proof, made in the guest by the carried companion library.
            self.assertEqual(os.path.basename(r["library"]).split(".so")[0], "libc" if r["allocator"] == "glibc" else "libnumap",
                             r["library"])
        for r in (r for r in recs if r["workload"] == "program:cdemo"):
            peaks = {ph["name"]: ph["peak_rss_bytes"] for ph in r["phases"]}
            self.assertEqual(list(peaks), ["startup", "small", "large", "after"])
            self.assertTrue(all(ph["peak_rss_exact"] for ph in r["phases"]), r["allocator"])
            self.assertGreaterEqual(peaks["large"], 96 << 20, r["allocator"])
            self.assertGreaterEqual(peaks["small"], 8 << 20, r["allocator"])
            self.assertLess(peaks["small"], peaks["large"], r["allocator"])
        # What the programs printed: "1 2 3" sorted from the carried input, busybox's "3".
        self.assertEqual({r["stdout_bytes"] for r in recs if r["workload"] == "program:sorter"}, {6})
        self.assertEqual({r["stdout_bytes"] for r in recs if r["workload"] == "program:shell"}, {2})


class LabTimeout(ProgramTest):
    def test_a_run_past_its_timeout_brings_back_its_finished_cells(self):
        # One cell that finishes, then one that never does: the guest stops the run 12 s before
        # the host's 120 s, sends back what finished, and the lab exits 3. The timeout must leave
        # room for a boot under CI's parallel load (10 s idle, 38-46 s seen in ctest, up to ~100 s
        # under heavy load), so the test takes ~110 s.
        # Sampled every 100 ms, not 10: the guest idles under emulation until its deadline, and what
        # this test checks is the deadline, not the timeline (the test took 48 CPU s at 10 ms, 20 at 100).
        p = lab(["--topology", SEED8, "--timeout", "120", "--out", self.out, "--", "run", "-a", "glibc", "-r", "1",
                 "--sample-ms", "100",
                 "--program", "done=" + PHASE_DEMO, "--program", "endless=" + PHASE_DEMO + " hang"])
        self.assertEqual(p.returncode, 3, p.stdout[-3000:] + p.stderr[-3000:])
        self.assertIn("did not finish within --timeout 120 s", p.stderr)
        recs = read_records(self.out)
        self.assertEqual([(r["workload"], r["status"]) for r in recs], [("program:done", "ok")])
        self.assertEqual([ph["name"] for ph in recs[0]["phases"]], ["startup", "small", "large", "after"])
        with open(os.path.join(self.out, "meta.json")) as f:
            lab_meta = json.load(f)["lab"]
        self.assertTrue(lab_meta["stopped_by_timeout"])
        self.assertEqual(lab_meta["timeout_s"], 120)
        self.assertEqual(lab_meta["guest_deadline_s"], 108)
        with open(os.path.join(self.out, "lab-console.log"), errors="replace") as f:
            self.assertIn("allocmark-lab: deadline", f.read())


class LabFailures(TempDirTest):
    """The guest does not boot or does not finish: exit 3, the console's or qemu's last lines, nothing at --out."""

    def assert_stopped(self, p, *needles):
        self.assert_ended(p, 3, *needles)

    def test_timeout_stops_the_guest(self):
        # Two seconds is shorter than any boot under emulation.
        p = lab(["--topology", SEED8, "--timeout", "2", "--out", self.out, "--", "run", "-w", "size_mix", "-a", "glibc"] + TINY)
        self.assert_stopped(p, "did not boot within --timeout 2 s", "--- guest console (last lines) ---")

    def test_a_kernel_qemu_cannot_load(self):
        not_a_kernel = os.path.join(self.tmp, "vmlinuz-broken")
        with open(not_a_kernel, "w") as f:
            f.write("not a kernel\n")
        p = lab(["--topology", SEED8, "--kernel", not_a_kernel, "--out", self.out, "--", "run", "-w", "size_mix", "-a", "glibc"])
        self.assert_stopped(p, "did not boot", "--- qemu ---")


class LabBadInput(TempDirTest):
    def assert_refused(self, p, *needles):
        self.assert_ended(p, 2, *needles)

    def test_bad_topology_file(self):
        bad = os.path.join(self.tmp, "bad.toml")
        with open(bad, "w") as f:
            f.write('name = "bad"\n[[node]]\nid = 0\ncpus = "0"\nmemory = "64M"\ndistances = [10, 20]\n')
        p = lab(["--topology", bad, "--out", self.out, "--", "run", "-w", "size_mix"])
        self.assert_refused(p, bad + ":")

    def test_missing_topology_file(self):
        p = lab(["--topology", os.path.join(self.tmp, "nope.toml"), "--out", self.out, "--", "run", "-w", "size_mix"])
        self.assert_refused(p, "nope.toml")

    def test_qemu_not_on_path_names_the_package(self):
        env = dict(os.environ, PATH=self.tmp)  # nothing there, qemu included
        p = lab(["--topology", SEED8, "--out", self.out, "--", "run", "-w", "size_mix", "-a", "glibc"], env=env)
        self.assert_refused(p, "qemu-system-x86_64", "qemu-system-x86 ")

    def test_kernel_image_missing(self):
        bin_dir = os.path.join(self.tmp, "bin")
        os.mkdir(bin_dir)
        os.symlink(shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64", os.path.join(bin_dir, "qemu-system-x86_64"))
        p = lab(["--topology", SEED8, "--kernel", os.path.join(self.tmp, "no-kernel"), "--out", self.out, "--",
                 "run", "-w", "size_mix", "-a", "glibc"], env=dict(os.environ, PATH=bin_dir))
        self.assert_refused(p, "no-kernel")

    def test_guest_command_checked_before_booting(self):
        for args, needle in [(["run", "-w", "no_such_workload"], "no_such_workload"),
                             (["run", "-w", "size_mix", "--out", "x"], "--out belongs to lab"),
                             (["run", "--resume"], "empty folder"),
                             (["show", "x"], "must be `run"),
                             (["exec"], "needs a program"),
                             (["exec", "no-such-program-here"], "no-such-program-here is not on PATH"),
                             (["run", "--no-such-flag"], "no-such-flag")]:
            with self.subTest(args=args):
                p = lab(["--topology", SEED8, "--out", self.out, "--"] + args, timeout=60)
                self.assert_refused(p, needle)

    def test_program_cells_whose_files_cannot_be_carried(self):
        script = os.path.join(self.tmp, "script")
        with open(script, "w") as f:
            f.write("#!/no/such/interpreter\n")
        os.chmod(script, 0o755)
        p = lab(["--topology", SEED8, "--out", self.out, "--", "run", "-a", "glibc", "--program", "s=" + script], timeout=60)
        self.assert_refused(p, "the interpreter of " + script, "/no/such/interpreter")
        # A program's cwd folder is carried whole into the initramfs, which lives on node 0: 48 MiB
        # there is more than half of a 64 MiB node.
        big = os.path.join(self.tmp, "big")
        os.mkdir(big)
        with open(os.path.join(big, "data"), "wb") as f:
            f.write(b"x" * (48 << 20))
        matrix = os.path.join(self.tmp, "big.toml")
        with open(matrix, "w") as f:
            f.write(f'[matrix]\nallocators = ["glibc"]\n[programs.big]\ncommand = "true"\ncwd = "{big}"\n')
        p = lab(["--topology", SEED8, "--memory-per-node", "64M", "--out", self.out, "--", "run", matrix], timeout=120)
        self.assert_refused(p, "more than half of node 0's 64 MiB", "cwd folder")

    def test_topology_qemu_cannot_boot(self):
        gap = os.path.join(self.tmp, "gap.toml")
        with open(gap, "w") as f:
            f.write('name = "gap"\n[[node]]\nid = 0\ncpus = "0"\nmemory = "64M"\ndistances = [10, 20]\n'
                    '[[node]]\nid = 1\ncpus = "2"\nmemory = "64M"\ndistances = [20, 10]\n')
        p = lab(["--topology", gap, "--out", self.out, "--", "run", "-w", "size_mix"])
        self.assert_refused(p, "CPU 1 is in no node")

    def test_memory_per_node_must_be_a_size(self):
        p = lab(["--topology", SEED8, "--memory-per-node", "lots", "--out", self.out, "--", "run", "-w", "size_mix"])
        self.assert_refused(p, "--memory-per-node")


class LabThp(TempDirTest):
    def test_cells_at_always_in_the_guest_get_huge_pages_and_never_cells_none(self):
        # The host's mode is not `always` (madvise here): the lab's guest is, and the plan is
        # checked against the guest's mode (its --thp), not the host's.
        two = os.path.join(ROOT, "configs", "topologies", "two-node.toml")
        p = lab(["--topology", two, "--thp", "always", "--out", self.out, "--", "run", "-a", "glibc", "-w", "hash_build",
                 "--set", "hash_build.scale=0.1", "--thp", "always,never", "-t", "1", "-r", "1"])
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        by = {r["allocator"]: r for r in read_records(self.out)}
        self.assertEqual(sorted(by), ["glibc@thp=always", "glibc@thp=never"])
        self.assertEqual(by["glibc@thp=always"]["thp"], {"mode": "always", "how": "machine"})
        # glibc asks for no huge page; under `always` its large heap gets them anyway.
        self.assertGreaterEqual(max(ph["anon_huge_bytes"] for ph in by["glibc@thp=always"]["phases"]), 2 << 20)
        for ph in by["glibc@thp=never"]["phases"]:
            self.assertEqual(ph["anon_huge_bytes"], 0, ph["name"])
        # The whole system's huge pages per node (node meminfo, issue 25): in the guest only the
        # cell runs, so the phase that got huge pages has them on the node its memory is on, and
        # the process's are part of the system's in every phase.
        for r in by.values():
            for ph in r["phases"]:
                where = (r["allocator"], ph["name"])
                self.assertEqual([n["node"] for n in ph["nodes"]], [0, 1], where)
                for n in ph["nodes"]:
                    self.assertIsInstance(n["system_anon_huge_bytes"], int, (where, n["node"]))
                self.assertGreaterEqual(sum(n["system_anon_huge_bytes"] for n in ph["nodes"]), ph["anon_huge_bytes"], where)
        huge = max(by["glibc@thp=always"]["phases"], key=lambda ph: ph["anon_huge_bytes"])
        home = max(huge["nodes"], key=lambda n: n["resident_bytes"])
        self.assertGreater(home["system_anon_huge_bytes"], 0, (huge["name"], huge["nodes"]))
        with open(os.path.join(self.out, "meta.json")) as f:
            self.assertEqual(json.load(f)["machine"]["thp_enabled"], "always")
        # Without the lab's --thp the guest's mode is not known to the host: refused before booting.
        p = lab(["--topology", two, "--out", os.path.join(self.tmp, "no"), "--", "run", "-a", "glibc", "-w", "hash_build",
                 "--thp", "always"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("the transparent huge pages of the lab's guest (its kernel's default: name it with lab --thp MODE) are not known",
                      p.stderr)


if __name__ == "__main__":
    unittest.main()
