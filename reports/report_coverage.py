"""What each method saw: the workloads' recall heat map, the layers not observed and why, the
fidelity table, a command's coverage against its reference, and coverage per process and GPU.
Every status and shortfall is the harness's, as written."""
import cudatrace_results as results
from report_page import esc, plt, png, reason_cell, table


def heat_label(layer):
    """A heat-map cell's share as the harness words one: rounded down, so 2 calls missing of
    320006 read 99.9%, never 100%."""
    return results.overview.coverage_text(layer["matched"] / layer["expected"])


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
                text = "not obs." if cells[(r, c)] is None else heat_label(cells[(r, c)])
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
                # Rounded down as the harness words a share: 400 of 52,741 reads 0.7%, never 0.8%.
                cov = f'{results.overview.coverage_text(r["coverage"])} ({matched} of {r.get("reference")})'
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

