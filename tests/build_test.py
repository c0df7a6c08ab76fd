"""`allocmark build`: real releases built from the release tarballs in $ALLOCMARK_SOURCES (issue 43;
docs/versions.md), into a cache in a temporary folder, so every run proves a build from the tarball.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3; standard library only.
ALLOCMARK_SOURCES comes from the environment (ci/test.sh points it at ../shared/sources when that
folder exists); without it these tests fail, saying so. Assertions are about behaviour (exit codes,
messages, files, what the library reports about itself), never about timings.
"""
import glob
import hashlib
import json
import os
import signal
import subprocess
import tarfile
import tempfile
import unittest

ALLOCMARK = os.environ["ALLOCMARK_BIN"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class CacheTest(unittest.TestCase):
    """A fresh cache per test; the sources the environment names."""

    def setUp(self):
        self.sources = os.environ.get("ALLOCMARK_SOURCES", "")
        if not self.sources or not os.path.isdir(self.sources):
            self.fail("ALLOCMARK_SOURCES must name the folder of release tarballs (NAME-VERSION.tar.gz; "
                      "ci/test.sh sets it to ../shared/sources when that exists); it is %r" % self.sources)
        self._tmp = tempfile.TemporaryDirectory(prefix="allocmark-build-")
        self.tmp = self._tmp.name
        self.cache = os.path.join(self.tmp, "cache")
        self.env = dict(os.environ, ALLOCMARK_CACHE=self.cache, ALLOCMARK_SOURCES=self.sources)

    def tearDown(self):
        self._tmp.cleanup()

    def run_allocmark(self, args, timeout=900):
        return subprocess.run([ALLOCMARK] + args, capture_output=True, text=True, timeout=timeout, env=self.env)

    def entries(self):
        """The registered entries (temporary folders and lock files start with a dot)."""
        builds = os.path.join(self.cache, "builds")
        return sorted(n for n in os.listdir(builds) if not n.startswith(".")) if os.path.isdir(builds) else []

    def build(self, release):
        p = self.run_allocmark(["build", release])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        name, _, rest = p.stdout.strip().partition(": ")
        self.assertEqual(name, release)
        library, _, state = rest.rpartition(" (")
        return p, library, state.rstrip(")")


class RealBuild:
    """One release of a family built from its tarball, proved, found again, listed (a mixin: each
    family's class names its release)."""
    RELEASE = SOURCE = SIGNATURE = ""  # "jemalloc@5.3.0", its tarball's name, its signature symbol
    VERSION_CHECK = None  # Python run under LD_PRELOAD that prints the version the library reports
    VERSION = ""          # what it prints first

    def check_build_json(self, library):
        entry = os.path.dirname(library)
        with open(os.path.join(entry, "build.json")) as f:
            b = json.load(f)
        family, version = self.RELEASE.split("@")
        self.assertEqual(b["release"], {"family": family, "version": version})
        self.assertEqual(b["library"], library)
        self.assertEqual(b["source_sha256"], sha256(os.path.join(self.sources, self.SOURCE)))
        self.assertEqual(b["recipe_sha256"], sha256(os.path.join(ROOT, "allocators", family, "recipe.toml")))
        cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        self.assertEqual(b["compiler"], cc)
        self.assertTrue(os.path.getsize(b["log"]) > 0)
        self.assertEqual(os.path.basename(entry)[:-17], "%s-%s" % (family, version))
        return b

    def check_library(self, library):
        nm = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True)
        names = {line.split()[-1].split("@")[0] for line in nm.stdout.splitlines()}
        self.assertIn("malloc", names)
        self.assertIn(self.SIGNATURE, names)
        env = dict(os.environ, LD_PRELOAD=library)
        self.assertEqual(subprocess.run(["/bin/true"], env=env).returncode, 0)
        if self.VERSION_CHECK:
            code = "import ctypes\n" + self.VERSION_CHECK % library
            p = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(p.stdout.strip().startswith(self.VERSION), p.stdout)

    def test_builds_once_then_finds_it(self):
        p, library, state = self.build(self.RELEASE)
        self.assertEqual(state, "built now")
        self.assertIn("building %s: tar -xzf" % self.RELEASE, p.stderr)
        self.assertTrue(library.startswith(os.path.join(self.cache, "builds") + "/"), library)
        self.check_build_json(library)
        self.check_library(library)
        log = os.path.join(os.path.dirname(library), "build.log")
        before = os.stat(log).st_mtime_ns
        again, library2, state2 = self.build(self.RELEASE)
        self.assertEqual((library2, state2), (library, "already built"))
        self.assertNotIn("building", again.stderr)
        self.assertEqual(os.stat(log).st_mtime_ns, before)
        self.assertEqual(len(self.entries()), 1)
        listed = json.loads(self.run_allocmark(["list", "--json"]).stdout)["releases"]
        self.assertEqual([b["release"] for b in listed["built"]], [self.RELEASE])
        self.assertNotIn(self.RELEASE, listed["buildable"])
        self.assertIn("    %-20s %s" % (self.RELEASE, library), self.run_allocmark(["list"]).stdout)
        self.check_in_a_matrix(library)

    # The name on the allocator axis, and extra flags, for the matrix check (issue 43: a release is
    # one name away, with its backend's variants and the thp axis).
    MATRIX_NAME, MATRIX_FLAGS, CELL_NAME = "", [], ""

    def check_in_a_matrix(self, library):
        """The release just built runs as a cell of a matrix (--no-build: found, never rebuilt) and its
        record says which release it ran, from which source."""
        out = os.path.join(self.tmp, "results")
        name = self.MATRIX_NAME or self.RELEASE
        p = self.run_allocmark(["run", "-a", name + ",glibc", "-w", "size_mix", "-t", "1", "-r", "1", "--set",
                                "size_mix.ops=20000", "--no-build", "-o", out] + self.MATRIX_FLAGS)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("building", p.stderr)
        with open(os.path.join(out, "results.jsonl")) as f:
            records = [json.loads(line) for line in f]
        release = [r for r in records if r["backend"] != "glibc"]
        self.assertEqual(len(release), 1)
        r = release[0]
        self.assertEqual(r["status"], "ok", r.get("error"))
        self.assertEqual(r["allocator"], self.CELL_NAME or name)
        self.assertEqual(r["preload"], library)
        family, version = self.RELEASE.split("@")
        self.assertEqual(r["release"]["name"], self.RELEASE)
        self.assertEqual(r["release"]["version"], version)
        self.assertEqual(r["release"]["source_sha256"], sha256(os.path.join(self.sources, self.SOURCE)))
        self.assertEqual(r["release"]["build"], os.path.dirname(library))
        self.assertNotIn("release", [g for g in records if g["backend"] == "glibc"][0])
        return r


