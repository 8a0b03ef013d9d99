#!/usr/bin/env python3
"""Do two `harness --bench` runs agree? The bar of issue 19: every per-call cost above
100 ns agrees within 10%, or within the two runs' 95% intervals where those are narrower.
The cost compared is the in-process A/B where the method pauses in process (the figure
the report leads with), else the difference to `none` between processes. Two runs that
both read "no measurable cost" (bench_stats: noise, shown as such) agree on it; one
that reads it beside a measured cost does not. Whether a cost is "no measurable cost" is
the harness's decision (harness/bench_stats.h), read from the file, never made here.

Beside the verdict, for every cost that disagrees: whether the call itself, untraced,
moved between the two runs (the median of none's processes and the method's paused
halves, harness/bench.cpp), which is the machine moving rather than the tracer; and how
many costs are at least consistent with their own intervals (the intervals overlap).
    usage: ci/bench_agreement.py RUN_A/bench_summary.json RUN_B/bench_summary.json
Exit status 0 when every compared cost agrees, 1 otherwise, 2 when not given two runs."""
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


def costs(path):
    """(call, linkage, method) -> (kind, value, ci, noise, untraced), noise as the harness wrote it."""
    try:
        bench = results.load_result(path)
    except results.SchemaError as e:
        sys.exit(f"bench_agreement: {e}")
    return {k: tuple(c) for k, c in results.bench.costs(bench).items()}


if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
a, b = costs(sys.argv[1]), costs(sys.argv[2])
bad = compared = overlapping = moved = 0
print(f"{'call':28} {'cudart':7} {'method':13} {'kind':10} {'run A':>9} {'run B':>9} {'diff':>7}  verdict")
for key in sorted(set(a) & set(b)):
    kind, va, ia, noise_a, base_a = a[key]
    _, vb, ib, noise_b, base_b = b[key]
    if max(va, vb) <= 100:
        continue
    compared += 1
    rel = abs(va - vb) / max(abs(va), abs(vb))
    overlap = ia[0] <= ib[1] and ib[0] <= ia[1]
    overlapping += overlap or (noise_a and noise_b)
    narrow = max(ia[1] - ia[0], ib[1] - ib[0]) < 0.1 * max(abs(va), abs(vb))
    # What the tables show must agree: "no measurable cost" beside a cost does not, however
    # close the numbers behind them.
    ok = (noise_a and noise_b) or (noise_a == noise_b and rel <= 0.10 and (overlap or not narrow))
    bad += not ok
    why = "  one run reads no measurable cost" if noise_a != noise_b else ""
    if not ok and base_a and base_b:
        base_rel = abs(base_a - base_b) / max(base_a, base_b)
        if base_rel > 0.10:
            moved += 1
            why = f"  untraced call moved too: {base_a:.0f} -> {base_b:.0f} ns"
    print(f"{key[0]:28} {key[1]:7} {key[2]:13} {kind:10} {va:+9.1f} {vb:+9.1f} {rel:6.1%}  "
          f"{'ok' if ok else 'DISAGREE'}{why}")
print(f"{compared - bad} of {compared} costs above 100 ns agree")
print(f"{overlapping} of {compared} are consistent with their own 95% intervals (the two intervals overlap)")
if bad:
    print(f"{moved} of the {bad} that disagree: the call itself, untraced, moved by more than 10% between the runs")
sys.exit(1 if bad else 0)
