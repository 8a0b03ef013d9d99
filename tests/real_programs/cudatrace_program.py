"""What the real programs share with the harness, through two conventions of its cost mode
(harness/stats/cost.h): a program that cannot run here (its framework is not installed, no GPU)
exits 77 with the reason as its last line on stderr, and is skipped with that reason rather
than failed; and a program marks the end of its start-up by appending
"<CLOCK_MONOTONIC ns> <what>" to the file named by $CUDATRACE_STARTUP_MARK, which splits
each run's wall time into start-up and the rest; and a program marks the end of each step
(each iteration of its loop) by appending "<CLOCK_MONOTONIC ns>" to the file named by
$CUDATRACE_STEP_MARK, from which the cost mode reports the slowdown per step in steady state
(harness/stats/steps.h, schema/README.md "Step marks")."""
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


_step_file = None


def step_done(sync=None):
    """Marks the end of a step. `sync`, the framework's wait for the GPU, is called first so
    that a step's time holds its GPU work rather than only its launches; it is called only
    when the harness asks for step marks, so that a run without them is the program as it is.
    Traced and untraced runs both get the variable, so both wait alike."""
    global _step_file
    path = os.environ.get("CUDATRACE_STEP_MARK")
    if not path:
        return
    if sync is not None:
        sync()
    if _step_file is None:
        _step_file = open(path, "a")
    print(time.clock_gettime_ns(time.CLOCK_MONOTONIC), file=_step_file, flush=True)


def steps_or_seconds_argument(default):
    """The program's one optional argument: a count of steps, or a duration ("300s": steps
    until that many seconds have passed since start-up ended), for runs long enough to show
    what a tracer does at volume. Returns (steps, seconds), one of them None."""
    if len(sys.argv) >= 2 and sys.argv[1].endswith("s"):
        try:
            seconds = float(sys.argv[1][:-1])
        except ValueError:
            seconds = 0
        if not seconds > 0:
            sys.exit(f"{os.path.basename(sys.argv[0])}: a duration is a positive number of seconds and 's', got {sys.argv[1]!r}")
        return None, seconds
    return count_argument(default), None


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
