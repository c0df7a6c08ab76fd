"""Every #include points down a floor (docs/ARCHITECTURE.md, "Floors").

Each folder of the sources sits on one floor; a file may include files of its own folder and of
lower floors only, never of its floor's other folders or of a higher one. Tests (`*_test.cpp`,
`tests/` folders) may include anything. Run by ctest with Debian's /usr/bin/python3; standard
library only. ALLOCMARK_SOURCE_DIR checks another tree (the unchanged program's, for instance).
"""
import os
import re
import unittest

ROOT = os.environ.get("ALLOCMARK_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# folder -> floor. The longest folder that holds a file decides its floor.
FLOORS = {
    "units": 0,                 # quantities in text (parse_bytes), ConfigError; below everything that reads them
    "harness/toml": 0,
    "harness/os": 0,            # the one launcher, monotonic clock and /proc reader (like numap's os.h)
    "harness/topology": 1,      # the machine's description: numap's tests and the lab read it
    "harness/trace": 1,         # allocation trace files: the replay workload and `trace` read them
    "allocators": 2,            # the backend catalogue
    "workloads": 2,
    "harness/record": 2.5,      # the record's field table and cell: below the metrics that expand them
    "harness/placement": 3,
    "harness/metrics": 3,       # /proc readers, a phase's record fields, the formulas (derived.h)
    "harness/settings": 4,      # the settings table: the driver and the worker read one Settings
    "harness/matrix": 5,
    "harness/worker": 5,
    "harness/results": 6,       # the folder, its schema and the model
    "harness/program": 6,       # the preload companion (with the worker's preload proof)
    "harness/results/reporters": 7,
    "harness/gate": 7,
    "harness/history": 7,       # the results history: reads folders through the results model
    "harness/runner": 8,        # stores records and rewrites the summaries as cells finish
    "harness/compare": 8,
    "harness/lab": 9,
    "harness/report": 9,
    "harness/cli": 10,
}

# Wrong-way arrows kept on purpose, each with its reason (none today).
ALLOWED = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:harness|workloads|allocators|units)/[^"]+)"', re.M)


def folder_of(path):
    best = None
    for folder in FLOORS:
        if (path + "/").startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def is_test(path):
    return path.endswith("_test.cpp") or "/tests/" in "/" + path


def sources():
    for top in ("harness", "workloads", "allocators", "units"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".h", ".cpp", ".c")):
                    path = os.path.relpath(os.path.join(dirpath, name), ROOT)
                    if not is_test(path):
                        yield path


def wrong_way_arrows():
    arrows, unplaced = [], []
    for path in sources():
        here = folder_of(path)
        if here is None:
            unplaced.append(path)
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for target in INCLUDE.findall(text):
            there = folder_of(target)
            if there is None:
                unplaced.append(target)
            elif there != here and FLOORS[there] >= FLOORS[here] and (path, target) not in ALLOWED:
                arrows.append(f"{path} (floor {FLOORS[here]}) includes {target} (floor {FLOORS[there]})")
    return arrows, unplaced


class IncludeFloors(unittest.TestCase):
    def test_every_include_points_down(self):
        arrows, unplaced = wrong_way_arrows()
        self.assertEqual(unplaced, [], "folders with no floor: add them to FLOORS and to docs/ARCHITECTURE.md")
        self.assertEqual(arrows, [], "\n" + "\n".join(arrows))

    def test_the_allow_list_holds_only_arrows_that_exist(self):
        for path, target in ALLOWED:
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                self.assertIn(f'"{target}"', f.read(), f"{path} no longer includes {target}: drop it from ALLOWED")


# The OS layer (harness/os/, docs/ARCHITECTURE.md): the harness, the workloads, the allocator catalogue
# and releases start processes, read the clock and read /proc only through it. /proc is also read by harness/metrics (the
# measured readers, raw calls at phase edges); a /proc path elsewhere is an os:: reader's argument.
OS_LAYER = ("harness/os/",)
PROC_READERS = ("harness/os/", "harness/metrics/")
# numap is an allocator of its own, built and shipped without the harness: its os.h is its layer.
NOT_THE_HARNESS = ("allocators/numap/",)
CLOCK = re.compile(r"\b(steady_clock|system_clock|high_resolution_clock|clock_gettime|gettimeofday)\b")
LAUNCH = re.compile(r"(?<![\w.>])(?:::)?(fork|vfork|clone|posix_spawnp?|execv|execve|execvp|execvpe|execl|execle|execlp|"
                    r"fexecve|popen|system)\s*\(")
PROC_PATH = re.compile(r'"/proc[/"]')
OS_READER_CALL = re.compile(r"os::\w+\(\s*$")
# Uses kept on purpose, each with its reason: (path, name).
OS_ALLOWED = {
    # The trace recorder interposes the exec family to follow the traced program across exec: it
    # defines and forwards them, it starts nothing of the harness's.
    ("harness/trace/record_preload.cpp", name)
    for name in ("execve", "execv", "execvp", "execvpe", "fexecve", "execl", "execlp", "execle")
}
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def bypasses_of_the_os_layer():
    found = []
    for path in sources():
        if path.startswith(OS_LAYER + NOT_THE_HARNESS):
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            text = COMMENT.sub("", f.read())
        for m in CLOCK.finditer(text):
            found.append(f"{path}: {m.group(1)} (use os::Clock or os::monotonic_ns, harness/os/clock.h)")
        for m in LAUNCH.finditer(text):
            if (path, m.group(1)) not in OS_ALLOWED:
                found.append(f"{path}: {m.group(1)}() (start processes with os::spawn, harness/os/spawn.h)")
        if not path.startswith(PROC_READERS):
            for m in PROC_PATH.finditer(text):
                if not OS_READER_CALL.search(text[: m.start()]):
                    found.append(f"{path}: reads /proc itself (use an os:: reader, harness/os/files.h)")
    return found


class OsLayer(unittest.TestCase):
    def test_processes_the_clock_and_proc_go_through_harness_os(self):
        found = bypasses_of_the_os_layer()
        self.assertEqual(found, [], "\n" + "\n".join(found))

    def test_the_allow_list_holds_only_uses_that_exist(self):
        for path, name in OS_ALLOWED:
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                self.assertRegex(COMMENT.sub("", f.read()), rf"\b{name}\s*\(", f"{path} no longer uses {name}: drop it from OS_ALLOWED")


if __name__ == "__main__":
    unittest.main()
