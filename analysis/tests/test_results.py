"""Tests of the analysis package on small fixture files (ctest: Analysis.Package)."""
import glob
import json
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
from cudatrace_results import bench as bench_mod  # noqa: E402


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


class Loading(unittest.TestCase):
    def test_a_run_folder_reads_whole(self):
        run = results.load_run(fixture("matrix"))
        self.assertEqual(run.run_id, "20260101T000000Z-aaaa")
        self.assertEqual(len(run.combos), 2)
        self.assertIsNone(run.bench)
        self.assertEqual(run.manifest["environment"]["gpu"]["devices"][0]["name"], "Test GPU")

    def test_an_unknown_version_is_refused_with_what_to_do(self):
        with self.assertRaises(results.SchemaError) as e:
            results.load_run(fixture("future"))
        text = str(e.exception)
        self.assertIn("schema_version 2", text)
        self.assertIn("summary.json", text)
        self.assertIn("another harness version", text)

    def test_files_from_before_schema_version_read_as_version_1(self):
        run = results.load_run(fixture("legacy"))
        self.assertEqual(results.schema_version(run.bench), 1)

    def test_a_folder_without_results_says_so(self):
        with tempfile.TemporaryDirectory() as empty:
            with self.assertRaises(results.SchemaError) as e:
                results.load_run(empty)
            self.assertIn("neither summary.json nor bench_summary.json", str(e.exception))

    def test_bench_rows_carry_their_run(self):
        run = results.load_run(fixture("bench"))
        self.assertTrue(all(r["run"] == run.run_id for r in run.bench_rows()))


class TheHarnessDecides(unittest.TestCase):
    """"No measurable cost" is read from the file, never decided again here."""

    def setUp(self):
        self.rows = results.rows_by_key(results.load_run(fixture("bench")).bench)

    def test_flags_are_trusted_as_written(self):
        preload = self.rows["cudaGetDevice", "shared", "preload"]
        self.assertFalse(results.between_is_noise(preload))
        self.assertTrue(results.in_process_is_noise(preload))
        self.assertTrue(results.between_is_noise(self.rows["cudaGetDevice", "shared", "strace"]))

    def test_a_difference_below_zero_without_the_flag_is_what_the_harness_said(self):
        # The harness did not flag it: the analysis does not second-guess it.
        self.assertFalse(results.between_is_noise(self.rows["cudaGetDevice", "shared", "uprobe"]))

    def test_the_in_process_cost_leads_and_carries_its_untraced_call(self):
        costs = bench_mod.costs(results.load_run(fixture("bench")).bench)
        preload = costs["cudaGetDevice", "shared", "preload"]
        self.assertEqual((preload.kind, preload.value, preload.noise, preload.untraced), ("in-process", 45.0, True, 105))
        strace = costs["cudaGetDevice", "shared", "strace"]
        self.assertEqual((strace.kind, strace.noise, strace.untraced), ("between", True, 100.0))
        self.assertNotIn(("cudaGetDevice", "shared", "none"), costs)

    def test_no_reader_decides_it_again(self):
        # The rule's clauses (a delta below zero, an interval reaching zero, a pairing control)
        # live in harness/stats/bench_stats.cpp only.
        for script in READERS + COMMAND_MODULES:
            with open(os.path.join(SOURCE, script)) as f:
                text = f.read()
            self.assertIsNone(re.search(r"delta_ns\"\]\s*<\s*0|ci\[0\]\s*<=\s*0|ab\[0\]\s*<=\s*0|<=\s*abs\(control", text),
                              f"{script} re-derives 'no measurable cost'")


COMMANDS = ["bench_agreement", "bench_outcome", "percall_table", "per_device_summary"]
# The report generator and the section modules beside it (reports/report_*.py) read alike.
READERS = (["reports/generate_report.py", "docs/make_results_doc.py"]
           + sorted(os.path.relpath(p, SOURCE) for p in glob.glob(os.path.join(SOURCE, "reports", "report_*.py"))))
COMMAND_MODULES = [f"analysis/cudatrace_results/{m}.py" for m in COMMANDS]


