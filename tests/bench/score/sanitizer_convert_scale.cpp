// The sanitizer method's conversion at volume, without a GPU: what its injection library
// writes for a process that launched N kernels (sanitizer.<pid>.json, and the launches file
// of 80-byte records), converted into the store as SanitizerTracer::finish() does. The mix is
// a PyTorch run's: PyTorch's mangled kernel names, three launches in four past the context's
// counter slots (uncounted), kernel nodes of graph launches among the rest. Prints launches
// per second and peak RSS, and checks every launch became one device event. The store is
// counted as the harness counts a command's run while it is written (an EventTally on the
// writer, per process): that count once held an entry per launch (1.6 GB at 5.7 M launches).
// tests/bench/score/CMakeLists.txt runs it (label bench).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/event_store.h"
#include "harness/score/event_tally.h"
#include "tracers/sanitizer/sanitizer_decode.h"
#include "tracers/sanitizer/sanitizer_format.h"

using namespace cudatrace;
using namespace cudatrace::sanitizer;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Kernel symbols as PyTorch's libraries register them: long templates, demangled for display.
std::vector<std::string> kernel_symbols() {
  std::vector<std::string> k;
  for (int i = 0; i < 64; ++i)
    k.push_back("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_" +
                std::to_string(i));
  k.push_back("_Z6vecaddPKfS0_Pfi");
  return k;
}

void write_process(const fs::path& dir, int pid, uint64_t launches) {
  const auto kernels = kernel_symbols();
  const json rep = {{"v", 1},
                    {"pid", pid},
                    {"library_error", ""},
                    {"mode", "blocks"},
                    {"launches", launches},
                    {"modules", {{"patched", 40}, {"failed", 0}, {"without_patches", 2}}},
                    {"kernels", kernels},
                    {"contexts", {{{"device", 0}, {"pci_bus_id", "0000:18:00.0"}, {"slots_used", launches / 4}}}},
                    {"errors", json::array()}};
  std::ofstream(dir / ("sanitizer." + std::to_string(pid) + ".json")) << rep.dump();
  std::ofstream out(dir / ("sanitizer." + std::to_string(pid) + ".launches"), std::ios::binary);
  std::vector<LaunchRecord> batch;
  for (uint64_t i = 0; i < launches; ++i) {
    LaunchRecord r{};
    r.host_ns = 1'000'000'000 + i * 2000;
    r.kernel = uint32_t(i % kernels.size());
    r.grid[0] = uint32_t(1 + i % 1024), r.grid[1] = 1, r.grid[2] = 1;
    r.block[0] = 256, r.block[1] = 1, r.block[2] = 1;
    r.stream = uint32_t(i % 3);
    r.module = r.kernel / 8;
    if (i % 4 != 0) {
      r.flags = kNoSlot;  // ran uncounted: the context's slots were taken
    } else if (i % 16 == 8) {
      r.flags = kGraphNode, r.graph_launch = i / 16 + 1;  // one node per graph launch: its count is its own
      r.blocks = r.grid[0];
    } else {
      r.blocks = r.grid[0];
    }
    batch.push_back(r);
    if (batch.size() == 65536 || i + 1 == launches) {
      out.write(reinterpret_cast<const char*>(batch.data()), std::streamsize(batch.size() * sizeof(LaunchRecord)));
      batch.clear();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: sanitizer_convert_scale DIR LAUNCHES\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const uint64_t launches = std::strtoull(argv[2], nullptr, 10);
  fs::remove_all(dir);
  fs::create_directories(dir / "out");
  const int pid = 4242;
  write_process(dir / "out", pid, launches);
  const auto t0 = std::chrono::steady_clock::now();
  EventTally tally(false, true, nullptr);
  TracerReport report;
  {
    ScopedEventTap tap(dir / kEventsFile, tally);
    report = convert_sanitizer_output(dir / "out", dir / kEventsFile, pid,
                                      SanitizerBounds::for_run(launches * sizeof(sanitizer::LaunchRecord)));
  }
  int64_t runs = 0;
  for (const auto& [kernel, n] : tally.families[layer::kDevice]) runs += n;
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t events = 0;
  {
    EventReader r(dir / kEventsFile);
    Event e;
    while (r.next(e)) events += !e.is_meta();
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double mib = double(fs::file_size(dir / kEventsFile)) / (1 << 20);
  std::printf("converted %llu launches in %.2f s: %.0f launches/s; store %.1f MiB (%.1f B/event); peak RSS %ld MiB\n",
              (unsigned long long)launches, took, double(launches) / took, mib, mib * (1 << 20) / double(launches),
              ru.ru_maxrss / 1024);
  const bool whole = events == launches && report.error.empty() && tally.whole() && runs == int64_t(launches) &&
                     report.loss.value("launches_without_slot", int64_t(0)) == int64_t(launches - (launches + 3) / 4);
  if (!whole)
    std::printf("FAIL: %llu events of %llu launches, %lld runs counted; %s; loss %s\n", (unsigned long long)events,
                (unsigned long long)launches, (long long)runs, report.error.c_str(), report.loss.dump().c_str());
  fs::remove_all(dir);
  return whole ? 0 : 1;
}
