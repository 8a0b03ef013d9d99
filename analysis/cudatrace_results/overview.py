"""The first screen: one row per method, what it observed on the workloads and on each
program, what a call costs under it, its slowdown per program and what it lost, every cell
read from what the harness wrote.

The harness decides; this module selects and words. summary.json's `methods` (each
workload program's status and reasons, the command's status, the events lost), a command's
`verdict.coverage[]` for the layers behind a cell, the cost mode's ratios and intervals and
the benchmark's deltas are taken as written. A summary.json written before `methods` existed
is read from its combinations (workload_status, _run_loss), as the harness would decide them. Where several
are shown in one cell, the cell shows the worst of them and says how many there were; it
never pools matched and expected calls of different programs into a share of its own.
"""
from . import bench as _bench
from .reasons import reason_lines

# Worst first. The harness's words for a command's layer ("blind", "partial", ...) and the
# words a workload's combination is read as (see workload_status).
ORDER = ["failed", "not run", "not observed", "blind", "partial", "complete", "nothing to see"]
# How a status is coloured: bad (red), part (amber), good (green), none (grey).
TONE = {"failed": "bad", "not run": "none", "not observed": "bad", "blind": "bad", "partial": "part",
        "complete": "good", "nothing to see": "none"}

# The benchmark calls the first screen shows: a kernel launch as a user writes it, and a
# cheap call that reaches no GPU (bench/percall names; the first that ran is taken).
LAUNCH_CALLS = ("launch<<<>>>", "cudaLaunchKernel", "cuLaunchKernel")
CHEAP_CALLS = ("cudaGetDevice", "cudaEventRecord")


def worst(statuses):
    return min(statuses, key=ORDER.index) if statuses else None


def lost_events(loss):
    """What a harness that summed every counter as events counted as lost: the sum of the
    counters that are positive integers (a flag or a text is no count). Only for results
    written before the harness summed the counters by unit (summary.json combos[].lost,
    harness/score/loss_units.h); those it reads instead."""
    total = 0
    for n in (loss or {}).values():
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            total += n
    return total


def lost_words(events, other):
    """harness/score/loss_units.cpp LossTotals::text: "66 events, 2 files"; "" for none."""
    words = [f"{events} events"] if events else []
    return ", ".join(words + [f"{n} {unit}" for unit, n in sorted((other or {}).items()) if n])


def harness_lost(combo):
    """(events, {unit: n}) one combination lost, as the harness summed its counters by unit
    (combos[].lost); from the counters themselves for a file that predates the field."""
    lost = combo.get("lost")
    if isinstance(lost, dict):
        return lost.get("events", 0), dict(lost.get("other") or {})
    return lost_events(combo.get("loss")), {}


def lost_text(loss):
    """harness/score/verdict.cpp lost_text: "ring_full=3, dropped=1"."""
    return ", ".join(f"{k}={n}" for k, n in (loss or {}).items()
                     if isinstance(n, int) and not isinstance(n, bool) and n > 0)


def share_text(matched, total):
    """harness/score/verdict.cpp share_text: rounded down, so a shortfall never reads whole;
    where it still reads 99.0% or more, how many are missing."""
    if total <= 0 or matched >= total:
        return "100.0%"
    tenths = matched * 1000 // total
    out = f"{tenths // 10}.{tenths % 10}%"
    if tenths >= 990:
        out += f", {total - matched} of {total} missing"
    return out


def coverage_text(coverage):
    """A harness-written coverage (0..1) as a share that never rounds up to whole."""
    if coverage is None:
        return "—"
    tenths = int(coverage * 1000)
    if coverage < 1 and tenths >= 1000:
        tenths = 999
    return f"{tenths // 10}.{tenths % 10}%"


def command_label(command, width=32):
    """A program as a person names it: its script and arguments ("torch_train_step.py 200"),
    the interpreter dropped where a script follows it; `python3 -c CODE` keeps the code's
    start. -> (short label, whole command)."""
    command = [str(a) for a in (command or [])]
    if not command:
        return "command", ""
    whole = " ".join(command)
    first = command[0].rsplit("/", 1)[-1]
    rest = command[1:]
    interpreters = ("python", "python3", "bash", "sh", "env", "node", "perl", "ruby")
    if (first in interpreters or first.startswith("python")) and rest:
        if rest[0] == "-c":
            words = [first, "-c"] + rest[1:]
        else:
            # Flags of the interpreter before the script go (python3 -u x.py: x.py).
            while rest and rest[0].startswith("-") and rest[0] not in ("-m",):
                rest = rest[1:]
            if rest and rest[0] == "-m":
                words = rest[1:] or [first]
            else:
                words = [rest[0].rsplit("/", 1)[-1]] + rest[1:] if rest else [first]
    else:
        words = [first] + rest
    label = " ".join(words)
    if len(label) > width:
        label = label[:width - 1] + "…"
    return label, whole


