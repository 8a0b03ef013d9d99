#!/usr/bin/env python3
"""What a `harness --bench` run decided, as text: its agreement with the run it was checked
against (--agree-with), cupti against Nsight Systems and the empty CUPTI subscriber, uprobe's
entry and return probes, the calls it could not make, and where its time went. Every
figure and verdict is the harness's (bench_summary.json); nothing is decided here.
    usage: ci/bench_outcome.py RUN   (a results folder or its bench_summary.json)
Exit status 0; 2 when the run cannot be read."""
import collections
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


def ns(block, key="delta_ns"):
    return f"{block[key]:+.0f}" if block else "-"


def ratio(x):
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
path = sys.argv[1]
path = os.path.join(path, "bench_summary.json") if os.path.isdir(path) else path
try:
    bench = results.load_result(path)
except (results.SchemaError, OSError, ValueError) as e:
    print(f"bench_outcome: {e}")
    sys.exit(2)
print(f"bench run {bench.get('run_id', '?')} (schema_version {results.schema_version(bench)}, "
      f"{bench.get('repetitions', '?')} rounds)")

print("\n4a. agreement")
a = results.agreement(bench)
if a:
    for line in results.agreement_lines(a):
        print(line)
else:
    print("not checked: this run was not made with --agree-with")

print("\n4b. cupti against nsys and the empty subscriber (cupti-bare): difference to none between processes, ns")
est = results.estimators(bench)
if est.get("calls"):
    print(f"{'call':30} {'cudart':7} {'kind':7} {'cupti':>8} {'nsys':>8} {'bare':>8} {'/nsys':>7} {'/bare':>7} "
          f"{'cupti A/B':>10}  target")
    for e in est["calls"]:
        ab = e.get("cupti_in_process")
        print(f"{e['call']:30} {e['linkage']:7} {e.get('call_kind') or '?':7} {ns(e['cupti']):>8} "
              f"{ns(e.get('nsys')):>8} {ns(e.get('empty_subscriber')):>8} {ratio(e.get('cupti_over_nsys')):>7} "
              f"{ratio(e.get('cupti_over_empty_subscriber')):>7} {ns(ab):>10}  {results.target_text(e['target'])}")
    print(f"targets: {est['met']} met, {est['missed']} missed, {est['not_judged']} not judged")
else:
    print(f"not made: {est.get('why', 'this summary predates it')}")

print("\n4c. uprobe's cost, entry and return probes, ns per call")
split = results.uprobe_split(bench)
if split.get("calls"):
    print(f"{'call':30} {'cudart':7} {'kind':10} {'entry':>8} {'return':>8} {'whole':>8} {'empty':>8}")
    for e in split["calls"]:
        print(f"{e['call']:30} {e['linkage']:7} {e['kind']:10} {ns(e['entry'], 'ns'):>8} {ns(e['return'], 'ns'):>8} "
              f"{ns(e['whole'], 'ns'):>8} {ns(e.get('empty'), 'ns'):>8}" + "".join(f"  {c}" for c in e.get("caveats", [])))
    print(f"how: {split['how']}")
else:
    print(f"not made: {split.get('why', 'this summary predates it')}")

skipped = results.calls_skipped(bench)
if skipped:
    print("\ncalls not measured")
    for s in skipped:
        n = len(s["processes"])
        print(f"  {s['call']}: {s['reason']} ({n} process{'es' if n != 1 else ''})")

seconds = collections.defaultdict(list)
for p in bench.get("process_seconds", []):
    seconds[p["method"]].append(p["seconds"])
if seconds:
    total = sum(sum(v) for v in seconds.values())
    print(f"\ntime in benchmark processes: {total:.0f} s; per method (all rounds and linkages, longest first):")
    for method, v in sorted(seconds.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {method:16} {sum(v):7.1f} s  ({len(v)} process{'es' if len(v) != 1 else ''}, "
              f"mean {sum(v) / len(v):.1f} s, longest {max(v):.1f} s)")
