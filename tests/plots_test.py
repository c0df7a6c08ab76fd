"""Charts (issue 9, docs/charts.md): plots/allocmark_plots.py over the committed fixture folders,
and `allocmark plot`. Run with Debian's /usr/bin/python3 (python3-matplotlib, python3-numpy):

    cd tests && /usr/bin/python3 -m unittest -v plots_test

Behaviour only, no timings: the expected chart files exist and are real pictures, skipped charts
say why on stderr, colours are stable per allocator, usage errors exit 2.
"""
import colorsys
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLOTS = os.path.join(ROOT, "plots")
SCRIPT = os.path.join(PLOTS, "allocmark_plots.py")
FIXTURES = os.path.join(HERE, "fixtures")
PYTHON = "/usr/bin/python3"

sys.dont_write_bytecode = True
sys.path.insert(0, PLOTS)

# fixture -> (chart files expected, chart kinds expected on stderr as skipped)
EXPECTED = {
    "results-small": (["peak_rss-size_mix.png", "timeline-size_mix-t1.png", "throughput.png", "contention-size_mix.png"],
                      ["scaling", "variants", "versions", "percall"]),
    "threads-sweep": (["peak_rss-size_mix.png", "timeline-size_mix-t1.png", "timeline-size_mix-t2.png",
                       "timeline-size_mix-t4.png", "throughput.png", "scaling-size_mix.png", "contention-size_mix.png"],
                      ["variants", "versions", "percall"]),
    "variants": (["peak_rss-size_mix.png", "timeline-size_mix-t2.png", "throughput.png", "variants-jemalloc.png",
                  "variants-glibc.png", "contention-size_mix.png"],
                 ["scaling", "versions", "percall"]),
    "single-allocator": (["peak_rss-size_mix.png", "timeline-size_mix-t1.png"],
                         ["throughput", "scaling", "variants", "versions", "contention", "percall"]),
}


def fixture_copy(name, tmp):
    """A writable copy of a fixture; results-small keeps its summary.json under golden/."""
    dst = os.path.join(tmp, name)
    shutil.copytree(os.path.join(FIXTURES, name), dst, ignore=shutil.ignore_patterns("golden"))
    golden = os.path.join(FIXTURES, name, "golden", "summary.json")
    if not os.path.exists(os.path.join(dst, "summary.json")) and os.path.exists(golden):
        shutil.copy(golden, os.path.join(dst, "summary.json"))
    return dst


def run_script(*args):
    return subprocess.run([PYTHON, SCRIPT, *args], capture_output=True, text=True, timeout=600)


def check_png(test, path):
    with open(path, "rb") as f:
        head = f.read(24)
    test.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n", path + ": not a PNG")
    test.assertEqual(head[12:16], b"IHDR", path)
    width, height = struct.unpack(">II", head[16:24])
    test.assertGreater(width, 200, path)
    test.assertGreater(height, 200, path)
    test.assertGreater(os.path.getsize(path), 5 * 1024, path)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import numpy as np
    pixels = mpimg.imread(path)
    test.assertGreater(float(np.ptp(pixels[..., :3])), 0.2, path + ": a flat image")
    rgb = (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3).astype(np.uint32)
    # Each colour as one integer 0xRRGGBB: the same distinct colours as np.unique(rgb, axis=0), whose
    # sort of rows took half a CPU second a chart.
    colours = np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2])
    test.assertGreater(len(colours), 20, path + ": almost no colours")


