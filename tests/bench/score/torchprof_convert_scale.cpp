// The torchprof method's conversion at volume, without a GPU: a trace torch.profiler wrote on
// the GPU host (tests/fixtures/torchprof/real/train_step) repeated N times in one process's
// trace, its correlation ids kept apart, then converted as TorchprofTracer::finish() does.
// Prints trace entries per second: of the fastest of ROUNDS conversions (default 1) of the
// same file, each into a store of its own, so that a busy machine's noise and a profile's
// share of the trace's writing both shrink. A 60-second training run's trace holds about 6.5 million
// entries. tests/bench/score/CMakeLists.txt runs it (label bench).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/event_store.h"
#include "tracers/torchprof/torchprof_tracer.h"

using namespace cudatrace;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The fixture's events, shifted `round` times: later in time, correlation ids past the last.
void write_repeated_trace(const fs::path& fixture, const fs::path& out, int64_t repeats, int64_t& entries) {
  json trace = json::parse(std::ifstream(fixture));
  const json events = std::move(trace["traceEvents"]);
  trace["traceEvents"] = json::array();
  double first = 1e300, last = 0;
  int64_t max_corr = 0;
  for (const auto& e : events) {
    if (e.contains("ts") && e["ts"].is_number()) first = std::min(first, e["ts"].get<double>()), last = std::max(last, e["ts"].get<double>());
    if (e.contains("args") && e["args"].contains("correlation")) max_corr = std::max(max_corr, e["args"]["correlation"].get<int64_t>());
    if (e.value("cat", "") == "ac2g") max_corr = std::max(max_corr, e.value("id", int64_t(0)));
  }
  const double span = last - first + 1000;
  std::string head = trace.dump();
  head.resize(head.rfind("[]"));  // everything before the empty traceEvents array
  std::ofstream o(out);
  o << head << "[";
  entries = 0;
  for (int64_t r = 0; r < repeats; ++r)
    for (json e : events) {
      if (e.value("ph", "") == "M" && r > 0) continue;  // process and thread names once
      if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + double(r) * span;
      if (e.contains("args") && e["args"].contains("correlation"))
        e["args"]["correlation"] = e["args"]["correlation"].get<int64_t>() + r * (max_corr + 1);
      if (e.value("cat", "") == "ac2g") e["id"] = e.value("id", int64_t(0)) + r * (max_corr + 1);
      o << (entries++ ? ",\n" : "\n") << e.dump();
    }
  o << "]}\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: torchprof_convert_scale FIXTURE_DIR DIR REPEATS [ROUNDS]\n");
    return 2;
  }
  const fs::path fixture = argv[1], dir = argv[2];
  const int64_t repeats = std::atoll(argv[3]);
  const int rounds = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;
  fs::remove_all(dir);
  fs::create_directories(dir / "spool");
  int64_t entries = 0;
  write_repeated_trace(fixture / "torchprof.1921.json", dir / "spool" / "torchprof.1921.json", repeats, entries);
  fs::copy_file(fixture / "torchprof.1921.status.json", dir / "spool" / "torchprof.1921.status.json");
  const double mib = double(fs::file_size(dir / "spool" / "torchprof.1921.json")) / (1 << 20);
  double took = 1e300;
  TracerReport report;
  for (int round = 0; round < rounds; ++round) {
    fs::remove(dir / kEventsFile);
    const auto t0 = std::chrono::steady_clock::now();
    report = convert_torchprof_output(dir / "spool", dir / kEventsFile,
                                      {0, 1795821223987365409 / 7889238000000000 * 7889238000000000},
                                      uint64_t(1) << 40, dir / "stderr.txt");
    took = std::min(took, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const int64_t kernels = report.notes.value("kernels", int64_t(0));
  std::printf("converted a trace of %lld entries (%.0f MiB) in %.1f s: %.0f entries/s, %.0f MiB/s; %lld kernels; "
              "peak RSS %ld MiB\n",
              (long long)entries, mib, took, double(entries) / took, mib / took, (long long)kernels, ru.ru_maxrss / 1024);
  const bool whole = kernels == 42 * repeats && report.error.empty();
  if (!whole) std::printf("FAIL: %lld kernels of %lld; %s\n", (long long)kernels, (long long)(42 * repeats), report.error.c_str());
  fs::remove_all(dir);
  return whole ? 0 : 1;
}
