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


if __name__ == "__main__":
    unittest.main()
