#!/usr/bin/env python3
"""The analysis package's bench-agreement command on runs written here: it shows the harness's verdict (the rule is
bench_agreement's, harness/stats/bench_stats.h), passes what agrees, fails what does not, names
every delta outside with how far the untraced call moved, and refuses what it cannot read.
    usage: check_agreement.py PATH/TO/analysis   (the folder holding cudatrace_results;
                                                  CUDATRACE_BENCH_AGREEMENT: the program)"""
import json
import os
import subprocess
import sys
import tempfile

# python3 -m cudatrace_results bench-agreement, the package taken from the folder given.
command = [sys.executable, "-m", "cudatrace_results", "bench-agreement"]
env = dict(os.environ, PYTHONPATH=sys.argv[1])


def row(call, method, delta, ci, in_process=None, none_ns=100.0):
    if method == "none":
        return {"call": call, "linkage": "shared", "method": "none", "reps": 3, "median_ns": none_ns,
                "values_ns": [none_ns]}
    r = {"call": call, "linkage": "shared", "method": method, "reps": 3, "median_ns": none_ns + delta,
         "values_ns": [none_ns + delta], "delta_ns": delta, "delta_ci95_ns": ci}
    if in_process:
        r["in_process_delta_ns"], r["in_process_delta_ci95_ns"] = in_process
    return r


def agreement(rows_a, rows_b, version=2, as_folders=False):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, rows in (("a", rows_a), ("b", rows_b)):
            os.makedirs(os.path.join(d, name))
            paths.append(os.path.join(d, name, "bench_summary.json"))
            with open(paths[-1], "w") as f:
                json.dump({"schema_version": version, "run_id": "run-" + name, "rows": rows}, f)
        if as_folders:
            paths = [os.path.dirname(p) for p in paths]
        p = subprocess.run(command + paths, capture_output=True, text=True, env=env)
        return p.returncode, p.stdout + p.stderr


failures = []


def check(cond, what, out):
    if not cond:
        failures.append(f"{what}\n{out}")


base = [row("cudaGetDevice", "none", 0, None), row("cudaGetDevice", "cupti", 400, [300, 500], (350, [340, 360]))]
code, out = agreement(base, base)
check(code == 0 and "2 of 2 deltas" in out and "PASS" in out, "identical runs agree", out)
code, out = agreement(base, base, as_folders=True)
check(code == 0 and "agreement with run-a" in out, "results folders are taken too", out)

# 25% apart between processes but at the edge of run A's interval (inside it), 31% and 110 ns
# apart in process (outside), the untraced call 1.6x slower in run B: the one outside named,
# with the untraced call's move.
moved = [row("cudaGetDevice", "none", 0, None, none_ns=160),
         row("cudaGetDevice", "cupti", 300, [290, 310], (240, [238, 242]))]
code, out = agreement(base, moved)
check(code == 1 and "FAIL" in out and "1 of 2 deltas" in out, "one of two deltas outside disagrees", out)
check("outside: cudaGetDevice shared cupti between: +300.0 ns, was +400.0 [+300.0, +500.0]" not in out,
      "a delta at the edge of the interval is inside it", out)
check("outside: cudaGetDevice shared cupti in-process: +240.0 ns, was +350.0 [+340.0, +360.0]" in out,
      "the in-process delta outside is named", out)
check("untraced call 100 -> 160 ns" in out, "the untraced call's move is named", out)

# Within 100 ns or 10% of the earlier value, whatever the intervals: agrees.
code, out = agreement([row("cudaMalloc", "strace", 150, [140, 160])], [row("cudaMalloc", "strace", 245, [240, 250])])
check(code == 0, "95 ns apart agrees", out)
code, out = agreement([row("vecadd", "nsys", 5000, [4990, 5010])], [row("vecadd", "nsys", 5450, [5440, 5460])])
check(code == 0, "9% apart agrees", out)
code, out = agreement([row("vecadd", "nsys", 5000, [4990, 5010])], [row("vecadd", "nsys", 5600, [5590, 5610])])
check(code == 1, "12% and 600 ns apart, outside the interval, disagrees", out)

# A summary of a version the analysis does not know is refused, with the version named.
code, out = agreement(base, base, version=99)
check(code == 2 and "schema_version 99" in out, "an unknown version is refused", out)
# Version 1 summaries (before the estimators) still compare.
code, out = agreement(base, base, version=1)
check(code == 0, "version 1 summaries compare", out)

# Called without two runs, it says how to call it and does not read a verdict into nothing.
p = subprocess.run(command + ["only-one.json"], capture_output=True, text=True, env=env)
check(p.returncode == 2 and "usage:" in p.stdout, "one argument is a usage error (exit 2)", p.stdout + p.stderr)
p = subprocess.run(command + ["--help"], capture_output=True, text=True, env=env)
check(p.returncode == 0 and "usage:" in p.stdout, "--help prints the usage", p.stdout + p.stderr)

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} check(s) failed" if failures else "every check passed")
sys.exit(1 if failures else 0)
