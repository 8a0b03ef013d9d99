#!/usr/bin/env bash
# The main job (README, first set-up command): install what is missing, build, then
# ci/main-run.sh: the matrix (every workload x both cudart linkages x every method), the
# per-call benchmark where there is a GPU, and reports/overhead.html.
# Extra arguments go to the matrix run, e.g. --reps 3 or --method all.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh build dist
exec ci/main-run.sh dist "$@"
