"""What a `harness --bench` run decided, as text: its agreement with the run it was checked
against (--agree-with), cupti against Nsight Systems and the empty CUPTI subscriber, uprobe's
entry and return probes, where each method's cost goes, the calls it could not make,
and where its time went. Every figure and verdict is the harness's (bench_summary.json); nothing is decided here.
    usage: python3 -m cudatrace_results bench-outcome RUN   (a results folder or its bench_summary.json)
Exit status 0; 2 when the run cannot be read."""
import collections
import os
import sys

from .command import args_or_usage
from .bench import (agreement, agreement_lines, calls_skipped, cost_parts, estimator_figures, estimators, part_text,
                    per_record_bar_lines,
                    per_record_text, target_text,
                    uprobe_split)
from .load import SchemaError, load_result, schema_version


def ns(block, key="delta_ns"):
    return f"{block[key]:+.0f}" if block else "-"


def ratio(x):
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


def estimator_lines(bench):
    est = estimators(bench)
    if not est.get("calls"):
        return [f"not made: {est.get('why', 'this summary predates it')}"]
    lines = []
    for e in est["calls"]:
        method, cost, ab, refs = estimator_figures(e)
        beside = "".join(f"  {name} {ns(r)} ({ratio(x)})" for name, r, x in refs)
        lines.append(f"{method:7} {e['call']:30} {e['linkage']:7} {e.get('call_kind') or '?':7} {ns(cost):>8}{beside}"
                     f"  in process {ns(ab)}  | {target_text(e['target'])}")
    unsettled = (f"; {est['unsettled']} of the judged not settled by the run's intervals"
                 if "unsettled" in est else "")
    lines.append(f"targets: {est['met']} met, {est['missed']} missed, {est['not_judged']} not judged{unsettled}")
    return lines


def uprobe_lines(bench):
    split = uprobe_split(bench)
    if not split.get("calls"):
        if cost_parts(bench).get("calls"):  # the harness takes uprobe apart with the other methods now
            return ["in 4d: uprobe's entry and return probes are parts of its cost (the registry's cost split)"]
        return [f"not made: {split.get('why', 'this summary predates it')}"]
    lines = [f"{'call':30} {'cudart':7} {'kind':10} {'entry':>8} {'return':>8} {'whole':>8} {'empty':>8}"]
    for e in split["calls"]:
        lines.append(f"{e['call']:30} {e['linkage']:7} {e['kind']:10} {ns(e['entry'], 'ns'):>8} "
                     f"{ns(e['return'], 'ns'):>8} {ns(e['whole'], 'ns'):>8} {ns(e.get('empty'), 'ns'):>8}"
                     + "".join(f"  {c}" for c in e.get("caveats", [])))
    lines.append(f"how: {split['how']}")
    return lines


def cost_part_lines(bench):
    parts = cost_parts(bench)
    if not parts.get("calls"):
        return [f"not made: {parts.get('why', 'this summary predates it')}"]
    lines = []
    for e in parts["calls"]:
        floor = f", {e['above_floor_ns']:+.0f} above the floor {part_text(e['floor'])}" if "floor" in e else ""
        lines.append(f"{e['method']:8} {e['call']:30} {e['linkage']:7} whole {part_text(e['whole'])}{floor}")
        for p in e["parts"]:
            lines.append(f"    {p['part']:20} {part_text(p):>22}  {p['kind']:10} {p['what']}")
        if per_record_text(e):
            lines.append(f"    per record: {per_record_text(e)}")
        for m in e.get("not_measured", []):
            lines.append(f"    not measured: {m}")
        for c in e.get("caveats", []):
            lines.append(f"    {c}")
    lines += per_record_bar_lines(bench)
    lines.append(f"how: {parts['how']}")
    return lines


def time_lines(bench):
    seconds = collections.defaultdict(list)
    for p in bench.get("process_seconds", []):
        seconds[p["method"]].append(p["seconds"])
    if not seconds:
        return []
    total = sum(sum(v) for v in seconds.values())
    lines = [f"\ntime in benchmark processes: {total:.0f} s; per method (all rounds and linkages, longest first):"]
    for method, v in sorted(seconds.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"  {method:16} {sum(v):7.1f} s  ({len(v)} process{'es' if len(v) != 1 else ''}, "
                     f"mean {sum(v) / len(v):.1f} s, longest {max(v):.1f} s)")
    return lines


def main(argv=None):
    argv, status = args_or_usage(argv, 1, __doc__)
    if argv is None:
        return status
    path = os.path.join(argv[0], "bench_summary.json") if os.path.isdir(argv[0]) else argv[0]
    try:
        bench = load_result(path)
    except (SchemaError, OSError, ValueError) as e:
        print(f"bench_outcome: {e}")
        return 2
    print(f"bench run {bench.get('run_id', '?')} (schema_version {schema_version(bench)}, "
          f"{bench.get('repetitions', '?')} rounds)")
    print("\n4a. agreement")
    a = agreement(bench)
    for line in agreement_lines(a) if a else ["not checked: this run was not made with --agree-with"]:
        print(line)
    print("\n4b. cupti against nsys and the empty subscriber (cupti-bare): difference to none between processes, ns")
    print("\n".join(estimator_lines(bench)))
    print("\n4c. uprobe's cost, entry and return probes, ns per call")
    print("\n".join(uprobe_lines(bench)))
    print("\n4d. where the cost goes, part by part, ns per call")
    print("\n".join(cost_part_lines(bench)))
    skipped = calls_skipped(bench)
    if skipped:
        print("\ncalls not measured")
        for s in skipped:
            n = len(s["processes"])
            print(f"  {s['call']}: {s['reason']} ({n} process{'es' if n != 1 else ''})")
    for line in time_lines(bench):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
