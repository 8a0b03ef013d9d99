#!/usr/bin/env bash
# Brings OpenTelemetry's own OTLP definitions to decode what the harness exports: the
# opentelemetry-proto files that the OpenTelemetry JS project published on the npm
# registry (@opentelemetry/otlp-grpc-exporter-base 0.34.0, build/protos: OTLP 0.19, whose
# trace messages are those of OTLP 1.x less the flags fields the harness does not write),
# compiled for Python with protoc. Debian packages no OTLP definitions.
#   otlp_definitions.sh DIR   -> DIR/python (import opentelemetry.proto...), DIR/python3 (the
#                                interpreter that has google.protobuf, on one line)
# Exit 77 (ctest: skipped) with the reason when npm, protoc or Python's protobuf is missing
# or the registry cannot be reached.
set -euo pipefail
out=$1
package=@opentelemetry/otlp-grpc-exporter-base@0.34.0
sha256=40d31ccf0da4e601f3e972eaf6d573d3cf1c750743cdefe79c09671517a31dac

skip() { echo "SKIP: $*" >&2; exit 77; }
python=""
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null && "$p" -c "import google.protobuf" 2>/dev/null; then python=$(command -v "$p"); break; fi
done
[[ -n $python ]] || skip "no python3 with google.protobuf (Debian: python3-protobuf; ci/install-deps.sh --test installs it)"
# The interpreter is this host's, chosen every time: a folder fetched on a build host and
# carried to a GPU host keeps its definitions, not the build host's Python.
if [[ -f $out/python/opentelemetry/proto/collector/trace/v1/trace_service_pb2.py ]]; then
  echo "$python" >"$out/python3"
  exit 0
fi
command -v protoc >/dev/null || skip "no protoc (Debian: protobuf-compiler; ci/install-deps.sh --test installs it)"
command -v npm >/dev/null || skip "no npm to fetch OpenTelemetry's OTLP definitions (Debian: npm)"

work=$(mktemp -d "${TMPDIR:-/tmp}/otlp-defs.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && npm pack --silent "$package" >pack.log 2>&1); then
  skip "npm could not fetch $package: $(tail -1 "$work/pack.log")"
fi
tgz=$(ls "$work"/*.tgz)
echo "$sha256  $tgz" | sha256sum -c --quiet - || { echo "otlp_definitions: $package is not the tarball this test pins" >&2; exit 1; }
tar xzf "$tgz" -C "$work" package/build/protos
protos=$work/package/build/protos
mkdir -p "$work/python"
(cd "$protos" && protoc -I . --python_out="$work/python" $(find opentelemetry -name '*.proto' | sort))
echo "$python" >"$work/python3"
mkdir -p "$out"
rm -rf "$out/python" "$out/python3"
mv "$work/python" "$work/python3" "$out/"
