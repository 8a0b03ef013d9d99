#!/usr/bin/env bash
# Configure, build and install into dist/ (a self-contained tree: bin/harness,
# libexec/cudatrace/<workloads>, lib/cudatrace/<tracer libraries>).
#   usage: ci/build.sh [BUILD_DIR] [PREFIX]      (defaults: build, dist)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=${2:-dist}
if [[ ! -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null; then
  echo "build: the CUDA toolkit (nvcc) is required: expected /usr/local/cuda/bin/nvcc" >&2
  exit 1
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[[ -f "$build/CMakeCache.txt" ]] || cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" --parallel "$(nproc)"
cmake --install "$build" --prefix "$prefix" >/dev/null
echo "build: installed into $prefix/"
