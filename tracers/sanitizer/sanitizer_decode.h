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

// `main_pid`: the traced program (0 = unknown).
TracerReport convert_sanitizer_output(const std::filesystem::path& dir, const std::filesystem::path& events_file,
                                      int64_t main_pid);

// Bounds on what is read back (the folder is the program's: it could write anything there).
inline constexpr uint64_t kSanitizerMaxReportBytes = uint64_t(64) << 20;
inline constexpr uint64_t kSanitizerMaxReportBytesPerRun = uint64_t(256) << 20;
inline constexpr uint64_t kSanitizerMaxLaunchRecords = uint64_t(8) << 20;  // per run: 512 MiB of records

}  // namespace cudatrace
