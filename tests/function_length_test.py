"""No function in harness/ or workloads/ is over 80 lines (issue 42): a reader holds one in a screen.

Lengths are ctags' (Universal Ctags: a function's `line` to its `end`, both counted), so the test
measures what the issue measures. No function is exempt.
Run by ctest with Debian's /usr/bin/python3; standard library only. ctags comes from Debian's
universal-ctags (ci/setup.sh --tests installs it); without it the test fails, it does not skip.
ALLOCMARK_SOURCE_DIR checks another tree.
"""
import os
import shutil
import subprocess
import unittest

ROOT = os.environ.get("ALLOCMARK_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ["harness", "workloads"]
LIMIT = 80


def ctags_problem():
    """Why ctags cannot measure here, or None."""
    if shutil.which("ctags") is None:
        return "ctags is not on PATH: install Debian's universal-ctags (ci/setup.sh --tests installs it)"
    version = subprocess.run(["ctags", "--version"], capture_output=True, text=True).stdout
    if "Universal Ctags" not in version:
        return "ctags is not Universal Ctags (it has no function ends): install Debian's universal-ctags"
    return None


def function_lengths():
    """[(file, name, lines)] of every function definition in FOLDERS; a member is named Class::name."""
    out = subprocess.run(
        ["ctags", "--fields=+ne", "--excmd=number", "-o", "-", "-R", "--languages=C++", "--c++-kinds=f", *FOLDERS],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lengths = []
    for row in out.splitlines():
        cols = row.split("\t")
        fields = dict(c.split(":", 1) for c in cols[3:] if ":" in c)
        if "line" in fields and "end" in fields:
            scope = fields.get("class") or fields.get("struct")
            name = scope.split("::")[-1] + "::" + cols[0] if scope else cols[0]
            lengths.append((cols[1], name, int(fields["end"]) - int(fields["line"]) + 1))
    return lengths


class FunctionLength(unittest.TestCase):
    def setUp(self):
        problem = ctags_problem()
        if problem:
            self.fail(problem)
        self.lengths = function_lengths()
        # A ctags that reads nothing would pass everything.
        self.assertGreater(len(self.lengths), 500, "ctags found almost no functions in " + ", ".join(FOLDERS))

    def test_no_function_over_the_limit(self):
        over = [f"{path}: {name} is {lines} lines, over {LIMIT}"
                for path, name, lines in sorted(self.lengths, key=lambda t: -t[2]) if lines > LIMIT]
        if over:
            self.fail("split these into functions a reader holds in one screen:\n" + "\n".join(over))


if __name__ == "__main__":
    unittest.main()
