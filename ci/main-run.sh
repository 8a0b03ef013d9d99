#!/usr/bin/env bash
# The main job's run, over an installed tree (ci/main.sh builds one into dist/ first; a GPU
# host given a built tree runs this alone): the matrix, the per-call benchmark where there
# is a GPU, and one report over both, each step timed.
#   usage: ci/main-run.sh PREFIX [harness flags for the matrix, e.g. --reps 3]
# Environment: MAIN_BENCH_REPS (benchmark rounds, default 3), MAIN_RESULTS (default
# results), MAIN_REPORT (default reports/overhead.html).
#
# What it runs, and why, on the budget of 10 minutes for the whole job on one GPU:
# - the matrix: every workload x both cudart linkages x the methods a user compares
#   (`--method compared`: the registry's methods, references and placeholders). The cost
#   references (`harness --list` names their kind) see what their method sees at a different
#   price: they are measured by the benchmark, not scored again. `--method all` after PREFIX
#   adds them (the harness adds repeated lists up).
# - the benchmark: every method and cost reference, both linkages, MAIN_BENCH_REPS rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: ci/main-run.sh PREFIX [matrix flags]}
shift
harness=$prefix/bin/harness
results=${MAIN_RESULTS:-results}
report=${MAIN_REPORT:-reports/overhead.html}
bench_reps=${MAIN_BENCH_REPS:-3}
status=0
# Each run names its own folder (--run-id-file), so nothing guesses which folder is new.
# A folder of ours holds the file, which the harness (maybe as root) replaces.
run_id_dir=$(mktemp -d)
trap 'rm -rf "$run_id_dir"' EXIT
run_id_file=$run_id_dir/run-folder
run_folder() { [[ -s $run_id_file ]] && cat "$run_id_file"; rm -f "$run_id_file"; }
job_start=$SECONDS
timings=()
step() {  # step NAME COMMAND...: run it, keep its wall time, carry on past a failure
  local name=$1 start=$SECONDS
  shift
  "$@" || status=$?
  timings+=("$name $((SECONDS - start)) s")
}

# --no-report: the job's one report is drawn below, over the matrix and the benchmark together.
step matrix "$harness" --workload all --method compared --linkage both --reps 1 --out "$results" --no-report \
  --run-id-file "$run_id_file" "$@"
folders=()
folder=$(run_folder || true)
[[ -n $folder ]] && folders+=("$folder")
echo "main: results in ${folders[0]:-(no run folder: see above)} (summary.json; per-run folders under runs/)"

# Per-call overhead needs a GPU; without one, --list says why and the step is skipped.
if "$harness" --list | grep '^GPU: yes' >/dev/null; then
  step benchmark "$harness" --bench --method all --linkage both --reps "$bench_reps" --out "$results" --no-report \
    --run-id-file "$run_id_file"
  folder=$(run_folder || true)
  [[ -n $folder ]] && folders+=("$folder")
else
  echo "main: per-call benchmark skipped: $("$harness" --list | grep '^GPU: ')"
fi

# One report over the matrix and the benchmark together, drawn by the first python3 on PATH
# that has matplotlib (a framework's environment on a GPU host), else the system's.
python=""
for p in $(type -ap python3) /usr/bin/python3; do
  [[ $p == /* ]] && "$p" -c 'import matplotlib' 2>/dev/null && { python=$p; break; }
done
if ((${#folders[@]} == 0)); then
  echo "main: no run folder to draw a report from"
elif [[ -n $python ]]; then
  mkdir -p "$(dirname "$report")"
  step report "$python" "$prefix/share/cudatrace/report/generate_report.py" "${folders[@]}" -o "$report"
  echo "main: report in $report (drawn by $python)"
else
  echo "main: no python3 with matplotlib: $report not written (apt-get install python3-matplotlib)"
fi
echo "main: took $((SECONDS - job_start)) s ($(IFS=,; echo "${timings[*]}" | sed 's/,/, /g'))"
# exit 3 = nothing could run here (e.g. no GPU and no root); say so but keep the results
exit $status
