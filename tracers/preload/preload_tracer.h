#pragma once
// Method `preload`: the program runs with our shim in LD_PRELOAD; afterwards the shim's
// per-thread record files are converted into events.jsonl. Shared cudart: runtime and
// driver layers. Static cudart: the driver layer only (cudart's own functions are inside
// the executable, where no preload can reach them).
#include "tracers/tracer.h"

namespace cudatrace {

class PreloadTracer final : public Tracer {
 public:
  // `devices` false: records name no device (the shim asks for no context after a call).
  explicit PreloadTracer(std::filesystem::path shim, bool devices = true) : shim_(std::move(shim)), devices_(devices) {}
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;
  TracerReport layers_without_events() override;

 private:
  std::filesystem::path shim_;
  bool devices_ = true;
  std::filesystem::path spool_;  // where the shim writes (the program's own folder)
  std::string cudart_;
};

std::filesystem::path preload_shim_path(const std::filesystem::path& prefix);

// Reads every preload.* file in `dir` and writes `events_file`. The report's loss counts
// records the shim dropped, records announced by a trailer but absent, and files cut
// short (a process that died before it could write its trailer).
TracerReport convert_preload_output(const std::filesystem::path& dir, const std::filesystem::path& events_file);

}  // namespace cudatrace
