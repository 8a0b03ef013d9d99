#!/usr/bin/env python3
"""Writes the measured-results page (Markdown) from recorded harness results folders.

usage: make_results_doc.py RESULTS_DIR [RESULTS_DIR ...] -o docs/results/GPU.md

Each RESULTS_DIR is a results/<run-id>/ folder as the harness wrote it: a matrix run
(summary.json, manifest.json), a per-call benchmark (bench_summary.json, manifest.json) or
a command run (summary.json with a verdict). Every figure on the page comes from these
files, and the page says which run (GPU, driver, CUDA, kernel, harness revision, command)
each table is from: re-run the commands it names, pass the new folders, and every table
is refreshed. Standard library only; the same inputs always give the same page.
"""
import argparse
import os
import sys

# The analysis package: analysis/ of the source tree, or beside this script.
_here = os.path.dirname(os.path.abspath(__file__))
for _p in (_here, os.path.join(_here, "..", "analysis")):
    if os.path.isdir(os.path.join(_p, "cudatrace_results")):
        sys.path.insert(0, _p)
        break
import cudatrace_results as results  # noqa: E402

LAYERS = ["runtime", "driver", "gpu-activity", "device", "syscall"]


def command_text(argv):
    """The harness's command line as a user would type it: `harness ...`, without --out."""
    words, skip = ["harness"], False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            words.append(arg)
    return " ".join(words)