class Jemalloc(RealBuild, CacheTest):
    # 5.0.1, the oldest release with background threads (the :bg variant): half the files of 5.3.x
    # to compile in CI, the same recipe, and not Debian's 5.3.0, so its version proves the build ran.
    RELEASE, SOURCE, SIGNATURE = "jemalloc@5.0.1", "jemalloc-5.0.1.tar.gz", "mallctl"
    # mallctl("version"): configure was told the version the tag export does not carry.
    VERSION_CHECK = """lib = ctypes.CDLL(%r)
v = ctypes.c_char_p(); n = ctypes.c_size_t(ctypes.sizeof(v))
assert lib.mallctl(b"version", ctypes.byref(v), ctypes.byref(n), None, 0) == 0
print(v.value.decode())"""
    VERSION = "5.0.1-0-g"
    MATRIX_NAME, MATRIX_FLAGS, CELL_NAME = "jemalloc@5.0.1:bg", ["--thp", "never"], "jemalloc@5.0.1:bg@thp=never"

    def check_in_a_matrix(self, library):
        r = super().check_in_a_matrix(library)
        self.assertEqual(r["env"]["MALLOC_CONF"], "background_thread:true")  # the variant's settings
        self.assertTrue(r["allocator_options"]["opt.background_thread"])      # reached the release
        self.assertEqual(r["thp"], {"mode": "never", "how": "prctl"})
        self.assertTrue(r["allocator_version"].startswith("5.0.1-0-g"))