def program_command(summary):
    """The program a command run traced: what follows `--` on the harness's command line."""
    line = (summary or {}).get("command_line") or []
    return line[line.index("--") + 1:] if "--" in line else []


def workload_status(combo):
    """One workload combination as its harness-written fields read: (status, one-line reason).
    failed: none of its runs succeeded; not observed: the harness named a layer unobserved and
    the method matched nothing else; partial: any layer unobserved or partly observed, matched
    less than the ledger, a process or GPU short, events lost, or a run failed; else complete."""
    method_layers = [l for l in combo.get("layers", []) if l.get("expected", 0) > 0]
    unobserved = combo.get("unobserved") or []
    partly = combo.get("partly_observed") or []
    short_layers = [l for l in method_layers if l.get("matched", 0) < l.get("expected", 0)]
    lost, lost_other = harness_lost(combo)
    if combo.get("ok", 1) == 0 and combo.get("reps", 1) > 0:
        return "failed", "failed: " + ((combo.get("failures") or ["no reason written"])[0])
    reasons = []
    for u in unobserved:
        reasons.append(f'{u["layer"]} not observed: {one_line(u["reason"])}')
    for u in partly:
        reasons.append(f'{u["layer"]} partly observed: {one_line(u["reason"])}')
    for l in short_layers:
        reasons.append(f'{l["layer"]} {share_text(l["matched"], l["expected"])} of the ledger')
    for s in (combo.get("per_device_short") or [])[:1]:
        reasons.append("short: " + s)
    if lost or lost_other:
        reasons.append(f"lost {lost_words(lost, lost_other)} ({lost_text(combo.get('loss'))})")
    if combo.get("failed", 0):
        reasons.append(f'{combo["failed"]} of {combo.get("reps", "?")} run(s) failed')
    if unobserved and not any(l.get("matched", 0) > 0 for l in method_layers):
        return "not observed", "; ".join(reasons)
    if reasons:
        return "partial", "; ".join(reasons)
    return "complete", ""


def one_line(reason):
    """A reason's first line as reasons.reason_lines words it (paths cut to the file's name)."""
    lines = reason_lines(str(reason))
    return lines[0] if lines else str(reason)


def _decided(run, method):
    """The run's summary.json `methods` entry for `method`; {} where it has none, None where
    the file predates the field."""
    methods = (run.summary or {}).get("methods")
    if not isinstance(methods, list):
        return None
    return next((m for m in methods if m.get("method") == method), {})


def _workload_programs(run, method):
    """(program, status, one-line reason) per workload program of `method` in one run, as the
    harness decided them; read from the combinations where the file predates `methods`."""
    decided = _decided(run, method)
    if decided is not None:
        w = decided.get("workloads") or {}
        return [(p["program"], p["status"], "; ".join(one_line(r) for r in p.get("reasons") or []))
                for p in w.get("programs") or []]
    return [(f'{c["workload"]}.{c.get("linkage") or ""}'.rstrip("."),) + workload_status(c)
            for c in run.combos if c.get("method") == method and c.get("workload")]


def _workload_cell(programs, not_run=None):
    """programs: (program, status, reason) of one method over every run (several runs: the
    worse of two for one program); not_run: why it ran on no workload, where the harness said."""
    by_program = {}
    for key, status, why in programs:
        if key not in by_program or ORDER.index(status) < ORDER.index(by_program[key][0]):
            by_program[key] = (status, why)
    if not by_program:
        return {"status": "not run", "text": "not run", "title": one_line(not_run)} if not_run else None
    counts = {}
    for status, _ in by_program.values():
        counts[status] = counts.get(status, 0) + 1
    n = len(by_program)
    status = worst(list(counts))
    complete = counts.get("complete", 0)
    if status == "complete":
        text = f"complete · {n} programs"
    elif counts.get(status) == n:
        text = f"{status} · all {n}"
    else:
        text = f"{status} · {complete} of {n} complete"
    # The one-line reason: the most frequent among the worst programs, with how many share it.
    worst_whys = {}
    for program, (s, why) in sorted(by_program.items()):
        if s == status and why:
            worst_whys.setdefault(why, []).append(program)
    title = ""
    if worst_whys:
        why, programs = max(worst_whys.items(), key=lambda kv: len(kv[1]))
        title = f"{', '.join(programs[:4])}{' …' if len(programs) > 4 else ''}: {why}"
    return {"status": status, "text": text, "title": title, "counts": counts, "programs": by_program}


