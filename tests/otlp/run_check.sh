#!/usr/bin/env bash
# ctest entry: bring the OTLP definitions (otlp_definitions.sh; 77 = skipped, with its
# reason), then check_otlp.py with the interpreter that has protobuf.
#   run_check.sh DEFS_DIR HARNESS WORK_DIR MODE
set -euo pipefail
here=$(dirname "$0")
"$here/otlp_definitions.sh" "$1"
exec "$(cat "$1/python3")" "$here/check_otlp.py" "$@"
