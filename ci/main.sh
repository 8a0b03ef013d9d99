#!/usr/bin/env bash
# The main job (README, first set-up command): install what is missing, build, then
# ci/main-run.sh: the matrix (every workload x both cudart linkages x every method), each
# method's slowdown on the workloads and on real software (PyTorch, CuPy, JAX: skipped with
# the reason where a framework is missing), the per-call benchmark where there is a GPU,
# and reports/overhead.html. Extra arguments go to the workload runs, e.g. --timeout 120.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh build dist
exec ci/main-run.sh dist "$@"
