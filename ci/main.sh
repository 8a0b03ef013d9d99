#!/usr/bin/env bash
# The main job (README, first set-up command): install what is missing, build, run the
# whole matrix (every workload x both cudart linkages x every method, 3 repetitions), the
# per-call benchmark where there is a GPU, and write reports/overhead.html.
# Extra arguments go to the matrix run, e.g. --reps 5.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh build dist
status=0
newest() { ls -td results/*/ 2>/dev/null | head -n 1; }

dist/bin/harness --workload all --method all --linkage both --reps 3 --out results "$@" || status=$?
folders=("$(newest)")
echo "main: results in ${folders[0]} (summary.json; per-run folders under runs/)"

# Per-call overhead needs a GPU; without one, --list says why and the step is skipped.
if dist/bin/harness --list | grep -q '^GPU: yes'; then
  dist/bin/harness --bench --method all --linkage both --reps 10 --out results || status=$?
  folders+=("$(newest)")
else
  echo "main: per-call benchmark skipped: $(dist/bin/harness --list | grep '^GPU: ')"
fi

# One report over the matrix and the benchmark together, drawn by the first python3 on PATH
# that has matplotlib (a framework's environment on a GPU host), else the system's.
python=""
for p in $(type -ap python3) /usr/bin/python3; do
  [[ $p == /* ]] && "$p" -c 'import matplotlib' 2>/dev/null && { python=$p; break; }
done
if [[ -n $python ]]; then
  "$python" dist/share/cudatrace/report/generate_report.py "${folders[@]}" -o reports/overhead.html || status=$?
  echo "main: report in reports/overhead.html (drawn by $python)"
else
  echo "main: no python3 with matplotlib: reports/overhead.html not written (apt-get install python3-matplotlib)"
fi
# exit 3 = nothing could run here (e.g. no GPU and no root); say so but keep the results
exit $status