def _decided_program_cell(d, rows, short):
    """The command's cell as summary.json `methods[].command` decided it; its layers from the verdict."""
    status = d.get("status", "partial")
    if status in ("failed", "not run"):
        return {"status": status, "text": status, "title": f'{status}: {one_line(d.get("reason") or "no reason written")}'}
    text, cov = status, d.get("coverage")
    if status in ("partial", "blind") and cov is not None:
        text = f'{status} {coverage_text(cov)} {d.get("layer", "")}'
    elif status == "not observed":
        text = f'not observed: {d.get("layer", "")}'
    if d.get("short"):
        text = "complete in total, a process SHORT" if cov is not None and cov >= 1 else text + " · SHORT"
    return {"status": status, "text": text, "title": "; ".join(_layer_parts(rows, short)) or one_line(d.get("reason", ""))}


def _layer_parts(rows, short):
    parts = []
    for r in sorted(rows, key=lambda r: (ORDER.index(r.get("status", "partial")) if r.get("status") in ORDER else 0,
                                         r.get("layer", ""))):
        why = r.get("reason") or r.get("why") or ""
        parts.append(f'{r["layer"]}: {r.get("status")} {coverage_text(r.get("coverage"))}'
                     + (f" ({one_line(why)})" if why else ""))
    for layer, lines in sorted(short.items()):
        for line in lines[:2]:
            parts.append(f"{layer} SHORT: {line}")
    return parts


def _program_cell(verdict, method, combos, not_run, decided=None):
    """A command's verdict for one method: the worst of its layers as the harness judged them
    (decided: summary.json `methods[].command` per method, where the file has it)."""
    rows = [r for r in (verdict or {}).get("coverage", []) if r.get("method") == method]
    short = (((verdict or {}).get("per_device") or {}).get("short") or {}).get(method) or {}
    if decided is not None:
        return _decided_program_cell(decided[method], rows, short) if decided.get(method) else None
    failed = [c for c in combos if c.get("method") == method and c.get("ok", 1) == 0]
    if failed:
        return {"status": "failed", "text": "failed",
                "title": "failed: " + ((failed[0].get("failures") or ["no reason written"])[0])}
    if not rows:
        if method in not_run:
            return {"status": "not run", "text": "not run", "title": one_line(not_run[method])}
        return None
    status = worst([r.get("status", "partial") for r in rows])
    parts = _layer_parts(rows, short)
    # The share shown is the worst layer's, as the harness wrote its coverage.
    shown = min(rows, key=lambda r: (ORDER.index(r["status"]) if r.get("status") in ORDER else 0,
                                     r.get("coverage") if r.get("coverage") is not None else 2))
    text = status
    if status in ("partial", "blind") and shown.get("coverage") is not None:
        text = f'{status} {coverage_text(shown["coverage"])} {shown["layer"]}'
    elif status == "not observed":
        text = f'not observed: {shown["layer"]}'
    if short and status == "complete":
        status, text = "partial", "complete in total, a process SHORT"
    elif short:
        text += " · SHORT"
    return {"status": status, "text": text, "title": "; ".join(parts)}


def _cost_cell(row):
    """A benchmark row's cost as the harness decided it (bench.cost_of)."""
    if not row:
        return None
    c = _bench.cost_of(row)
    if c is None:
        return None
    lo, hi = c.ci
    kind = "paused and live in one process" if c.kind == "in-process" else "against none, between processes"
    if c.noise:
        text, tone = "no measurable cost", "good"
    else:
        text, tone = _ns(c.value), "plain"
    title = f'{row["call"]} ({row["linkage"]} cudart): Δ {c.value:+.1f} ns [{lo:+.1f}, {hi:+.1f}] at 95%, {kind}'
    return _marked(tone, text, title, _cost_caveats(row), "; ")


def _cost_caveats(row):
    """What the harness wrote against a benchmark row's figure: a layer of the method's left out
    (in whole or in part) while it was measured, events lost while it ran."""
    flags = []
    for key, part in (("layers_not_covered", ""), ("layers_partly_covered", "part of ")):
        for layer, why in sorted((row.get(key) or {}).items()):
            flags.append(f"without {part}its {layer} layer: {one_line(why)}")
    if row.get("loss_during_runs"):
        flags.append("measured under loss: " + lost_text(row["loss_during_runs"]))
    return flags


