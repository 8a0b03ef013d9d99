#!/usr/bin/env bash
# On a GPU machine, over a tree prepared by ci/gpu-bundle.sh (build-gpu/, dist-gpu/) and
# ../shared/tools/device-kit.sh (.devkit/: strace): the GPU tests, the real-program
# workloads under every method, and real software as commands. Results go to OUT (a
# folder; default results-gpu), as a tarball and the console logs.
#   usage: ci/gpu-check.sh tests [ctest-regex]   the gpu|privileged tests (or those matching)
#          ci/gpu-check.sh matrix                the real-program workloads x every method,
#                                                then real software as commands
#          ci/gpu-check.sh cost [METHODS]        record_cost, then --bench under none and
#                                                METHODS (default preload), both linkages
#          ci/gpu-check.sh cupti-split [ROUNDS]  percall run by hand under each of the CUPTI
#                                                library's modes (tracers/cupti/injection/injection.cpp) and
#                                                nsys, interleaved: where cupti's cost goes
#          ci/gpu-check.sh devhook-cost [SUBRINGS]  --bench of devhook and devhook-thread (vecadd
#                                                + sync, both sizes, in-process A/B) with the
#                                                ring split in each of SUBRINGS (default
#                                                "32 1"): issue 18's cost table
#          ci/gpu-check.sh overhead [METHODS]    two back-to-back --bench runs (the agreement
#                                                bar), every method by default, nsys included
#                                                where installed; then nsys and cupti on vecadd
#                                                and errors against the ledger. Plan for it:
#                                                docs/measured-history.md says how long a
#                                                round took on the H100 host
#          ci/gpu-check.sh main                  the main job's run (ci/main-run.sh) over the
#                                                carried tree, timed step by step: matrix,
#                                                benchmark, report (issue 19: <= 10 minutes)
#          ci/gpu-check.sh otlp                  the OpenTelemetry export on the GPU: vecadd under
#                                                cupti (kernels linked to launches), then a
#                                                PyTorch step as a command, exported and decoded
#                                                (needs .otlpkit/python: tests/otlp's compiled
#                                                definitions and Python's protobuf, see there)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results-gpu}
mkdir -p "$out"
[[ -d .devkit ]] && export PATH=$PWD/.devkit/bin:$PATH LD_LIBRARY_PATH=$PWD/.devkit/lib:${LD_LIBRARY_PATH:-}
# ci/gpu-bundle.sh's tree travels compressed (the device tool carries 64 MiB at most).
# (xz, or Python's lzma where the host has no xz).
if [[ ! -d build-gpu && -f dist-carry/build-gpu.txz ]]; then
  if command -v xz >/dev/null; then tar xJf dist-carry/build-gpu.txz
  else python3 -c 'import tarfile; tarfile.open("dist-carry/build-gpu.txz").extractall()'; fi
