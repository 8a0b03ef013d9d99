"""What every command of the package does with its arguments before its own work."""
import sys


def args_or_usage(argv, count, doc):
    """The command's arguments (sys.argv's where `argv` is None), or None and the exit status
    after printing `doc`: 0 where -h or --help asked for it, 2 where the count is wrong.
    `count` None: one or more."""
    argv = sys.argv[1:] if argv is None else argv
    asked = argv[:1] in (["-h"], ["--help"])
    if asked or (not argv if count is None else len(argv) != count):
        print(doc)
        return None, 0 if asked else 2
    return argv, None
