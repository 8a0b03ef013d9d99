"""The per-call benchmark's derived tables (bench_summary.json version 2), read and worded by the
analysis package, never decided again (ctest: Analysis.Package)."""
import unittest

from test_results import command, fixture, results


class BenchVersion2(unittest.TestCase):
    """What the harness derived from a run's rows (version 2), read and worded, never decided here."""

    def setUp(self):
        self.bench = results.load_run(fixture("bench-v2")).bench

    def test_version_2_reads_and_version_1_has_none_of_it(self):
        self.assertEqual(results.schema_version(self.bench), 2)
        legacy = results.load_run(fixture("legacy")).bench
        self.assertEqual((results.estimators(legacy), results.uprobe_split(legacy), results.agreement(legacy),
                          results.calls_skipped(legacy)), ({}, {}, None, []))

    def test_the_agreement_as_the_harness_decided_it(self):
        a = results.agreement(self.bench)
        lines = results.agreement_lines(a)
        self.assertIn(f"{a['within']} of {a['compared']} deltas", lines[0])
        self.assertTrue(lines[0].endswith("PASS" if a["pass"] else "FAIL"))
        outside = [l for l in lines if l.startswith("  outside:")]
        self.assertEqual(len(outside), len(a["outside"]))
        self.assertTrue(outside and all("untraced call" in l for l in outside), lines)

    def test_targets_are_worded_as_written(self):
        calls = {(e["call"], e["linkage"]): e for e in results.estimators(self.bench)["calls"]}
        self.assertEqual(results.target_text(calls["cudaLaunchKernel", "shared"]["target"]), "<= 0.7x nsys: met")
        self.assertEqual(results.target_text(calls["cudaStreamSynchronize_idle", "shared"]["target"]),
                         "<= 1.2x cupti-bare: MISSED")
        self.assertIn("not judged: nsys has no difference",
                      results.target_text(calls["cuLaunchKernel", "shared"]["target"]))
        self.assertEqual(results.target_text(calls["cudaGetDevice", "shared"]["target"]),
                         "cupti <= nsys-all (Nsight Systems recording every CUDA API, as cupti does): met; "
                         "cupti <= cupti-bare + 100 ns: met")
        self.assertEqual(results.target_againsts(calls["cudaGetDevice", "shared"]["target"]), ["nsys-all", "cupti-bare"])

    def test_references_by_name_and_the_legacy_keys_read_alike(self):
        calls = {(e["call"], e["linkage"]): e for e in results.estimators(self.bench)["calls"]}
        method, cost, ab, refs = results.estimator_figures(calls["cudaGetDevice", "shared"])
        self.assertEqual((method, cost["delta_ns"], ab["delta_ns"]), ("cupti", 420.0, 410.0))
        self.assertEqual([(name, r["delta_ns"], round(x, 2)) for name, r, x in refs],
                         [("nsys-all", 430.0, 0.98), ("nsys", 380.0, 1.11), ("cupti-bare", 400.0, 1.05)])
        method, cost, ab, refs = results.estimator_figures(calls["cudaLaunchKernel", "shared"])
        self.assertEqual(method, "cupti")
        self.assertIn("nsys", [name for name, _, _ in refs], "an older summary's fixed keys, by the names they meant")

    def test_bars_are_worded_each_with_its_verdict(self):
        target = {"met": False, "bars": [
            {"against": "nsys", "bar": "cupti <= nsys", "met": None,
             "why_not_judged": "nsys has no difference to none for this call"},
            {"against": "cupti-bare", "bar": "cupti <= cupti-bare + 100 ns", "met": False, "at_most_ns": 600}]}
        self.assertEqual(results.target_text(target), "cupti <= nsys: not judged: nsys has no difference to none "
                         "for this call; cupti <= cupti-bare + 100 ns: MISSED")
        self.assertEqual(results.target_againsts(target), ["nsys", "cupti-bare"])
        target["bars"][1]["settled"] = False
        self.assertTrue(results.target_text(target).endswith("cupti <= cupti-bare + 100 ns: MISSED (not settled)"))
        self.assertEqual(results.target_againsts({"against": "nsys", "at_most": 0.7, "met": True}), ["nsys"])
        unlabelled = {"met": None, "bars": [], "why_not_judged": "the call's kind is not in this summary"}
        self.assertEqual(results.target_text(unlabelled), "not judged: the call's kind is not in this summary")
        self.assertEqual(results.target_text({"met": True}), "not judged: no bar in this summary")

    def test_bench_outcome_prints_4a_4b_4c(self):
        r = command("bench-outcome", fixture("bench-v2"))
        self.assertEqual(r.returncode, 0, r.stdout)
        for text in ("4a. agreement", "agreement with 20260101T000000Z-bench-v1", "4b. cupti", "<= 0.7x nsys: met",
                     "4c. uprobe", "how: entry = uprobe-enter",
                     "4d. where the cost goes, part by part", "whole +420 [+400, +440], +108 above the floor",
                     "not measured: interposition", "ncclAllReduce_4KiB_2GPUs: this process sees 1 GPU",
                     "per record: 2 records a call: recording +30 [+28, +32] ns a record (the whole +45); "
                     "bar <= 50 ns a record: met",
                     "preload: <= 50 ns a record met on 1 of 1 calls (0 missed, 0 not judged)"):
            self.assertIn(text, r.stdout)
        self.assertRegex(r.stdout, r"\n  uprobe +6\.5 s ")
        r = command("bench-outcome", fixture("legacy"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("not checked: this run was not made with --agree-with", r.stdout)