class Charts(unittest.TestCase):
    """Every expected chart of every fixture, and the skipped ones named with a reason."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="allocmark-plots-")
        cls.runs = {}
        for name in EXPECTED:
            folder = fixture_copy(name, cls.tmp)
            out = os.path.join(cls.tmp, name + "-charts")
            cls.runs[name] = (run_script(folder, "--out", out), out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_expected_chart_is_a_real_png(self):
        for name, (files, _) in EXPECTED.items():
            with self.subTest(fixture=name):
                proc, out = self.runs[name]
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(sorted(os.listdir(out)), sorted(files), proc.stderr)
                for f in files:
                    check_png(self, os.path.join(out, f))

    def test_skipped_charts_say_why_on_stderr(self):
        for name, (_, skipped) in EXPECTED.items():
            with self.subTest(fixture=name):
                proc, _ = self.runs[name]
                lines = [l for l in proc.stderr.splitlines() if l.startswith("allocmark_plots: skipped ")]
                kinds = [l.split()[2].rstrip(":") for l in lines]
                self.assertEqual(sorted(set(kinds)), sorted(set(skipped + ["contention", "placement"])), proc.stderr)
                # The fixtures predate per-node figures: chart 6's per-node view and the placement
                # chart say so.
                self.assertIn("skipped contention per NUMA node: no call latency per node", proc.stderr)
                self.assertIn("skipped placement: this run has no per-node figures", proc.stderr)
                for l in lines:
                    self.assertGreater(len(l.split(":", 2)[2].strip()), 10, "no reason: " + l)

    def test_only_and_svg(self):
        folder = fixture_copy("threads-sweep", tempfile.mkdtemp(dir=self.tmp))
        out = os.path.join(self.tmp, "only")
        proc = run_script(folder, "--out", out, "--only", "scaling,throughput", "--format", "svg",
                          "--baseline", "jemalloc", "--log")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["scaling-size_mix.svg", "throughput.svg"])
        with open(os.path.join(out, "throughput.svg")) as f:
            self.assertIn("<svg", f.read(2000))


class Colours(unittest.TestCase):
    def test_same_allocator_same_colour_across_calls_and_fixtures(self):
        import data
        import style
        a = data.Run(os.path.join(FIXTURES, "threads-sweep"))
        b = data.Run(os.path.join(FIXTURES, "variants"))
        for alloc in ("glibc", "jemalloc"):
            first = style.colour(alloc, a.backend(alloc))
            self.assertEqual(first, style.colour(alloc, a.backend(alloc)))
            self.assertEqual(first, style.colour(alloc, b.backend(alloc)))
            self.assertEqual(first, style.BACKEND_COLOURS[alloc])
        self.assertEqual(style.colour("jemalloc:bg", "jemalloc"), style.colour("jemalloc:bg"))
        self.assertEqual(style.colour("some-lib", "generic"), style.colour("some-lib", "generic"))

    def test_variants_share_their_backends_hue_in_another_shade(self):
        import matplotlib.colors as mcolors
        import style
        for variant, backend in (("jemalloc:bg", "jemalloc"), ("glibc:arena1", "glibc")):
            v, base = style.colour(variant, backend), style.colour(backend, backend)
            self.assertNotEqual(v, base)
            hv = colorsys.rgb_to_hls(*mcolors.to_rgb(v))[0]
            hb = colorsys.rgb_to_hls(*mcolors.to_rgb(base))[0]
            self.assertAlmostEqual(hv, hb, delta=0.02)

    def test_known_backends_are_distinct(self):
        import style
        self.assertEqual(len(set(style.BACKEND_COLOURS.values())), len(style.BACKEND_COLOURS))


class Usage(unittest.TestCase):
    def test_script_exits_2_on_bad_input(self):
        tmp = tempfile.mkdtemp(prefix="allocmark-plots-")
        try:
            folder = fixture_copy("single-allocator", tmp)
            for args, needle in (([tmp + "/missing"], "not a folder"), ([tmp], "no results.jsonl"),
                                 ([folder, "--only", "pie"], "--only"), ([folder, "--format", "gif"], "--format"),
                                 ([folder, "--baseline", "nosuch"], "--baseline"), ([folder, "--bogus"], "bogus"),
                                 ([folder, "--describe", tmp], "--describe"),
                                 ([folder, "--describe", tmp + "/missing/d.json"], "--describe")):
                with self.subTest(args=args):
                    proc = run_script(*args)
                    self.assertEqual(proc.returncode, 2, proc.stderr)
                    self.assertIn(needle, proc.stderr)
            os.remove(os.path.join(folder, "summary.json"))
            proc = run_script(folder)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("summary.json", proc.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@unittest.skipUnless(os.environ.get("ALLOCMARK_BIN"), "ALLOCMARK_BIN (the built driver) not set")
class PlotCommand(unittest.TestCase):
    """`allocmark plot`: the driver's front of the script."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="allocmark-plot-")
        self.bin = os.environ["ALLOCMARK_BIN"]

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def plot(self, *args):
        return subprocess.run([self.bin, "plot", *args], capture_output=True, text=True, timeout=600)

    def test_folder_without_results_exits_2(self):
        proc = self.plot(self.tmp)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("results.jsonl", proc.stderr)

    def test_bad_flags_exit_2_naming_the_flag(self):
        folder = fixture_copy("single-allocator", self.tmp)
        for args, flag in ((["--only", "pie"], "--only"), (["--format", "gif"], "--format"), (["--only", "a,,b"], "--only")):
            with self.subTest(args=args):
                proc = self.plot(folder, *args)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(flag, proc.stderr)

    def test_writes_summary_json_for_an_older_folder_then_plots(self):
        folder = os.path.join(self.tmp, "old")
        shutil.copytree(os.path.join(FIXTURES, "results-small"), folder, ignore=shutil.ignore_patterns("golden"))
        out = os.path.join(self.tmp, "charts")
        proc = self.plot(folder, "--out", out, "--only", "peak_rss")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(os.path.exists(os.path.join(folder, "summary.json")))
        self.assertEqual(os.listdir(out), ["peak_rss-size_mix.png"])
        check_png(self, os.path.join(out, "peak_rss-size_mix.png"))


if __name__ == "__main__":
    unittest.main()
