#pragma once
// Method `torchprof`: the PyTorch profiler (torch.profiler, Kineto on CUPTI) around the
// whole of a Python program, checked against the same truth as every method. The harness
// puts the hook folder (hook/sitecustomize.py) first on PYTHONPATH; every interpreter of
// the program writes a status file there, and each one that starts CUDA through torch
// profiles from then until it exits and exports its Chrome trace (torchprof.<pid>.json). After the run the traces
// are read as the program's files (torchprof_trace.h) into the event store, and what the
// status files and the program's stderr say of traces missing, cut or stopped is its loss.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "common/clock.h"
#include "tracers/tracer.h"
#include "tracers/torchprof/torchprof_trace.h"

namespace cudatrace {

inline constexpr const char* kTorchprofDirEnv = "CUDATRACE_TORCHPROF_DIR";

// Where the hook is installed: <prefix>/lib/cudatrace/torchprof.
std::filesystem::path torchprof_hook_dir(const std::filesystem::path& prefix);

// Why `python` cannot run the method (it is not there, or finds no torch): empty when it can.
// Asked with `python -I`, which finds torch without importing it; remembered per interpreter.
std::string torchprof_python_problem(const std::string& python);

class TorchprofTracer final : public Tracer {
 public:
  TorchprofTracer(std::filesystem::path hook_dir, uint64_t max_bytes)
      : hook_dir_(std::move(hook_dir)), max_bytes_(max_bytes) {}
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;
  std::optional<std::map<std::string, int64_t>> loss_without_events(const std::filesystem::path& run_dir) override;
  TracerReport layers_without_events() override;

 private:
  std::filesystem::path hook_dir_, spool_;
  uint64_t max_bytes_;
  ClockOffset clock_;
  int64_t base_ns_ = 0;
};

// The conversion on its own: every status and trace file in `dir` into `events_file`, at
// most `max_bytes` of traces read in all; Kineto's own words on loss from
// `program_stderr` (the run's stderr.txt; none when empty). Layers, loss and notes as
// finish() reports them.
TracerReport convert_torchprof_output(const std::filesystem::path& dir, const std::filesystem::path& events_file,
                                      const TraceClock& clock, uint64_t max_bytes,
                                      const std::filesystem::path& program_stderr);

}  // namespace cudatrace
