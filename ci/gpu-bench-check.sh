#!/usr/bin/env bash
# On a GPU host: two back-to-back per-call benchmark runs of the main job's shape (shared
# cudart: `harness --bench --method all --linkage shared --reps N`; pass `--linkage both` to
# add static cudart, about twice as long), the second checked against the
# first (--agree-with), then what they decided: 4a whether they agree, 4b cupti against
# Nsight Systems and the empty CUPTI subscriber, 4c uprobe's entry and return probes; and
# how long each run took. Run it as root (sudo), or the eBPF methods are skipped.
#   usage: ci/gpu-bench-check.sh PREFIX OUT [more harness flags]
#     PREFIX  a built or installed tree (dist/, build-gpu/): PREFIX/bin/harness
#     OUT     a folder for the two results folders, the logs, the outcome and a report
# Environment: BENCH_REPS (rounds per run; default 4: with fewer, each method's interval rests on
# two or three processes, and the agreement check reads a run-to-run shift as disagreement far
# more often: docs/measured-history.md),
# CUDATRACE_NCCL_LIB (libnccl.so.2 for the two-GPU all-reduce; looked for in the PyTorch venv
# under /opt/torch/.venv when unset; with one GPU the two-GPU calls are skipped anyway).
# Exit status: 0 when both runs succeeded and they agree, 1 otherwise, 2 on bad usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:?usage: ci/gpu-bench-check.sh PREFIX OUT [harness flags]}
out=${2:?usage: ci/gpu-bench-check.sh PREFIX OUT [harness flags]}
shift 2
harness=$prefix/bin/harness
[[ -x $harness ]] || { echo "gpu-bench-check: no harness at $harness" >&2; exit 2; }
reps=${BENCH_REPS:-4}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The tools ci/gpu-check.sh's device kit brings (strace) where this checkout has them.
[[ -d $here/../.devkit ]] && export PATH=$here/../.devkit/bin:$PATH LD_LIBRARY_PATH=$here/../.devkit/lib:${LD_LIBRARY_PATH:-}
if [[ -z ${CUDATRACE_NCCL_LIB:-} ]]; then
  for lib in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
    [[ -f $lib ]] && { export CUDATRACE_NCCL_LIB=$lib; break; }
  done
fi
log() { echo "== $*" | tee -a "$out/console.log"; }
((EUID == 0)) || log "not root: uprobe, cupti and their cost references will be skipped (run with sudo)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$out/console.log"
log "NCCL for the two-GPU all-reduce: ${CUDATRACE_NCCL_LIB:-none found (libnccl.so.2 as the loader finds it)}"

status=0
runs=()
seconds=()
for round in 1 2; do
  agree=()
  ((round == 2)) && [[ -n ${runs[0]:-} ]] && agree=(--agree-with "${runs[0]}")
  log "bench run $round/2: --method all --linkage shared --reps $reps ${agree[*]} $*"
  rm -f "$out/run-$round"
  start=$(date +%s%N)
  "$harness" --bench --method all --linkage shared --reps "$reps" --out "$out/results" --no-report \
    --run-id-file "$out/run-$round" ${agree[@]+"${agree[@]}"} "$@" > "$out/bench-$round.log" 2>&1
  rc=$?
  ((rc == 0)) || status=1
  ms=$((($(date +%s%N) - start) / 1000000))
  seconds+=("$((ms / 1000)).$(printf %03d $((ms % 1000)))")
  log "bench run $round/2 took ${seconds[$((round - 1))]} s (exit status $rc; log: $out/bench-$round.log)"
  grep -E 'FAILED|not measured|could not|refused' "$out/bench-$round.log" | head -20 | tee -a "$out/console.log"
  if [[ -s $out/run-$round ]]; then
    runs+=("$(cat "$out/run-$round")")
  else
    log "bench run $round/2 wrote no results folder: $(tail -2 "$out/bench-$round.log")"
    status=1
  fi
done

if ((${#runs[@]} == 2)); then
  log "outcome of run 1 (${runs[0]})"
  "$here/../analysis/results.sh" bench-outcome "${runs[0]}" > "$out/outcome-1.txt" 2>&1
  sed -n '/^4b\./,$p' "$out/outcome-1.txt" | tee -a "$out/console.log"
  log "outcome of run 2 (${runs[1]}), checked against run 1"
  "$here/../analysis/results.sh" bench-outcome "${runs[1]}" 2>&1 | tee "$out/outcome-2.txt" | tee -a "$out/console.log"
  grep -q 'agreement with .*: PASS$' "$out/outcome-2.txt" || status=1
  # The report over both runs, drawn by the first python3 that has matplotlib.
  if p=$("$here/../analysis/find_python3.sh"); then
    "$p" "$prefix/share/cudatrace/report/generate_report.py" "${runs[@]}" -o "$out/overhead.html" >/dev/null &&
      log "report: $out/overhead.html"
  fi
fi
if [[ -s $out/outcome-2.txt ]]; then
  log "4a: $(grep -m1 '^agreement with' "$out/outcome-2.txt" || grep -m1 -A1 '^4a\.' "$out/outcome-2.txt" | tail -1)"
  log "4b: run 1 $(grep -m1 '^targets:' "$out/outcome-1.txt" || echo 'not made'); run 2 $(grep -m1 '^targets:' "$out/outcome-2.txt" || echo 'not made')"
  log "4c: $(grep -cE '^[^ ]+ +(static|shared) +(in-process|between) ' "$out/outcome-2.txt") call x linkage rows split into entry and return (tables above)"
fi
log "time: run 1 ${seconds[0]:-?} s, run 2 ${seconds[1]:-?} s (budget: the main job, matrix included, <= 600 s on one H100)"
log "$( ((status == 0)) && echo "both runs done, and they agree" || echo "a run failed, or the runs do not agree: see above")"
exit $status
