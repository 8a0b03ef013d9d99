#!/usr/bin/env bash
# Install the Debian/Ubuntu packages the project builds and tests with, only those missing.
# Safe to re-run; needs root (or sudo). The CUDA toolkit itself is a prerequisite, not installed here.
#   usage: ci/install-deps.sh [--test]
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev   # BPF programs + static linking; zlib: the JAX trace (tracers/jaxprof)
  systemtap-sdt-dev                                                  # USDT probes (sys/sdt.h)
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev      # JSON, tests, per-call benchmark
  python3 python3-matplotlib                                          # the HTML report
  strace                                                              # the strace method
  libsqlite3-dev                                                      # the nsys method's export reader
  libcurl4-openssl-dev                                                # --otlp-endpoint (headers; libcurl is loaded when used)
)

# Only the tests need a browser (the report check): `install-deps.sh --test` adds it.
if [[ "${1:-}" == "--test" ]]; then
  packages+=(chromium)
  # The OTLP export is decoded with OpenTelemetry's definitions, fetched with npm: Debian's npm
  # only where no npm is installed (Node.js from elsewhere brings its own and conflicts with it).
  packages+=(protobuf-compiler python3-protobuf)
  command -v npm >/dev/null || packages+=(npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
