"""A results folder's paths, defined once (issue 22): what the runner writes is what every reader finds.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3; standard library only.
"""
import html.parser
import os
import unittest
import urllib.parse

from e2e_test import TempDirTest, run


class FailureTableLinks(html.parser.HTMLParser):
    """Each row of the report's table of failed cells: the cells' texts and the links inside them."""

    def __init__(self):
        super().__init__()
        self.rows, self._inside, self._cell = [], False, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._inside = attrs.get("id") == "failure-table"
        elif self._inside and tag == "tr":
            self.rows.append([])
        elif self._inside and tag == "td":
            self._cell = {"text": "", "href": None}
            self.rows[-1].append(self._cell)
        elif self._cell is not None and tag == "a":
            self._cell["href"] = attrs.get("href")

    def handle_endtag(self, tag):
        if tag == "table":
            self._inside = False
        elif tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data


def failure_rows(page):
    parser = FailureTableLinks()
    with open(page, encoding="utf-8") as f:
        parser.feed(f.read())
    return [r for r in parser.rows if r]  # the header row has no <td>


class FailedCellLog(TempDirTest):
    """The report's table of failed cells links each cell's log, wherever the page is written."""

    def setUp(self):
        super().setUp()
        p = run(["run", "-a", "glibc", "--program", "fails=false", "-t", "1", "-r", "1", "--out", self.out])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # a cell not ok
        self.logs = sorted(os.listdir(os.path.join(self.out, "logs")))

    def assert_links_the_log(self, page):
        rows = failure_rows(page)
        self.assertEqual(len(rows), 1, rows)
        log = rows[0][-1]
        self.assertIsNotNone(log["href"], f"the log cell {log['text']!r} links nothing")
        target = os.path.normpath(os.path.join(os.path.dirname(page), urllib.parse.unquote(log["href"])))
        self.assertTrue(os.path.isfile(target), f"{log['href']} (from {page}) is no file")
        self.assertEqual(os.path.dirname(target), os.path.join(self.out, "logs"))
        self.assertIn(os.path.basename(target), self.logs)
        self.assertTrue(target.endswith(".log"), target)

    def test_the_page_in_the_folder_links_the_log(self):
        p = run(["report", self.out])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assert_links_the_log(os.path.join(self.out, "report.html"))

    def test_a_page_elsewhere_links_the_log_from_there(self):
        pages = os.path.join(self.tmp, "pages # 50%")
        os.mkdir(pages)
        page = os.path.join(pages, "run.html")
        p = run(["report", self.out, "-o", page])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assert_links_the_log(page)


if __name__ == "__main__":
    unittest.main()
