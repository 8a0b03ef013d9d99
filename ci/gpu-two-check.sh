#!/usr/bin/env bash
# On a host with two GPUs: the two-GPU workloads and real multi-GPU software under every
# method, each run scored per process and per GPU; then one report and a one-screen summary.
#   usage: ci/gpu-two-check.sh PREFIX OUT [PHASE ...]
#     PREFIX  a harness tree: a build tree (build-gpu: ctest runs there too) or an installed
#             one (dist); PREFIX/bin/harness is the harness
#     OUT     where results, logs, the report and the summary go (created)
#     PHASE   any of: ctest workloads nccl ddp report (default: all, in that order). Each phase
#             ends within its bound (TWO_GPU_STEP_S, default 540 s: under a remote runner's
#             ten minutes), so a runner may call one phase at a time.
# Environment: PYTHON (default /opt/torch/.venv/bin/python3, else python3) runs the PyTorch
# programs; TWO_GPU_RUN_S (default 150) bounds each traced run inside the harness; a run that
# times out is named, with what was still running, and the matrix goes on.
# Exit status: 0 every phase ran and its runs passed; 1 a run failed or a phase hit its bound;
# 2 bad usage. On a host with fewer than two GPUs every phase says so and exits 0.
set -uo pipefail
[[ $# -ge 2 ]] || { sed -n '2,16p' "$0"; exit 2; }
# PREFIX and OUT as the caller named them, then the checkout's root for its scripts.
prefix=$(cd "$1" && pwd) || exit 2
out=$(mkdir -p "$2" && cd "$2" && pwd) || exit 2
cd "$(dirname "$0")/.." || exit 2
shift 2
phases=("$@")
[[ ${#phases[@]} -gt 0 ]] || phases=(ctest workloads nccl ddp report)
harness=$prefix/bin/harness
[[ -x $harness ]] || { echo "gpu-two-check: no harness at $harness" >&2; exit 2; }
step_s=${TWO_GPU_STEP_S:-540}
run_s=${TWO_GPU_RUN_S:-150}
py=${PYTHON:-/opt/torch/.venv/bin/python3}
[[ -x $py ]] || py=$(command -v python3)
results=$out/results
mkdir -p "$results"
[[ -d .devkit ]] && export PATH=$PWD/.devkit/bin:$PATH LD_LIBRARY_PATH=$PWD/.devkit/lib:${LD_LIBRARY_PATH:-}
log() { echo "== $(date +%H:%M:%S) $*" | tee -a "$out/console.log"; }
status=0

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader 2>&1 | tee "$out/gpus.txt"
if [[ ${gpus:-0} -lt 2 ]]; then
  log "skipped: this host shows ${gpus:-0} GPU(s), the checks need two"
  exit 0
fi

# One bounded step: its console to OUT/<name>.log, the run folder it made to OUT/<name>.run.
# The harness stops each traced run at $run_s itself; `timeout` bounds the whole step.
harness_step() {
  local name=$1
  shift
  log "$name: harness $*"
  timeout -k 20 "$step_s" "$harness" --timeout "$run_s" --no-report --out "$results" \
    --run-id-file "$out/$name.run" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  grep -E '^\[ *[0-9]+/|run\(s\) ok|SHORT|NOT OBSERVED|left running' "$out/$name.log" | cut -c1-240 | tail -60
  case $rc in
    0) ;;
    124 | 137) log "$name: STOPPED at its bound of $step_s s (the runs that finished are kept)"; status=1 ;;
    3) log "$name: nothing could run here (reasons in $out/$name.log)" ;;
    *) log "$name: harness exit $rc (a run failed: $out/$name.log)"; status=1 ;;
  esac
  [[ -s $out/$name.run ]] && analysis/results.sh per-device-summary "$(cat "$out/$name.run")" | tee -a "$out/summary.txt"
}

for phase in "${phases[@]}"; do
  case $phase in
    ctest)
      if [[ ! -f $prefix/CTestTestfile.cmake ]]; then
        log "ctest: $prefix is not a build tree; the workloads phase runs the harness directly"
        continue
      fi
      # ctest recorded the source path it was built from.
      built_at=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$prefix/CMakeCache.txt")
      [[ -n $built_at && "$built_at" != "$PWD" && ! -e $built_at ]] && { mkdir -p "$(dirname "$built_at")"; ln -sfn "$PWD" "$built_at"; }
      log "ctest: TwoGpus.* (the two-GPU workloads under every method), bounded by $step_s s"
      (cd "$prefix" && timeout -k 20 "$step_s" ctest -R '^TwoGpus\.' --timeout "$step_s" --output-on-failure 2>&1) \
        >"$out/ctest.log"
      rc=$?
      grep -E 'Test +#|tests passed|SKIPPED|Failed|every process|SHORT' "$out/ctest.log" | cut -c1-200 | tail -30
      [[ $rc -eq 0 ]] || { log "ctest: exit $rc ($out/ctest.log)"; status=1; }
      ;;
    workloads)
      harness_step workloads --workload twogpu,twoproc --linkage both --method compared
      ;;
    nccl)
      harness_step nccl --method compared -- "$py" tests/real_programs/nccl_two_gpus.py
      ;;
    ddp)
      harness_step ddp --method compared -- "$py" tests/real_programs/torch_ddp_step.py
      ;;
    report)
      runs=()
      for f in "$out"/*.run; do [[ -s $f ]] && runs+=("$(cat "$f")"); done
      if [[ ${#runs[@]} -eq 0 ]]; then
        log "report: no results in $out yet (run a phase first)"
        continue
      fi
      # As the harness does: the first python3 that has matplotlib, else the framework's, else the system's.
      report_py=$(analysis/find_python3.sh 2>/dev/null) || report_py=$py
      "$report_py" -c "import matplotlib" 2>/dev/null || report_py=/usr/bin/python3
      log "report: ${#runs[@]} results folder(s) -> $out/two-gpus.html"
      timeout -k 10 300 "$report_py" "$prefix/share/cudatrace/report/generate_report.py" "${runs[@]}" \
        -o "$out/two-gpus.html" 2>&1 | tail -3
      log "per process and GPU, every folder:"
      analysis/results.sh per-device-summary "${runs[@]}" | tee "$out/summary.txt"
      ;;
    *)
      echo "gpu-two-check: unknown phase '$phase' (ctest workloads nccl ddp report)" >&2
      exit 2
      ;;
  esac
done
exit $status
