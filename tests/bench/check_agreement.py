#!/usr/bin/env python3
"""ci/bench_agreement.py on runs built here: it passes what agrees, fails what does not,
and says when the untraced call moved between the runs (the machine, not the tracer).
    usage: check_agreement.py PATH/TO/bench_agreement.py"""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def row(call, method, delta, ci, paused=None, noise=False, none_ns=100.0):
    if method == "none":
        return {"call": call, "linkage": "shared", "method": "none", "median_ns": none_ns}
    r = {"call": call, "linkage": "shared", "method": method, "median_ns": none_ns + delta,
         "in_process_delta_ns": delta, "in_process_delta_ci95_ns": ci}
    if paused:
        r["in_process_paused_values_ns"] = paused
    if noise:
        r["in_process_no_measurable_cost"] = True
    return r


def agreement(rows_a, rows_b, version=1):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, rows in (("a", rows_a), ("b", rows_b)):
            os.makedirs(os.path.join(d, name))
            paths.append(os.path.join(d, name, "bench_summary.json"))
            with open(paths[-1], "w") as f:
                json.dump({"schema_version": version, "run_id": name, "rows": rows}, f)
        p = subprocess.run([sys.executable, script] + paths, capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


failures = []


def check(cond, what, out):
    if not cond:
        failures.append(f"{what}\n{out}")


base = [row("cudaGetDevice", "none", 0, None), row("cudaGetDevice", "cupti", 400, [300, 500], [50, 52, 51])]
code, out = agreement(base, base)
check(code == 0 and "1 of 1 costs above 100 ns agree" in out, "identical runs must agree", out)

# 25% apart, the untraced call 1.6x slower in run B: disagrees, and says the machine moved.
moved = [row("cudaGetDevice", "none", 0, None), row("cudaGetDevice", "cupti", 300, [250, 350], [80, 82, 81])]
code, out = agreement(base, moved)
check(code == 1 and "DISAGREE" in out, "25% apart must disagree", out)
check("untraced call moved too: 51 -> 81 ns" in out, "the untraced call's move must be named", out)
check("1 of 1 are consistent with their own 95% intervals" in out, "overlapping intervals are counted", out)

# Both runs read no measurable cost (noise): they agree on it, whatever the numbers.
noise_a = [row("cudaMalloc", "strace", 150, [-50, 300], noise=True)]
noise_b = [row("cudaMalloc", "strace", 400, [-20, 800], noise=True)]
code, out = agreement(noise_a, noise_b)
check(code == 0, "two readings of no measurable cost agree", out)

# "No measurable cost" is the harness's decision, read from the flag and never made again:
# a reading the harness did not flag is a cost, even with an interval reaching zero, so
# beside a flagged one it disagrees, and the line says why.
unflagged = [row("vecadd", "preload", 188.5, [-32, 249])]
code, out = agreement(unflagged, [row("vecadd", "preload", 12, [-103, 330], noise=True)])
check(code == 1 and "one run reads no measurable cost" in out, "the flag as written, not re-derived", out)
# Flagged noise against a measured cost disagrees too.
code, out = agreement([row("vecadd", "preload", 188.5, [-32, 249], noise=True)], [row("vecadd", "preload", 170, [25, 303])])
check(code == 1, "noise against a measured cost disagrees", out)

# A summary of a version the analysis does not know is refused, with the version named.
code, out = agreement(base, base, version=99)
check(code != 0 and "schema_version 99" in out, "an unknown version is refused", out)

# A cost of 100 ns or less in both runs is not compared.
small = [row("cudaGetDevice", "preload", 60, [50, 70])]
code, out = agreement(small, [row("cudaGetDevice", "preload", 95, [90, 99])])
check(code == 0 and "0 of 0" in out, "costs at or below 100 ns are not compared", out)

# Called without two runs, it says how to call it and does not read a verdict into nothing.
p = subprocess.run([sys.executable, script, "only-one.json"], capture_output=True, text=True)
check(p.returncode == 2 and "usage:" in p.stdout, "one argument is a usage error (exit 2)", p.stdout + p.stderr)
p = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
check(p.returncode == 0 and "usage:" in p.stdout, "--help prints the usage", p.stdout + p.stderr)

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} check(s) failed" if failures else "every check passed")
sys.exit(1 if failures else 0)
