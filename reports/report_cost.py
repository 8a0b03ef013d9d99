"""What tracing costs a whole program: the cost mode's slowdown per program and method (chart
and table, the harness's ratios and intervals), the matrix repetitions' slowdown, what was
lost, and results that tracing changed."""
import cudatrace_results as results
from report_page import esc, matplotlib, plt, png, table


def cost_section(runs):
    """The cost mode (harness --cost): per program, one bar per method, its slowdown against
    none with the 95% interval the harness computed from paired rounds, and the numbers
    behind it in a table. A method that did not run, failed, lost events or left a layer
    unobserved is named in red, never drawn as if it were clean."""
    programs = [p for r in runs for p in results.cost_programs(r)]
    if not programs:
        return ('<p id="cost-table" class="empty">No cost-mode run in these results '
                '(<code>harness --cost</code>).</p>')
    return _cost_chart(programs) + _cost_text(programs)


def _cost_chart(programs):
    """One bar per method and program, its interval as whiskers; a cross where there is no figure."""
    methods = []
    for p in programs:
        for name in [m["method"] for m in p["methods"]] + [n["method"] for n in p.get("not_run", [])]:
            if name != "none" and name not in methods:
                methods.append(name)
    colours = {m: plt.cm.tab10(i % 10) for i, m in enumerate(methods)}
    # One group per program (a program measured in two cost runs, e.g. vecadd under nsys
    # apart, is one group: each bar is against its own run's none).
    groups = {}
    for p in programs:
        g = groups.setdefault(results.program_label(p), {"skipped": p.get("skipped"), "methods": {}})
        for m in p["methods"]:
            g["methods"].setdefault(m["method"], m)
    per_row = 8
    labels = list(groups)
    rows_of = [labels[i:i + per_row] for i in range(0, len(labels), per_row)]
    fig, axes = plt.subplots(len(rows_of), 1, figsize=(12, 3.4 * len(rows_of)), squeeze=False)
    width = 0.8 / max(1, len(methods))
    for ax, row in zip(axes[:, 0], rows_of):
        for j, label in enumerate(row):
            for i, name in enumerate(methods):
                x = j + (i - (len(methods) - 1) / 2) * width
                m = groups[label]["methods"].get(name)
                r = (m or {}).get("ratio")
                if groups[label]["skipped"]:
                    continue
                if not r:
                    # Not run, failed, or no usable round: a cross at 1, never a bar.
                    ax.plot([x], [1], marker="x", color=colours[name], markersize=6, markeredgewidth=2)
                    continue
                ci = r.get("ci95")
                err = [[r["value"] - ci[0]], [ci[1] - r["value"]]] if ci else None
                ax.bar([x], [r["value"]], width, yerr=err, capsize=2, color=colours[name],
                       hatch="//" if results.from_marked_runs(m) else None,
                       edgecolor="#b00" if m.get("marks") else colours[name])
        ax.axhline(1, color="#444", linewidth=0.8)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.FixedLocator([0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 20, 50, 100]))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_ylabel("wall time / none's")
        ax.set_xticks(range(len(row)))
        ax.set_xticklabels([f"{l}\n(skipped)" if groups[l]["skipped"] else l for l in row], rotation=15, ha="right",
                           fontsize=8)
        ax.set_xlim(-0.6, len(row) - 0.4)
    handles = [matplotlib.patches.Patch(color=colours[m], label=m) for m in methods]
    axes[0, 0].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes[0, 0].set_title("slowdown against none, ≥95% interval from paired rounds (6 or more) "
                         "(red edge: runs marked; hatched: only marked runs; x: no figure)")
    fig.tight_layout(h_pad=2.5)
    return f'<img id="cost-chart" alt="slowdown per program and method" src="{png(fig)}">'


def _seconds(ns):
    return "—" if ns is None else f"{ns / 1e9:.3f}"


