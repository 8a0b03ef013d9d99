#pragma once
// "--set METHOD.ring_mb=N", which every eBPF method takes: its ring buffer size in bytes.
#include <cstdint>
#include <map>
#include <string>

namespace cudatrace {

inline constexpr uint64_t kMaxRingMb = 2048;
inline constexpr const char* kRingOptionHelp =
    "BPF ring buffer size in MiB, a power of two from 1 to 2048 (default 64; kernel memory, taken whole)";

// Throws std::invalid_argument for a bad size or any other key.
uint64_t ring_bytes_option(const std::map<std::string, std::string>& options, const std::string& method);

}  // namespace cudatrace
