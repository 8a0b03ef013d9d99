#pragma once
// harness --bench: the per-call benchmark (libexec/cudatrace/percall.<linkage>) under each
// method, merged into results/<run-id>/bench.json (Google Benchmark format, every method's
// runs in one file) and bench_summary.json (per call: median, delta to `none` with a 95%
// interval, ratio).
#include "harness/cli.h"
#include "tracers/tracer.h"

namespace cudatrace {

int run_bench(const Options& opts, const HostFacts& host, const std::vector<std::string>& command_line);

}  // namespace cudatrace
