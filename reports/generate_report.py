#!/usr/bin/env python3
"""Writes one self-contained HTML report (charts embedded) from harness results folders.

usage: generate_report.py RESULTS_DIR [RESULTS_DIR ...] [-o reports/overhead.html]

Each RESULTS_DIR is a results/<run-id>/ folder: a matrix run (summary.json) and/or a
per-call benchmark run (bench_summary.json); manifest.json gives the environment. They are
read by the analysis package (cudatrace_results), which refuses a version it does not know.
Needs Debian's python3-matplotlib.
"""
import argparse
import base64
import html
import io
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

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.patches
    import matplotlib.pyplot as plt
    import matplotlib.ticker
except ImportError:
    sys.exit("generate_report: python3-matplotlib is missing (apt-get install python3-matplotlib)")


def png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def esc(x):
    return html.escape(str(x))


def table(headers, rows, table_id, empty="Nothing to show."):
    """A table, scrolling inside its own box where it is wider or taller than a screen; never
    one with headers and no rows: `empty` says why there is none. A long one can be sorted
    (click a heading) and filtered (the box above it) in the page (SCRIPT, no server)."""
    if not rows:
        return f'<p id="{table_id}" class="empty">{esc(empty)}</p>'
    long = len(rows) > 12
    out = []
    if long:
        out.append(f'<input class="filter" type="search" data-table="{table_id}" '
                   f'placeholder="filter these {len(rows)} rows (every word must match)">')
    out.append(f'<div class="wide"><table id="{table_id}"{" class=sortable" if long else ""}><thead><tr>'
               + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def section(anchor, title, body, note=""):
    """A section folded by default; opened, it scrolls inside one screen."""
    return (f'<details id="{esc(anchor)}" class="sec"><summary><h2>{esc(title)}</h2>'
            f'{" <span class=note>" + note + "</span>" if note else ""}</summary>'
            f'<div class="body">{body}</div></details>')


# Sorting, filtering and opening the section a link points to: inline, no external script.
SCRIPT = """<script>
(function(){
function openTarget(){var id=decodeURIComponent(location.hash.slice(1));if(!id)return;var e=document.getElementById(id);
 for(var d=e;d;d=d.parentElement){if(d.tagName==='DETAILS')d.open=true;}if(e)e.scrollIntoView();}
window.addEventListener('hashchange',openTarget);openTarget();
function key(td){var t=td?td.textContent.trim():'';var m=t.match(/^[+-]?[0-9][0-9,]*(\\.[0-9]+)?/);
 return m?[0,parseFloat(m[0].replace(/,/g,''))]:[1,t.toLowerCase()];}
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('thead th').forEach(function(th,i){th.title='click to sort';th.style.cursor='pointer';
  th.addEventListener('click',function(){var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
   var dir=th.dataset.dir==='1'?-1:1;th.dataset.dir=dir===1?'1':'-1';
   rows.sort(function(x,y){var a=key(x.cells[i]),c=key(y.cells[i]);if(a[0]!==c[0])return a[0]-c[0];
    return (a[1]<c[1]?-1:a[1]>c[1]?1:0)*dir;});rows.forEach(function(r){b.appendChild(r);});});});});
document.querySelectorAll('input.filter').forEach(function(f){f.addEventListener('input',function(){
 var words=f.value.toLowerCase().split(/\\s+/).filter(Boolean);var t=document.getElementById(f.dataset.table);
 Array.prototype.forEach.call(t.tBodies[0].rows,function(r){var x=r.textContent.toLowerCase();
  r.style.display=words.every(function(w){return x.indexOf(w)>=0;})?'':'none';});});});
})();
</script>"""


def reason_cell(full):
    """A reason as a reader takes it in: one line per distinct clause, naming libraries rather
    than their paths; the whole text behind a disclosure where that dropped anything."""
    lines = results.reason_lines(full)
    short = "<br>".join(esc(l) for l in lines)
    if "\n".join(lines) == full:
        return f'<span class="bad">{short}</span>'
    return (f'<details class="reason"><summary class="bad">{short}</summary>'
            f'<span class="full">{esc(full)}</span></details>')


def _cell(cell, href):
    """One first-screen cell: its text coloured by what the harness wrote, its one-line reason
    on hover, a link to its evidence below; a blank cell says the method was not asked there."""
    if not cell:
        return '<td class="na" title="not run on this">·</td>'
    tone = results.overview.TONE.get(cell["status"], cell["status"])
    title = f' title="{esc(cell["title"])}"' if cell.get("title") else ""
    return f'<td class="{esc(tone)}"{title}><a href="#{esc(href)}">{esc(cell["text"])}</a></td>'


def overview_section(o):
    """The first screen: one row per method (analysis/cudatrace_results/overview.py)."""
    if not o["methods"]:
        return '<p id="overview" class="empty">No tracing method ran in these results.</p>'
    progs, slow = o["programs"], o["slowdown_programs"]
    seen_cols = 1 + len(progs)
    calls = [c for c in (o["launch_call"], o["cheap_call"]) if c]
    head1 = (f'<tr><th rowspan="2">method</th><th colspan="{seen_cols}">what it observed</th>'
             + (f'<th colspan="{len(calls)}">per-call Δ</th>' if calls else "")
             + (f'<th colspan="{len(slow)}">slowdown vs none [≥95%]</th>' if slow else "")
             + '<th rowspan="2">lost events</th></tr>')

    def th(label, whole):
        return f'<th title="{esc(whole)}">{esc(label)}</th>'

    head2 = ("<tr>" + th("workloads", "every workload x linkage of the matrix")
             + "".join(th(p["label"], p["command"]) for p in progs)
             + "".join(th(c, f"{c}: the method's cost per call") for c in calls)
             + "".join(th(p["label"], p["command"]) for p in slow) + "</tr>")
    body = []
    for m in o["methods"]:
        r = o["rows"][m]
        cells = [_cell(r["workloads"], "sec-completeness")]
        cells += [_cell(r["programs"][p["anchor"]], p["anchor"]) for p in progs]
        if o["launch_call"]:
            cells.append(_cell(r["launch"], "sec-per-call"))
        if o["cheap_call"]:
            cells.append(_cell(r["cheap"], "sec-per-call"))
        cells += [_cell(r["slowdown"][p["anchor"] + ":" + p["label"]], "sec-cost") for p in slow]
        cells.append(_cell(r["loss"], "sec-loss"))
        body.append(f"<tr><th>{esc(m)}</th>{''.join(cells)}</tr>")
    f = o["facts"]
    facts = (f'<p id="facts">GPU {esc(f["gpu"])} · driver {esc(f["driver"])} · harness {esc(f["revision"])} · '
             f'{esc(f["when"])} · {len(f["runs"])} results folder(s)</p>')
    legend = ('<p class="legend"><span class="good">complete</span> · <span class="part">partial</span> · '
              '<span class="bad">not observed, failed, lost</span> · <span class="na">· not run</span>. '
              'Hover a cell for its reason, click for its evidence; * marked (hover says why). Observed: the '
              'worst of the programs (workloads) or of the layers (a program), as the harness judged them.</p>')
    return (f'<table id="overview"><thead>{head1}{head2}</thead><tbody>{"".join(body)}</tbody></table>'
            + facts + legend)


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
    """4b: cupti against Nsight Systems and an empty CUPTI subscriber, one estimator for all
    three (the difference of medians to none between processes, same run), each its own row
    under the call; cupti's in-process A/B on a row of its own, labelled as the other
    quantity it is."""
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
        notes.append(f'{run}: {est["met"]} met, {est["missed"]} missed, {est["not_judged"]} not judged')
        for e in est["calls"]:
            t = e["target"]
            cls = "empty" if t["met"] is None else "good" if t["met"] else "bad"
            where = [esc(e["call"]), esc(e["linkage"]), esc(e.get("call_kind") or "?")]
            rows.append(where + ["<b>cupti</b>", delta(e["cupti"]), "",
                                 f'<b class="{cls}">{esc(results.target_text(t))}</b>', run])
            for key, name, r, against in (("nsys", "nsys", "cupti_over_nsys", "nsys"),
                                          ("empty_subscriber", "empty CUPTI subscriber (cupti-bare)",
                                           "cupti_over_empty_subscriber", "cupti-bare")):
                bar = "the bar for this call" if t["against"] == against else ""
                rows.append(where + [esc(name), delta(e.get(key)), ratio(e.get(r)), bar, run])
            if e.get("cupti_in_process"):
                rows.append(where + ["<i>cupti, in process: paused against live (another quantity)</i>",
                                     delta(e["cupti_in_process"]), "", "", run])
    if not rows:
        return ""
    return ("<h3>cupti against Nsight Systems and an empty CUPTI subscriber</h3>"
            "<p>One estimator for the three: each method's difference of medians to <code>none</code> between "
            "processes, in the same run (Nsight Systems cannot be paused in process). The empty subscriber "
            "(<code>cupti-bare</code>, both callback domains, an empty callback) is the floor any CUPTI-based "
            "tool pays. Targets: cupti at most 0.7× nsys on launches and copies, at most 1.2× the empty "
            "subscriber on every other call. The row in italics is another quantity, labelled: cupti paused and "
            "live in one process, what its callbacks and activity add over a subscribed, idle CUPTI.</p>"
            f'<p>{"; ".join(notes)}.</p>'
            + table(["call", "cudart", "kind", "who", "Δ vs none ns [95%]", "cupti ÷ this", "target", "bench run"],
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
            + bench_uprobe_split_section(benches) + bench_skipped_calls_section(benches))


def completeness_section(combos):
    cells = {}
    for c in combos:
        if not c.get("workload"):
            continue
        for layer in c.get("layers", []):
            if layer["expected"] == 0:
                continue
            cells[(f'{c["workload"]}.{c["linkage"]}', f'{c["method"]}:{layer["layer"]}')] = layer
        # A layer the method exists to observe and did not: red, never blank.
        for u in c.get("unobserved", []):
            cells[(f'{c["workload"]}.{c["linkage"]}', f'{c["method"]}:{u["layer"]}')] = None
    if not cells:
        if any(not c.get("workload") for c in combos):
            return "<p>Command runs have no ledger: see <i>What each method saw of the command</i> below.</p>"
        return "<p>No scored layers in these results (only the baseline ran).</p>"
    rows = sorted({k[0] for k in cells})
    cols = sorted({k[1] for k in cells})
    fig, ax = plt.subplots(figsize=(1.4 + 1.2 * len(cols), 0.8 + 0.45 * len(rows)))
    def value(r, c):
        if (r, c) not in cells:
            return float("nan")
        cell = cells[(r, c)]
        return 0.0 if cell is None else cell["matched"] / cell["expected"]
    grid = [[value(r, c) for c in cols] for r in rows]
    im = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            if (r, c) in cells:
                text = "not obs." if cells[(r, c)] is None else f"{100 * grid[i][j]:.0f}%"
                ax.text(j, i, text, ha="center", va="center", fontsize=7 if cells[(r, c)] is None else 8)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    fig.colorbar(im, ax=ax, label="recall")
    ax.set_title("recall: matched / expected, per workload x method:layer")
    return (f'<img id="completeness-heatmap" alt="completeness heatmap" src="{png(fig)}">'
            "<p>“not obs.”: a layer the method exists to observe and did not observe for that program "
            "(the reason is in the table below). Blank: the workload gives that layer nothing to expect "
            "(burst makes no launch). Driver: one launch inside each runtime launch, or every driver call "
            "the program made itself; syscall: ledger calls during which their thread made a syscall.</p>")


def unobserved_table(combos):
    """Every layer a method exists to observe and did not (or only in part), with the reason:
    always red. The same reason for many programs is one row; paths inside a reason are cut
    to the library's name, the full text behind a disclosure."""
    items = []
    for c in combos:
        where = ".".join(x for x in (c.get("workload") or "command", c.get("linkage")) if x)
        for u in c.get("unobserved", []):
            items.append((where, c["method"], u["layer"], u["reason"], False))
        for u in c.get("partly_observed", []):
            items.append((where, c["method"], u["layer"], u["reason"], True))
    if not items:
        return '<p id="unobserved">Every method observed every layer it exists to observe.</p>'
    rows = []
    for g in results.grouped_reasons(items):
        layer = ("part of " if g["partly"] else "") + g["layer"]
        full = g["full"][0] if len(g["full"]) == 1 else "\n".join(g["full"])
        rows.append([esc(g["method"]), f'<b class="bad">{esc(layer)}</b>', esc(", ".join(g["where"])),
                     reason_cell(full)])
    return ('<p>Layers not observed: the method could not see this layer of this program at all, so its '
            'zero loss there means nothing. “Part of”: it saw the layer, but not the calls named, '
            'so its recall there is short by design and its loss counters do not count them.</p>'
            + table(["method", "layer not observed", "programs", "why"], rows, "unobserved"))


def command_section(s, n):
    """A command run (no ledger): coverage per method and layer against a reference, and the
    call families side by side (disagreements first, everything behind a toggle). n: the
    program's number, which makes its tables' ids unique in the page."""
    out = []
    v = s.get("verdict")
    if v:
        cmd = " ".join(s.get("command_line", []))
        out.append(f'<p>Harness command line: <code>{esc(cmd)}</code> (results folder {esc(s.get("run_id", ""))})</p>')
        out.append("<ul>" + "".join(
            f'<li>{esc(l)}: {r["total"]} from {esc(r["source"])}'
            + "".join(f'; not counted: {n["calls"]} {esc(f)} ({esc(n["why"])})'
                      for f, n in sorted((r.get("not_counted") or {}).items())) + "</li>"
            for l, r in sorted(v["reference"].items())) + "</ul>")
        rows = []
        for r in sorted(v["coverage"], key=lambda r: (r["method"], r["layer"])):
            status = r["status"]
            cls = "good" if status in ("complete", "nothing to see") else "bad"
            seen, only = r.get("seen"), r.get("only_it_saw")
            # What it matched of the reference, apart from what only it saw: a share of the
            # reference never exceeds it (harness/score/verdict.cpp writes `matched`; earlier
            # summaries have seen = matched + only it saw).
            matched = r.get("matched", seen - only if seen is not None and only is not None else None)
            if r.get("coverage") is None:
                cov = "—"
            else:
                cov = f'{100 * r["coverage"]:.1f}% ({matched} of {r.get("reference")})'
            missed = r.get("missed_families", [])
            why = r.get("reason") or r.get("why", "")
            cell = reason_cell(why) if why else ""
            if missed:
                cell += (f'<details><summary>missed entirely: {len(missed)} famil{"y" if len(missed) == 1 else "ies"}'
                         f'</summary>{esc(", ".join(missed))}</details>')
            rows.append([esc(r["method"]), esc(r["layer"]), f'<b class="{cls}">{esc(status)}</b>',
                         f'<b class="{cls}">{cov}</b>', "—" if only is None else only, cell or "—"])
        out.append(table(["method", "layer", "verdict", "matched of the reference", "only it saw",
                          "why it saw less / families missed entirely"], rows, f"command-coverage-{n}",
                         empty="No method was asked to observe a layer of this command."))
        for layer, fams in sorted((v.get("families") or {}).items()):
            fams = fams or {}
            methods = sorted({m for counts in fams.values() for m in counts if m != "reference"})
            disagree, agree = [], []
            for fam, counts in sorted(fams.items()):
                ref = counts.get("reference", 0)
                row = [esc(fam), ref] + [counts.get(m, 0) for m in methods]
                (agree if all(counts.get(m, 0) == ref for m in methods) else disagree).append(row)
            headers = ["family", "reference"] + methods
            out.append(f"<details><summary>{esc(layer)}: families where methods disagree ({len(disagree)})</summary>"
                       + table(headers, disagree, f"families-{n}-{esc(layer)}",
                               empty="Every method saw as many calls of each family as the reference.")
                       + f"<details><summary>all {len(disagree) + len(agree)} families</summary>"
                       + table(headers, disagree + agree, f"families-all-{n}-{esc(layer)}") + "</details></details>")
    return "\n".join(out)


def per_device_section(runs):
    """Coverage per process and GPU: workloads whose runs had several processes or GPUs, a
    command's processes against the CUPTI reference's, and whether each method's records name
    their device. A (process, device) that saw less than all is red: a total never hides it."""
    names = results.devices.gpu_names([r.manifest for r in runs])
    combos = [c for r in runs for c in r.combos]
    out = []
    rows = []
    for r in results.devices.workload_rows(combos):
        cls = "bad" if r["short"] else "good"
        rec = "—" if r["recall"] is None else results.overview.share_text(r["matched"], r["expected"])
        rows.append([esc(f'{r["workload"]}.{r["linkage"]}'), esc(r["method"]), esc(r["layer"]), esc(r["process"]),
                     esc(results.devices.device_label(r["device"], names)),
                     f'<b class="{cls}">{r["matched"]}/{r["expected"]} ({rec})</b>', r["phantom"]])
    out.append("<h3>Workloads: per process and GPU</h3>"
               + table(["workload", "method", "layer", "process", "device", "matched/expected", "phantom"], rows,
                       "per-device-workloads",
                       empty="No workload here ran more than one process or GPU."))
    arows = []
    for r in results.devices.attribution_rows(combos):
        agree = f'{r["equal"]}/{r["compared"]}' if r["compared"] else "—"
        named = '<b class="good">named</b>' if r["named"] else f'<b class="bad">{esc(results.devices.UNATTRIBUTED)}</b>'
        arows.append([esc(r["method"]), esc(r["layer"]), named, agree, r["unnamed"], reason_cell(r["how"])])
    seen = set()
    unique = []
    for row in arows:  # one row per method and layer: the same for every workload
        key = (row[0], row[1], row[2], row[5])
        if key not in seen:
            seen.add(key)
            unique.append(row)
    out.append("<h3>Which GPU each method's records name</h3>"
               + table(["method", "layer", "device on its records", "agrees with the ledger",
                        "matched calls without one", "how, or why not"], unique, "device-attribution",
                       empty="No workload was scored."))
    return "\n".join(out)


def per_device_command(run, names, n):
    """A command's processes against the CUPTI reference's, per process and GPU, with a chart
    where there are several (a rank or a GPU that saw less is red in both)."""
    out = []
    ref, why, processes = results.devices.command_reference(run.summary)
    if ref is None:
        return f'<p class="empty">Per process and GPU: {esc(why or "no per-process reference")}</p>'
    out.append("<p>Per process and GPU. Reference: " + esc(ref) + "'s processes: " + esc("; ".join(
        f'{p["process"]} (pids {", ".join(map(str, p.get("pids", [])))})' for p in processes))
        + ". A method's processes are matched to these by the GPUs both used where the method names them, "
          "else by the calls both made, then the order of their first CUDA call (the matched_by column).</p>")
    crow = []
    rows = results.devices.command_rows(run.summary)
    for r in rows:
        cls = "bad" if r["short"] else "good"
        cov = "—" if r.get("coverage") is None else results.overview.coverage_text(r["coverage"])
        crow.append([esc(r["method"]), esc(r["layer"]), esc(r["process"]),
                     esc(", ".join(map(str, r.get("method_pids", []))) or "—"),
                     esc(results.devices.device_label(r["device"], names)),
                     f'<b class="{cls}">{r["matched"]} of {r["reference"]} ({cov})</b>', r.get("seen", 0),
                     esc(r.get("matched_by", ""))])
    if len(processes) > 1 and rows:
        out.append(per_device_chart(rows, f"per-device-chart-{n}"))
    out.append(table(["method", "layer", "process (reference)", "its pids in the method's run", "device",
                      "matched of the reference", "seen", "matched by"], crow, f"per-device-command-{n}",
                     empty="No method observed a layer the reference has."))
    return "\n".join(out)


def per_device_chart(rows, chart_id):
    """Per process and GPU of a multi-GPU program: each method and layer's coverage of each
    reference process, as the harness wrote it; a short one (the harness's status) in red."""
    keys = sorted({(r["method"], r["layer"]) for r in rows})
    procs = sorted({r["process"] for r in rows})
    fig, ax = plt.subplots(figsize=(11, 0.6 + 0.32 * len(keys) * len(procs)))
    y, labels = 0, []
    for method, layer in keys:
        for proc in procs:
            r = next((r for r in rows if (r["method"], r["layer"], r["process"]) == (method, layer, proc)), None)
            if r is None or r.get("coverage") is None:
                ax.text(0.01, y, "no figure", va="center", fontsize=7, color="#555")
            else:
                ax.barh([y], [r["coverage"]], color="#b00" if r["short"] else "#2a7", height=0.8)
                ax.text(min(r["coverage"], 0.97) + 0.01, y, results.overview.coverage_text(r["coverage"]),
                        va="center", fontsize=7)
            labels.append(f"{method}:{layer}  {proc}")
            y += 1
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.08)
    ax.set_xlabel("share of the reference's calls matched (red: short, as the harness judged)")
    fig.tight_layout()
    return f'<img id="{chart_id}" alt="coverage per process and GPU" src="{png(fig)}">'


def fidelity_table(combos):
    rows = []
    for c in combos:
        for l in c.get("layers", []):
            args = f'{l["args_equal"]}/{l["args_compared"]}' if l["args_compared"] else "—"
            rets = f'{l["ret_equal"]}/{l["ret_compared"]}' if l["ret_compared"] else "—"
            rows.append([esc(c.get("workload") or "command"), esc(c.get("linkage") or ""), esc(c["method"]), esc(l["layer"]),
                         f'{l["matched"]}/{l["expected"]}', l["phantom"], l["unscored"], args, rets, l["order_violations"]])
    return table(["workload", "cudart", "method", "layer", "matched/expected", "phantom", "unscored", "args equal",
                  "codes equal", "order violations"], rows, "fidelity-table",
                 empty="No layer was scored: no workload ran under a method that observes one.")


def loss_table(combos):
    rows = []
    for c in combos:
        if c["method"] == "none":
            continue
        loss = c.get("loss", {})
        # Counted as the harness counts a run's loss (verdict.cpp lost_events): positive integer
        # counters; a flag is shown among the counters, never added.
        total = results.overview.lost_events(loss)
        detail = ", ".join(f"{esc(k)} {esc(v)}" for k, v in sorted(loss.items())) or "—"
        unobserved = [u["layer"] for u in c.get("unobserved", [])]
        # Zero loss of a layer never observed is no good news.
        cell = (f'<b class="bad">{total}; not observed: {esc(", ".join(unobserved))}</b>' if unobserved
                else f'<b class="{"bad" if total else "good"}">{total}</b>')
        rows.append([esc(c.get("workload") or "command"), esc(c.get("linkage") or ""), esc(c["method"]), cell, detail])
    rows.sort(key=lambda r: "class=\"bad\"" not in r[3])  # what lost something, or saw nothing, first
    return table(["workload", "cudart", "method", "lost (all counters)", "counters"], rows, "loss-table",
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


def cost_section(runs):
    """The cost mode (harness --cost): per program, one bar per method, its slowdown against
    none with the 95% interval the harness computed from paired rounds, and the numbers
    behind it in a table. A method that did not run, failed, lost events or left a layer
    unobserved is named in red, never drawn as if it were clean."""
    programs = [p for r in runs for p in results.cost_programs(r)]
    if not programs:
        return ('<p id="cost-table" class="empty">No cost-mode run in these results '
                '(<code>harness --cost</code>).</p>')
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
    chart = f'<img id="cost-chart" alt="slowdown per program and method" src="{png(fig)}">'

    def seconds(ns):
        return "—" if ns is None else f"{ns / 1e9:.3f}"

    def ratio(r, interval=True):
        if not r:
            return "—"
        text = f'{r["value"]:.2f}×'
        if interval:
            ci = r.get("ci95")
            # The harness's interval (order statistics of the paired rounds, at least 95%)
            # or its reason for none; and its anomaly flag: the report decides nothing.
            text += (f' [{ci[0]:.2f}, {ci[1]:.2f}]' if ci else
                     f' ({esc(r.get("why_no_interval", "no interval: %d round(s)" % r.get("pairs", 0)))})')
            if r.get("anomaly"):
                text += f' <b class="bad" title="{esc(r["anomaly"])}">ANOMALY</b>'
        return text

    def per_step(m, base):
        """The steady-state step (median ms) and its slowdown per step with its interval
        (summary.json methods[].steps, harness/stats/steps.h), or why there is none."""
        st = m.get("steps")
        if not st:
            return "—"
        ms = st.get("median_step_ns")
        text = "—" if ms is None else f"{ms / 1e6:.3f} ms"
        if not base:
            text += f' ({ratio(st.get("ratio"))})' if st.get("ratio") else f' ({esc(st.get("why_no_ratio", "—"))})'
        return text + f' <span title="steady steps">[{st.get("steady_steps", 0)} steps]</span>'

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
            rows.append([label, esc(m["method"]), used, seconds(m["median_wall_ns"]),
                         "baseline" if base else ratio(m.get("ratio")),
                         seconds(m.get("median_startup_ns")) + ("" if base else f' ({ratio(m.get("startup_ratio"), False)})'),
                         seconds(m.get("median_rest_ns")) + ("" if base else f' ({ratio(m.get("rest_ratio"), False)})'),
                         per_step(m, base),
                         f'{setup["median_ms"]:.2f} ({esc(setup["what"])})' if setup else "—",
                         esc(p.get("run", "")), "<br>".join(marks) or '<span class="good">clean</span>'])
        for n in p.get("not_run", []):
            rows.append([label, esc(n["method"]), "0", "—", "—", "—", "—", "—", "—", esc(p.get("run", "")),
                         f'<b class="bad">not run: {esc(n["reason"])}</b>'])
    rounds = sorted({(p["run"], p["rounds"].get("done"), p["rounds"].get("planned"), p.get("stopped") or "")
                     for p in programs})
    stopped = "".join(f"<li>{esc(run)}: {done} of {planned} round(s){': ' + esc(why) if why else ''}</li>"
                      for run, done, planned, why in rounds)
    return (chart
            + "<p>Each program ran once untraced and untimed (warm-up), then under every method in rounds, "
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


def skipped_section(summaries):
    by_reason = {}
    for s in summaries:
        for k in s.get("skipped", []):
            by_reason.setdefault(k["reason"], []).append(
                ".".join(x for x in (k.get("workload"), k.get("linkage"), k.get("method")) if x))
    if not by_reason:
        return '<p id="skipped">Nothing was skipped.</p>'
    items = "".join(f"<li><b>{esc(r)}</b>: {esc(', '.join(sorted(set(w))))}</li>" for r, w in sorted(by_reason.items()))
    return f'<ul id="skipped">{items}</ul>'


def environment_section(manifests):
    env = next((m["environment"] for m in manifests if m and "environment" in m), None)
    if not env:
        return '<p id="environment">No manifest.json found.</p>'
    gpu = env.get("gpu", {})
    devices = ", ".join(f'{d["name"]} (cc {d["compute_capability"]}, {d["multiprocessors"]} SMs)' for d in gpu.get("devices", []))
    host = env.get("host", {})
    rows = [["GPU", esc(devices or gpu.get("reason", "none"))],
            ["driver", esc(f'{gpu.get("driver_version", "?")} (CUDA {gpu.get("driver_cuda_version", "?")})')],
            ["CUDA toolkit (build)", esc(env.get("cuda", {}).get("toolkit_version_at_build", "?"))],
            ["kernel", esc(host.get("kernel", "?"))], ["OS", esc(host.get("os", "?"))],
            ["CPU", esc(f'{host.get("cpu", "?")} x {host.get("cpus", "?")}')],
            ["harness", esc(f'{env.get("harness", {}).get("version", "?")} ({env.get("harness", {}).get("revision", "?")})')]]
    return table(["", ""], rows, "environment")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="results/<run-id> folders")
    ap.add_argument("-o", "--output", default="reports/overhead.html")
    args = ap.parse_args()
    try:
        runs = results.load_runs(args.results)
    except results.SchemaError as e:
        sys.exit(f"generate_report: {e}")
    summaries = [r.summary for r in runs if r.summary]
    benches = [r.bench for r in runs if r.bench]
    manifests = [r.manifest for r in runs]
    ids = [r.run_id for r in runs]
    combos = [c for r in runs for c in r.combos]
    bench_rows = [row for r in runs for row in r.bench_rows()]
    chart, per_call = per_call_section(bench_rows)
    failed = sum(s["counts"]["failed"] for s in summaries)
    o = results.overview.build(runs)
    names = results.devices.gpu_names(manifests)
    by_id = {r.run_id: r for r in runs}
    program_sections = []
    for n, p in enumerate(o["programs"], 1):
        body = [f'<p>Command: <code>{esc(p["command"])}</code></p>']
        for rid in p["runs"]:
            run = by_id.get(rid)
            if run and run.verdict:
                body.append(command_section(run.summary, n))
                body.append(per_device_command(run, names, n))
        if p["cost"]:
            body.append('<p>Its slowdown: see <a href="#sec-cost">Slowdown per program</a>.</p>')
        program_sections.append(section(p["anchor"], f'Program: {p["label"]}', "\n".join(body)))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>CUDA tracing methods: what each one sees, and what it costs</title>
<style>body{{font-family:sans-serif;max-width:1240px;margin:0 auto;padding:6px 12px;color:#222;box-sizing:border-box}}
h1{{font-size:20px;margin:6px 0}}h2{{display:inline;font-size:17px}}h3{{font-size:15px}}
.wide{{max-width:100%;overflow-x:auto}}table{{border-collapse:collapse;margin:0.6em 0;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#eee}}td:first-child{{text-align:left}}
img{{max-width:100%}}.good{{color:#070}}.bad{{color:#b00}}.part{{color:#a60}}.empty{{color:#555;font-style:italic}}
#unobserved td,[id^=command-coverage] td:last-child{{text-align:left;max-width:44em;overflow-wrap:anywhere}}
details.reason .full{{display:block;white-space:pre-wrap;font-size:12px;color:#444}}
summary{{cursor:pointer}}details.sec{{border-top:1px solid #ccc;padding:4px 0}}
details.sec>.body{{max-height:calc(100vh - 60px);overflow:auto}}.note{{color:#555;font-size:13px}}
#overview{{font-size:12.5px;margin:4px 0;width:100%}}#overview td,#overview th{{padding:3px 5px;text-align:center;overflow-wrap:anywhere}}
#overview tbody th{{text-align:left}}#overview a{{color:inherit;text-decoration:none}}#overview a:hover{{text-decoration:underline}}
#overview td.good{{background:#e6f4ea}}#overview td.part{{background:#fdf1dc}}#overview td.bad{{background:#fbe3e3}}
#overview td.none,#overview td.na{{background:#f4f4f4;color:#777}}#facts,.legend{{margin:2px 0;font-size:12.5px;color:#444}}
input.filter{{width:30em;max-width:100%;margin-top:6px}}</style></head><body>
<h1>CUDA tracing methods: what each one sees, and what it costs</h1>
{overview_section(o)}
{section("sec-completeness", "Workloads: what each method saw", completeness_section(combos) + unobserved_table(combos) + fidelity_table(combos))}
{"".join(program_sections)}
{section("sec-per-call", "Per-call cost", chart + per_call + untraced_section(benches) + bench_derived_sections(benches))}
{section("sec-cost", "Slowdown per program", cost_section(runs))}
{section("sec-per-device", "Workloads per process and GPU", per_device_section(runs))}
{section("sec-loss", "Loss", "<p>Every counter a tracer reports about events it could not keep; 0 is the only good value.</p>" + loss_table(combos))}
{section("sec-results-changed", "Results changed by tracing", "<p>A traced run whose result (<code>--result</code>) differs from the untraced run's: tracing changed what the program computed.</p>" + results_changed_section(combos))}
{section("sec-slowdown-matrix", "Whole-workload slowdown (matrix repetitions)", "<p>From the repetitions of each combination, run one after another (the cost mode pairs interleaved rounds instead).</p>" + slowdown_section(combos))}
{section("sec-skipped", "Skipped, and why", skipped_section(summaries + benches))}
{section("sec-environment", "Environment", f"<p>Results folders: {esc(', '.join(ids))}. {failed} failed run(s).</p>" + environment_section(manifests))}
{SCRIPT}
</body></html>
"""
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(page)
    print(f"generate_report: wrote {args.output}")


if __name__ == "__main__":
    main()
