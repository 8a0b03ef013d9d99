#pragma once
// harness --bench: the per-call benchmark (libexec/cudatrace/percall.<linkage>) under each
// method, merged into results/<run-id>/bench.json (Google Benchmark format, every method's
// runs in one file) and bench_summary.json (per call: median, delta to `none` with a 95%
// interval, ratio), with what is derived from them (harness/stats/bench_stats.h): cupti against
// nsys and an empty subscriber, uprobe's entry and return probes, and, with --agree-with,
// whether this run agrees with an earlier one.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "harness/cli.h"
#include "tracers/tracer.h"

namespace cudatrace {

// The shape of bench_summary.json this harness writes (schema/bench_summary.v2.schema.json).
inline constexpr int kBenchSummaryVersion = 2;

int run_bench(const Options& opts, const HostFacts& host, const std::vector<std::string>& command_line);

// A run's bench_summary.json (the folder or the file), its version checked: one this
// harness reads (1 or kBenchSummaryVersion). Throws std::runtime_error with the reason.
nlohmann::json read_bench_summary(const std::filesystem::path& folder_or_file);

}  // namespace cudatrace
