#pragma once
// Method `uprobe` (and its two cost references): eBPF uprobes and uretprobes on the CUDA
// runtime (libcudart.so, or the cudart functions inside a static executable) and on the
// driver (libcuda.so.1, as the target's loader would find them). Needs root or
// CAP_BPF + CAP_PERFMON. The probes see every process that maps those files; the BPF side
// keeps only the target's process tree.
#include <memory>

#include "bpf/uprobe_event.h"
#include "tracers/tracer.h"
#include "tracers/uprobe/uprobe_decode.h"

namespace cudatrace {

class UprobeSession;

// Which functions of which files get probes, and what was found where.
struct ProbePlan {
  std::vector<ProbedFunction> functions;
  nlohmann::json notes = nlohmann::json::object();
  bool runtime = false, driver = false;  // a layer has probes
};

// `exe`: the target (absolute path); `cudart`: static/shared/unknown.
ProbePlan plan_probes(const std::filesystem::path& exe, const std::string& cudart, const std::string& ld_library_path);

class UprobeTracer final : public Tracer {
 public:
  UprobeTracer(uprobe_mode mode, uint64_t ring_bytes);
  ~UprobeTracer() override;
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  void attach(pid_t child) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;

 private:
  uprobe_mode mode_;
  uint64_t ring_bytes_;
  ProbePlan plan_;
  std::filesystem::path run_dir_;
  std::filesystem::path exe_;
  std::unique_ptr<UprobeSession> session_;
  nlohmann::json attach_notes_ = nlohmann::json::object();
};

}  // namespace cudatrace
