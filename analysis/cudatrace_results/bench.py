"""The per-call benchmark's rows (bench_summary.json), read as the harness decided them.

Whether a difference is "no measurable cost" is harness/stats/bench_stats.h's decision, written
into each row as `no_measurable_cost` / `in_process_no_measurable_cost` (absent: a cost).
So are, since version 2, whether two runs agree (`agreement`), cupti against nsys and the
empty subscriber (`estimators`), uprobe's entry and return probes (`uprobe_split`) and
where each method's cost goes, for those the harness takes apart (`cost_parts`).
Nothing here decides them again: these functions read and word them.
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


def agreement(bench):
    """The harness's verdict on this run against an earlier one (--agree-with), or None."""
    return bench.get("agreement")


def estimators(bench):
    """cupti against nsys and cupti-bare, per call (version 2); {} before that."""
    return bench.get("estimators") or {}


# Summaries written before the bars came from the registry kept cupti's references under
# fixed keys; the names they stood for.
_LEGACY_REFERENCES = (("nsys", "nsys", "cupti_over_nsys"), ("nsys_all_apis", "nsys-all", "cupti_over_nsys_all_apis"),
                      ("empty_subscriber", "cupti-bare", "cupti_over_empty_subscriber"))


def estimator_figures(e):
    """One estimators entry as (method, cost, in-process A/B or None, [(reference, figure, ratio)]),
    as the harness wrote it: `references` by name, or, in summaries before that, cupti's fixed keys."""
    if "references" in e:
        refs = [(name, r, r.get("ratio")) for name, r in e["references"].items()]
        return e["method"], e["cost"], e.get("in_process"), refs
    refs = [(name, e[key], e.get(ratio)) for key, name, ratio in _LEGACY_REFERENCES if key in e]
    return "cupti", e["cupti"], e.get("cupti_in_process"), refs


def uprobe_split(bench):
    """uprobe's cost split into entry and return probes (version 2); {} before that."""
    return bench.get("uprobe_split") or {}


def cost_parts(bench):
    """Where a method's cost goes, per call, for the methods the harness takes apart
    (harness/stats/bench_stats.h); {} before that."""
    return bench.get("cost_parts") or {}


def part_text(p):
    """'+60 [+58, +62]' of a part, a floor or a whole."""
    value = p["ns"] if "ns" in p else p["delta_ns"]
    lo, hi = p["ci95_ns"]
    return f"{value:+.0f} [{lo:+.0f}, {hi:+.0f}]"


def per_record_text(e):
    """A cost_parts entry's figure per record, with its bar, as one phrase; None where the
    benchmark counted no records (a summary before records_per_call, or a method that does
    not count them)."""
    r = e.get("per_record")
    if not r:
        return None
    n = r["records_per_call"]
    text = f"{n:g} record{'s' if n != 1 else ''} a call"
    if "ns" in r:
        lo, hi = r["ci95_ns"]
        text += f": {r['part']} {r['ns']:+.0f} [{lo:+.0f}, {hi:+.0f}] ns a record (the whole {r['whole_ns']:+.0f})"
    elif "why" in r:
        text += f": {r['why']}"
    bar = r.get("bar")
    if bar:
        verdict = "not judged" if bar["met"] is None else "met" if bar["met"] else "MISSED"
        text += f"; bar <= {bar['at_most_ns']:g} ns a record: {verdict}"
        if bar.get("settled") is False:
            text += " (not settled)"
        if bar.get("why_not_judged"):
            text += f" ({bar['why_not_judged']})"
    return text


def per_record_bar_lines(bench):
    """Each per-record bar's tally over the calls, one line per method."""
    return [f"{t['method']}: <= {t['at_most_ns']:g} ns a record met on {t['met']} of "
            f"{t['met'] + t['missed'] + t['not_judged']} calls ({t['missed']} missed, {t['not_judged']} not judged"
            + (f"; {t['unsettled']} of the judged not settled by the run's intervals)" if "unsettled" in t else ")")
            for t in cost_parts(bench).get("per_record_bars", [])]


def calls_skipped(bench):
    """Calls the benchmark could not make, each with its reason and the processes that could not."""
    return bench.get("calls_skipped", [])


def agreement_lines(a):
    """The agreement as lines of text: the verdict, then every delta that fell outside."""
    verdict = "PASS" if a["pass"] else "FAIL"
    lines = [f"agreement with {a['against']}: {a['within']} of {a['compared']} deltas within its 95% interval or "
             f"max(10%, 100 ns) of its value ({100 * a['fraction']:.1f}%, at least {100 * a['required']:.0f}% "
             f"needed): {verdict}"]
    if a.get("why"):
        lines.append(f"  {a['why']}")
    for o in a.get("outside", []):
        untraced = o.get("untraced_ns") or [None, None]
        moved = ""
        if None not in untraced and min(untraced) > 0:
            moved = f"  (untraced call {untraced[0]:.0f} -> {untraced[1]:.0f} ns)"
        lo, hi = o["first_ci95_ns"]
        lines.append(f"  outside: {o['call']} {o['linkage']} {o['method']} {o['kind']}: {o['second_ns']:+.1f} ns, "
                     f"was {o['first_ns']:+.1f} [{lo:+.1f}, {hi:+.1f}]{moved}")
    if a.get("not_compared"):
        lines.append(f"  {a['not_compared']} delta(s) in one run only, not compared")
    return lines


def target_againsts(target):
    """The references the call's bars hold cupti to (nsys, cupti-bare)."""
    return [b["against"] for b in target.get("bars", [target]) if "against" in b]


def target_text(target):
    """Each bar ('cupti <= nsys', ...) with 'met', 'MISSED' or 'not judged: why'. A summary from
    before the bars were #52's has one bar as a ratio ('<= 0.7x nsys')."""
    if "bars" in target:
        bars = target["bars"]
    elif "at_most" in target and "against" in target:
        bars = [dict(target, bar=f"<= {target['at_most']:g}x {target['against']}")]
    else:
        bars = []
    if not bars:
        return f"not judged: {target.get('why_not_judged', 'no bar in this summary')}"
    out = []
    for b in bars:
        if b.get("met") is None:
            out.append(f"{b.get('bar', '?')}: not judged: {b.get('why_not_judged', '')}")
        else:
            unsettled = " (not settled)" if b.get("settled") is False else ""
            out.append(f"{b.get('bar', '?')}: {'met' if b['met'] else 'MISSED'}{unsettled}")
    return "; ".join(out)
