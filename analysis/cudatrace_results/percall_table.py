"""Summarises per-call benchmark JSONs written by bench/percall run by hand (one file per
process, named LABEL.rROUND.json; ci/gpu-check.sh cupti-split): per call and label, the median
over rounds of the per-call median, its difference to the label `none`, the in-process A/B
(where the tracer paused) and, where an `nsys` label ran, the ratio of each difference to nsys's.
No harness ran these processes, so there is no verdict to read: the figures are medians and
differences of the raw files, and nothing here says whether a cost is measurable (that rule is
harness/stats/bench_stats.h's, for `harness --bench`).
    usage: python3 -m cudatrace_results percall-table DIR"""
import statistics
import sys

from .command import args_or_usage
from .percall import load_percall_folder


def table_lines(labels, medians, ab, control):
    calls = sorted({c for c, _ in medians})
    lines = [f"{'call':28} {'label':16} {'rounds':>6} {'median':>9} {'delta':>9} {'range of deltas':>20} {'/nsys':>6} "
             f"{'in-process (control)':>22}"]
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
            lines.append(line)
    return lines


def main(argv=None):
    argv, status = args_or_usage(argv, 1, __doc__)
    if argv is None:
        return status
    loaded = load_percall_folder(argv[0], warn=lambda name, e: print(f"{name}: unreadable ({e})", file=sys.stderr))
    for line in table_lines(*loaded):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
