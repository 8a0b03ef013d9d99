#!/usr/bin/env bash
# The test command (README, second set-up command; what CI runs): install what is
# missing, build, run every ctest. Tests that need a GPU or root skip with their reason.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh --test
ci/build.sh build dist
cd build
ctest --output-on-failure --timeout 900 "$@"
