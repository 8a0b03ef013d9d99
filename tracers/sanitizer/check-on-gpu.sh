#!/usr/bin/env bash
# The sanitizer method on a GPU host, over an installed tree (PREFIX, default dist): real
# software as commands under none, cupti and sanitizer (blocks against CUPTI's kernel
# records, exits against the untraced run), then the slowdown of a PyTorch step and a JAX
# jit loop (3 rounds), then the per-call benchmark. PYTHON: an interpreter with torch,
# triton, cupy and jax (default python3); a program whose framework is missing is skipped
# with that reason. Results go under OUT (default results-gpu).
#   usage: tracers/sanitizer/check-on-gpu.sh [PREFIX]
set -uo pipefail
cd "$(dirname "$0")/../.."
prefix=${1:-dist}
harness=$prefix/bin/harness
py=${PYTHON:-python3}
out=${OUT:-results-gpu}/sanitizer
mkdir -p "$out"
programs=tests/real_programs
for p in torch_train_step triton_kernel cupy_kernels torch_cuda_graph torch_spawn jax_step jax_jit_loop; do
  module=${p%%_*}
  if ! "$py" -c "import $module" 2>/dev/null; then
    echo "== $p: skipped: $py cannot import $module"
    continue
  fi
  echo "== $p"
  "$harness" --method none,cupti,sanitizer --timeout 120 --out "$out" -- "$py" "$programs/$p.py" 2>&1 |
    grep -E "sanitizer +device|FAILED|run\(s\) ok"
done
for p in torch_train_step jax_jit_loop; do
  echo "== slowdown: $p"
  "$harness" --method none,sanitizer --reps 3 --timeout 120 --out "$out" -- "$py" "$programs/$p.py" 2>&1 | grep -E "rep |run\(s\) ok"
done
echo "== bench"
"$harness" --bench --method none,sanitizer --linkage both --reps 5 --out "$out" 2>&1 | grep -E "vecadd|aunch|round"
