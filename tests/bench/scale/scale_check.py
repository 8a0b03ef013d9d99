#!/usr/bin/env python3
"""The harness at volume, without a GPU: a program making N cheap CUDA calls (call_loop)
under each host-side method, through the whole path from the method's output to its
verdict. Prints, per method, the events kept, the events per second of the harness's work
after the program ended (conversion, reading, scoring, storing), the bytes per event of the
store, and the harness's peak RSS. Fails where a verdict hides loss, where the harness's own
bounds cut a run, or where memory is not bounded (1 GiB).

  scale_check.py HARNESS CALL_LOOP [--calls N] [--methods a,b | --without NAME] [--out DIR]

Without --methods: every method of the registry (`harness --list --json`, kind "method")
that observes a host-side layer (runtime, driver, syscall), less --without.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("harness")
    ap.add_argument("call_loop")
    ap.add_argument("--calls", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", help="comma-separated; default: the registry's host-side methods")
    ap.add_argument("--without", action="append", default=[], help="leave this method out (repeatable)")
    ap.add_argument("--out")
    ap.add_argument("--max-rss-mib", type=int, default=1024)
    a = ap.parse_args()

    listing = json.loads(subprocess.run([a.harness, "--list", "--json"], capture_output=True, text=True, check=True).stdout)
    runnable = {m["name"] for m in listing["methods"] if m.get("available")}
    layers_of = {m["name"]: set(m["layers"]) for m in listing["methods"]}
    host_side = {"runtime", "driver", "syscall"}
    wanted = a.methods.split(",") if a.methods else [
        m["name"] for m in listing["methods"] if m["kind"] == "method" and host_side & set(m["layers"])]
    wanted = [m for m in wanted if m not in a.without]
    methods = [m for m in wanted if m in runnable]
    skipped = [m for m in wanted if m not in runnable]
    if not methods:
        print(f"SKIP: none of {', '.join(wanted)} can run here")
        return SKIP
    out = a.out or tempfile.mkdtemp(prefix="cudatrace-scale-")
    failures = []
    rows = []
    for m in methods:
        t0 = time.monotonic()
        with tempfile.TemporaryFile(mode="w+") as err:
            p = subprocess.Popen([a.harness, "--no-report", "--no-baseline", "--out", out, "--method", m, "--timeout",
                                  "3000", "--", a.call_loop, str(a.calls), str(a.threads)],
                                 stdout=subprocess.DEVNULL, stderr=err)
            # This harness's own peak (and its children's), not the largest of every run so far.
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            console = err.read()
        wall = time.monotonic() - t0
        rss_mib = usage.ru_maxrss / 1024
        runs = sorted(os.path.join(out, d) for d in os.listdir(out))
        run_dir = os.path.join(runs[-1], "runs", f"cmd.{m}.r1")
        run = json.load(open(os.path.join(run_dir, "run.json")))
        summary = json.load(open(os.path.join(runs[-1], "summary.json")))
        shutil.rmtree(runs[-1])
        ms = run.get("harness_ms", {})
        after = (ms.get("conversion_and_finish", 0) + ms.get("reading_and_scoring", 0)) / 1000
        events = run.get("events", {})
        records = events.get("records", 0)
        runtime = run.get("event_counts", {}).get("runtime", 0)
        loss = {k: v for k, v in run["tracer"]["loss"].items() if isinstance(v, int) and v > 0}
        rows.append((m, records, runtime, after, records / after if after > 0 else 0, events.get("bytes_per_event", 0),
                     rss_mib, ms.get("program", 0) / 1000, wall, loss))
        coverage = [r for r in summary.get("verdict", {}).get("coverage", []) if r["method"] == m]
        for r in coverage:
            if loss and r.get("status") == "complete":
                failures.append(f"{m} {r['layer']}: complete over lost events {loss}")
        if any(k.startswith("over_bound") for k in loss):
            failures.append(f"{m}: the harness's own bound cut the run: {loss}")
        if p.returncode not in (0,):
            failures.append(f"{m}: harness exit {p.returncode}: {console.strip().splitlines()[-1:]}")
        # A method that observes the runtime layer (the registry's word) sees every call.
        if "runtime" in layers_of.get(m, set()) and runtime < a.calls and not loss:
            failures.append(f"{m}: {runtime} runtime events of {a.calls} calls, and no loss counted")
        if rss_mib > a.max_rss_mib:
            failures.append(f"{m}: harness peak RSS {rss_mib:.0f} MiB over {a.max_rss_mib}")
    print(f"{a.calls} calls, {a.threads} thread(s); skipped (cannot run here): {', '.join(skipped) or 'none'}")
    # events/s: over the harness's time after the program; a method decoded while the
    # program runs (cupti, uprobe) has only its tail left then, so `after %` says more.
    print(f"{'method':8} {'events':>11} {'runtime':>11} {'after s':>8} {'after %':>8} {'events/s':>11} {'B/event':>8} "
          f"{'peak RSS':>9} {'program s':>9}  loss")
    for m, rec, rt, after, rate, bpe, rss, prog, wall, loss in rows:
        rss_text = f"{rss:.0f} MiB"
        share = f"{100 * after / prog:.0f}%" if prog > 0 else "-"
        print(f"{m:8} {rec:>11} {rt:>11} {after:>8.2f} {share:>8} {rate:>11.0f} {bpe:>8.2f} {rss_text:>9} {prog:>9.2f}  "
              f"{loss or '-'}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