def _first_call(bench_rows, calls):
    """The first of `calls` (LAUNCH_CALLS, CHEAP_CALLS) that the benchmark made."""
    return next((c for c in calls if any(r["call"] == c for r in bench_rows)), None)


def per_call_costs(runs):
    """The first screen's two per-call figures, for every method and linkage, for the report's
    per-call cost chart: the launch and the cheap call the first screen shows (LAUNCH_CALLS,
    CHEAP_CALLS), each figure the harness's as bench.cost_of reads it (in process where the
    method pauses, else against none between processes; its interval; "no measurable cost" as
    written) with its caveats. Where several runs measured one (call, linkage, method), the first
    given is taken, as on the first screen.
    -> {"launch_call", "cheap_call", "methods": [in the order first met], "linkages": [...],
        "costs": {(method, call, linkage): {"cost": bench.Cost, "caveats": [...]}}}"""
    bench_rows = [row for r in runs for row in r.bench_rows()]
    launch, cheap = _first_call(bench_rows, LAUNCH_CALLS), _first_call(bench_rows, CHEAP_CALLS)
    methods, linkages, costs = [], [], {}
    for row in bench_rows:
        key = (row["method"], row["call"], row["linkage"])
        if row["call"] not in (launch, cheap) or key in costs:
            continue
        c = _bench.cost_of(row)
        if c is None:
            continue
        costs[key] = {"cost": c, "caveats": _cost_caveats(row)}
        if row["method"] not in methods:
            methods.append(row["method"])
        if row["linkage"] not in linkages:
            linkages.append(row["linkage"])
    return {"launch_call": launch, "cheap_call": cheap, "methods": methods,
            "linkages": sorted(linkages, key=lambda l: (l != "shared", l)), "costs": costs}


def _marked(tone, text, title, marks, lead):
    """A cell whose figure comes with caveats: starred, tinted, the caveats on hover."""
    if not marks:
        return {"status": tone, "text": text, "title": title}
    return {"status": "part", "text": text + " *", "title": title + lead + "; ".join(marks)}


def _ns(v):
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:+.2f} ms"
    if a >= 1e3:
        return f"{v / 1e3:+.2f} µs"
    return f"{v:+.0f} ns"


def _slowdown_cell(program, method):
    """The cost mode's ratio for one method on one program: steady state (after start-up)
    where the harness told start-up apart, else the whole run; its interval, or why none."""
    for n in program.get("not_run") or []:
        if n["method"] == method:
            return {"status": "none", "text": "not run", "title": one_line(n["reason"])}
    m = next((m for m in program.get("methods", []) if m["method"] == method), None)
    if m is None:
        return None
    # Per step first (the program marked its steps: its whole run is mostly start-up), then
    # steady state after start-up, then the whole run.
    step = (m.get("steps") or {}).get("ratio")
    steady = bool(program.get("startup_source")) and m.get("rest_ratio")
    r = step or (m.get("rest_ratio") if steady else m.get("ratio"))
    what = ("per step in steady state" if step else "steady state (after start-up)" if steady else "whole run")
    if not r:
        return {"status": "bad", "text": "no figure", "title": one_line(m.get("why_no_ratio", "no ratio written"))}
    ci = r.get("ci95")
    text = f'{r["value"]:.2f}×' + ("/step" if step else "")
    title = f"{what}: {r['value']:.3f}× none's"
    if ci and step:
        title += (f", 95% interval [{ci[0]:.3f}, {ci[1]:.3f}] over {r.get('steps', '?')} steady steps in "
                  f"{r.get('rounds', '?')} round(s)")
    elif ci:
        title += f", at least 95% interval [{ci[0]:.3f}, {ci[1]:.3f}] from {r.get('pairs', '?')} paired rounds"
    else:
        title += f", no interval: {r.get('why_no_interval', 'too few rounds')}"
    if ci:
        text += f" [{ci[0]:.2f}–{ci[1]:.2f}]"
    if step and m.get("ratio"):
        title += f"; whole run {m['ratio']['value']:.3f}×"
    marks = [f"{kind} in round(s) {', '.join(map(str, rounds))}" for kind, rounds, _ in
             ((x["mark"], x.get("rounds", []), x.get("detail")) for x in m.get("marks", []))]
    if r.get("anomaly"):
        marks.append("ANOMALY: " + one_line(r["anomaly"]))
    return _marked("plain", text, title, marks, "; marked: ")


