#pragma once
// Loss counters kept in a BPF per-CPU array (one slot per kind): their sums over CPUs.
#include <bpf/libbpf.h>

#include <cstdint>
#include <vector>

namespace cudatrace {

inline std::vector<uint64_t> sum_percpu_counters(const bpf_map* map, uint32_t kinds) {
  std::vector<uint64_t> total(kinds, 0);
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0 || !map) return total;
  std::vector<uint64_t> per_cpu(size_t(cpus), 0);
  for (uint32_t k = 0; k < kinds; ++k) {
    if (bpf_map__lookup_elem(map, &k, sizeof k, per_cpu.data(), per_cpu.size() * sizeof(uint64_t), 0) != 0) continue;
    for (uint64_t v : per_cpu) total[k] += v;
  }
  return total;
}

}  // namespace cudatrace
