"""The per-call benchmark's sections (bench_summary.json): the chart and table of every call,
how far the untraced calls moved, and what the harness derived from a run (agreement, cupti
against nsys, uprobe's probes, calls not measured). Every verdict is the harness's, as written."""
import cudatrace_results as results
from report_page import esc, matplotlib, plt, png, table


def per_call_section(bench_rows):
    """Median ns per call and method (log scale), whiskers from min to max repetition."""
    if not bench_rows:
        return "<p>No per-call benchmark in these results (run <code>harness --bench</code>).</p>", ""
    linkages = sorted({r["linkage"] for r in bench_rows})
    methods = sorted({r["method"] for r in bench_rows}, key=lambda m: (m != "none", m))
    calls = sorted({r["call"] for r in bench_rows})
    fig, axes = plt.subplots(len(linkages), 1, figsize=(11, 3.6 * len(linkages)), squeeze=False)
    width = 0.8 / max(1, len(methods))
    # One colour per method on every panel; a method with no row for a linkage gets no bar
    # and no legend entry there.
    colours = {m: plt.cm.tab10(i % 10) for i, m in enumerate(methods)}
    for ax, linkage in zip(axes[:, 0], linkages):
        for i, m in enumerate(methods):
            xs, ys, lo, hi = [], [], [], []
            for j, c in enumerate(calls):
                row = next((r for r in bench_rows if r["call"] == c and r["method"] == m and r["linkage"] == linkage), None)
                if not row:
                    continue
                xs.append(j + (i - (len(methods) - 1) / 2) * width)
                ys.append(row["median_ns"])
                lo.append(row["median_ns"] - min(row["values_ns"]))
                hi.append(max(row["values_ns"]) - row["median_ns"])
            if xs:
                ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=m, color=colours[m])
        ax.set_yscale("log")
        ax.set_ylabel("ns per call (median)")
        ax.set_title(f"{linkage} cudart")
        ax.set_xticks(range(len(calls)))
        ax.set_xticklabels(calls, rotation=20, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    fig.tight_layout(h_pad=2.5)
    chart = f'<img id="per-call-chart" alt="per-call overhead" src="{png(fig)}">'
    rows = []
    for r in sorted(bench_rows, key=lambda r: (r["call"], r["linkage"], r["method"], r["run"])):
        if r["method"] == "none":
            continue
        ci = r.get("delta_ci95_ns", [None, None])
        delta = f'{r["delta_ns"]:+.1f}' if "delta_ns" in r else "—"
        interval = f"[{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci[0] is not None else "—"
        ratio = f'{r["ratio"]:.2f}×' if "ratio" in r else "—"
        # "No measurable cost" is the harness's decision (harness/stats/bench_stats.h), as written.
        if "delta_ns" in r and results.between_is_noise(r):
            delta, ratio = "no measurable cost", "—"
        ab = r.get("in_process_delta_ci95_ns")
        in_process = (f'{r["in_process_delta_ns"]:+.1f} [{ab[0]:+.1f}, {ab[1]:+.1f}]' if ab else "—")
        if ab and results.in_process_is_noise(r):
            in_process = f"no measurable cost [{ab[0]:+.1f}, {ab[1]:+.1f}]"
        # The pairing control: both halves paused, what the pairing reads when nothing differs.
        control = f'{r["in_process_control_ns"]:+.1f}' if "in_process_control_ns" in r else "—"
        # Measured while the tracer dropped records: not the cost of tracing, and said so.
        method = esc(r["method"])
        # Measured without one of the method's layers, or part of one (bench.cpp): the cost
        # of the rest only.
        for key, part in (("layers_not_covered", ""), ("layers_partly_covered", "part of ")):
            for layer, why in sorted(r.get(key, {}).items()):
                method += f'<br><b class="bad" title="{esc(why)}">without {part}its {esc(layer)} layer</b>'
        if r.get("loss_during_runs"):
            lost = ", ".join(f"{k}={v}" for k, v in sorted(r["loss_during_runs"].items()))
            method += f'<br><b class="bad">measured under loss: {esc(lost)}</b>'
        rows.append([esc(r["call"]), esc(r["linkage"]), method, f'{r["median_ns"]:.1f}', delta, interval, ratio,
                     in_process, control, r["reps"], esc(r.get("run", ""))])
    return chart, table(["call", "cudart", "method", "median ns", "Δ vs none ns", "95% interval", "ratio",
                         "in-process A/B Δ ns [95%]", "pairing control ns", "reps", "bench run"], rows, "per-call-table")


def untraced_section(benches):
    """How far each untraced call moved between the processes of a bench run: the floor
    under every per-call cost above (harness/stats/bench.cpp says where it comes from)."""
    rows = []
    for b in benches:
        for u in sorted(b.get("untraced_between_processes", []), key=lambda u: -u["max_over_min"]):
            spread = f'{u["max_over_min"]:.2f}×'
            if u["max_over_min"] >= 1.2:
                spread = f'<b class="bad">{spread}</b>'
            rows.append([esc(u["call"]), esc(u["linkage"]), u["processes"], f'{u["min_ns"]:.0f}',
                         f'{u["median_ns"]:.0f}', f'{u["max_ns"]:.0f}', spread, esc(b.get("run_id", ""))])
    if not rows:
        return ""
    return ("<h3>How far the untraced calls moved between processes</h3>"
            "<p>The same call with nothing recording (<code>none</code>'s processes and every pausing "
            "method's paused halves), process by process. Where it moved by 1.2× or more (red), the machine "
            "itself moved between processes, and every cost of that call moves with it: read the 95% "
            "intervals above, not the medians alone, and add <code>--reps</code> to narrow them.</p>"
            + table(["call", "cudart", "processes", "min ns", "median ns", "max ns", "max / min", "bench run"],
                    rows, "untraced-spread"))


def bench_agreement_section(benches):
    """4a: a bench run made with --agree-with, against the earlier run it names: the
    harness's verdict, the share, and every delta that fell outside."""
    out = []
    for b in benches:
        a = results.agreement(b)
        if not a:
            continue
        verdict = '<b class="good">PASS</b>' if a["pass"] else '<b class="bad">FAIL</b>'
        why = f' ({esc(a["why"])})' if a.get("why") else ""
        one_run = f' {a["not_compared"]} delta(s) measured in one run only.' if a.get("not_compared") else ""
        out.append(f'<p id="bench-agreement">Run {esc(b.get("run_id", ""))} against {esc(a["against"])}: {verdict}, '
                   f'{a["within"]} of {a["compared"]} deltas agree ({100 * a["fraction"]:.1f}%, at least '
                   f'{100 * a["required"]:.0f}% needed){why}.{one_run} Rule: {esc(a.get("rule", ""))}.</p>')
        rows = []
        for o in a.get("outside", []):
            untraced = o.get("untraced_ns") or [None, None]
            moved = "—" if None in untraced else f"{untraced[0]:.0f} → {untraced[1]:.0f}"
            lo, hi = o["first_ci95_ns"]
            rows.append([esc(o["call"]), esc(o["linkage"]), esc(o["method"]), esc(o["kind"]),
                         f'{o["first_ns"]:+.1f} [{lo:+.1f}, {hi:+.1f}]', f'{o["second_ns"]:+.1f}',
                         f'{o["difference_ns"]:+.1f}', moved])
        out.append(table(["call", "cudart", "method", "delta", "earlier run ns [95%]", "this run ns", "difference ns",
                          "untraced call ns (earlier → this)"], rows, "bench-agreement-outside",
                         empty="Every delta the two runs share agreed."))
    if not out:
        return ""
    return "<h3>Do two back-to-back benchmark runs agree?</h3>" + "\n".join(out)


def bench_estimator_section(benches):
    """4b: each method with cost bars (cupti's are #52's) against the references they name, one
    estimator for all (the difference of medians to none between processes, same run), each its
    own row under the call; the method's in-process A/B on a row of its own, labelled as the
    other quantity it is."""
    def delta(block):
        if not block:
            return "—"
        lo, hi = block["ci95_ns"]
        text = f'{block["delta_ns"]:+.0f} [{lo:+.0f}, {hi:+.0f}]'
        return text + " (no measurable cost)" if block.get("no_measurable_cost") else text

    def ratio(x):
        return f"{x:.2f}×" if isinstance(x, (int, float)) else "—"

    rows, notes = [], []
    for b in benches:
        est = results.estimators(b)
        if not est.get("calls"):
            continue
        run = esc(b.get("run_id", ""))
        unsettled = (f', {est["unsettled"]} of the judged not settled by the run&#x27;s intervals'
                     if "unsettled" in est else "")
        notes.append(f'{run}: {est["met"]} met, {est["missed"]} missed, {est["not_judged"]} not judged{unsettled}')
        for e in est["calls"]:
            t = e["target"]
            method, cost, in_process, refs = results.estimator_figures(e)
            cls = "empty" if t["met"] is None else "good" if t["met"] else "bad"
            where = [esc(e["call"]), esc(e["linkage"]), esc(e.get("call_kind") or "?")]
            rows.append(where + [f"<b>{esc(method)}</b>", delta(cost), "",
                                 f'<b class="{cls}">{esc(results.target_text(t))}</b>', run])
            for name, figure, r in refs:
                bar = "a bar for this call" if name in results.target_againsts(t) else ""
                rows.append(where + [esc(name), delta(figure), ratio(r), bar, run])
            if in_process:
                rows.append(where + [f"<i>{esc(method)}, in process: paused against live (another quantity)</i>",
                                     delta(in_process), "", "", run])
    if not rows:
        return ""
    bars = {f'{esc(t["method"])} at most {esc(" or ".join(t["against"]))}'
            f'{" + %g ns" % t["plus_ns"] if t.get("plus_ns") else ""} on '
            f'{"every call" if t["calls"] == "every" else "calls other than " + esc(", ".join(t["calls"]))}: '
            f'{esc(t["why"])}'
            for b in benches for t in results.estimators(b).get("targets", []) if "why" in t}
    return ("<h3>Each method against the references its cost bars name</h3>"
            "<p>One estimator for all: each method's difference of medians to <code>none</code> between "
            "processes, in the same run (Nsight Systems cannot be paused in process). "
            + (f'The bars (the registry\'s, the first reference the run measured used): {"; ".join(sorted(bars))}. '
               if bars else "")
            + "Each is judged on the medians, and said to be settled only where the run's intervals decide it. "
            "The row in italics is another quantity, labelled: the method paused and live in one process (for "
            "cupti, what its callbacks and activity add over a subscribed, idle CUPTI).</p>"
            f'<p>{"; ".join(notes)}.</p>'
            + table(["call", "cudart", "kind", "who", "Δ vs none ns [95%]", "method ÷ this", "target", "bench run"],
                    rows, "cupti-estimators"))


def bench_uprobe_split_section(benches):
    """4c: uprobe's per-call cost split into its entry and return probes, as the harness
    derived it, with how."""
    rows, how = [], ""
    for b in benches:
        split = results.uprobe_split(b)
        how = how or split.get("how", "")
        for e in split.get("calls", []):
            def fig(f):
                return "—" if not f else f'{f["ns"]:+.0f} [{f["ci95_ns"][0]:+.0f}, {f["ci95_ns"][1]:+.0f}]'
            caveats = "".join(f'<br><b class="bad">{esc(c)}</b>' for c in e.get("caveats", []))
            rows.append([esc(e["call"]), esc(e["linkage"]), esc(e["kind"]), fig(e["entry"]), fig(e["return"]),
                         fig(e["whole"]) + caveats, fig(e.get("empty")), esc(b.get("run_id", ""))])
    if not rows:
        return ""
    return ("<h3>uprobe's cost: entry probe and return probe</h3>"
            f"<p>How: {esc(how)}.</p>"
            + table(["call", "cudart", "measured", "entry ns [95%]", "return ns [95%]", "uprobe (both) ns [95%]",
                     "uprobe-empty (traps alone) ns [95%]", "bench run"], rows, "uprobe-split"))


def bench_cost_parts_section(benches):
    """4d: where each method's cost goes, part by part, for the methods the harness can take
    apart, and how far each sits above its mechanism's floor, as the harness estimated them."""
    rows, how = [], ""
    for b in benches:
        parts = results.cost_parts(b)
        how = how or parts.get("how", "")
        for e in parts.get("calls", []):
            floor = (f'{results.part_text(e["floor"])}<br>{e["above_floor_ns"]:+.0f} above it'
                     f'<br><small>{esc(e["floor"].get("what", ""))}</small>' if "floor" in e else "—")
            cells = "".join(f'<b>{esc(p["part"])}</b> {results.part_text(p)}<br><small>{esc(p["what"])} '
                            f'({esc(p["kind"])})</small><br>' for p in e["parts"])
            per_record = results.per_record_text(e)
            if per_record:
                missed = e["per_record"].get("bar", {}).get("met") is False
                cells += f'<b{" class=bad" if missed else ""}>per record</b> {esc(per_record)}<br>'
            cells += "".join(f'<b class="bad">not measured: {esc(m)}</b><br>' for m in e.get("not_measured", []))
            cells += "".join(f'<b class="bad">{esc(c)}</b><br>' for c in e.get("caveats", []))
            rows.append([f'<b>{esc(e["method"])}</b>', esc(e["call"]), esc(e["linkage"]),
                         results.part_text(e["whole"]), cells, floor, esc(b.get("run_id", ""))])
    if not rows:
        return ""
    tallies = "".join(f"<li>{esc(line)}</li>" for b in benches for line in results.per_record_bar_lines(b))
    return ("<h3>Where the cost goes, part by part</h3>"
            "<p>What each part of a method costs per call, and its mechanism's floor: what the mechanism "
            "(LD_PRELOAD's interposition, an empty CUPTI subscriber) costs with nothing recorded. What lies above "
            f"the floor is the method's own work. How: {esc(how)}.</p>"
            + (f'<p>Bars per record (#52: the records each call made, counted by the tracer):</p>'
               f'<ul id="per-record-bars">{tallies}</ul>' if tallies else "")
            + table(["method", "call", "cudart", "whole ns [95%]", "parts ns [95%]", "floor ns [95%]", "bench run"],
                    rows, "cost-parts"))


def bench_skipped_calls_section(benches):
    """Calls the benchmark could not make (the two-GPU calls on one GPU, NCCL absent), with why."""
    items = []
    for b in benches:
        for c in results.calls_skipped(b):
            items.append(f'<li><b>{esc(c["call"])}</b>: {esc(c["reason"])} ({len(c["processes"])} processes, '
                         f'{esc(b.get("run_id", ""))})</li>')
    return f'<p>Calls not measured:</p><ul id="bench-calls-skipped">{"".join(items)}</ul>' if items else ""


def bench_derived_sections(benches):
    return (bench_agreement_section(benches) + bench_estimator_section(benches)
            + bench_uprobe_split_section(benches) + bench_cost_parts_section(benches)
            + bench_skipped_calls_section(benches))



def per_call_cost_chart(runs):
    """The first screen's per-call cells drawn: per method, the Δ of a launch and of a cheap call
    (left and right), one bar per cudart linkage with the harness's 95% interval as whiskers.
    A figure the harness called no measurable cost is a grey bar so labelled; one measured
    without part of the method's layers or under loss is edged red and starred."""
    data = results.overview.per_call_costs(runs)
    calls = [c for c in (data["launch_call"], data["cheap_call"]) if c]
    if not data["costs"]:
        return '<p id="per-call-cost" class="empty">No per-call benchmark in these results.</p>'
    methods, linkages = data["methods"], data["linkages"]
    colours = {l: plt.cm.tab10(i % 10) for i, l in enumerate(linkages)}
    height = 0.8 / max(1, len(linkages))
    fig, axes = plt.subplots(1, len(calls), figsize=(11, 0.9 + 0.28 * len(methods) * len(linkages)),
                             squeeze=False, sharey=True)
    for ax, call in zip(axes[0], calls):
        shown = [e["cost"] for (_, c, _), e in data["costs"].items() if c == call]
        # Room on the right for each bar's label; on the left only as far as an interval reaches.
        low = min([0.0] + [c.ci[0] for c in shown] + [c.value for c in shown])
        high = max([1.0] + [c.ci[1] for c in shown] + [c.value for c in shown])
        ax.set_xlim(low - 0.05 * (high - low), high + 0.3 * (high - low))
        for j, method in enumerate(methods):
            if not any((method, call, linkage) in data["costs"] for linkage in linkages):
                ax.text(0, j, " not measured", va="center", fontsize=7, color="#777")
        for i, linkage in enumerate(linkages):
            for j, method in enumerate(methods):
                entry = data["costs"].get((method, call, linkage))
                if entry is None:
                    continue
                c = entry["cost"]
                y = j + (i - (len(linkages) - 1) / 2) * height
                err = [[max(0.0, c.value - c.ci[0])], [max(0.0, c.ci[1] - c.value)]]
                ax.barh([y], [c.value], height, xerr=err, capsize=2, color="#ccc" if c.noise else colours[linkage],
                        edgecolor="#b00" if entry["caveats"] else "none", linewidth=1.5)
                label = "no measurable cost" if c.noise else f"{c.value:+.0f}"
                ax.text(max(c.value, c.ci[1], 0), y, " " + label + (" *" if entry["caveats"] else ""),
                        va="center", fontsize=7, color="#555" if c.noise else "#222")
        ax.axvline(0, color="#444", linewidth=0.8)
        ax.set_title(f"{call}: Δ ns per call [95%]", fontsize=9)
        ax.set_xlabel("ns added per call (in process where the method pauses, else against none)", fontsize=8)
    axes[0, 0].set_yticks(range(len(methods)))
    axes[0, 0].set_yticklabels(methods, fontsize=8)
    axes[0, 0].invert_yaxis()
    handles = [matplotlib.patches.Patch(color=colours[l], label=f"{l} cudart") for l in linkages]
    handles.append(matplotlib.patches.Patch(color="#ccc", label="no measurable cost"))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    # Under the panels: inside one it would cover the longest bars.
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=len(handles), frameon=False)
    return (f'<div id="per-call-cost"><h3>What a launch and a cheap call cost under each method</h3>'
            f'<img id="per-call-cost-chart" alt="per-call cost of a launch and a cheap call per method" '
            f'src="{png(fig)}"><p>The first screen\'s per-call figures for every method and cudart linkage: '
            f'{esc(" and ".join(calls))}. Grey: no measurable cost, as the harness decided it '
            f'(harness/stats/bench_stats.h). Red edge, *: measured without part of the method\'s layers or '
            f'under loss (the table below says which).</p></div>')