def build(runs):
    """-> {"methods": [...], "programs": [...], "columns": ..., "rows": {method: {...}}, "facts": ...}.
    programs: one per command (cost-mode or plain), keyed by its command, each with its
    verdict, its cost entry and the runs it came from; workload cost programs go into the
    slowdown columns under their workload's name."""
    programs = {}
    workload_costs = {}

    def program(command, run):
        label, whole = command_label(command)
        p = programs.setdefault(whole or label, {"label": label, "command": whole, "verdict": None, "cost": None,
                                                 "combos": [], "not_run": {}, "runs": [], "decided": None})
        if run.run_id not in p["runs"]:
            p["runs"].append(run.run_id)
        return p

    for run in runs:
        s = run.summary or {}
        cost = s.get("cost") or {}
        p = None
        for cp in cost.get("programs", []):
            if cp.get("workload"):
                workload_costs.setdefault(cp.get("program") or cp["workload"], dict(cp, run=run.run_id))
                continue
            p = program(cp.get("command") or program_command(s), run)
            p["cost"] = dict(cp, run=run.run_id)
        if s.get("verdict") is not None or any(not c.get("workload") for c in run.combos):
            # A run traces one command: its verdict belongs to the program its cost entry
            # names (the cost entry carries the command as it was resolved).
            p = p or program(program_command(s), run)
            if s.get("verdict") is not None:
                p["verdict"] = s["verdict"]
            if isinstance(s.get("methods"), list):
                p["decided"] = {m.get("method"): m.get("command") for m in s["methods"]}
            p["combos"] += [c for c in run.combos if not c.get("workload")]
            for k in s.get("skipped", []):
                if not k.get("workload") and k.get("method"):
                    p["not_run"][k["method"]] = k.get("reason", "")
    plist = list(programs.values())
    for i, p in enumerate(plist):
        p["anchor"] = f"program-{i + 1}"
        for n in (p["cost"] or {}).get("not_run") or []:
            p["not_run"].setdefault(n["method"], n.get("reason", ""))
    slowdown_programs = ([{"label": k, "command": k, "cost": v, "anchor": "cost"} for k, v in workload_costs.items()]
                         + [p for p in plist if p["cost"]])

    combos = [c for r in runs for c in r.combos]
    methods = []

    def add(m):
        if m and m != "none" and m not in methods:
            methods.append(m)

    for c in combos:
        add(c.get("method"))
    for r in runs:
        for m in (r.summary or {}).get("methods") or []:
            add(m.get("method"))
    for p in plist:
        for r in (p["verdict"] or {}).get("coverage", []):
            add(r.get("method"))
        for m in (p["cost"] or {}).get("methods", []):
            add(m["method"])
        for m in (p["cost"] or {}).get("not_run", []):
            add(m["method"])

    bench_rows = [row for r in runs for row in r.bench_rows()]

    def bench_row(method, calls):
        for call in calls:
            for linkage in ("shared", "static"):
                for row in bench_rows:
                    if row["method"] == method and row["call"] == call and row["linkage"] == linkage:
                        return row
        return None

    rows = {}
    for m in methods:
        decided_workloads = [(_decided(r, m) or {}).get("workloads") or {} for r in runs]
        workload = _workload_cell([e for r in runs for e in _workload_programs(r, m)],
                                  next((w.get("reason") for w in decided_workloads if w.get("status") == "not run"), None))
        per_program = {p["anchor"]: _program_cell(p["verdict"], m, p["combos"], p["not_run"], p["decided"])
                       for p in plist}
        launch = bench_row(m, LAUNCH_CALLS)
        cheap = bench_row(m, CHEAP_CALLS)
        slow = {p["anchor"] + ":" + p["label"]: _slowdown_cell(p["cost"], m) for p in slowdown_programs}
        rows[m] = {"workloads": workload, "programs": per_program, "launch": _cost_cell(launch),
                   "cheap": _cost_cell(cheap), "slowdown": slow, "loss": _loss_cell([_run_loss(r, m) for r in runs])}
    return {"methods": methods, "programs": plist, "slowdown_programs": slowdown_programs, "rows": rows,
            "launch_call": _first_call(bench_rows, LAUNCH_CALLS), "cheap_call": _first_call(bench_rows, CHEAP_CALLS),
            "facts": run_facts(runs)}