NATIVE_PROBE = os.path.join(os.path.dirname(ALLOCMARK), "native_probe")
MIMALLOC_FIGURES = ["current_rss", "peak_rss", "current_commit", "peak_commit", "page_faults"]


def native_probe(library):
    """What allocmark's mimalloc reader reports with `library` preloaded (allocators/native_probe.cpp)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_") and k != "LD_PRELOAD"}
    env["LD_PRELOAD"] = library
    p = subprocess.run([NATIVE_PROBE, "mimalloc"], capture_output=True, text=True, env=env, timeout=60)
    if p.returncode != 0:
        raise AssertionError("native_probe with %s: exit %d: %s" % (library, p.returncode, p.stderr))
    return json.loads(p.stdout)


class Mimalloc(RealBuild, CacheTest):
    RELEASE, SOURCE, SIGNATURE = "mimalloc@2.0.9", "mimalloc-2.0.9.tar.gz", "mi_version"
    VERSION_CHECK = "print(ctypes.CDLL(%r).mi_version())"
    VERSION = "209"

    def check_library(self, library):
        """The release of the header allocmark is built against: its options are read (not
        `unverified`) and each of mi_process_info's figures is a number, none absent."""
        super().check_library(library)
        r = native_probe(library)
        self.assertEqual(r["version"], "2.0.9")
        self.assertNotIn("unverified", r["options"])
        for name in MIMALLOC_FIGURES:
            self.assertIsInstance(r["stats"][name], int, r["stats"])
            self.assertNotIn(name + "_absent", r["stats"])
        self.assertGreater(r["stats"]["peak_commit"], 0)

    def check_in_a_matrix(self, library):
        r = super().check_in_a_matrix(library)
        self.assertIsInstance(r["alloc_stats"]["current_commit"], int, r["alloc_stats"])


# A stand-in for a mimalloc release (mi_version, mi_option_get, mi_collect and, where defined,
# mi_process_info), compiled here rather than built from a release: the figures a real release
# gets wrong only in a long run (2.2.7's committed bytes below zero, issue 43) are given outright.
FAKE_MIMALLOC = r"""
#include <stdbool.h>
#include <stddef.h>
int mi_version(void) { return FAKE_VERSION; }
long mi_option_get(int option) { (void)option; return 0; }
void mi_collect(bool force) { (void)force; }
#ifdef FAKE_PROCESS_INFO
void mi_process_info(size_t* elapsed, size_t* user, size_t* sys, size_t* current_rss, size_t* peak_rss,
                     size_t* current_commit, size_t* peak_commit, size_t* page_faults) {
  *elapsed = *user = *sys = 0;
  *current_rss = *current_commit = (size_t)(long long)-1932735283;  /* -1.8 GiB, as 2.2.7 printed */
  *peak_rss = (size_t)1 << 62;                                        /* 4 EiB: no machine's */
  *peak_commit = (size_t)1 << 30;
  *page_faults = 3;
}
#endif
"""


