"""Hostile but ordinary folders (issue 21; docs/reliability.md), against the real driver: a link
planted in a results folder (a CI artifact from someone else) never makes allocmark remove,
truncate, append to or gather anything outside it; a cell description writes only inside the
folder it belongs to; no subcommand writes over a results folder's own files; errors name the file
and the field before any work is done; the report names the log a failed cell really has.

Run by ctest with Debian's /usr/bin/python3; standard library only; root for the read-only mount.
Assertions are about behaviour (exit codes, files, messages), never about timings.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from e2e_test import TempDirTest, mounted_tmpfs
from reliability_test import ONE, records, run


def snapshot(top):
    """Every path under `top` (links as links) with its content: what must not change."""
    out = {}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, top)
            if os.path.islink(path):
                out[rel] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    out[rel] = f.read()
            else:
                out[rel] = "folder"
    return out


class Seeded(TempDirTest):
    """A one-cell folder run once per class, copied fresh into each test."""

    @classmethod
    def setUpClass(cls):
        cls._seed_tmp = tempfile.TemporaryDirectory(prefix="allocmark-seed-")
        cls.seed = os.path.join(cls._seed_tmp.name, "seed")
        p = run(["run"] + ONE + ["--out", cls.seed])
        assert p.returncode == 0, p.stderr
        cls.key = records(cls.seed)[0]["key"]
        # The stem the runner names this cell's files with (logs/STEM.log, data/STEM.data).
        cls.stem = "".join(c if c.isalnum() or c in ".-" else "_" for c in cls.key)

    @classmethod
    def tearDownClass(cls):
        cls._seed_tmp.cleanup()

    def setUp(self):
        super().setUp()
        shutil.copytree(self.seed, self.out, symlinks=True)
        # What a hostile folder points at: it must come through every test unchanged.
        self.elsewhere = os.path.join(self.tmp, "elsewhere")
        os.makedirs(os.path.join(self.elsewhere, "sub"))
        with open(os.path.join(self.elsewhere, "precious.txt"), "w") as f:
            f.write("precious\n")
        with open(os.path.join(self.elsewhere, "record.json"), "w") as f:
            json.dump({"key": "someone/else/t1/r1/0", "status": "ok", "attempt": 1}, f)
        with open(os.path.join(self.elsewhere, "empty.jsonl"), "w"):
            pass
        os.makedirs(os.path.join(self.elsewhere, self.stem + ".data"))
        with open(os.path.join(self.elsewhere, self.stem + ".data", "db"), "w") as f:
            f.write("someone's database\n")

    def plant(self, rel, target):
        path = os.path.join(self.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
        os.symlink(target, path)
        return path


class LinksInAResultsFolder(Seeded):
    def test_a_link_where_the_run_keeps_a_file_or_folder_is_refused_and_its_target_kept(self):
        e = lambda *p: os.path.join(self.elsewhere, *p)  # noqa: E731
        # (what is planted, where it points, whether the cell still has to run, extra flags)
        cases = [
            ("parts/x", e(), False, []),                             # gathered and deleted elsewhere's JSON
            ("parts/s1/0.json", e("record.json"), False, []),        # the same for one file
            ("data", e(), True, []),                                 # the cell's data folder removed in the target
            ("logs", e(), True, []),                                 # the worker's log written there
            ("logs/%s.log" % self.stem, e("precious.txt"), True, []),  # truncated by the worker's log
            ("results.jsonl", e("empty.jsonl"), True, []),           # the record appended to the target
            (".allocmark.lock", e("precious.txt"), False, []),       # truncated by the lock's holder text
            ("results.corrupt.jsonl", e("precious.txt"), False, ["--discard-corrupt-lines"]),  # appended to
            ("machines", e(), False, []),
        ]
        for rel, target, rerun, extra in cases:
            with self.subTest(link=rel):
                shutil.rmtree(self.out)
                shutil.copytree(self.seed, self.out, symlinks=True)
                if rerun and rel != "results.jsonl":
                    os.remove(os.path.join(self.out, "results.jsonl"))
                if rel == "results.corrupt.jsonl":
                    with open(os.path.join(self.seed, "results.jsonl")) as f:
                        seed_lines = f.read()
                    with open(os.path.join(self.out, "results.jsonl"), "a") as f:
                        f.write("not a record\n" + seed_lines)
                if rel.startswith("logs/"):
                    with open(target, "w") as f:
                        f.write("precious\n")
                link = self.plant(rel, target)
                before_target, before_folder = snapshot(self.elsewhere), snapshot(self.out)
                p = run(["run"] + ONE + ["--out", self.out, "--resume"] + extra)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(link, p.stderr)
                self.assertIn("symbolic link", p.stderr)
                self.assertEqual(snapshot(self.elsewhere), before_target, "nothing outside the folder is touched")
                self.assertEqual(snapshot(self.out), before_folder, "nothing in the folder is changed")


    def test_readers_refuse_a_fifo_instead_of_waiting_on_it(self):
        # A fifo where a file should be would block a reader for ever (nobody writes into it).
        copy = os.path.join(self.tmp, "copy")
        for name in ("results.jsonl", "meta.json"):
            commands = [["show", self.out], ["status", self.out], ["report", self.out, "-o", os.path.join(self.tmp, "r.html")],
                        ["baseline", self.out, "-o", os.path.join(self.tmp, "b.json")], ["merge", self.out, copy, "-o",
                        os.path.join(self.tmp, "merged")], ["run"] + ONE + ["--out", self.out, "--resume"]]
            for command in commands:
                with self.subTest(fifo=name, command=command[0]):
                    for folder in (self.out, copy):
                        shutil.rmtree(folder, ignore_errors=True)
                        shutil.copytree(self.seed, folder, symlinks=True)
                    os.remove(os.path.join(self.out, name))
                    os.mkfifo(os.path.join(self.out, name))
                    p = run(command, timeout=60)
                    self.assertEqual(p.returncode, 2, p.stderr)
                    self.assertIn(os.path.join(self.out, name), p.stderr)
                    self.assertIn("fifo", p.stderr)


class CellPlaces(Seeded):
    """`allocmark cell`: a description inside a results folder writes only inside that folder."""

    def spec(self, **fields):
        rec = records(self.seed)[0]
        cell = {"allocator": {"name": "glibc", "backend": "glibc", "library": "", "env": {}},
                "workload": "size_mix", "threads": 1, "rep": 1, "params": rec["params"]}
        spec = {"cell": cell, "settings": {"timeout_s": 60, "sample_ms": 10}, "attempt": 1,
                "log": os.path.join(self.out, "logs", "cell.log")}
        spec.update(fields)
        path = os.path.join(self.out, "slurm", "s1", "cells", "0.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(spec, f)
        os.makedirs(os.path.join(self.out, "parts", "s1"), exist_ok=True)
        return path

    def test_every_place_a_spec_names_must_lie_inside_its_results_folder(self):
        e = lambda *p: os.path.join(self.elsewhere, *p)  # noqa: E731
        record = os.path.join(self.out, "parts", "s1", "0.json")
        cases = [
            ("log outside", {"log": e("precious.txt")}, record, "log"),
            ("log through ..", {"log": os.path.join(self.out, "..", "elsewhere", "precious.txt")}, record, "log"),
            ("data_root outside", {"settings": {"timeout_s": 60, "data_root": e()}}, record, "data_root"),
            ("machines_dir outside", {"machines_dir": e("machines")}, record, "machines_dir"),
            ("record outside", {}, e("record.json"), "--record"),
            ("log through a linked logs/", {"log": os.path.join(self.out, "logs", "precious.txt")}, record, "log"),
            ("linked machines/", {"machines_dir": os.path.join(self.out, "machines")}, record, "machines_dir"),
        ]
        for name, fields, record_path, needle in cases:
            with self.subTest(case=name):
                shutil.rmtree(self.out)
                shutil.copytree(self.seed, self.out, symlinks=True)
                spec = self.spec(**fields)
                if name == "log through a linked logs/":
                    self.plant("logs", self.elsewhere)
                if name == "linked machines/":
                    self.plant("machines", self.elsewhere)
                before = snapshot(self.elsewhere)
                p = run(["cell", spec, "--record", record_path])
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(needle, p.stderr)
                self.assertEqual(snapshot(self.elsewhere), before, "nothing outside the folder is touched")
                self.assertFalse(os.path.exists(record), "the cell never ran")
        # The same description with every place inside its folder runs, and keeps to the folder.
        shutil.rmtree(self.out)
        shutil.copytree(self.seed, self.out, symlinks=True)
        p = run(["cell", self.spec(), "--record", record])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(record) as f:
            self.assertEqual(json.load(f)["key"], self.key)
        self.assertTrue(os.path.isfile(os.path.join(self.out, "logs", "cell.log")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "data")), "the data folder is removed after the cell")

    def test_bad_descriptions_and_records_are_named_before_the_cell_runs(self):
        log = os.path.join(self.out, "logs", "cell.log")
        rec = records(self.seed)[0]
        good = {"allocator": {"name": "glibc", "backend": "glibc"}, "workload": "size_mix", "threads": 1, "rep": 1,
                "params": rec["params"]}
        cases = [
            ("a folder as the spec", None, [self.tmp], ["is a folder"]),
            ("threads of the wrong kind", {"cell": dict(good, threads="two")}, [], ["cell.threads", "integer"]),
            ("no allocator", {"cell": {k: v for k, v in good.items() if k != "allocator"}}, [], ["cell.allocator", "missing"]),
            ("a parameter that is not text", {"cell": dict(good, params=dict(rec["params"], ops=5))}, [], ["cell.params.ops", "string"]),
            ("timeout of the wrong kind", {"cell": good, "settings": {"timeout_s": "soon"}}, [], ["settings.timeout_s", "number"]),
            ("a folder as --record", {"cell": good}, ["--record", self.tmp], ["--record", "is a folder"]),
            ("an unwritable --record", {"cell": good}, ["--record", os.path.join(self.out, "parts", "nope", "0.json")],
             ["--record", "does not exist"]),
        ]
        for name, spec, args, needles in cases:
            with self.subTest(case=name):
                if os.path.exists(log):
                    os.remove(log)
                if spec is None:
                    path = args[0]
                    args = []
                else:
                    path = self.spec(**dict(spec, log=log))
                p = run(["cell", path] + args)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                for n in needles:
                    self.assertIn(n, p.stderr)
                if spec is not None and "--record" not in args:
                    self.assertIn(path, p.stderr, "the message names the description")
                self.assertNotIn("json.exception", p.stderr)
                self.assertFalse(os.path.exists(log), "nothing ran")


class OutputFiles(Seeded):
    """No subcommand writes over a file of a results folder it reads, nor over any results folder's own files."""

    def test_every_output_flag_refuses_the_files_of_a_results_folder(self):
        other = os.path.join(self.tmp, "other")
        shutil.copytree(self.seed, other, symlinks=True)
        link = os.path.join(self.tmp, "innocent.html")
        os.symlink(os.path.join(self.out, "results.jsonl"), link)
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        a_file = os.path.join(self.tmp, "a_file")
        with open(a_file, "w") as f:
            f.write("x\n")
        d = lambda *p: os.path.join(self.out, *p)  # noqa: E731
        cases = [
            (["report", self.out, "-o", d("results.jsonl")], "-o"),
            (["report", self.out, "-o", d("summary.json")], "-o"),
            (["report", self.out, "-o", d("logs", "page.html")], "-o"),
            (["report", self.out, "-o", link], "-o"),
            (["report", other, "-o", d("cells.json")], "-o"),
            (["report", self.out, "-o", fifo], "-o"),
            (["compare", self.out, other, "-o", d("meta.json")], "-o"),
            (["compare", self.out, other, "-o", os.path.join(other, "summary.csv")], "-o"),
            (["compare", self.out, other, "--charts", d("logs")], "--charts"),
            (["plot", self.out, "--out", d("parts")], "--out"),
            (["plot", self.out, "--out", a_file], "--out"),
            (["advise", "--out", self.out, "--report", d("logs", "page.html"), "--", "true"], "--report"),
        ]
        for args, flag in cases:
            with self.subTest(command=" ".join(args[:1] + args[2:])):
                for folder in (self.out, other):
                    shutil.rmtree(folder)
                    shutil.copytree(self.seed, folder, symlinks=True)
                before = snapshot(self.out), snapshot(other)
                p = run(args)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(flag + " ", p.stderr)
                self.assertNotIn("Traceback", p.stderr)
                self.assertEqual((snapshot(self.out), snapshot(other)), before)
                self.assertTrue(os.path.islink(link) and stat_is_fifo(fifo))


