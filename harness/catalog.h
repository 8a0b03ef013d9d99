#pragma once
// The workloads the harness knows, where their binaries live, and the two cudart linkages.
#include <filesystem>
#include <string>
#include <vector>

namespace cudatrace {

struct WorkloadInfo {
  std::string name;
  std::string summary;
  bool needs_gpu = true;
};

const std::vector<WorkloadInfo>& workloads();
const WorkloadInfo* find_workload(const std::string& name);
inline const std::vector<std::string>& linkages() {
  static const std::vector<std::string> l{"static", "shared"};
  return l;
}

// <prefix>/libexec/cudatrace/<workload>.<linkage>
std::filesystem::path workload_binary(const std::filesystem::path& prefix, const std::string& workload,
                                      const std::string& linkage);

}  // namespace cudatrace