class MimallocFiguresThatCannotBeRight(unittest.TestCase):
    """A figure mimalloc hands out that cannot be a measurement (a negative count read as unsigned,
    bytes above the machine's memory) is `null` with `<name>_absent` saying why, never the number;
    a release without mi_process_info says so per figure rather than reporting 0 (issue 43)."""

    def fake(self, version, process_info):
        tmp = tempfile.mkdtemp(prefix="allocmark-fake-mimalloc-")
        self.addCleanup(subprocess.run, ["rm", "-rf", tmp])
        src, lib = os.path.join(tmp, "fake.c"), os.path.join(tmp, "libmimalloc.so.2")
        with open(src, "w") as f:
            f.write(FAKE_MIMALLOC)
        flags = ["-DFAKE_VERSION=%d" % version] + (["-DFAKE_PROCESS_INFO"] if process_info else [])
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src] + flags, check=True)
        return native_probe(lib)

    def test_a_negative_count_or_more_bytes_than_the_machine_has_is_a_reason_not_a_number(self):
        r = self.fake(227, process_info=True)
        stats = r["stats"]
        for name in ["current_rss", "current_commit"]:
            self.assertIsNone(stats[name], stats)
            self.assertEqual(stats[name + "_absent"], "mimalloc 2.2.7 reported -1932735283 (a negative count "
                             "read as unsigned): not a measurement")
        self.assertIsNone(stats["peak_rss"], stats)
        self.assertRegex(stats["peak_rss_absent"], r"^mimalloc 2\.2\.7 reported 4611686018427387904 bytes, more "
                         r"than the machine's RAM and swap \(\d+\): not a measurement$")
        self.assertEqual((stats["peak_commit"], stats["page_faults"]), (1 << 30, 3))
        self.assertNotIn("peak_commit_absent", stats)
        # Its option numbering is not the header's: not read, and said so.
        self.assertEqual(r["options"], {"unverified": "mimalloc version 2.2.7 differs from the header allocmark "
                                        "was built against (2.0.9)"})

    def test_a_release_without_mi_process_info_says_which_figures_it_lacks(self):
        stats = self.fake(167, process_info=False)["stats"]
        self.assertEqual(stats, dict([(n, None) for n in MIMALLOC_FIGURES] +
                                     [(n + "_absent", "mimalloc 1.6.7 exports no mi_process_info")
                                      for n in MIMALLOC_FIGURES]))


class Tcmalloc(RealBuild, CacheTest):
    RELEASE, SOURCE, SIGNATURE = "tcmalloc@2.18.1", "gperftools-2.18.1.tar.gz", "MallocExtension_GetNumericProperty"
    VERSION_CHECK = """lib = ctypes.CDLL(%r)
lib.tc_version.restype = ctypes.c_char_p
print(lib.tc_version(None, None, None).decode().split()[-1])"""
    VERSION = "2.18.1"


class Snmalloc(RealBuild, CacheTest):
    RELEASE, SOURCE, SIGNATURE = "snmalloc@0.7.5", "snmalloc-0.7.5.tar.gz", "__malloc_end_pointer"


class Rpmalloc(RealBuild, CacheTest):
    RELEASE, SOURCE, SIGNATURE = "rpmalloc@1.4.5", "rpmalloc-1.4.5.tar.gz", "rpmalloc_initialize"

    def test_builds_from_a_source_folder(self):
        """--source DIR: an unpacked release, copied (never built in place), keyed by its contents."""
        with tarfile.open(os.path.join(self.sources, self.SOURCE)) as t:
            t.extractall(self.tmp)
        folder = os.path.join(self.tmp, "rpmalloc-1.4.5")
        before = sorted(os.listdir(folder))
        p = self.run_allocmark(["build", self.RELEASE, "--source", folder])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("building %s: cp -a '%s/.'" % (self.RELEASE, folder), p.stderr)
        library = p.stdout.strip().split(": ", 1)[1].rsplit(" (", 1)[0]
        self.check_library(library)
        with open(os.path.join(os.path.dirname(library), "build.json")) as f:
            b = json.load(f)
        self.assertEqual(b["source"], folder)
        self.assertEqual(len(b["source_sha256"]), 64)
        self.assertNotEqual(b["source_sha256"], sha256(os.path.join(self.sources, self.SOURCE)))
        self.assertEqual(sorted(os.listdir(folder)), before, "nothing is built inside the folder")
        again = self.run_allocmark(["build", self.RELEASE, "--source", folder])
        self.assertTrue(again.stdout.strip().endswith("(already built)"), again.stdout + again.stderr)
        # An edited source is another build, beside the first.
        with open(os.path.join(folder, "rpmalloc", "rpmalloc.c"), "a") as f:
            f.write("\n/* edited */\n")
        edited = self.run_allocmark(["build", self.RELEASE, "--source", folder])
        self.assertTrue(edited.stdout.strip().endswith("(built now)"), edited.stdout + edited.stderr)
        self.assertEqual(len(self.entries()), 2)


