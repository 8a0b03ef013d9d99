"""Do two `harness --bench` runs agree? The rule is the harness's own (harness/stats/bench_stats.h,
the same that `harness --bench --agree-with RUN_A` applies to the run it makes): a delta of
run B agrees when it lies within run A's 95% interval of the same delta, or within
max(10%, 100 ns) of A's value; the runs agree when at least 95% of the deltas they share
do (every call, linkage and method; the difference to `none` between processes and the
in-process A/B alike). This command only finds the rule's program (bench_agreement, built
beside the harness) and shows its verdict, with every delta that fell outside and how far
the untraced call moved there.
    usage: python3 -m cudatrace_results bench-agreement RUN_A RUN_B
           (results folders or their bench_summary.json)
The program is $CUDATRACE_BENCH_AGREEMENT, else libexec/cudatrace/bench_agreement of the tree
this package sits in (share/cudatrace/report/ of a build or installed tree), else under dist/,
build-gpu/ or build/ of the source checkout holding analysis/.
Exit status 0 when they agree, 1 when not, 2 when not given two readable runs."""
import json
import os
import subprocess
import sys

from .command import args_or_usage
from .bench import agreement_lines
from .load import SchemaError, load_result

_package = os.path.dirname(os.path.abspath(__file__))


def summary_path(arg):
    return os.path.join(arg, "bench_summary.json") if os.path.isdir(arg) else arg


def rule_program():
    named = os.environ.get("CUDATRACE_BENCH_AGREEMENT")
    if named:
        return named
    # <tree>/share/cudatrace/report/cudatrace_results: the tree's own program first.
    trees = [os.path.join(_package, "..", "..", "..", "..")]
    trees += [os.path.join(_package, "..", "..", t) for t in ("dist", "build-gpu", "build")]
    for tree in trees:
        candidate = os.path.normpath(os.path.join(tree, "libexec", "cudatrace", "bench_agreement"))
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def main(argv=None):
    argv, status = args_or_usage(argv, 2, __doc__)
    if argv is None:
        return status
    paths = [summary_path(a) for a in argv]
    try:
        for p in paths:
            load_result(p)  # a version this analysis cannot read is refused here, with what to do
    except (SchemaError, OSError, ValueError) as e:
        print(f"bench_agreement: {e}")
        return 2
    program = rule_program()
    if program is None:
        print("bench_agreement: no bench_agreement program (build the tree, or set CUDATRACE_BENCH_AGREEMENT)")
        return 2
    run = subprocess.run([program] + paths, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode not in (0, 1):
        print(f"bench_agreement: {run.stderr.strip() or 'the rule program failed'}")
        return 2
    for line in agreement_lines(json.loads(run.stdout)):
        print(line)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
