"""The report's charts (#53): the per-call cost chart (the first screen's launch and cheap-call
figures for every method, drawn from recorded results) and the heat map's labels
(ctest: Analysis.Package)."""
import base64
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
SOURCE = os.environ.get("CUDATRACE_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "analysis"))

import cudatrace_results as results  # noqa: E402

# The H100's recorded benchmark and matrix (docs/results/h100), as the report's other tests use them.
H100 = [os.path.join(SOURCE, "docs", "results", "h100", name) for name in ("matrix", "bench")]


class PerCallCosts(unittest.TestCase):
    """What the chart draws is the harness's figure for each row, chosen as the first screen chooses."""

    def setUp(self):
        self.runs = results.load_runs(H100)
        self.data = results.overview.per_call_costs(self.runs)
        self.rows = results.rows_by_key(self.runs[1].bench)

    def test_the_calls_are_the_first_screens(self):
        o = results.overview.build(self.runs)
        self.assertEqual((self.data["launch_call"], self.data["cheap_call"]), (o["launch_call"], o["cheap_call"]))
        self.assertTrue(self.data["launch_call"] and self.data["cheap_call"])

    def test_every_method_and_linkage_the_benchmark_measured(self):
        methods = {m for (_, _, m) in self.rows if m != "none"}
        self.assertEqual(set(self.data["methods"]), methods)
        self.assertEqual(self.data["linkages"][0], "shared")
        for (method, call, linkage) in self.data["costs"]:
            self.assertIn((call, linkage, method), self.rows)

    def test_each_figure_as_the_harness_wrote_it(self):
        for (method, call, linkage), entry in self.data["costs"].items():
            row = self.rows[call, linkage, method]
            c = entry["cost"]
            if "in_process_delta_ns" in row:
                self.assertEqual((c.value, list(c.ci)), (row["in_process_delta_ns"], list(row["in_process_delta_ci95_ns"])))
                self.assertEqual(c.noise, bool(row.get("in_process_no_measurable_cost")))
            else:
                self.assertEqual((c.value, list(c.ci)), (row["delta_ns"], list(row["delta_ci95_ns"])))
                self.assertEqual(c.noise, bool(row.get("no_measurable_cost")))

    def test_caveats_come_with_their_figure(self):
        runs = results.load_runs([os.path.join(FIXTURES, "bench-v2")])
        data = results.overview.per_call_costs(runs)
        lossy = [k for k, e in data["costs"].items() if any("measured under loss" in x for x in e["caveats"])]
        self.assertTrue(lossy, data["costs"])


class TheChartInTheReport(unittest.TestCase):
    """The report drawn from the recorded H100 results holds the chart, folded in the per-call
    section, and the first screen's cost cells lead to it."""

    @classmethod
    def setUpClass(cls):
        python = "/usr/bin/python3"
        if subprocess.run([python, "-c", "import matplotlib"], stderr=subprocess.DEVNULL).returncode != 0:
            raise unittest.SkipTest("python3-matplotlib missing")
        cls.dir = tempfile.TemporaryDirectory()
        html = os.path.join(cls.dir.name, "r.html")
        subprocess.run([python, os.path.join(SOURCE, "reports", "generate_report.py")] + H100 + ["-o", html],
                       check=True, stdout=subprocess.DEVNULL)
        with open(html, encoding="utf-8") as f:
            cls.text = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_the_chart_is_an_image_in_the_folded_per_call_section(self):
        section = re.search(r'<details id="sec-per-call" class="sec">(.*?)</details>', self.text, flags=re.S)
        self.assertIsNotNone(section)
        m = re.search(r'<div id="per-call-cost">.*?<img id="per-call-cost-chart" [^>]*'
                      r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', section.group(1), flags=re.S)
        self.assertIsNotNone(m, "no per-call cost chart in the per-call section")
        png = base64.b64decode(m.group(1))
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        self.assertGreater(width, 600)
        self.assertGreater(height, 200)

    def test_the_first_screens_cost_cells_lead_to_it(self):
        overview = re.search(r'<table id="overview">(.*?)</table>', self.text, flags=re.S).group(1)
        methods = len(re.findall(r"<tr><th>", overview))
        links = overview.count('href="#per-call-cost"')
        # Two cost cells per method row (a launch and a cheap call), each a link where it has a figure.
        self.assertGreater(links, 0)
        self.assertLessEqual(links, 2 * methods)
        self.assertNotIn('href="#sec-per-call"', overview)


class HeatMapLabels(unittest.TestCase):
    def test_a_shortfall_never_reads_whole(self):
        if subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], stderr=subprocess.DEVNULL).returncode:
            raise unittest.SkipTest("python3-matplotlib missing")
        code = ("import sys; sys.path[:0] = sys.argv[1:3]; import report_coverage as c; "
                "print(c.heat_label({'matched': 320004, 'expected': 320006}), c.heat_label({'matched': 5, 'expected': 5}))")
        out = subprocess.run(["/usr/bin/python3", "-c", code, os.path.join(SOURCE, "reports"),
                              os.path.join(SOURCE, "analysis")], capture_output=True, text=True, check=True).stdout
        self.assertEqual(out.split(), ["99.9%", "100.0%"])

    def test_a_programs_table_rounds_a_share_down_as_the_harness_does(self):
        if subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], stderr=subprocess.DEVNULL).returncode:
            raise unittest.SkipTest("python3-matplotlib missing")
        code = ("import sys; sys.path[:0] = sys.argv[1:3]; import report_coverage as c; "
                "row = {'method': 'torchprof', 'layer': 'driver', 'status': 'partial', 'coverage': 400 / 52741, "
                "'matched': 400, 'reference': 52741, 'seen': 400, 'only_it_saw': 0}; "
                "print(c.command_section({'verdict': {'reference': {}, 'coverage': [row]}}, 1))")
        out = subprocess.run(["/usr/bin/python3", "-c", code, os.path.join(SOURCE, "reports"),
                              os.path.join(SOURCE, "analysis")], capture_output=True, text=True, check=True).stdout
        self.assertIn("0.7% (400 of 52741)", out)
        self.assertNotIn("0.8%", out)


if __name__ == "__main__":
    unittest.main()
