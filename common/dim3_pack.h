#pragma once
// How an argument slot holds a dim3 (grid or block), in every tracer's raw records:
// x | y << 32 | z << 48. y and z above 65535 do not occur (the hardware caps them).
#include <cstdint>

namespace cudatrace {

inline uint64_t pack_dim3(uint32_t x, uint32_t y, uint32_t z) {
  return uint64_t(x) | uint64_t(y & 0xFFFF) << 32 | uint64_t(z & 0xFFFF) << 48;
}

}  // namespace cudatrace
