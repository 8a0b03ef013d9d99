#!/usr/bin/env bash
# The analysis package's commands from a shell (ci/ and by hand): python3 -m cudatrace_results
# with the package found beside this script, analysis/ of the source tree or
# share/cudatrace/report/ of a build or installed tree. The commands need the standard library
# only, so any python3 does; the report needs matplotlib (find_python3.sh finds one).
#   usage: analysis/results.sh COMMAND [ARGS...]    (analysis/results.sh --help lists them)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH} exec python3 -m cudatrace_results "$@"
