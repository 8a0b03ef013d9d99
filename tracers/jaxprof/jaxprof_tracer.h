#pragma once
// Method `jaxprof`: JAX's own profiler (jax.profiler.start_trace, XLA's CUPTI tracer) around
// the whole of a Python program, checked against the same truth as every method. The harness
// puts the hook folder (hook/sitecustomize.py, with ../pyhook/cudatrace_hook.py) first on
// PYTHONPATH; every interpreter of the program writes a status file
// (jaxprof.<pid>.status.json), and each one that initializes a JAX backend traces from then
// until it exits, when jax.profiler writes jaxprof.<pid>/plugins/profile/<run>/. After the
// run those traces are read as the program's files (jaxprof_trace.h) into the event store,
// and what the status files say of traces missing, cut or refused is its loss.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "tracers/tracer.h"

namespace cudatrace {

inline constexpr const char* kJaxprofDirEnv = "CUDATRACE_JAXPROF_DIR";

// Why `python` cannot run the method (it is not there, or finds no jax): empty when it can.
std::string jaxprof_python_problem(const std::string& python);

class JaxprofTracer final : public Tracer {
 public:
  JaxprofTracer(std::filesystem::path hook_dir, uint64_t max_bytes)
      : hook_dir_(std::move(hook_dir)), max_bytes_(max_bytes) {}
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;
  std::optional<std::map<std::string, int64_t>> loss_without_events(const std::filesystem::path& run_dir) override;
  TracerReport layers_without_events() override;

 private:
  std::filesystem::path hook_dir_, spool_;
  uint64_t max_bytes_;
};

// The conversion on its own: every status file and trace folder in `dir` into `events_file`,
// at most `max_bytes` of trace files read in all. Layers, loss and notes as finish() reports
// them.
TracerReport convert_jaxprof_output(const std::filesystem::path& dir, const std::filesystem::path& events_file,
                                    uint64_t max_bytes);

}  // namespace cudatrace