def _ratio(r, interval=True):
    if not r:
        return "—"
    text = f'{r["value"]:.2f}×'
    if interval:
        ci = r.get("ci95")
        # The harness's interval (order statistics of the paired rounds, at least 95%)
        # or its reason for none; and its anomaly flag: the report decides nothing.
        text += (f' [{ci[0]:.2f}, {ci[1]:.2f}]' if ci else
                 f' ({esc(r.get("why_no_interval", "no interval: %d round(s)" % r.get("pairs", 0)))})')
        scope = (r.get("interval") or {}).get("scope")
        if ci and scope:
            text += f' <small title="{esc(scope)}">(within {r.get("rounds", "?")} run(s) only)</small>'
        if r.get("anomaly"):
            text += f' <b class="bad" title="{esc(r["anomaly"])}">ANOMALY</b>'
    return text


def _per_step(m, base):
    """The steady-state step (median ms) and its slowdown per step with its interval
    (summary.json methods[].steps, harness/stats/steps.h), or why there is none."""
    st = m.get("steps")
    if not st:
        return "—"
    ms = st.get("median_step_ns")
    text = "—" if ms is None else f"{ms / 1e6:.3f} ms"
    if not base:
        text += f' ({_ratio(st.get("ratio"))})' if st.get("ratio") else f' ({esc(st.get("why_no_ratio", "—"))})'
    return text + f' <span title="steady steps">[{st.get("steady_steps", 0)} steps]</span>'


def _cost_text(programs):
    """The note on how the figures are made, the rounds each run did, and the table behind the chart."""
    rows, notes = [], []
    for p in programs:
        label = esc(results.program_label(p))
        if p.get("skipped"):
            rows.append([label, "—", "", "", "", "", "", "", "", "", f'<b class="bad">skipped: {esc(p["skipped"])}</b>'])
            continue
        start = p.get("startup_source") or p.get("startup_why")
        notes.append(f"<li>{label}: start-up {'ends at ' if p.get('startup_source') else 'not told apart: '}"
                     f"{esc(start or '—')}</li>")
        for m in p["methods"]:
            base = m["method"] == "none"
            marks = [f'<b class="bad" title="{esc(detail)}">{esc(kind)} in round(s) '
                     f'{esc(", ".join(map(str, rounds)))}</b>' for kind, rounds, detail in results.mark_summary(m)]
            if results.from_marked_runs(m):
                marks.append('<b class="bad">figures from marked runs: no clean run</b>')
            if not base and not m.get("ratio"):
                marks.append(f'<b class="bad">no figure: {esc(m.get("why_no_ratio", "—"))}</b>')
            used = f'{len(m["rounds_used"])} of {m["counts"]["runs"]}'
            setup = m.get("setup_reported")
            rows.append([label, esc(m["method"]), used, _seconds(m["median_wall_ns"]),
                         "baseline" if base else _ratio(m.get("ratio")),
                         _seconds(m.get("median_startup_ns")) + ("" if base else f' ({_ratio(m.get("startup_ratio"), False)})'),
                         _seconds(m.get("median_rest_ns")) + ("" if base else f' ({_ratio(m.get("rest_ratio"), False)})'),
                         _per_step(m, base),
                         f'{setup["median_ms"]:.2f} ({esc(setup["what"])})' if setup else "—",
                         esc(p.get("run", "")), "<br>".join(marks) or '<span class="good">clean</span>'])
        for n in p.get("not_run", []):
            rows.append([label, esc(n["method"]), "0", "—", "—", "—", "—", "—", "—", esc(p.get("run", "")),
                         f'<b class="bad">not run: {esc(n["reason"])}</b>'])
    rounds = sorted({(p["run"], p["rounds"].get("done"), p["rounds"].get("planned"), p.get("stopped") or "")
                     for p in programs})
    stopped = "".join(f"<li>{esc(run)}: {done} of {planned} round(s){': ' + esc(why) if why else ''}</li>"
                      for run, done, planned, why in rounds)
    return ("<p>Each program ran once untraced and untimed (warm-up), then under every method in rounds, "
            "the order within a round drawn from a recorded seed (older runs: rotated), none in every round. A "
            "method's slowdown is the median, over the rounds in which both ran usably, of its wall time over "
            "none's in the same round, with the order statistics of those rounds' ratios as an interval that "
            "holds at least 95% (6 rounds or more; fewer: too few rounds for an interval). Per step: the median "
            "of the steps a program marked ($CUDATRACE_STEP_MARK, the first 10% dropped as warm-up) over none's, "
            "with a block bootstrap over each run's steps widened by the rounds' interval (schema/README.md, "
            "Step marks). ANOMALY: faster traced, the whole interval under 1. A run that failed, lost events or left a layer unobserved is "
            "marked and left out while clean runs exist; one that saw a layer only in part is marked and "
            "counted (the method's limit, not the run's fault). Start-up runs from the program's start to the "
            "return of its first kernel launch (the workload's ledger) or to the program's own mark; the "
            "method's own set-up is what the method timed of its work inside the program.</p>"
            + f"<ul>{stopped}{''.join(notes)}</ul>"
            + table(["program", "method", "runs used", "median s", "vs none [95%]", "start-up s (vs none)",
                     "rest s (vs none)", "per step (vs none [95%])", "method's own set-up ms", "cost run", "marks"],
                    rows, "cost-table"))


