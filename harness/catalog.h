#pragma once
// The workloads the harness knows, where their binaries live, and the two cudart linkages.
#include <filesystem>
#include <string>
#include <vector>

namespace cudatrace {

struct WorkloadInfo {
  std::string name;
  std::string summary;
  bool needs_gpu = true;        // false: without a GPU it runs its host-side path (--host_path)
  bool needs_libcuda = false;   // linked with -lcuda: cannot start where no libcuda.so.1 is found
  int min_gpus = 1;             // GPUs it drives at once (needs_gpu): skipped where the host shows fewer
  std::vector<std::string> linkages{"static", "shared"};  // the builds it has
};

const std::vector<WorkloadInfo>& workloads();
const WorkloadInfo* find_workload(const std::string& name);
inline const std::vector<std::string>& linkages() {
  static const std::vector<std::string> l{"static", "shared"};
  return l;
}

// Why this workload cannot run here, or empty.
struct HostFacts;
std::string workload_unavailable(const WorkloadInfo& w, const HostFacts& host);

// The flags a workload takes (read from its --help), e.g. {"n", "iters", "host_path"};
// empty when its binary is missing or says nothing.
std::vector<std::string> workload_flags(const std::filesystem::path& prefix, const WorkloadInfo& w);

// <prefix>/libexec/cudatrace/<workload>.<linkage>
std::filesystem::path workload_binary(const std::filesystem::path& prefix, const std::string& workload,
                                      const std::string& linkage);

}  // namespace cudatrace