fi
# ctest recorded this checkout's absolute path when it was built.
built_at=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build-gpu/CMakeCache.txt)
[[ "$built_at" != "$PWD" ]] && { mkdir -p "$(dirname "$built_at")"; ln -sfn "$PWD" "$built_at"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
harness=build-gpu/bin/harness  # the build tree has the installed layout; dist-gpu need not travel
results=$out/results
log() { echo "== $*" | tee -a "$out/console.log"; }

phase=${1:-matrix}
if [[ $phase == tests ]]; then
  log "ctest"
  (cd "$built_at/build-gpu" && ctest -L "gpu|privileged" ${2:+-R "$2"} -j4 --timeout 300 2>&1) | tee "$out/ctest.log" | tail -40
  exit 0
fi

if [[ $phase == cost ]]; then
  log "record_cost"
  build-gpu/libexec/cudatrace/record_cost 2>&1 | tee -a "$out/console.log" | tail -5
  log "bench: none,${2:-preload}"
  $harness --bench --method "none,${2:-preload}" --linkage both --reps 5 --out "$results" 2>&1 |
    tee -a "$out/console.log" | tail -40
  for run in "$results"/*/; do cp "$run/bench_summary.json" "$out/" 2>/dev/null; done
  rm -rf "$results"
  exit 0
fi

if [[ $phase == main ]]; then
  log "main job: ci/main-run.sh build-gpu"
  work=$(mktemp -d /tmp/main-gpu.XXXXXX)
  MAIN_RESULTS=$work/results MAIN_REPORT=$out/overhead.html ci/main-run.sh build-gpu 2>&1 | tee "$out/main.log" |
    grep -E '^main:|bench round [0-9]+/[0-9]+$|run\(s\) ok' | tee -a "$out/console.log"
  for f in "$work"/results/*/summary.json "$work"/results/*/bench_summary.json; do
    [[ -f $f ]] && cp "$f" "$out/$(basename "$(dirname "$f")").$(basename "$f")"
  done
  rm -rf "$work"
  exit 0
fi

if [[ $phase == otlp ]]; then
  # The checker decodes with the definitions carried in .otlpkit/python (compiled by
  # tests/otlp/otlp_definitions.sh), on the host's own protobuf where a python3 has one,
  # else on the pure-Python protobuf carried in .otlpkit/protobuf.
  export PYTHONPATH=$PWD/.otlpkit/python
  py=""
  for p in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import google.protobuf" 2>/dev/null; then py=$(command -v "$p"); break; fi
  done
  if [[ -z $py ]]; then
    py=$(command -v python3)
    export PYTHONPATH=$PYTHONPATH:$PWD/.otlpkit/protobuf PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python
  fi
  log "otlp: decoding with $py, protobuf $("$py" -c 'import google.protobuf as g; print(g.__version__)')"
  echo "$py" >.otlpkit/python3
  python3() { "$py" "$@"; }
  work=$(mktemp -d /tmp/otlp-gpu.XXXXXX)
  log "otlp: vecadd under cupti, both linkages"
  python3 tests/otlp/check_otlp.py .otlpkit "$harness" "$work/vecadd" gpu 2>&1 | tee -a "$out/console.log" | tail -5
  log "otlp: --otlp-endpoint against a receiver on 127.0.0.1 (this host's libcurl)"
  python3 tests/otlp/check_otlp.py .otlpkit "$harness" "$work/endpoint" endpoint 2>&1 | tee -a "$out/console.log" | tail -5
  log "otlp: vecadd --iters 10 --n 65536 under every method, shared cudart, exported and checked"
  $harness --workload vecadd --linkage shared --method compared,devhook-thread \
    --set vecadd.iters=10 --set vecadd.n=65536 --out "$work/methods" 2>&1 | tail -3 | tee -a "$out/console.log"
  python3 tests/otlp/check_otlp.py .otlpkit "$harness" "$(ls -d "$work"/methods/*)" existing 2>&1 |
    tee -a "$out/console.log" | tail -20
  log "otlp: a PyTorch training step as a command, under cupti and preload"
  $harness --method cupti,preload --out "$work/torch" -- python3 tests/real_programs/torch_train_step.py 2>&1 |
    tail -3 | tee -a "$out/console.log"
  python3 tests/otlp/check_otlp.py .otlpkit "$harness" "$(ls -d "$work"/torch/*)" existing 2>&1 |
    tee -a "$out/console.log" | tail -12
  log "otlp: CuPy as a command under preload and devhook (what they cannot see, on the exported resource)"
  $harness --method preload,devhook --out "$work/cupy" -- python3 tests/real_programs/cupy_kernels.py 2>&1 |
    tail -2 | tee -a "$out/console.log"
  python3 tests/otlp/check_otlp.py .otlpkit "$harness" "$(ls -d "$work"/cupy/*)" existing 2>&1 |
    tee -a "$out/console.log" | tail -12
  log "otlp: export time of a large run (vecadd under devhook, a span per block)"
  $harness --workload vecadd --linkage shared --method devhook --out "$work/big" 2>&1 | tail -1 | tee -a "$out/console.log"
  big=$(ls -d "$work"/big/*)
  { time $harness --export-otlp "$big" -o "$work/big.jsonl"; } 2>&1 | tee -a "$out/console.log"
  ls -l "$work/big.jsonl" | tee -a "$out/console.log"
  for f in "$work"/*/*/summary.json; do cp "$f" "$out/$(basename "$(dirname "$(dirname "$f")")").summary.json"; done
  head -c 4000 "$(ls "$work"/torch/*/otlp-check.jsonl)" >"$out/torch-first-line.json"
  rm -rf "$work"
  exit 0
fi

if [[ $phase == devhook-cost ]]; then
  for k in ${2:-32 1}; do
    log "bench: none,devhook,devhook-thread, devhook.subrings=$k"
    $harness --bench --method none,devhook,devhook-thread --set devhook.subrings=$k --set devhook-thread.subrings=$k --linkage shared --reps 3 \
      --out "$results" 2>&1 | tee -a "$out/console.log" | grep -E 'vecadd|took|error' | tail -12
    for run in "$results"/*/; do cp "$run/bench_summary.json" "$out/bench_summary-k$k.json" 2>/dev/null; done
    rm -rf "$results"
  done
  exit 0
fi

if [[ $phase == cupti-split ]]; then
  percall=build-gpu/libexec/cudatrace/percall.shared
  library=$PWD/build-gpu/lib/cudatrace/libcudatrace_cupti.so
  nsys=${NSYS:-$(ls -d /opt/nvidia/nsight-systems*/*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | tail -1)}
  calls='launch<<<>>>|cudaLaunchKernel|cuLaunchKernel|cudaMemcpyAsync|cudaEventRecord|cudaStreamSynchronize|cudaGetDevice|cudaMalloc'
  split=$out/cupti-split
  mkdir -p "$split"
  for round in $(seq 1 "${2:-3}"); do
    for label in none bare bare-clock bare-tsc bare-runtime bare-driver kernel-activity api-activity full nsys nsys-all; do
      json=$split/$label.r$round.json
      args=(--benchmark_filter="$calls" --benchmark_out="$json" --benchmark_out_format=json)
      case $label in
        none) CUDATRACE_METHOD=none $percall "${args[@]}" > /dev/null ;;
        nsys*) [[ -x $nsys ]] || continue
           extra=(); [[ $label == nsys-all ]] && extra=(--cuda-trace-all-apis=true)
           CUDATRACE_METHOD=$label $nsys profile --trace=cuda --sample=none --cpuctxsw=none "${extra[@]}" \
             -o "/tmp/split-$label-$round" -f true $percall "${args[@]}" > "$split/$label.r$round.log" 2>&1 ;;
        *) CUDATRACE_METHOD=$label CUDA_INJECTION64_PATH=$library CUDATRACE_CUPTI_MODE=$label \
             $percall "${args[@]}" > /dev/null 2> "$split/$label.r$round.log" ;;
      esac || log "$label round $round failed: $(tail -2 "$split/$label.r$round.log" 2>/dev/null)"
    done
  done
  # Callbacks per call: each call's own and the driver calls the runtime makes inside it.
  CUDATRACE_METHOD=count CUDA_INJECTION64_PATH=$library CUDATRACE_CUPTI_MODE=count $percall \
    --benchmark_filter='cudaGetDevice|cudaLaunchKernel|cudaEventRecord' > /dev/null 2> "$split/count.log"
  grep 'count' "$split/count.log" | sort -t: -k3 -n -r | head -20 | tee -a "$out/console.log"
  analysis/results.sh percall-table "$split" | tee -a "$out/console.log"
  exit 0
