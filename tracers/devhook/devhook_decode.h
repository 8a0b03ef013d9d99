#pragma once
// Turns what the devhook agent saved (devhook.<pid>.json: kernels, launches, contexts,
// what it could not instrument; devhook.<pid>.records: the ring) into device-layer events.
//
// Block mode: one event per (launch, block), from its entry and exit records.
// Thread mode: still one event per (launch, block), with args.threads = the threads seen
// in it, so a million-thread launch does not become a million lines.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "common/cuda_names.h"  // kernel_display_name
#include "tracers/tracer.h"

namespace cudatrace {

// `cudart`: the target's linkage, to explain an empty result. `main_pid`: the traced
// program (0 = unknown); its report missing is an error.
TracerReport convert_devhook_output(const std::filesystem::path& dir, const std::filesystem::path& events_file,
                                    const std::string& cudart, int64_t main_pid);

// The loss counters of the agent's reports in `dir` (every process), read without the
// records: for runs whose events nobody converts (the per-call benchmark). nullopt when
// no report is there or one cannot be read.
std::optional<std::map<std::string, int64_t>> devhook_loss_counters(const std::filesystem::path& dir);

}  // namespace cudatrace
