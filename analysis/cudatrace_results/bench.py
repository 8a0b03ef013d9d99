"""The per-call benchmark's rows (bench_summary.json), read as the harness decided them.

Whether a difference is "no measurable cost" is harness/bench_stats.h's decision, written
into each row as `no_measurable_cost` / `in_process_no_measurable_cost` (absent: a cost).
Nothing here decides it again.
"""
import statistics
from collections import namedtuple

# kind: "in-process" (the method paused and live in one process) or "between" (to `none`
# across processes); value and ci in ns; noise: the harness's "no measurable cost";
# untraced: the call with nothing recording, as this method's processes ran it.
Cost = namedtuple("Cost", "kind value ci noise untraced")


def between_is_noise(row):
    return bool(row.get("no_measurable_cost"))


def in_process_is_noise(row):
    return bool(row.get("in_process_no_measurable_cost"))


def rows_by_key(bench):
    return {(r["call"], r["linkage"], r["method"]): r for r in bench.get("rows", [])}


def cost_of(row, baseline_median=None):
    """The cost the report leads with: the in-process A/B where the method has one, else the
    difference to `none`; None for `none` itself or a row without a difference."""
    if row["method"] == "none":
        return None
    paused = row.get("in_process_paused_values_ns")
    untraced = statistics.median(paused) if paused else baseline_median
    if "in_process_delta_ns" in row:
        return Cost("in-process", row["in_process_delta_ns"], row["in_process_delta_ci95_ns"], in_process_is_noise(row),
                    untraced)
    if "delta_ns" in row:
        return Cost("between", row["delta_ns"], row["delta_ci95_ns"], between_is_noise(row), untraced)
    return None


def costs(bench):
    """(call, linkage, method) -> Cost for every row that has one."""
    baseline = {(r["call"], r["linkage"]): r["median_ns"] for r in bench.get("rows", []) if r["method"] == "none"}
    out = {}
    for r in bench.get("rows", []):
        c = cost_of(r, baseline.get((r["call"], r["linkage"])))
        if c is not None:
            out[r["call"], r["linkage"], r["method"]] = c
    return out
