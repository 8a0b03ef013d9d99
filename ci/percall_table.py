#!/usr/bin/env python3
"""Summarises per-call benchmark JSONs written by bench/percall run by hand (one file per
process, named LABEL.rROUND.json): per call and label, the median over rounds of the
per-call median, its difference to the label `none`, the in-process A/B (where the tracer
paused) and, where an `nsys` label ran, the ratio of each difference to nsys's.
    usage: ci/percall_table.py DIR"""
import os
import statistics
import sys

# The analysis package: beside this script where installed (share/cudatrace/report/), in
# analysis/ of the source tree otherwise.
_here = os.path.dirname(os.path.abspath(__file__))
for _p in (_here, os.path.join(_here, "..", "analysis")):
    if os.path.isdir(os.path.join(_p, "cudatrace_results")):
        sys.path.insert(0, _p)
        break
import cudatrace_results as results  # noqa: E402

labels, medians, ab, control = results.load_percall_folder(
    sys.argv[1], warn=lambda name, e: print(f"{name}: unreadable ({e})", file=sys.stderr))

calls = sorted({c for c, _ in medians})
print(f"{'call':28} {'label':16} {'rounds':>6} {'median':>9} {'delta':>9} {'range of deltas':>20} {'/nsys':>6} {'in-process (control)':>22}")
for call in calls:
    base = medians.get((call, "none"))
    nsys = medians.get((call, "nsys"))
    nsys_delta = statistics.median(nsys) - statistics.median(base) if base and nsys else None
    for label in labels:
        v = medians.get((call, label))
        if not v:
            continue
        line = f"{call:28} {label:16} {len(v):6} {statistics.median(v):9.1f}"
        if base and label != "none":
            d = statistics.median(v) - statistics.median(base)
            per_round = [x - y for x, y in zip(v, base)]
            line += f" {d:+9.1f} {'[%+.0f, %+.0f]' % (min(per_round), max(per_round)):>20}"
            line += f" {d / nsys_delta:6.2f}" if nsys_delta and nsys_delta > 0 and label != "nsys" else " " * 7
        else:
            line += " " * 37
        if ab.get((call, label)):
            line += f" {statistics.median(ab[call, label]):+10.1f} ({statistics.median(control[call, label]):+.1f})"
        print(line)