def make_tarball(path, top, files):
    """A tarball at `path` holding top/NAME for each NAME: TEXT of `files`."""
    src = tempfile.mkdtemp(prefix="allocmark-src-")
    for name, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(src, top, name)), exist_ok=True)
        with open(os.path.join(src, top, name), "w") as f:
            f.write(text)
    with tarfile.open(path, "w:gz") as t:
        t.add(os.path.join(src, top), arcname=top)
    return path


RPMALLOC_HEADERS = {"rpmalloc/rpmalloc.h": "", "rpmalloc/malloc.c": ""}


class BuildBadInput(CacheTest):
    """Every refusal: exit 2, a message naming the problem, nothing registered."""

    def assert_refused(self, args, *needles):
        p = self.run_allocmark(["build"] + args)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)
        self.assertEqual(self.entries(), [])
        self.assertEqual(p.stdout, "")
        return p

    def test_names(self):
        self.assert_refused(["hoard@3.13"], "no recipe for 'hoard'", "families: jemalloc, mimalloc, rpmalloc, snmalloc, tcmalloc")
        self.assert_refused(["jemalloc"], "'jemalloc' is not a release: write FAMILY@VERSION")
        self.assert_refused(["jemalloc@latest"], "'latest' is not a version")
        self.assert_refused(["rpmalloc@1.4.5,hoard@1"], "no recipe for 'hoard'")  # checked before any build
        self.assert_refused(["rpmalloc@1.4.5", "mimalloc@2.0.9", "--source", "x.tar.gz"], "--source names the source of one release")

    def test_unknown_version_says_where_it_looked(self):
        self.assert_refused(["jemalloc@9.9.9"], "no source for jemalloc@9.9.9: looked for %s/jemalloc-9.9.9.tar.gz" % self.sources,
                            "$ALLOCMARK_SOURCES", "--source PATH", "upstream tags (https://github.com/jemalloc/jemalloc, tag 9.9.9")
        self.assert_refused(["tcmalloc@9.9"], "gperftools-9.9.tar.gz", "tag gperftools-9.9")
        self.assert_refused(["jemalloc@5.3.0", "--source", os.path.join(self.tmp, "none.tar.gz")], "--source", "does not exist")

    def test_sources_that_are_not_releases(self):
        text = os.path.join(self.tmp, "jemalloc-5.3.0.tar.gz")
        with open(text, "w") as f:
            f.write("not a tarball\n")
        self.assert_refused(["jemalloc@5.3.0", "--source", text], "not a gzip-compressed tar archive")
        # A folder is an unpacked source: refused, naming what it lacks, when it is not this family's.
        os.makedirs(os.path.join(self.tmp, "empty"))
        self.assert_refused(["jemalloc@5.3.0", "--source", os.path.join(self.tmp, "empty")],
                            "is not a jemalloc source: it lacks configure.ac, autogen.sh, src/jemalloc.c")
        with tarfile.open(os.path.join(self.sources, "rpmalloc-1.4.5.tar.gz")) as t:
            t.extractall(self.tmp)
        self.assert_refused(["mimalloc@2.0.9", "--source", os.path.join(self.tmp, "rpmalloc-1.4.5")],
                            "is not a mimalloc source: it lacks CMakeLists.txt, src/alloc.c, include/mimalloc.h")
        self.assertEqual(os.listdir(os.path.join(self.cache, "logs")) if os.path.isdir(os.path.join(self.cache, "logs")) else [], [])
        wrong = make_tarball(os.path.join(self.tmp, "mimalloc-9.9.9.tar.gz"), "mimalloc-9.9.9", {"README.md": "hi\n"})
        self.assert_refused(["mimalloc@9.9.9", "--source", wrong], "is not a mimalloc source: it lacks CMakeLists.txt")
        # A real release of another family is not this family's source either.
        other = os.path.join(self.sources, "rpmalloc-1.4.5.tar.gz")
        self.assert_refused(["jemalloc@5.3.0", "--source", other], "is not a jemalloc source: it lacks configure.ac")

    def test_failing_build_shows_its_log(self):
        broken = make_tarball(os.path.join(self.tmp, "rpmalloc-9.9.9.tar.gz"), "rpmalloc-9.9.9",
                              dict(RPMALLOC_HEADERS, **{"rpmalloc/rpmalloc.c": "this is not C\n"}))
        p = self.assert_refused(["rpmalloc@9.9.9", "--source", broken], "building rpmalloc@9.9.9 failed at step 1 (cc ",
                                "last lines of its log:", "this is not C", "the whole log: ")
        log = p.stderr.split("the whole log: ")[1].split("\n")[0]
        with open(log) as f:
            self.assertIn("error", f.read())
        self.assertEqual(glob.glob(os.path.join(self.cache, "builds", ".tmp-*")), [], "the temporary folder is removed")

    def test_library_that_is_not_the_allocator(self):
        no_malloc = make_tarball(os.path.join(self.tmp, "rpmalloc-9.9.8.tar.gz"), "rpmalloc-9.9.8",
                                 dict(RPMALLOC_HEADERS, **{"rpmalloc/rpmalloc.c": "int rpmalloc_initialize(void) { return 0; }\n"}))
        self.assert_refused(["rpmalloc@9.9.8", "--source", no_malloc], "which does not export malloc")
        no_signature = make_tarball(os.path.join(self.tmp, "rpmalloc-9.9.7.tar.gz"), "rpmalloc-9.9.7",
                                    dict(RPMALLOC_HEADERS, **{"rpmalloc/rpmalloc.c": "#include <stddef.h>\nvoid* malloc(size_t n) { return 0; }\n"}))
        self.assert_refused(["rpmalloc@9.9.7", "--source", no_signature], "which does not export rpmalloc_initialize")