def combo_lost(run, combo):
    """What one combination lost, "66 events, 2 files" ("" for nothing): the harness's figures
    where the file has them (summary.json methods[].lost.where names every combination that
    lost any, by unit; one it does not name lost none), else its combination's (harness_lost)."""
    decided = _decided(run, combo.get("method"))
    if decided is None:
        return lost_words(*harness_lost(combo))
    program = "command"
    if combo.get("workload"):
        program = combo["workload"] + (f'.{combo["linkage"]}' if isinstance(combo.get("linkage"), str) else "")
    where = ((decided or {}).get("lost") or {}).get("where") or []
    return next((lost_words(w.get("events", 0), w.get("other")) for w in where if w.get("program") == program), "")


def _run_loss(run, method):
    """One run's lost events for `method` as summary.json `methods[].lost` says them (None where
    it ran nothing); for a file that predates the field, counted here from its combinations as
    the harness counts a run's (lost_events)."""
    decided = _decided(run, method)
    if decided is not None:
        return decided.get("lost")
    combos = [c for c in run.combos if c.get("method") == method]
    if not combos:
        return None
    lossy = [(c, *harness_lost(c)) for c in combos]
    other = {}
    for _, _, o in lossy:
        for unit, n in o.items():
            other[unit] = other.get(unit, 0) + n
    return {"events": sum(n for _, n, _ in lossy), "other": other,
            "combinations": sum(1 for _, n, o in lossy if n > 0 or o), "of": len(combos),
            "where": [{"program": f'{c.get("workload") or "command"}{"." + c["linkage"] if c.get("linkage") else ""}',
                       "events": n, "other": o, "counters": lost_text(c.get("loss"))} for c, n, o in lossy if n > 0 or o],
            "layers_unobserved": sorted({u["layer"] for c in combos for u in (c.get("unobserved") or [])})}


def _loss_cell(losses):
    """A method's lost events over the runs given (each run's as the harness counted it); a zero
    beside a layer it never observed says so."""
    losses = [x for x in losses if x]
    if not losses:
        return None
    total, lossy = sum(x.get("events", 0) for x in losses), sum(x.get("combinations", 0) for x in losses)
    other = {}
    for x in losses:
        for unit, n in (x.get("other") or {}).items():
            other[unit] = other.get(unit, 0) + n
    of = sum(x.get("of", 0) for x in losses)
    blind = sorted({layer for x in losses for layer in x.get("layers_unobserved") or []})
    if lossy:
        where = [f'{w["program"]}: {w["counters"]}' for x in losses for w in x.get("where") or []]
        besides = "".join(f", {n:,} {unit}" for unit, n in sorted(other.items()) if n)
        return {"status": "bad", "text": f"{total:,}{besides} in {lossy} of {of}",
                "title": "; ".join(where[:6]) + (" …" if len(where) > 6 else "")}
    if blind:
        return {"status": "part", "text": "0, " + ", ".join(blind) + " not always seen",
                "title": "no counter lost anything, but a layer it exists to observe went unobserved in "
                         "some programs: nothing there could be counted as lost"}
    return {"status": "good", "text": "0", "title": f"every loss counter 0 in all {of} combinations"}


def run_facts(runs):
    """GPU, driver, harness revision and when, over every run given (distinct values joined)."""
    gpus, drivers, revisions, whens = [], [], [], []

    def add(xs, x):
        if x and x not in xs:
            xs.append(x)

    for r in runs:
        env = (r.manifest or {}).get("environment") or {}
        gpu = env.get("gpu") or {}
        names = {}
        for d in gpu.get("devices") or []:
            names[d.get("name", "?")] = names.get(d.get("name", "?"), 0) + 1
        add(gpus, ", ".join(f"{n}× {name}" if n > 1 else name for name, n in names.items())
            or gpu.get("reason") or ("no GPU" if gpu else ""))
        if gpu.get("driver_version"):
            add(drivers, f'{gpu["driver_version"]} (CUDA {gpu.get("driver_cuda_version", "?")})')
        add(revisions, ((env.get("harness") or {}).get("revision")))
        for src in (r.summary, r.bench, r.manifest):
            for key in ("started", "finished"):
                v = (src or {}).get(key)
                if isinstance(v, str):
                    add(whens, v)
    whens.sort()
    when = "" if not whens else whens[0] if len(whens) == 1 else f"{whens[0]} – {whens[-1]}"
    return {"gpu": "; ".join(gpus) or "unknown (no manifest.json)", "driver": "; ".join(drivers) or "unknown",
            "revision": ", ".join(revisions) or "unknown", "when": when or "unknown", "runs": [r.run_id for r in runs]}