fi

if [[ $phase == overhead ]]; then
  methods=${2:-all}
  for round in 1 2; do
    log "bench $round/2: $methods"
    start=$(date +%s)
    $harness --bench --method "$methods" --linkage both --reps 5 --out "$results" 2>&1 |
      tee -a "$out/console.log" | tail -80
    log "bench $round/2 took $(($(date +%s) - start)) s"
    for run in "$results"/*/; do cp "$run/bench_summary.json" "$out/bench_summary-$round.json" 2>/dev/null; done
    rm -rf "$results"
  done
  log "agreement of the two runs (issue 19's bar)"
  analysis/results.sh bench-agreement "$out/bench_summary-1.json" "$out/bench_summary-2.json" | tee -a "$out/console.log" | tail -70
  log "nsys and cupti against the ledger"
  $harness --workload vecadd,errors --method none,cupti,nsys --linkage both --out "$results" 2>&1 |
    tee -a "$out/console.log" | grep -v '^\[' | tail -30
  for run in "$results"/*/; do cp "$run/summary.json" "$out/summary-nsys.json" 2>/dev/null; done
  find "$results" -path '*conversion*' -name stderr.txt -exec tail -5 {} \; | tee -a "$out/console.log"
  rm -rf "$results"
  exit 0
fi

log "matrix: real-program workloads x every method"
$harness --workload graphs,driverapi,dlopen,privatert,multiproc --method all --linkage both --out "$results" 2>&1 |
  tee -a "$out/console.log" | grep -v '^\[' | tail -30

for prog in tests/real_programs/torch_train_step.py tests/real_programs/cupy_kernels.py tests/real_programs/triton_kernel.py tests/real_programs/jax_step.py; do
  log "command: $prog"
  timeout 300 $harness --method compared --out "$results" -- python3 "$prog" 2>&1 |
    tee -a "$out/console.log" | tail -28
done
# What travels back is small: each run's summary and manifest (the events stay behind).
i=0
for run in "$results"/*/; do
  i=$((i + 1))
  cp "$run/summary.json" "$out/summary-$i.json" 2>/dev/null
  [[ $i == 1 ]] && cp "$run/manifest.json" "$out/manifest.json"
done
rm -rf "$results"
ls -la "$out"
