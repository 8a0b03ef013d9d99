#include "tracers/ebpf/ring_option.h"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <stdexcept>

namespace cudatrace {

uint64_t ring_bytes_option(const std::map<std::string, std::string>& options, const std::string& method) {
  uint64_t mb = 64;
  if (auto it = options.find("ring_mb"); it != options.end()) {
    char* end = nullptr;
    errno = 0;
    mb = std::strtoull(it->second.c_str(), &end, 10);
    // The kernel takes a ring's size as a 32-bit count of bytes, a power of two and a whole
    // number of pages: 2048 MiB (2^31) is the largest; 4096 MiB (2^32) does not fit and
    // fails at load (EINVAL). Checked as root on kernel 6.18: 1 to 2048 MiB create.
    if (it->second.empty() || *end || errno == ERANGE || mb == 0 || mb > kMaxRingMb || (mb & (mb - 1)))
      throw std::invalid_argument(method + ".ring_mb wants a power of two from 1 to " + std::to_string(kMaxRingMb) +
                                  " (MiB; the kernel's ring size is 32 bits), got '" + it->second + "'");
  }
  for (const auto& [key, value] : options)
    if (key != "ring_mb") throw std::invalid_argument("unknown " + method + " option '" + key + "' (valid: ring_mb)");
  return mb << 20;
}

}  // namespace cudatrace
