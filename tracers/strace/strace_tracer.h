#pragma once
// Method `strace`: runs the target under the system's strace (following forks and
// threads, ns timestamps and durations, fd paths), then parses strace's file into
// syscall events on the harness's clock. strace sees syscalls, not CUDA calls: the
// matcher scores, for each ledger call, whether its thread made a syscall during it.
#include "common/clock.h"
#include "tracers/tracer.h"

namespace cudatrace {

class StraceTracer final : public Tracer {
 public:
  explicit StraceTracer(std::filesystem::path strace) : strace_(std::move(strace)) {}
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override { std::filesystem::remove(run_dir / "strace.txt"); }

  // strace's arguments, before the target's argv (exposed for the tests).
  static std::vector<std::string> strace_args(const std::filesystem::path& strace, const std::filesystem::path& output);

 private:
  std::filesystem::path strace_;
  std::filesystem::path output_;  // strace runs as the program's user: its own folder
  ClockOffset clock_;  // read at prepare(): the tool stamps wall-clock time
};

// Converts a strace output file into run_dir/events.jsonl; the report's loss and notes
// carry the parser's counters. Shared by the tracer and the fixture tests.
TracerReport convert_strace_output(const std::filesystem::path& strace_file, const std::filesystem::path& events_file,
                                   int64_t realtime_minus_monotonic_ns);

}  // namespace cudatrace
