"""One screen per results folder, per process and GPU: for each workload and method, the
layers whose runs held several processes or GPUs and which (process, GPU) fell short (as the
harness named them); for a command, each method's coverage per process and GPU against CUPTI's;
the processes left running and whose they were; runs that failed or timed out, with their
first reason.
    usage: python3 -m cudatrace_results per-device-summary RESULTS_DIR [RESULTS_DIR ...]"""
import os
import sys

from .command import args_or_usage
from . import devices
from .load import SchemaError, load_result, load_runs

WIDTH = 118


def cut(text, width=WIDTH):
    return text if len(text) <= width else text[:width - 3] + "..."


def workload_lines(run, names):
    lines = []
    combos = [c for c in run.combos if c.get("workload")]
    by_combo = {}
    for r in devices.workload_rows(combos):
        by_combo.setdefault((r["workload"], r["linkage"], r["method"]), []).append(r)
    for c in combos:
        key = (c["workload"], c.get("linkage"), c["method"])
        status = "ok" if c.get("failed", 0) == 0 else "FAILED: " + (c.get("failures") or ["?"])[0]
        rows = by_combo.get(key, [])
        layers = sorted({r["layer"] for r in rows})
        short = [r for r in rows if r["short"]]
        verdict = "no per-device layer" if not rows else (
            f"{len(layers)} layer(s) complete on every process and GPU" if not short else
            "SHORT " + "; ".join(f'{r["layer"]} {r["process"]} on {devices.short_device_label(r["device"], names)} '
                                 f'{r["matched"]}/{r["expected"]}' for r in short[:3])
            + (f" (+{len(short) - 3})" if len(short) > 3 else ""))
        lines.append(cut(f'  {c["workload"]}.{c.get("linkage")} {c["method"]:<12} {status}: {verdict}'))
    return lines


def command_lines(run, names):
    ref, why, processes = devices.command_reference(run.summary)
    lines = [cut("  command: " + " ".join(run.summary.get("command_line", [])[-2:]))]
    for c in run.combos:
        if c.get("failed", 0):
            lines.append(cut(f'  {c["method"]:<12} FAILED: {(c.get("failures") or ["?"])[0]}'))
    if ref is None:
        lines.append("  per process and GPU: " + (why or "no reference"))
        return lines
    lines.append(cut("  reference (" + ref + "): " + "; ".join(
        f'{p["process"]} pids {",".join(map(str, p.get("pids", [])))}' for p in processes)))
    per_method = {}
    for r in devices.command_rows(run.summary):
        per_method.setdefault((r["method"], r["layer"]), []).append(r)
    for (method, layer), rows in sorted(per_method.items()):
        short = [r for r in rows if r["short"]]
        if not short:
            text = f"complete on {len(rows)} (process, GPU)"
        else:
            text = "SHORT " + "; ".join(
                f'{r["process"].split(" (")[0]} on {devices.short_device_label(r["device"], names)} '
                f'{r["matched"]}/{r["reference"]}' for r in short[:2])
        lines.append(cut(f"  {method:<12} {layer:<13} {text}"))
    return lines


def leftover_lines(folder):
    """The processes each run left behind, and whose they were (run.json)."""
    out = {}
    runs = os.path.join(folder, "runs")
    if not os.path.isdir(runs):
        return []
    for name in sorted(os.listdir(runs)):
        path = os.path.join(runs, name, "run.json")
        if not os.path.isfile(path):
            continue
        run = load_result(path)
        for left in run.get("left_running_detail") or []:
            out.setdefault(f'{left.get("name")} ({left.get("belongs")}: {left.get("why")})', []).append(name)
        if run.get("status") == "timeout":
            out.setdefault("TIMEOUT: " + str(run.get("detail", "")), []).append(name)
    return [cut(f"  left running: {what} in {len(where)} run(s), e.g. {where[0]}") for what, where in out.items()]


def main(argv=None):
    argv, status = args_or_usage(argv, None, __doc__)
    if argv is None:
        return status
    try:
        runs = load_runs(argv)
    except (SchemaError, OSError, ValueError) as e:
        print(f"per_device_summary: {e}")
        return 2
    names = devices.gpu_indexes([r.manifest for r in runs])
    for folder, run in zip(argv, runs):
        if not run.summary:
            continue
        print(f"== {run.run_id}")
        if not run.combos:
            skipped = run.summary.get("skipped") or [{}]
            print(cut(f'  nothing ran ({len(skipped)} skipped), e.g.: {skipped[0].get("reason", "?")}'))
            continue
        lines = command_lines(run, names) if run.verdict else workload_lines(run, names)
        lines += leftover_lines(folder)
        for line in lines:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
