"""The cost mode's results (summary.json "cost", written by harness/stats/cost.cpp), as the
harness computed them: the slowdown of each method against none from paired rounds, its
interval, start-up apart from the rest, and every run that was marked. Nothing here
computes a ratio or an interval again; this module only lays them out for readers.
"""

from .overview import command_label

# The harness's name for figures taken from marked runs (harness/stats/cost_stats.cpp, basis_name).
MARKED_BASIS = "marked runs (no clean run)"


def cost_programs(run):
    """The programs of one results folder's cost run, each with the run it came from."""
    cost = (run.summary or {}).get("cost") or {}
    return [dict(p, run=run.run_id, rounds=cost.get("rounds", {}), stopped=cost.get("stopped"))
            for p in cost.get("programs", [])]


def program_label(program):
    """"vecadd.shared", or a command by its script and arguments ("jax_jit_loop.py 300"): the
    interpreter dropped before a script; one given its code inline keeps "python3 -c" and the
    code's start (overview.command_label)."""
    if program.get("workload"):
        return program["program"]
    return command_label(program.get("command") or [])[0]


def mark_summary(method):
    """What marked a method's runs, one short phrase each: ("lost events", [2, 4], detail)."""
    return [(m["mark"], m.get("rounds", []), m.get("detail", "")) for m in method.get("marks", [])]


def from_marked_runs(method):
    return method.get("basis") == MARKED_BASIS