class Interrupted(CacheTest):
    """A build killed midway registers nothing; two builds at once make one entry."""

    def test_killed_build_leaves_nothing_and_the_next_one_builds(self):
        p = subprocess.Popen([ALLOCMARK, "build", "mimalloc@2.0.9"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=self.env, start_new_session=True)
        for line in p.stderr:  # killed while the compiler runs: the last step, before the rename
            if "--target mimalloc" in line:
                break
        os.killpg(p.pid, signal.SIGTERM)
        p.communicate(timeout=60)
        self.assertEqual(p.returncode, -signal.SIGTERM)
        self.assertEqual(self.entries(), [])
        self.assertEqual(self.run_allocmark(["list", "--json"]).returncode, 0)
        self.assertEqual(json.loads(self.run_allocmark(["list", "--json"]).stdout)["releases"]["built"], [])
        again = self.run_allocmark(["build", "mimalloc@2.0.9"])
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("(built now)", again.stdout)
        self.assertEqual(len(self.entries()), 1)
        self.assertEqual(glob.glob(os.path.join(self.cache, "builds", ".tmp-*")), [], "the stale folder is removed")

    def test_two_builds_at_once_make_one_entry(self):
        procs = [subprocess.Popen([ALLOCMARK, "build", "rpmalloc@1.4.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=self.env) for _ in range(2)]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0])
        self.assertEqual(sorted(o.rsplit(" (", 1)[1] for o in outs), ["already built)\n", "built now)\n"])
        self.assertEqual(outs[0].rsplit(" (", 1)[0], outs[1].rsplit(" (", 1)[0])
        self.assertEqual(len(self.entries()), 1)


if __name__ == "__main__":
    unittest.main()
