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
// Launch records read per run: as many as the run's bound (--max-trace-bytes, from the free
// space under --out) holds, for a real job launches 10^7 to 10^8 kernels; this many where
// the caller knows no bound. They are read in a stream, never held; those past the bound
// are the loss launch_records_over_bound, which reaches the verdict.
inline constexpr uint64_t kSanitizerDefaultLaunchRecords = uint64_t(8) << 20;  // 640 MB of records
uint64_t sanitizer_launch_records_bound(uint64_t max_bytes);
// Graph launches whose kernel nodes' shared counts one process's conversion sums: the one
// thing it holds per launch (about 120 bytes each: 256 MiB at most, within the harness's
// 1 GiB). The nodes of graph launches past it are the loss graph_node_launches_over_bound.
inline constexpr size_t kSanitizerMaxGraphLaunches = size_t(1) << 21;

// `main_pid`: the traced program (0 = unknown). `max_bytes`: the run's bound on a method's
// raw output (--max-trace-bytes), which sets how many launch records are read.
// `max_graph_launches`: a test's smaller bound.
TracerReport convert_sanitizer_output(const std::filesystem::path& dir, const std::filesystem::path& events_file,
                                      int64_t main_pid, uint64_t max_bytes = 0,
                                      size_t max_graph_launches = kSanitizerMaxGraphLaunches);

}  // namespace cudatrace
