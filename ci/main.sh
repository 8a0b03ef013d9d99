#!/usr/bin/env bash
# The main job (README, first set-up command): install what is missing, build, run the
# whole matrix (every workload x both cudart linkages x every method, 3 repetitions),
# and write results/<run-id>/. Extra arguments go to the harness, e.g. --reps 5.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh build dist
status=0
dist/bin/harness --workload all --method all --linkage both --reps 3 --out results "$@" || status=$?
latest=$(ls -td results/*/ 2>/dev/null | head -n 1)
echo "main: results in ${latest:-results/} (summary.json; per-run folders under runs/)"
# exit 3 = nothing could run here (e.g. no GPU and no root); say so but keep the results
exit $status
