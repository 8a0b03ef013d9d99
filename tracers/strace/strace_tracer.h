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
  // `max_bytes`: how much of strace's output one run reads (HostFacts::max_trace_bytes).
  StraceTracer(std::filesystem::path strace, uint64_t max_bytes) : strace_(std::move(strace)), max_bytes_(max_bytes) {}
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override { std::filesystem::remove(run_dir / "strace.txt"); }

  // strace's arguments, before the target's argv (exposed for the tests).
  static std::vector<std::string> strace_args(const std::filesystem::path& strace, const std::filesystem::path& output);

 private:
  std::filesystem::path strace_;
  uint64_t max_bytes_;
  std::filesystem::path output_;  // strace runs as the program's user: its own folder
  ClockOffset clock_;  // read at prepare(): the tool stamps wall-clock time
};

// Converts a strace output file (at most `max_bytes` of it) into the event store at
// `events_file`, as a stream; the report's loss and notes carry the parser's counters.
// Shared by the tracer and the fixture tests.
TracerReport convert_strace_output(const std::filesystem::path& strace_file, const std::filesystem::path& events_file,
                                   int64_t realtime_minus_monotonic_ns, uint64_t max_bytes = uint64_t(64) << 20);

}  // namespace cudatrace