def provenance(manifest, summary_or_bench):
    env = (manifest or {}).get("environment", {})
    gpu = env.get("gpu", {})
    devices = gpu.get("devices") or [{}]
    host = env.get("host", {})
    cuda = env.get("cuda", {})
    harness = env.get("harness", {})
    command = (manifest or {}).get("command_line") or (summary_or_bench or {}).get("command_line") or []
    rows = [
        ("GPU", devices[0].get("name", "none")),
        ("driver", gpu.get("driver_version", "-")),
        ("CUDA toolkit (build)", cuda.get("toolkit_version_at_build", "-")),
        ("kernel", host.get("kernel", "-")),
        ("OS", host.get("os", "-")),
        ("CPU", f'{host.get("cpu", "-")} ({host.get("cpus", "-")} CPUs)'),
        ("harness revision", harness.get("revision", "-")),
        ("started", (manifest or {}).get("started", "-")),
        ("command", f"`{command_text(command)}`" if command else "-"),
    ]
    return "\n".join(["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows])


def layer_cell(combo, layer):
    for u in combo.get("unobserved", []):
        if u["layer"] == layer:
            return "**NOT OBSERVED**"
    scores = {s["layer"]: s for s in combo.get("layers", [])}
    s = scores.get(layer)
    if not s or not s.get("expected"):
        return ""
    partly = any(p["layer"] == layer for p in combo.get("partly_observed", []))
    # As the harness words a share: rounded down, so a shortfall never reads 100.0%.
    cell = results.overview.share_text(s["matched"], s["expected"])
    return cell + (" (part)" if partly else "")


def loss_cell(combo):
    # Counted as the harness counts a run's loss (positive integer counters; a flag is no count).
    return str(results.overview.lost_events(combo.get("loss")))


def matrix_section(folder, summary, manifest):
    combos = summary.get("combos", [])
    if not combos:
        return ""
    used = [l for l in LAYERS if any(layer_cell(c, l) for c in combos)]
    out = [f"## Completeness: {summary.get('counts', {}).get('runs', len(combos))} runs", "",
           provenance(manifest, summary), "",
           "Per workload, linkage and method: the share of each layer's expected calls matched (summed over",
           "repetitions), **NOT OBSERVED** where the method could not see a layer it exists to see",
           "(the reasons are in the run's summary.json), \"(part)\" where it saw only part of it by",
           "design, loss counters summed, and wall time against `none`.", "",
           "| workload | linkage | method | runs ok | " + " | ".join(used) + " | lost | wall × none |",
           "|---|---|---|---|" + "---|" * len(used) + "---|---|"]
    for c in combos:
        ratio = c.get("wall_ratio_vs_none")
        out.append(f'| {c["workload"]} | {c["linkage"]} | {c["method"]} | {c["ok"]}/{c["reps"]} | ' +
                   " | ".join(layer_cell(c, l) for l in used) +
                   f' | {loss_cell(c)} | {"" if ratio is None else f"{ratio:.2f}"} |')
    reasons = {}
    for c in combos:
        for u in c.get("unobserved", []) + c.get("partly_observed", []):
            reasons.setdefault((c["method"], u["layer"], u["reason"]), []).append(f'{c["workload"]}.{c["linkage"]}')
    if reasons:
        out += ["", "Layers not observed, or observed in part, and why:", ""]
        for (method, layer, reason), where in sorted(reasons.items()):
            out.append(f"- {method} / {layer} ({', '.join(sorted(where))}): {reason}")
    return "\n".join(out)


def verdict_section(summary, manifest):
    v = summary.get("verdict")
    if not v:
        return ""
    out = ["## A command: what each method saw", "", provenance(manifest, summary), "",
           "| method | layer | status | coverage of the reference | seen | reference | only it saw |",
           "|---|---|---|---|---|---|---|"]
    for row in v.get("coverage", []):
        cov = row.get("coverage")
        out.append(f'| {row["method"]} | {row["layer"]} | {row.get("status", "")} | '
                   f'{"" if cov is None else f"{100 * cov:.1f}%"} | {row.get("seen", "")} | '
                   f'{row.get("reference", "")} | {row.get("only_it_saw", "")} |')
    return "\n".join(out)


def ns(x):
    return "" if x is None else f"{x:+.0f}"


def bench_section(bench, manifest):
    rows = bench.get("rows", [])
    if not rows:
        return ""
    out = ["## Per-call overhead", "", provenance(manifest, bench), "",
           f'Median ns per call over {bench.get("repetitions", "?")} rounds; Δ to `none` with its bootstrap 95% '
           "interval; the in-process A/B (the method paused and live in one process) where the method has one.",
           "A Δ whose interval reaches below zero is no measurable cost, not a speed-up.", "",
           "| call | linkage | method | median ns | Δ ns | 95% interval | ratio | in-process A/B ns |",
           "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["call"], r["linkage"], r["method"] != "none", r["method"])):
        ci = r.get("delta_ci95_ns")
        ab = r.get("in_process_delta_ns")
        ab_ci = r.get("in_process_delta_ci95_ns")
        ratio = r.get("ratio")
        delta = ns(r.get("delta_ns"))
        # "No measurable cost" is the harness's decision (harness/stats/bench_stats.h), as written.
        if "delta_ns" in r and results.between_is_noise(r):
            delta, ratio = "no measurable cost", None
        interval = "" if not ci else f"[{ci[0]:+.0f}, {ci[1]:+.0f}]"
        in_process = "" if ab is None else f"{ab:+.1f}" + (f" [{ab_ci[0]:+.1f}, {ab_ci[1]:+.1f}]" if ab_ci else "")
        if ab is not None and results.in_process_is_noise(r):
            in_process = "no measurable cost" + (f" [{ab_ci[0]:+.1f}, {ab_ci[1]:+.1f}]" if ab_ci else "")
        method = r["method"] + "".join(f" (without {part}its {l} layer)"
                                       for key, part in (("layers_not_covered", ""), ("layers_partly_covered", "part of "))
                                       for l in sorted(r.get(key, {})))
        out.append(f'| {r["call"]} | {r["linkage"]} | {method} | {r["median_ns"]:.0f} | '
                   f'{delta} | {interval} | {"" if ratio is None else f"{ratio:.2f}"} | {in_process} |')
    spread = sorted(bench.get("untraced_between_processes", []), key=lambda u: -u["max_over_min"])
    if spread:
        out += ["", "How far each call moved between this run's processes with nothing recording (`none`'s "
                "processes and every pausing method's paused halves): every cost of that call moves with it.", "",
                "| call | linkage | processes | min ns | median ns | max ns | max / min |", "|---|---|---|---|---|---|---|"]
        out += [f'| {u["call"]} | {u["linkage"]} | {u["processes"]} | {u["min_ns"]:.0f} | {u["median_ns"]:.0f} | '
                f'{u["max_ns"]:.0f} | {u["max_over_min"]:.2f} |' for u in spread]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    # Completeness first, then commands, then per-call overhead, whatever the folders' order.
    sections, title = {"matrix": [], "verdict": [], "bench": []}, a.title
    for folder in a.folders:
        try:
            run = results.load_run(folder)
        except results.SchemaError as e:
            sys.exit(f"make_results_doc: {e}")
        manifest, summary, bench = run.manifest, run.summary, run.bench
        if title is None and manifest:
            devices = manifest.get("environment", {}).get("gpu", {}).get("devices") or [{}]
            title = devices[0].get("name")
        if summary and summary.get("verdict"):
            sections["verdict"].append(verdict_section(summary, manifest))
        elif summary:
            sections["matrix"].append(matrix_section(folder, summary, manifest))
        if bench:
            sections["bench"].append(bench_section(bench, manifest))
    inputs = ", ".join(f"`{os.path.relpath(f, os.path.dirname(os.path.abspath(a.output)))}`" for f in a.folders)
    head = [f"# Measured on {title or 'this machine'}", "",
            f"Generated by `docs/make_results_doc.py` from {inputs}: do not edit by hand. To measure your",
            "own machine, run the commands each table names and pass the results folders to the script.", ""]
    ordered = sections["matrix"] + sections["verdict"] + sections["bench"]
    text = "\n".join(head) + "\n" + "\n\n".join(s for s in ordered if s) + "\n"
    with open(a.output, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
