#!/usr/bin/env python3
"""Do two `harness --bench` runs agree? The rule is the harness's own (harness/stats/bench_stats.h,
the same that `harness --bench --agree-with RUN_A` applies to the run it makes): a delta of
run B agrees when it lies within run A's 95% interval of the same delta, or within
max(10%, 100 ns) of A's value; the runs agree when at least 95% of the deltas they share
do (every call, linkage and method; the difference to `none` between processes and the
in-process A/B alike). This script only finds the rule's program (bench_agreement, built
beside the harness) and shows its verdict, with every delta that fell outside and how far
the untraced call moved there.
    usage: ci/bench_agreement.py RUN_A RUN_B   (results folders or their bench_summary.json)
The program is $CUDATRACE_BENCH_AGREEMENT, else libexec/cudatrace/bench_agreement under dist/,
build-gpu/ or build/ beside this script's checkout.
Exit status 0 when they agree, 1 when not, 2 when not given two readable runs."""
import json
import os
import subprocess
import sys

# The analysis package: beside this script where installed (share/cudatrace/report/), in
# analysis/ of the source tree otherwise.
_here = os.path.dirname(os.path.abspath(__file__))
for _p in (_here, os.path.join(_here, "..", "analysis")):
    if os.path.isdir(os.path.join(_p, "cudatrace_results")):
        sys.path.insert(0, _p)
        break
import cudatrace_results as results  # noqa: E402


def summary_path(arg):
    return os.path.join(arg, "bench_summary.json") if os.path.isdir(arg) else arg


def rule_program():
    named = os.environ.get("CUDATRACE_BENCH_AGREEMENT")
    if named:
        return named
    for tree in ("dist", "build-gpu", "build"):
        candidate = os.path.join(_here, "..", tree, "libexec", "cudatrace", "bench_agreement")
        if os.access(candidate, os.X_OK):
            return candidate
    sys.exit("bench_agreement: no bench_agreement program (build the tree, or set CUDATRACE_BENCH_AGREEMENT)")


if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
paths = [summary_path(a) for a in sys.argv[1:]]
try:
    for p in paths:
        results.load_result(p)  # a version this analysis cannot read is refused here, with what to do
except (results.SchemaError, OSError, ValueError) as e:
    print(f"bench_agreement: {e}")
    sys.exit(2)
run = subprocess.run([rule_program()] + paths, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
if run.returncode not in (0, 1):
    print(f"bench_agreement: {run.stderr.strip() or 'the rule program failed'}")
    sys.exit(2)
for line in results.agreement_lines(json.loads(run.stdout)):
    print(line)
sys.exit(run.returncode)
