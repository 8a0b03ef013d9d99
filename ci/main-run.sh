#!/usr/bin/env bash
# The main job's run, over an installed tree (ci/main.sh builds one into dist/ first; a GPU
# host given a built tree runs this alone): the matrix, the slowdown of every method on the
# workloads and on real software (the cost mode), the per-call benchmark where there is a
# GPU, and one report over all of them, each step timed.
#   usage: ci/main-run.sh PREFIX [harness flags for the workload runs, e.g. --timeout 120]
# Environment:
#   MAIN_BUDGET_S          the job's time, from its start, that the cost steps fit their
#                          rounds into (default 570: the job must end within 10 minutes on
#                          one H100, and a cost run stops only between two runs)
#   MAIN_COST_ROUNDS       rounds of each cost run (default 3: the fewest that give a 95%
#                          interval); a cost run stops earlier when its share of the budget
#                          is spent, and says so in the report
#   MAIN_WORKLOAD_COST_S   the workloads' cost run's share of the budget (default 90)
#   MAIN_PYTHON            the interpreter of the framework programs (default: the first
#                          python3 on PATH that imports the program's framework, else python3)
#   MAIN_BENCH_REPS (benchmark rounds, default 2), MAIN_BENCH_LINKAGE (default shared), MAIN_RESULTS (default results),
#   MAIN_REPORT (default reports/overhead.html).
#
# What it runs, and why (the job must end within 10 minutes on one H100, so each step is
# cut to what its question needs; every cut is printed when the job runs):
# - workloads: vecadd and streams with shared cudart in the cost mode,
#   MAIN_COST_ROUNDS interleaved rounds of every method a user compares, nsys included.
#   Shared cudart because there every method observes every layer it exists to observe
#   (static cudart hides the runtime layer from preload, whose cost there is the cost of
#   seeing less). The other workloads are shapes for coverage, and they are short: their
#   wall time is mostly start-up, which these two already price.
# - matrix: every workload, both linkages, one repetition, every method a user compares
#   but nsys: what each method sees. On the GPU host Nsight Systems captures but cannot
#   export (capture only), so scoring it on every workload bought only time; its capture
#   path and its cost are checked in the cost steps.
# - benchmark: the `priced` group (harness --help): every method, and the cost references
#   a method's cost split takes its cost apart with (the registry's Method::cost_split; the
#   report's "where the cost goes", the estimator table and uprobe's entry/return split read
#   them; cupti-inject adds about 1.5 s a round on an H200), shared cudart, MAIN_BENCH_REPS
#   rounds (MAIN_BENCH_LINKAGE=both adds static cudart). Static cudart and the other
#   references (the floors, devhook-thread) are priced by ci/gpu-bench-check.sh, which runs
#   them all: in the main job they would take the time the framework programs need for the
#   three rounds of an interval.
# - programs: a CuPy kernel loop, a JAX jit loop and a PyTorch training step
#   (tests/real_programs/) in the cost mode, cheapest first, each given an even share of
#   what is left of MAIN_BUDGET_S (what one leaves goes to the next). CuPy runs under every
#   method a user compares; JAX and PyTorch, whose start-up takes seconds per run, leave out
#   devhook (their kernels ship as SASS: it observes nothing there, and its cost on a
#   program is measured on CuPy) and strace (ptrace's cost is measured on CuPy and the
#   workloads). A framework's own profiler runs on its programs only (torchprof on PyTorch,
#   jaxprof on JAX): elsewhere it would run the program to observe nothing, and take a
#   round's time; on the workloads the harness skips them with that reason. A program whose framework is missing (CI) exits 77 untraced and is
#   skipped with that reason; the report names it.
# The cost references (`harness --list` names their kind) see what their method sees at a
# different price: the benchmark prices them. Extra arguments go to every workload run.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: ci/main-run.sh PREFIX [harness flags]}
shift
harness=$prefix/bin/harness
results=${MAIN_RESULTS:-results}
report=${MAIN_REPORT:-reports/overhead.html}
bench_reps=${MAIN_BENCH_REPS:-2}
# 6 paired rounds are the fewest that give a 95% interval (schema/README.md, "Intervals");
# the time budgets stop the rounds earlier on a slow machine, and the summary says where.
rounds=${MAIN_COST_ROUNDS:-6}
budget=${MAIN_BUDGET_S:-570}
workload_cost_s=${MAIN_WORKLOAD_COST_S:-90}
status=0
# Each run names its own folder (--run-id-file), so nothing guesses which folder is new.
# A folder of ours holds the file, which the harness (maybe as root) replaces.
run_id_dir=$(mktemp -d)
trap 'rm -rf "$run_id_dir"' EXIT
run_id_file=$run_id_dir/run-folder
folders=()
keep_folder() { [[ -s $run_id_file ]] && folders+=("$(cat "$run_id_file")"); rm -f "$run_id_file"; }
job_start=$SECONDS
timings=()
step() {  # step NAME COMMAND...: run it, keep its wall time and its results folder, carry on past a failure
  local name=$1 start=$SECONDS
  shift
  "$@" || status=$?
  timings+=("$name $((SECONDS - start)) s")
  keep_folder
}
left() { echo $((budget - (SECONDS - job_start))); }
# A cost run whose programs all said they cannot run here (exit 3) skipped, and named why:
# not a failure of the job.
skips_are_fine() {
  local rc=0
  "$@" || rc=$?
  ((rc == 3)) && rc=0
  return $rc
}
common=(--out "$results" --no-report --run-id-file "$run_id_file")

