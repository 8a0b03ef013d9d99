#include "tracers/ebpf/ring_option.h"

#include <cstdlib>
#include <stdexcept>

namespace cudatrace {

uint64_t ring_bytes_option(const std::map<std::string, std::string>& options, const std::string& method) {
  uint64_t mb = 64;
  if (auto it = options.find("ring_mb"); it != options.end()) {
    char* end = nullptr;
    mb = std::strtoull(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || mb == 0 || mb > 4096 || (mb & (mb - 1)))
      throw std::invalid_argument(method + ".ring_mb wants a power of two from 1 to 4096 (MiB), got '" + it->second + "'");
  }
  for (const auto& [key, value] : options)
    if (key != "ring_mb") throw std::invalid_argument("unknown " + method + " option '" + key + "' (valid: ring_mb)");
  return mb << 20;
}

}  // namespace cudatrace
