#pragma once
// Method `preload`: the program runs with our shim in LD_PRELOAD; while it runs, a thread of
// the harness converts the shim's per-thread record files into the event store
// (preload_follower.h), and at its end the rest. Shared cudart: runtime and
// driver layers. Static cudart: the driver layer only (cudart's own functions are inside
// the executable, where no preload can reach them).
#include <memory>

#include "tracers/tracer.h"

namespace cudatrace {

namespace preload {
class PreloadFollower;
}

class PreloadTracer final : public Tracer {
 public:
  // `devices` false: records name no device (the shim asks for no context after a call).
  // `max_bytes`: how much of the record files one run reads (HostFacts::max_trace_bytes).
  explicit PreloadTracer(std::filesystem::path shim, bool devices = true, uint64_t max_bytes = uint64_t(128) << 20);
  ~PreloadTracer() override;
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  void attach(pid_t child) override;  // the conversion starts following the shim's folder
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;
  TracerReport layers_without_events() override;

 private:
  std::filesystem::path shim_;
  bool devices_ = true;
  uint64_t max_bytes_;
  std::filesystem::path spool_;  // where the shim writes (the program's own folder)
  std::string cudart_;
  std::filesystem::path run_dir_;
  std::unique_ptr<preload::PreloadFollower> live_;  // from attach() to finish()
};

std::filesystem::path preload_shim_path(const std::filesystem::path& prefix);

// Reads every preload.* file in `dir` and writes `events_file`, at most `max_bytes` of
// records in all, in slices. The report's loss counts records the shim dropped, records
// announced by a trailer but absent, files cut short (a process that died before it could
// write its trailer) and records past the bound (over_bound_records).
TracerReport convert_preload_output(const std::filesystem::path& dir, const std::filesystem::path& events_file,
                                    uint64_t max_bytes = uint64_t(128) << 20);

}  // namespace cudatrace
