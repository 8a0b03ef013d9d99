#pragma once
// Turns what the sanitizer injection library wrote (sanitizer.<pid>.json and
// sanitizer.<pid>.launches, sanitizer_format.h) into device-layer events: one per launch,
// args.blocks the blocks counted on the GPU (args.threads with threads=on), beside the
// launch's grid and block as the launch callback gave them.
//
// Every launch whose count is not its grid is named in the report with the reason: no
// counter slot left, its module could not be patched, its counters could not be read back,
// or fewer blocks than the grid entered before the counters were read (a kernel still
// running at exit, or one that failed).
#include <cstdint>
#include <filesystem>

#include "tracers/tracer.h"

namespace cudatrace {

// Bounds on what is read back (the folder is the program's: it could write anything there).
inline constexpr uint64_t kSanitizerMaxReportBytes = uint64_t(64) << 20;
inline constexpr uint64_t kSanitizerMaxReportBytesPerRun = uint64_t(256) << 20;
// What one run's conversion reads and holds, from the run's bound and the machine rather
// than fixed counts: a real job launches 10^7 to 10^8 kernels.
struct SanitizerBounds {
  // Launch records read, in a stream, never held: as many as the run's bound on a method's
  // raw output holds (--max-trace-bytes, from the free space under --out). Those past it
  // are the loss launch_records_over_bound.
  uint64_t launch_records = 0;
  // Graph launches whose kernel nodes' shared counts one process's conversion sums: the one
  // thing it holds per launch (96 bytes each, measured: 2^21 took 192 MiB), as many as an
  // eighth of the memory available now holds, at least 2^20. The nodes of graph launches
  // past it are the loss graph_node_launches_over_bound.
  size_t graph_launches = 0;
  static SanitizerBounds for_run(uint64_t run_bytes);
};
inline constexpr uint64_t kSanitizerBytesPerGraphLaunch = 96;

// `main_pid`: the traced program (0 = unknown).
TracerReport convert_sanitizer_output(const std::filesystem::path& dir, const std::filesystem::path& events_file,
                                      int64_t main_pid, const SanitizerBounds& bounds);

}  // namespace cudatrace
