#include "harness/catalog.h"

#include <cstdlib>
#include <sstream>

#include "common/spawn.h"
#include "tracers/tracer.h"

namespace cudatrace {

namespace {

// The words workloads.def uses, as what the catalog needs of them.
struct Needs {
  bool gpu;
  bool libcuda;
  int gpus;
};
namespace def {
constexpr Needs gpu{true, false, 1}, gpus2{true, false, 2}, host_path{false, false, 1}, host_path_libcuda{false, true, 1};
const std::vector<std::string> both{"static", "shared"}, shared{"shared"};
}  // namespace def

}  // namespace

const std::vector<WorkloadInfo>& workloads() {
  static const std::vector<WorkloadInfo> all{
#define WORKLOAD(name, needs, builds, summary) \
  WorkloadInfo{#name, summary, def::needs.gpu, def::needs.libcuda, def::needs.gpus, def::builds},
#include "workloads/workloads.def"
#undef WORKLOAD
  };
  return all;
}

const WorkloadInfo* find_workload(const std::string& name) {
  for (const auto& w : workloads())
    if (w.name == name) return &w;
  return nullptr;
}

std::string workload_unavailable(const WorkloadInfo& w, const HostFacts& host) {
  if (w.needs_gpu && !host.gpu) return "workload " + w.name + " needs a GPU: " + host.gpu_reason;
  if (w.needs_gpu && host.gpu_count < w.min_gpus)
    return "workload " + w.name + " needs " + std::to_string(w.min_gpus) + " GPUs: this host shows " +
           std::to_string(host.gpu_count) + (std::getenv("CUDA_VISIBLE_DEVICES") ? " (CUDA_VISIBLE_DEVICES is set)" : "");
  if (w.needs_libcuda && !host.libcuda)
    return "workload " + w.name + " links libcuda and no libcuda.so.1 is installed (no NVIDIA driver)";
  return "";
}

std::vector<std::string> workload_flags(const std::filesystem::path& prefix, const WorkloadInfo& w) {
  std::vector<std::string> flags;
  const auto bin = workload_binary(prefix, w.name, w.linkages.front());
  if (!std::filesystem::exists(bin)) return flags;
  // Its usage lists one flag a line: "  --iters      kernel launches (default 100)".
  std::istringstream help(spawn_and_wait({bin.string(), "--help"}, true, 64 << 10).output);
  std::string line;
  while (std::getline(help, line))
    if (line.rfind("  --", 0) == 0) flags.push_back(line.substr(4, line.find(' ', 4) - 4));
  return flags;
}

std::filesystem::path workload_binary(const std::filesystem::path& prefix, const std::string& workload,
                                      const std::string& linkage) {
  return prefix / CUDATRACE_LIBEXEC_SUBDIR / (workload + "." + linkage);
}

}  // namespace cudatrace
