#!/usr/bin/env bash
# Prepare a build tree small enough to carry to a GPU machine that has no compilers or
# -dev packages: a stripped Release build in build-gpu/ (object files removed, ctest
# files kept) plus dist-gpu/. On the GPU machine, the tree must sit at the same absolute
# path as here (ctest records absolute paths): ln -sfn "$PWD" "<this checkout's path>".
set -euo pipefail
cd "$(dirname "$0")/.."
# From scratch every time: the end of this script deletes the objects and ninja's
# dependency log, so a later incremental build would miss header changes (seen: a test
# binary linked against a stale object).
rm -rf build-gpu dist-gpu
# Extra arguments go to CMake, e.g. -DCUDATRACE_SANITIZER_INCLUDE=DIR where this box has no
# compute-sanitizer headers of its own (they are copied from the GPU host's toolkit).
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build-gpu --parallel "$(nproc)"
cmake --install build-gpu --prefix dist-gpu >/dev/null
# The GPU host has no npm: the OTLP tests' definitions are fetched here, into the folder
# their ctest entries name (tests/otlp/CMakeLists.txt); without them those tests skip there.
tests/otlp/otlp_definitions.sh build-gpu/otlp-definitions || echo "gpu-bundle: no OTLP definitions: the Otlp tests will skip"
find build-gpu -name '*.o' -delete
# Nothing on the GPU machine links or reconfigures: static archives, compiler-identification
# leftovers and ninja's dependency log only count against the 64 MiB a carried tree may have.
find build-gpu -name '*.a' -delete
rm -rf build-gpu/CMakeFiles/[0-9]*/CompilerId* build-gpu/.ninja_deps
# The workloads keep their symbol tables: with static cudart, the uprobe method finds the
# cudart functions there (a fully stripped static binary hides its runtime layer).
find build-gpu/bin build-gpu/lib build-gpu/tests dist-gpu/bin dist-gpu/lib -type f -perm -u+x \
  -exec strip --strip-unneeded {} + 2>/dev/null || true
find build-gpu/libexec dist-gpu/libexec -type f -perm -u+x -exec strip --strip-debug {} + 2>/dev/null || true
du -sh build-gpu dist-gpu
# The device tool carries at most 64 MiB: the tree is over that, and so is gzip of it (71 MiB
# at 085b557, the test binaries each linking SQLite and the harness); xz's long window
# finds what the binaries share: 15 MiB. Carry dist-carry/ and let ci/gpu-check.sh unpack it.
mkdir -p dist-carry
rm -f dist-carry/build-gpu.tgz
tar cf - build-gpu | xz -9 -T"$(nproc)" >dist-carry/build-gpu.txz
du -sh dist-carry/build-gpu.txz
