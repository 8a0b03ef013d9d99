#pragma once
// What this machine has, for bounds that scale with it rather than fixed sizes.
#include <cstdint>

namespace cudatrace {

// MemAvailable now, in bytes (0 where /proc/meminfo does not say): what bounds on what the
// harness holds in memory scale with.
uint64_t available_memory_bytes();

}  // namespace cudatrace
