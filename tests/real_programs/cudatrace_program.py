"""What the real programs share with the harness, through two conventions of its cost mode
(harness/stats/cost.h): a program that cannot run here (its framework is not installed, no GPU)
exits 77 with the reason as its last line on stderr, and is skipped with that reason rather
than failed; and a program marks the end of its start-up by appending
"<CLOCK_MONOTONIC ns> <what>" to the file named by $CUDATRACE_STARTUP_MARK, which splits
each run's wall time into start-up and the rest."""
import importlib
import os
import sys
import time

CANNOT_RUN_HERE = 77


def cannot_run(program, why):
    print(f"{program}: {why}", file=sys.stderr)
    sys.exit(CANNOT_RUN_HERE)


def need(program, module):
    """The module, or exit 77 naming it and the import's error."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # an ImportError, or a broken install failing inside its import
        cannot_run(program, f"cannot import {module} ({type(e).__name__}: {e}) with {sys.executable}")


def startup_done(what):
    path = os.environ.get("CUDATRACE_STARTUP_MARK")
    if path:
        with open(path, "a") as f:
            f.write(f"{time.clock_gettime_ns(time.CLOCK_MONOTONIC)} {what}\n")


def count_argument(default):
    """The program's one optional argument: how many steps or iterations to run."""
    if len(sys.argv) < 2:
        return default
    try:
        n = int(sys.argv[1])
    except ValueError:
        n = 0
    if n < 1:
        sys.exit(f"{os.path.basename(sys.argv[0])}: the argument is a count of steps (a positive whole number), got {sys.argv[1]!r}")
    return n
