#include "common/machine.h"

#include <fstream>
#include <string>

namespace cudatrace {

uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key && key != "MemAvailable:") meminfo.ignore(256, '\n');
  if (key == "MemAvailable:") meminfo >> kib;
  return kib * 1024;
}

}  // namespace cudatrace