def slowdown_section(combos):
    rows = []
    for c in combos:
        if c["method"] == "none" or "wall_ratio_vs_none" not in c:
            continue
        w = c["wall_ns"]
        ci = c.get("wall_ratio_ci95")
        interval = f'{ci[0]:.2f}–{ci[1]:.2f}×' if ci else "— (needs 3+ reps)"
        rows.append([esc(c["workload"]), esc(c["linkage"]), esc(c["method"]), f'{c["wall_ratio_vs_none"]:.2f}×',
                     interval, f'{w["median"] / 1e6:.0f}', f'{w["min"] / 1e6:.0f}–{w["max"] / 1e6:.0f}', c["reps"]])
    return table(["workload", "cudart", "method", "wall time vs none", "95% interval", "median ms", "range ms", "reps"],
                 rows, "slowdown-table", empty="No workload ran under both a method and none: no slowdown to show.")


def loss_table(runs):
    rows = []
    for run, c in ((r, c) for r in runs for c in r.combos):
        if c["method"] == "none":
            continue
        loss = c.get("loss", {})
        # The harness's count (summary.json methods[].lost); a flag is shown among the counters.
        total = results.overview.combo_lost(run, c)
        detail = ", ".join(f"{esc(k)} {esc(v)}" for k, v in sorted(loss.items())) or "—"
        unobserved = [u["layer"] for u in c.get("unobserved", [])]
        # Zero loss of a layer never observed is no good news.
        cell = (f'<b class="bad">{esc(total or "0")}; not observed: {esc(", ".join(unobserved))}</b>' if unobserved
                else f'<b class="{"bad" if total else "good"}">{esc(total or "0")}</b>')
        rows.append([esc(c.get("workload") or "command"), esc(c.get("linkage") or ""), esc(c["method"]), cell, detail])
    rows.sort(key=lambda r: "class=\"bad\"" not in r[3])  # what lost something, or saw nothing, first
    return table(["workload", "cudart", "method", "lost (by unit)", "counters"], rows, "loss-table",
                 empty="No tracing method ran (only the baseline), so nothing could be lost.")


def results_changed_section(combos):
    """Traced runs whose result (--result) differed from the untraced run's, as the harness
    named them; the report judges nothing itself."""
    rows = []
    for c in combos:
        changed = c.get("results_changed") or {}
        if changed.get("runs", 0) > 0:
            rows.append([esc(c.get("workload") or "command"), esc(c.get("linkage") or ""), esc(c["method"]),
                         f'<b class="bad">{changed["runs"]} of {c.get("reps", 0)}</b>',
                         "<br>".join(esc(x) for x in changed.get("examples", []))])
    return table(["workload", "cudart", "method", "runs changed", "what it computed"], rows, "results-changed-table",
                 empty="No traced run computed otherwise than untraced (with --result; without it, only the exit is compared).")

