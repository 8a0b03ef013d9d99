"""The analysis package's commands: python3 -m cudatrace_results COMMAND [ARGS...]
(PYTHONPATH holding the folder this package is in; analysis/results.sh sets it). Each command
reads what the harness wrote and prints it; none decides a verdict again."""
import importlib
import sys

# command -> (module, one line of what it does)
COMMANDS = {
    "bench-agreement": ("bench_agreement", "do two `harness --bench` runs agree (the harness's rule program)"),
    "bench-outcome": ("bench_outcome", "what a `harness --bench` run decided, as text"),
    "per-device-summary": ("per_device_summary", "one screen per results folder, per process and GPU"),
    "percall-table": ("percall_table", "bench/percall JSONs run by hand, per call and label"),
}


def usage():
    return (__doc__ + "\n\ncommands:\n"
            + "\n".join(f"  {name:20} {what}" for name, (_, what) in sorted(COMMANDS.items()))
            + "\n\n`COMMAND --help` says more.")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"cudatrace_results: no command {argv[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f".{COMMANDS[argv[0]][0]}", __package__)
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
