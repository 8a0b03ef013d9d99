#!/usr/bin/env python3
"""Writes one self-contained HTML report (charts embedded) from harness results folders.

usage: generate_report.py RESULTS_DIR [RESULTS_DIR ...] [-o reports/overhead.html]

Each RESULTS_DIR is a results/<run-id>/ folder: a matrix run (summary.json) and/or a
per-call benchmark run (bench_summary.json); manifest.json gives the environment. They are
read by the analysis package (cudatrace_results), which refuses a version it does not know.
Needs Debian's python3-matplotlib. The sections are drawn by the report_*.py modules beside
this script: report_page (tables, folds, style), report_first_screen, report_coverage,
report_per_call, report_cost.
"""
import argparse
import os
import sys

# The analysis package: beside this script where installed (share/cudatrace/report/), in
# analysis/ of the source tree otherwise.
_here = os.path.dirname(os.path.abspath(__file__))
for _p in (_here, os.path.join(_here, "..", "analysis")):
    if os.path.isdir(os.path.join(_p, "cudatrace_results")):
        sys.path.insert(0, _p)
        break
import cudatrace_results as results  # noqa: E402
from report_page import SCRIPT, STYLE, esc, section, table  # noqa: E402
from report_first_screen import overview_section  # noqa: E402
from report_coverage import (completeness_section, unobserved_table, command_section, per_device_section,  # noqa: E402
                             per_device_command, fidelity_table)
from report_per_call import per_call_section, per_call_cost_chart, untraced_section, bench_derived_sections  # noqa: E402
from report_cost import cost_section, slowdown_section, loss_table, results_changed_section  # noqa: E402


def skipped_section(summaries):
    by_reason = {}
    for s in summaries:
        for k in s.get("skipped", []):
            by_reason.setdefault(k["reason"], []).append(
                ".".join(x for x in (k.get("workload"), k.get("linkage"), k.get("method")) if x))
    if not by_reason:
        return '<p id="skipped">Nothing was skipped.</p>'
    items = "".join(f"<li><b>{esc(r)}</b>: {esc(', '.join(sorted(set(w))))}</li>" for r, w in sorted(by_reason.items()))
    return f'<ul id="skipped">{items}</ul>'


def environment_section(manifests):
    env = next((m["environment"] for m in manifests if m and "environment" in m), None)
    if not env:
        return '<p id="environment">No manifest.json found.</p>'
    gpu = env.get("gpu", {})
    devices = ", ".join(f'{d["name"]} (cc {d["compute_capability"]}, {d["multiprocessors"]} SMs)' for d in gpu.get("devices", []))
    host = env.get("host", {})
    rows = [["GPU", esc(devices or gpu.get("reason", "none"))],
            ["driver", esc(f'{gpu.get("driver_version", "?")} (CUDA {gpu.get("driver_cuda_version", "?")})')],
            ["CUDA toolkit (build)", esc(env.get("cuda", {}).get("toolkit_version_at_build", "?"))],
            ["kernel", esc(host.get("kernel", "?"))], ["OS", esc(host.get("os", "?"))],
            ["CPU", esc(f'{host.get("cpu", "?")} x {host.get("cpus", "?")}')],
            ["harness", esc(f'{env.get("harness", {}).get("version", "?")} ({env.get("harness", {}).get("revision", "?")})')]]
    return table(["", ""], rows, "environment")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="results/<run-id> folders")
    ap.add_argument("-o", "--output", default="reports/overhead.html")
    args = ap.parse_args()
    try:
        runs = results.load_runs(args.results)
    except results.SchemaError as e:
        sys.exit(f"generate_report: {e}")
    summaries = [r.summary for r in runs if r.summary]
    benches = [r.bench for r in runs if r.bench]
    manifests = [r.manifest for r in runs]
    ids = [r.run_id for r in runs]
    combos = [c for r in runs for c in r.combos]
    bench_rows = [row for r in runs for row in r.bench_rows()]
    chart, per_call = per_call_section(bench_rows)
    failed = sum(s["counts"]["failed"] for s in summaries)
    o = results.overview.build(runs)
    names = results.devices.gpu_names(manifests)
    by_id = {r.run_id: r for r in runs}
    program_sections = []
    for n, p in enumerate(o["programs"], 1):
        body = [f'<p>Command: <code>{esc(p["command"])}</code></p>']
        for rid in p["runs"]:
            run = by_id.get(rid)
            if run and run.verdict:
                body.append(command_section(run.summary, n))
                body.append(per_device_command(run, names, n))
        if p["cost"]:
            body.append('<p>Its slowdown: see <a href="#sec-cost">Slowdown per program</a>.</p>')
        program_sections.append(section(p["anchor"], f'Program: {p["label"]}', "\n".join(body)))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>CUDA tracing methods: what each one sees, and what it costs</title>
{STYLE}</head><body>
<h1>CUDA tracing methods: what each one sees, and what it costs</h1>
{overview_section(o)}
{section("sec-completeness", "Workloads: what each method saw", completeness_section(combos) + unobserved_table(combos) + fidelity_table(combos))}
{"".join(program_sections)}
{section("sec-per-call", "Per-call cost", per_call_cost_chart(runs) + chart + per_call + untraced_section(benches) + bench_derived_sections(benches))}
{section("sec-cost", "Slowdown per program", cost_section(runs))}
{section("sec-per-device", "Workloads per process and GPU", per_device_section(runs))}
{section("sec-loss", "Loss", "<p>Every counter a tracer reports about events it could not keep; 0 is the only good value.</p>" + loss_table(runs))}
{section("sec-results-changed", "Results changed by tracing", "<p>A traced run whose result (<code>--result</code>) differs from the untraced run's: tracing changed what the program computed.</p>" + results_changed_section(combos))}
{section("sec-slowdown-matrix", "Whole-workload slowdown (matrix repetitions)", "<p>From the repetitions of each combination, run one after another (the cost mode pairs interleaved rounds instead).</p>" + slowdown_section(combos))}
{section("sec-skipped", "Skipped, and why", skipped_section(summaries + benches))}
{section("sec-environment", "Environment", f"<p>Results folders: {esc(', '.join(ids))}. {failed} failed run(s).</p>" + environment_section(manifests))}
{SCRIPT}
</body></html>
"""
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(page)
    print(f"generate_report: wrote {args.output}")


if __name__ == "__main__":
    main()
