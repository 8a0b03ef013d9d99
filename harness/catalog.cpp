#include "harness/catalog.h"

namespace cudatrace {

const std::vector<WorkloadInfo>& workloads() {
  static const std::vector<WorkloadInfo> all{
      {"vecadd", "allocate, copy in, launch 100 times, copy out, free"},
      {"streams", "2 host threads x 2 streams: async copies, kernels, events, cross-stream waits"},
      {"memheavy", "1 GiB on the device, pinned/pageable/async copies, memset, 1000 small allocations"},
      {"errors", "injected failures (OOM, invalid value, bad pointer, double free, bad launch, bad device)", false},
      {"burst", "8 host threads x 20000 cudaGetDevice calls, back to back (loss under load)"},
  };
  return all;
}

const WorkloadInfo* find_workload(const std::string& name) {
  for (const auto& w : workloads())
    if (w.name == name) return &w;
  return nullptr;
}

std::filesystem::path workload_binary(const std::filesystem::path& prefix, const std::string& workload,
                                      const std::string& linkage) {
  return prefix / CUDATRACE_LIBEXEC_SUBDIR / (workload + "." + linkage);
}

}  // namespace cudatrace
