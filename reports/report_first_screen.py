"""The first screen: one row per method (analysis/cudatrace_results/overview.py builds it; this
draws it), each cell linking to its evidence in a folded section below."""
import cudatrace_results as results
from report_page import esc


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
            cells.append(_cell(r["launch"], "per-call-cost"))
        if o["cheap_call"]:
            cells.append(_cell(r["cheap"], "per-call-cost"))
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