def stat_is_fifo(path):
    import stat
    return stat.S_ISFIFO(os.lstat(path).st_mode)


class Messages(Seeded):
    def test_a_read_only_folder_is_said_to_be_read_only(self):
        self.assertEqual(os.geteuid(), 0, "this test mounts a tmpfs: run the suite as root (CI does)")
        with mounted_tmpfs(os.path.join(self.tmp, "ro"), "16m") as mnt:
            folder = os.path.join(mnt, "out")
            shutil.copytree(self.seed, folder, symlinks=True)
            for name in ("summary.json", "summary.csv"):
                os.remove(os.path.join(folder, name))
            subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
            p = run(["plot", folder, "--out", os.path.join(self.tmp, "charts")])
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("Read-only file system", p.stderr)
            self.assertNotIn("disk full", p.stderr)

    def test_the_report_names_the_log_of_a_failed_cell(self):
        p = run(["run", "-a", "glibc", "-w", "fault_inject", "--set", "fault_inject.mode=exit", "-t", "1", "-r", "1",
                 "--out", self.out, "--extend"])
        self.assertEqual(p.returncode, 1, p.stderr)
        failed = [r for r in records(self.out) if r["status"] != "ok"]
        self.assertEqual(len(failed), 1, failed)
        logs = [n for n in os.listdir(os.path.join(self.out, "logs")) if "fault_inject" in n]
        self.assertEqual(len(logs), 1, logs)
        page = os.path.join(self.tmp, "page.html")
        p = run(["report", self.out, "-o", page])
        self.assertIn(p.returncode, (0, 1), p.stderr)
        with open(page) as f:
            html = f.read()
        table = html[html.index('id="failure-table"'):]
        table = table[:table.index("</table>")]
        self.assertIn("logs/" + logs[0], table)


if __name__ == "__main__":
    unittest.main()
