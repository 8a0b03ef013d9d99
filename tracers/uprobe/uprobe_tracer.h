#pragma once
// Method `uprobe` (and its two cost references): eBPF uprobes and uretprobes on the CUDA
// runtime (libcudart.so, or the cudart functions linked into an executable or a library)
// and on the driver (libcuda). The files found before start (as the target's loader would
// find them) are probed first; every other one a traced process maps — dlopen, a forked
// child, an exec — is probed when it is mapped (load_follower.h). Needs root or
// CAP_BPF + CAP_PERFMON. The probes see every process that maps those files; the BPF side
// keeps only the target's process tree. The records are decoded into the run's store while
// the program runs (tracers/ebpf/spool_follower.h).
#include <memory>
#include <mutex>

#include "tracers/uprobe/uprobe_event.h"
#include "tracers/tracer.h"
#include "tracers/uprobe/probe_plan.h"

namespace cudatrace {

class UprobeSession;
class LoadFollower;
class PauseChannel;
struct UprobeLiveDecode;

class UprobeTracer final : public Tracer {
 public:
  // `max_spool_bytes`: the bound on the records spooled during the run (HostFacts::max_trace_bytes).
  UprobeTracer(uprobe_mode mode, uint64_t ring_bytes, uint64_t max_spool_bytes);
  ~UprobeTracer() override;
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  void attach(pid_t child) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;
  TracerReport layers_without_events() override;

 private:
  void find_loader();
  void on_load(const uprobe_load_notice& n);
  size_t attach_file(ProbedFile& f, const std::string& path, nlohmann::json& failures);
  nlohmann::json stop_following();
  // Which layers have probes, which in part, and why not: from the plan, not the events.
  void judge_layers(TracerReport& report) const;
  void note_file_time(const std::string& path, int64_t ns);
  uprobe_mode mode_;
  uint64_t ring_bytes_;
  uint64_t max_spool_bytes_;
  ProbePlan plan_;
  // plan_.functions grows on the load follower's thread while the live decoder reads it.
  std::mutex functions_mutex_;
  std::unique_ptr<UprobeLiveDecode> live_;  // the spool decoded into the store as it is written
  std::filesystem::path run_dir_;
  std::filesystem::path exe_;
  std::unique_ptr<UprobeSession> session_;
  nlohmann::json attach_notes_ = nlohmann::json::object();
  // Following loads (load_follower.h): the loader probed, or why not.
  std::filesystem::path loader_;
  uint64_t loader_hook_offset_ = 0;
  int64_t loader_to_r_debug_ = 0;
  std::string loader_why_not_;
  std::unique_ptr<LoadFollower> follower_;
  // The per-call benchmark asks through it to detach and re-attach the call probes.
  std::unique_ptr<PauseChannel> pause_;
  nlohmann::json stop_pausing();
  int64_t start_ns_ = 0;
  int64_t files_examined_ = 0, functions_failed_ = 0;
  uint64_t functions_over_limit_ = 0;
  uint64_t maps_truncated_ = 0;  // notifications whose /proc/PID/maps was over its read bound
  std::vector<std::string> unreadable_files_;
  std::vector<std::pair<int64_t, std::string>> slowest_files_;  // (ns, path), longest first
};

}  // namespace cudatrace
