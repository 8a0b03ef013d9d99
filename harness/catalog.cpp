#include "harness/catalog.h"

#include <sstream>

#include "common/spawn.h"
#include "tracers/tracer.h"

namespace cudatrace {

const std::vector<WorkloadInfo>& workloads() {
  static const std::vector<WorkloadInfo> all{
      {"vecadd", "allocate, copy in, launch 100 times, copy out, free"},
      {"streams", "2 host threads x 2 streams: async copies, kernels, events, cross-stream waits"},
      {"memheavy", "1 GiB on the device, pinned/pageable/async copies, memset, 1000 small allocations"},
      {"errors", "injected failures (OOM, invalid value, bad pointer, double free, bad launch, bad device)", false},
      {"burst", "8 host threads x 20000 cudaGetDevice calls, back to back (loss under load)"},
      // The patterns of real software; each runs its host-side path where there is no GPU.
      {"graphs", "a captured CUDA graph and a node-by-node one, replayed 20 and 10 times", false},
      {"driverapi", "a JIT launcher: PTX via cuModuleLoadData/cuLibraryLoadData, cuLaunchKernel(Ex), driver errors",
       false, true},
      {"dlopen", "a framework: no cudart linked; a private libcudart.so dlopen'd late, calls via dlsym", false, false,
       {"shared"}},
      {"privatert", "the program's calls, then a library's with its own hidden static cudart (as cuBLAS)", false},
      {"multiproc", "forked workers each doing CUDA work, and a child that execs vecadd", false},
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