# --no-report: the job's one report is drawn at the end, over every step's folder.
step workloads skips_are_fine "$harness" --cost --reps "$rounds" --time-budget "$workload_cost_s" --workload vecadd,streams \
  --linkage shared --method compared "${common[@]}" "$@"
step matrix "$harness" --workload all --linkage both --method compared,-nsys --reps 1 "${common[@]}" "$@"
echo "main: results in ${folders[*]:-(no run folder: see above)} (summary.json; per-run folders under runs/)"

# Per-call overhead needs a GPU; without one, --list says why and the step is skipped.
if "$harness" --list | grep '^GPU: yes' >/dev/null; then
  step benchmark "$harness" --bench --method priced --linkage "${MAIN_BENCH_LINKAGE:-shared}" --reps "$bench_reps" "${common[@]}"
else
  echo "main: per-call benchmark skipped: $("$harness" --list | grep '^GPU: ')"
fi

# Real software, cheapest first. Each program's argument (its steps) gives it a steady
# part beside its start-up, which the cost mode splits off at the program's mark.
programs=("cupy_kernels.py 300 cupy compared,-torchprof,-jaxprof" "jax_jit_loop.py 300 jax compared,-devhook,-strace,-torchprof"
          "torch_train_step.py 200 torch compared,-devhook,-strace,-jaxprof")
python_for() {  # the interpreter that imports $1, else the one a user would get
  [[ -n ${MAIN_PYTHON:-} ]] && { echo "$MAIN_PYTHON"; return; }
  local p
  for p in $(type -ap python3); do
    "$p" -c "import $1" 2>/dev/null && { echo "$p"; return; }
  done
  echo python3
}
for i in "${!programs[@]}"; do
  read -r script count module methods <<<"${programs[$i]}"
  share=$(($(left) / (${#programs[@]} - i)))
  if ((share <= 0)); then
    echo "main: $script not run: nothing left of the job's budget (MAIN_BUDGET_S=$budget)"
    continue
  fi
  echo "main: $script: up to $share s of the job's budget ($(left) s left), --method $methods"
  step "${script%.py}" skips_are_fine "$harness" --cost --reps "$rounds" --time-budget "$share" --method "$methods" "${common[@]}" \
    -- "$(python_for "$module")" "tests/real_programs/$script" "$count"
done

# One report over every step, drawn by the first python3 on PATH that has matplotlib (a
# framework's environment on a GPU host), else the system's.
python=$(analysis/find_python3.sh 2>/dev/null) || python=""
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