def command(*args):
    """python3 -m cudatrace_results ARGS, the package taken from this source tree."""
    env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "analysis"))
    return subprocess.run([sys.executable, "-m", "cudatrace_results"] + list(args), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class LossByUnit(unittest.TestCase):
    """What a combination lost is read by unit as the harness summed it (combos[].lost): bytes
    or files are never shown as events, and a loss of them alone is still a loss."""

    def test_a_loss_of_bytes_only_is_partial_and_said_in_bytes(self):
        combo = {"method": "torchprof", "ok": 1, "reps": 1, "layers": [{"layer": "runtime", "expected": 5, "matched": 5}],
                 "loss": {"kineto_log_unread_bytes": 4096, "events_unread": 0},
                 "lost": {"events": 0, "other": {"bytes": 4096}}}
        status, reason = results.overview.workload_status(combo)
        self.assertEqual(status, "partial")
        self.assertIn("lost 4096 bytes (kineto_log_unread_bytes=4096)", reason)
        self.assertEqual(results.overview.lost_words(66, {"files": 2}), "66 events, 2 files")

    def test_files_from_before_the_field_count_every_counter_as_events(self):
        self.assertEqual(results.overview.harness_lost({"loss": {"a": 2, "b": True, "c": 3}}), (5, {}))


class EveryReaderUsesThePackage(unittest.TestCase):
    def test_imports(self):
        for script in READERS:
            with open(os.path.join(SOURCE, script)) as f:
                text = f.read()
            self.assertIn("import cudatrace_results", text, script)
            self.assertNotIn("json.load(", text, f"{script} loads result files itself")
        for module in COMMAND_MODULES:
            with open(os.path.join(SOURCE, module)) as f:
                self.assertNotIn("json.load(", f.read(), f"{module} loads result files itself")

    def test_ci_reads_results_through_the_commands_only(self):
        # ci/ keeps shell scripts; a Python reader there would be a second way in, outside the
        # package's commands and tests.
        self.assertEqual(glob.glob(os.path.join(SOURCE, "ci", "*.py")), [])
        scripts = "".join(open(p).read() for p in glob.glob(os.path.join(SOURCE, "ci", "*.sh")))
        used = set(re.findall(r"results\.sh\"? ([a-z-]+)", scripts))
        self.assertTrue(used, "no ci script calls a command")
        dispatcher = open(os.path.join(SOURCE, "analysis", "cudatrace_results", "__main__.py")).read()
        for name in used:
            self.assertIn(f'"{name}"', dispatcher, f"ci calls {name}, which the package does not have")

    def test_every_command_is_listed_and_an_unknown_one_refused(self):
        r = command("--help")
        self.assertEqual(r.returncode, 0, r.stdout)
        for name in COMMANDS:
            self.assertIn(name.replace("_", "-"), r.stdout)
        r = command("no-such-command")
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("no command 'no-such-command'", r.stdout)

    def test_bench_agreement_reads_through_the_package(self):
        path = fixture("bench", "bench_summary.json")
        r = command("bench-agreement", path, path)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("PASS", r.stdout)
        r = command("bench-agreement", path, fixture("future", "summary.json"))
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("schema_version 2", r.stdout)

    def test_per_device_summary_names_what_the_harness_found_short(self):
        r = command("per-device-summary", fixture("twogpu"), fixture("twogpu-command"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("twoproc.shared preload      ok: SHORT runtime rank 1 on gpu1 0/18", r.stdout)
        self.assertIn("preload      runtime       SHORT process 1 on gpu0 4300/6740", r.stdout)
        r = command("per-device-summary", fixture("future"))
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("schema_version 2", r.stdout)

    def test_percall_table_command(self):
        r = command("percall-table", fixture("percall"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("broken.r1.json: unreadable", r.stdout)
        self.assertRegex(r.stdout, r"cudaGetDevice +preload +1 +130\.0 +\+30\.0 .* \+25\.0 \(\+1\.0\)")

    def test_percall_folder(self):
        warned = []
        labels, medians, ab, control = results.load_percall_folder(fixture("percall"), warn=lambda n, e: warned.append(n))
        self.assertEqual(warned, ["broken.r1.json"])
        self.assertEqual(medians["cudaGetDevice", "none"], [100.0])
        self.assertEqual(ab["cudaGetDevice", "preload"], [25.0])
        self.assertEqual(control["cudaGetDevice", "preload"], [1.0])
        self.assertNotIn(("cudaGetDevice_mean", "none"), medians)


class Reasons(unittest.TestCase):
    def test_paths_become_library_names(self):
        self.assertEqual(results.short_reason("calls from /a/b/site-packages/libcublas.so.13 lost"),
                         "calls from libcublas.so.13 lost")

    def test_the_same_clause_for_many_libraries_is_one_line(self):
        reason = ("runtime calls from /x/lib/liba.so.1 not observable: stripped; "
                  "runtime calls from /x/lib/libb.so.2 not observable: stripped; the ring was full")
        self.assertEqual(results.reason_lines(reason),
                         ["runtime calls from liba.so.1, libb.so.2 not observable: stripped", "the ring was full"])

    def test_a_reason_without_paths_is_unchanged(self):
        self.assertEqual(results.reason_lines("cudart is linked statically"), ["cudart is linked statically"])

    def test_grouped_by_method_layer_and_reason(self):
        items = [("vecadd.static", "preload", "runtime", "cudart is static", False),
                 ("graphs.static", "preload", "runtime", "cudart is static", False),
                 ("graphs.static", "preload", "driver", "from /a/libx.so: table", True)]
        groups = results.grouped_reasons(items)
        self.assertEqual(len(groups), 2)
        runtime = next(g for g in groups if g["layer"] == "runtime")
        self.assertEqual(runtime["where"], ["vecadd.static", "graphs.static"])
        driver = next(g for g in groups if g["layer"] == "driver")
        self.assertEqual(driver["libraries"], ["libx.so"])
        self.assertTrue(driver["partly"])


class CostMode(unittest.TestCase):
    """The cost mode's section of summary.json, read as the harness wrote it (the fixtures
    are real runs on a machine without a GPU: a workload run, a command with a start-up
    mark, a command that said it cannot run here)."""

    def programs(self, name):
        return results.cost_programs(results.load_run(fixture(name)))

    def test_every_program_and_method_with_its_run(self):
        programs = self.programs("cost-workloads")
        self.assertEqual([p["program"] for p in programs],
                         ["errors.static", "errors.shared", "graphs.static", "graphs.shared"])
        for p in programs:
            self.assertTrue(p["run"])
            self.assertEqual(p["rounds"], {"planned": 3, "done": 3})
            self.assertEqual(p["methods"][0]["method"], "none")
            self.assertIsNone(p["methods"][0]["ratio"])
            # A method that did not run on the program is named, with why.
            self.assertTrue(all(n["reason"] for n in p["not_run"]))
            for m in p["methods"][1:]:
                self.assertTrue(m["ratio"] or m["why_no_ratio"])

    def test_marked_figures_are_said_to_be_marked(self):
        preload = next(m for p in self.programs("cost-workloads") if p["program"] == "errors.static"
                       for m in p["methods"] if m["method"] == "preload")
        self.assertTrue(results.from_marked_runs(preload))
        kinds = [k for k, _, _ in results.mark_summary(preload)]
        self.assertIn("layer not observed", kinds)

    def test_labels(self):
        self.assertEqual(results.program_label({"workload": "vecadd", "program": "vecadd.shared"}), "vecadd.shared")
        self.assertEqual(results.program_label({"command": ["/opt/v/bin/python3", "tests/real_programs/jax_jit_loop.py",
                                                            "300"]}), "jax_jit_loop.py 300")
        self.assertEqual(results.program_label({"command": ["/usr/bin/python3", "-c", "import os"]}),
                         "python3 -c import os")
        self.assertEqual(results.program_label({"command": ["python3", "-u", "-m", "torch.distributed.run", "x.py"]}),
                         "torch.distributed.run x.py")
        self.assertEqual(results.program_label({"command": ["./my_app", "--n", "4"]}), "my_app --n 4")
        self.assertEqual(results.program_label({"command": ["python3", "-c", "x" * 80]}),
                         "python3 -c " + "x" * 20 + "…")
        self.assertEqual(results.program_label(self.programs("cost-skipped")[0]), "torch_train_step.py 5")

    def test_a_skipped_program_keeps_its_reason(self):
        p = self.programs("cost-skipped")[0]
        self.assertIn("cannot run here (exit 77)", p["skipped"])
        self.assertIn("cannot import torch", p["skipped"])

    def test_start_up_from_the_programs_mark(self):
        p = self.programs("cost-command")[0]
        self.assertEqual(p["startup_source"], "the program's start-up mark: imports done")
        none = p["methods"][0]
        self.assertGreater(none["median_startup_ns"], 0)
        self.assertGreater(none["median_rest_ns"], 0)


def validate(data, schema, root, where="$"):
    """The part of JSON Schema our schemas use; returns a list of problems."""
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        return validate(data, root["$defs"][ref[len("#/$defs/"):]], root, where)
    problems = []
    types = schema.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        pytypes = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
        ok = any((t == "integer" and isinstance(data, int) and not isinstance(data, bool))
                 or (t == "number" and isinstance(data, (int, float)) and not isinstance(data, bool))
                 or (t in pytypes and isinstance(data, pytypes[t])) for t in types)
        if not ok:
            return [f"{where}: not {types}"]
    if "const" in schema and data != schema["const"]:
        problems.append(f"{where}: {data!r} is not {schema['const']!r}")
    if "enum" in schema and data not in schema["enum"]:
        problems.append(f"{where}: {data!r} not in {schema['enum']}")
    if isinstance(data, str) and len(data) < schema.get("minLength", 0):
        problems.append(f"{where}: too short")
    if isinstance(data, list):
        if len(data) < schema.get("minItems", 0) or len(data) > schema.get("maxItems", len(data)):
            problems.append(f"{where}: {len(data)} items")
        for i, item in enumerate(data):
            problems += validate(item, schema.get("items", {}), root, f"{where}[{i}]")
    if isinstance(data, dict):
        for key in schema.get("required", []):
            if key not in data:
                problems.append(f"{where}: no {key}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, value in data.items():
            if key in props:
                problems += validate(value, props[key], root, f"{where}.{key}")
            elif extra is False:
                problems.append(f"{where}: unexpected {key}")
            elif isinstance(extra, dict):
                problems += validate(value, extra, root, f"{where}.{key}")
    return problems


class PerDevice(unittest.TestCase):
    """Coverage per process and GPU as the harness wrote it: a rank that saw nothing is a row
    of its own, never hidden in a total."""

    def test_workload_rows_name_the_rank_that_fell_short(self):
        run = results.load_run(fixture("twogpu"))
        rows = results.devices.workload_rows(run.combos)
        short = [r for r in rows if r["short"]]
        # Short where the harness said so (per_device_short), and only there: a bucket of
        # calls of no device, or one the harness did not name, is not judged again here.
        self.assertEqual([(r["method"], r["process"], r["device"]) for r in short],
                         [("preload", "rank 1", "0000:1a:00.0")])
        names = results.devices.gpu_names([run.manifest])
        self.assertEqual(results.devices.device_label("0000:1a:00.0", names),
                         "GPU 1 (NVIDIA H100 80GB HBM3) 0000:1a:00.0")
        self.assertEqual(results.devices.device_label("no device", names), "no device")

    def test_attribution_says_which_methods_name_devices(self):
        rows = results.devices.attribution_rows(results.load_run(fixture("twogpu")).combos)
        self.assertEqual({(r["method"], r["named"]) for r in rows}, {("preload", True), ("strace", False)})

    def test_command_rows_against_the_reference(self):
        summary = results.load_run(fixture("twogpu-command")).summary
        ref, why, processes = results.devices.command_reference(summary)
        self.assertEqual(ref, "cupti")
        self.assertEqual(len(processes), 2)
        rows = results.devices.command_rows(summary)
        self.assertEqual([r["short"] for r in rows], [True, True, True])
        self.assertEqual(rows[2]["device"], results.devices.UNATTRIBUTED)


class Schemas(unittest.TestCase):
    """schema/ beside event.v1.schema.json describes what the harness writes and the package reads."""

    def check(self, name, paths):
        """Every file against the schema of its own version; the newest schema is the newest
        version the package reads."""
        stem = name.split(".")[0]
        versions = results.SUPPORTED_VERSIONS[stem + ".json"]
        schemas = {}
        for v in versions:
            with open(os.path.join(SOURCE, "schema", f"{stem}.v{v}.schema.json")) as f:
                schemas[v] = json.load(f)
            self.assertEqual(schemas[v]["properties"]["schema_version"]["const"], v)
        self.assertTrue(paths)
        for path in paths:
            with open(path) as f:
                data = json.load(f)
            schema = schemas[results.schema_version(data)]
            self.assertEqual(validate(data, schema, schema), [], path)

    def test_summary(self):
        paths = [p for p in glob.glob(os.path.join(FIXTURES, "*", "summary.json")) if "future" not in p]
        paths += glob.glob(os.path.join(SOURCE, "docs", "results", "*", "*", "summary.json"))
        paths += glob.glob(os.path.join(SOURCE, "tests", "fixtures", "results-h100", "*", "summary.json"))
        self.check("summary.v1.schema.json", paths)

    def test_bench_summary(self):
        paths = glob.glob(os.path.join(FIXTURES, "*", "bench_summary.json"))
        paths += glob.glob(os.path.join(SOURCE, "docs", "results", "*", "*", "bench_summary.json"))
        paths += glob.glob(os.path.join(SOURCE, "tests", "fixtures", "results-h100", "*", "bench_summary.json"))
        paths += glob.glob(os.path.join(SOURCE, "tests", "bench", "fixtures", "*", "bench_summary.json"))
        self.check("bench_summary.v1.schema.json", paths)

    def test_the_validator_finds_a_wrong_file(self):
        with open(os.path.join(SOURCE, "schema", "summary.v1.schema.json")) as f:
            schema = json.load(f)
        self.assertTrue(validate({"schema_version": 2, "run_id": "x", "counts": {}, "combos": [{}]}, schema, schema))


class Report(unittest.TestCase):
    """The report, drawn with Debian's python3 (matplotlib): the package's output as a reader sees it."""

    @classmethod
    def setUpClass(cls):
        python = "/usr/bin/python3"
        if subprocess.run([python, "-c", "import matplotlib"], stderr=subprocess.DEVNULL).returncode != 0:
            raise unittest.SkipTest("python3-matplotlib missing")
        cls.dir = tempfile.TemporaryDirectory()
        cls.html = os.path.join(cls.dir.name, "r.html")
        subprocess.run([python, os.path.join(SOURCE, "reports", "generate_report.py"), fixture("matrix"),
                        fixture("bench"), fixture("bench-v2"), fixture("command"), fixture("cost-workloads"),
                        fixture("cost-command"), fixture("cost-skipped"), fixture("twogpu"), fixture("twogpu-command"),
                        "-o", cls.html], check=True, stdout=subprocess.DEVNULL)
        with open(cls.html) as f:
            cls.text = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_never_an_empty_table(self):
        for body in re.findall(r"<tbody>(.*?)</tbody>", self.text, flags=re.S):
            self.assertIn("<tr>", body)

    def test_coverage_never_reads_above_all_of_the_reference(self):
        self.assertIn("100.0% (6657 of 6657)", self.text)
        self.assertNotIn("7140 of 6657", self.text)
        self.assertRegex(self.text, r"<td>483</td>")

    def test_reasons_name_libraries_and_keep_the_full_text_behind_a_disclosure(self):
        self.assertIn("driver calls from libcublas.so.13, libcublasLt.so.13 not observable: a private table", self.text)
        self.assertIn("<details class=\"reason\">", self.text)
        self.assertIn("/opt/x/site-packages/nvidia/cu13/lib/libcublas.so.13", self.text)

    def test_the_flags_as_written(self):
        self.assertIn("no measurable cost [-1.0, +90.0]", self.text)
        self.assertIn("<td>-1.0</td>", self.text)  # uprobe's unflagged difference is shown as measured

    def test_what_the_harness_derived_from_a_bench_run(self):
        # 4a: the verdict, the share and every delta outside; 4b: one estimator, the in-process
        # A/B labelled beside it; 4c: entry and return, with how; the calls not measured.
        self.assertRegex(self.text, r'<p id="bench-agreement">Run 20260102T000000Z-bench-v2 against '
                                    r'20260101T000000Z-bench-v1: <b class="(good|bad)">(PASS|FAIL)</b>')
        self.assertIn('id="bench-agreement-outside"', self.text)
        self.assertIn('id="cupti-estimators"', self.text)
        est = re.search(r'<table id="cupti-estimators"[^>]*>(.*?)</table>', self.text, flags=re.S).group(1)
        # References by name, the legacy keys of an older summary read as the names they stood for.
        self.assertIn("<td>cupti-bare</td>", est)
        self.assertIn("<td>nsys-all</td>", est)
        self.assertIn("cupti, in process: paused against live (another quantity)", self.text)
        self.assertIn("&lt;= 0.7x nsys: met", self.text)
        self.assertIn('id="uprobe-split"', self.text)
        self.assertIn("How: entry = uprobe-enter&#x27;s cost", self.text)
        self.assertIn("uprobe measured under loss", self.text)
        self.assertIn('id="bench-calls-skipped"', self.text)
        # 4d: each part with its interval, the floor and what lies above it; a part not measured named.
        parts = re.search(r'<table id="cost-parts"[^>]*>(.*?)</table>', self.text, flags=re.S).group(1)
        self.assertIn("<b>CUPTI&#x27;s dispatch</b> +300 [+290, +310]", parts)
        self.assertIn("+312 [+295, +330]<br>+108 above it", parts)
        self.assertIn("not measured: interposition (no paused halves, or no none)", parts)
        self.assertIn("<b>per record</b> 2 records a call: recording +30 [+28, +32] ns a record", parts)
        self.assertIn('<ul id="per-record-bars"><li>preload: &lt;= 50 ns a record met on 1 of 1 calls', self.text)

    def test_the_slowdown_of_the_cost_mode(self):
        self.assertIn('id="cost-chart"', self.text)
        table = re.search(r'<table id="cost-table"[^>]*>(.*?)</table>', self.text, flags=re.S).group(1)
        self.assertRegex(table, r"\d\.\d\d× \[\d+\.\d\d, \d+\.\d\d\]")
        self.assertIn("skipped: the program says it cannot run here (exit 77)", table)
        self.assertIn("not run: method cupti", table)
        self.assertIn("figures from marked runs", table)
        self.assertIn("torch_train_step.py", table)
        self.assertIn("start-up ends at the program&#x27;s start-up mark: imports done", self.text)

    def test_per_device_section_names_what_fell_short(self):
        self.assertIn('id="per-device-workloads"', self.text)
        self.assertIn('<b class="bad">0/18 (0.0%)</b>', self.text)
        self.assertIn("GPU 1 (NVIDIA H100 80GB HBM3) 0000:1a:00.0", self.text)
        self.assertIn('id="per-device-command-', self.text)
        self.assertIn('<b class="bad">0 of 6746 (0.0%)</b>', self.text)
        self.assertIn("the order of their first CUDA call", self.text)
        self.assertIn('id="device-attribution"', self.text)

    def test_fits_1280_pixels(self):
        self.assertIn("max-width:1240px", self.text)
        self.assertIn('class="wide"', self.text)


class Overview(unittest.TestCase):
    """The first screen reads what the harness wrote: its loss count, its shares rounded down,
    its statuses; a method blind to a layer never reads as a clean zero."""

    def test_the_slowdown_cell_prefers_the_per_step_figure_and_shows_its_anomaly(self):
        step = {"value": 0.9, "ci95": [0.85, 0.95], "rounds": 3, "steps": 540, "anomaly": "faster traced: warm-up?"}
        m = {"method": "shim", "ratio": {"value": 1.02, "pairs": 3, "ci95": None,
                                          "why_no_interval": "too few rounds for an interval: 3"},
             "steps": {"ratio": step}, "marks": []}
        cell = results.overview._slowdown_cell({"methods": [m], "startup_source": "mark"}, "shim")
        self.assertIn("0.90×/step [0.85–0.95]", cell["text"])
        self.assertIn("540 steady steps", cell["title"])
        self.assertIn("whole run 1.020×", cell["title"])
        self.assertIn("ANOMALY", str(cell))
        del m["steps"]
        cell = results.overview._slowdown_cell({"methods": [m]}, "shim")
        self.assertEqual(cell["text"].split()[0], "1.02×")
        self.assertIn("too few rounds for an interval", cell["title"])

    def test_loss_is_counted_as_the_harness_counts_it(self):
        # verdict.cpp lost_events: positive integers only; a flag is no count.
        self.assertEqual(results.overview.lost_events({"ring_full": 3, "truncated": True, "x": -1, "why": "t"}), 3)
        self.assertEqual(results.overview.lost_text({"ring_full": 3, "truncated": True}), "ring_full=3")

    def test_a_share_never_reads_whole_when_short(self):
        self.assertEqual(results.overview.share_text(319999, 320000), "99.9%, 1 of 320000 missing")
        self.assertEqual(results.overview.share_text(2, 3), "66.6%")
        self.assertEqual(results.overview.coverage_text(0.99996), "99.9%")

    def test_the_recorded_h100_matrix(self):
        runs = results.load_runs([os.path.join(SOURCE, "docs", "results", "h100", "matrix"), fixture("twogpu-command")])
        o = results.overview.build(runs)
        rows = o["rows"]
        # Static cudart hides the runtime layer from preload: named, never complete.
        self.assertEqual(rows["preload"]["workloads"]["status"], "not observed")
        self.assertIn("statically", rows["preload"]["workloads"]["title"])
        self.assertEqual(rows["preload"]["loss"]["status"], "part")
        self.assertEqual(rows["devhook-thread"]["loss"]["status"], "bad")
        self.assertEqual(rows["uprobe"]["workloads"]["text"], "complete · 19 programs")
        ddp = o["programs"][0]
        self.assertEqual(ddp["label"], "torch_ddp_step.py")
        cell = rows["preload"]["programs"][ddp["anchor"]]
        self.assertEqual(cell["text"], "partial 31.8% runtime · SHORT")
        self.assertIn("SHORT", cell["title"])

    def test_the_harness_decision_is_read_where_written(self):
        # summary.json `methods` (harness/out/method_table.cpp): each cell is what it says, even
        # where the combinations alone would read otherwise (they say preload's vecadd.shared
        # was complete and lost nothing).
        runs = results.load_runs([os.path.join(SOURCE, "docs", "results", "h100", "matrix"), fixture("twogpu-command")])
        matrix, command = runs
        matrix.summary["methods"] = [
            {"method": "preload", "command": None, "slowdown": [],
             "workloads": {"status": "failed", "counts": {"failed": 1}, "not_run": 0, "programs": [
                 {"program": "vecadd.shared", "status": "failed",
                  "reasons": ["failed: /opt/x/site-packages/lib/libfoo.so refused; exit 3"]}]},
             "lost": {"events": 7, "combinations": 1, "of": 1, "layers_unobserved": [],
                      "where": [{"program": "vecadd.shared", "events": 7, "counters": "ring_full=7"}]}},
            {"method": "nsys", "command": None, "lost": None, "slowdown": [],
             "workloads": {"status": "not run", "counts": {}, "programs": [], "not_run": 16,
                           "reason": "nsys is not installed"}}]
        command.summary["methods"] = [
            {"method": "preload", "workloads": None, "lost": None, "slowdown": [],
             "command": {"status": "failed", "reason": "the traced run exited 1"}},
            {"method": "cupti", "workloads": None, "lost": None, "slowdown": [],
             "command": {"status": "partial", "layer": "driver", "coverage": 1.0, "short": True, "reason": ""}}]
        with open(os.path.join(SOURCE, "schema", "summary.v1.schema.json")) as f:
            schema = json.load(f)
        for run in runs:
            self.assertEqual(validate(run.summary, schema, schema), [])
        o = results.overview.build(runs)
        rows = o["rows"]
        self.assertEqual(rows["preload"]["workloads"]["status"], "failed")
        self.assertEqual(rows["preload"]["workloads"]["text"], "failed · all 1")
        self.assertIn("libfoo.so refused", rows["preload"]["workloads"]["title"])
        self.assertNotIn("/opt/x/", rows["preload"]["workloads"]["title"])
        self.assertEqual(rows["preload"]["loss"]["text"], "7 in 1 of 1")
        # The loss table's figure per combination is the harness's too, where its counters say 0.
        vecadd = next(c for c in matrix.combos if c["method"] == "preload" and c["workload"] == "vecadd"
                      and c["linkage"] == "shared")
        self.assertEqual(results.overview.lost_events(vecadd.get("loss")), 0)
        self.assertEqual(results.overview.combo_lost(matrix, vecadd), "7 events")
        self.assertEqual(results.overview.combo_lost(command, next(c for c in command.combos if c["method"] == "preload")),
                         "")
        self.assertEqual(rows["nsys"]["workloads"]["text"], "not run")
        self.assertEqual(rows["nsys"]["workloads"]["title"], "nsys is not installed")
        self.assertIsNone(rows["uprobe"]["workloads"], "the field names no uprobe entry: nothing is judged here")
        anchor = o["programs"][0]["anchor"]
        self.assertEqual(rows["preload"]["programs"][anchor]["text"], "failed")
        self.assertEqual(rows["cupti"]["programs"][anchor]["text"], "complete in total, a process SHORT")
        self.assertEqual(rows["cupti"]["programs"][anchor]["status"], "partial")


if __name__ == "__main__":
    unittest.main()
