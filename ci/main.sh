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
# Per-call overhead needs a GPU; without one, --list says why and the step is skipped.
if dist/bin/harness --list | grep -q '^GPU: yes'; then
  dist/bin/harness --bench --method all --linkage both --reps 10 --out results || status=$?
else
  echo "main: per-call benchmark skipped: $(dist/bin/harness --list | grep '^GPU: ')"
fi
echo "main: reports/overhead.html is not built yet (issue #8); read summary.json and bench_summary.json"
# exit 3 = nothing could run here (e.g. no GPU and no root); say so but keep the results
exit $status
