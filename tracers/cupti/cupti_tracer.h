#pragma once
// Method `cupti`: the injection library (cupti_injection.h) plus the eBPF collector on its
// USDT probes (cupti_session.h). Sees every runtime and driver call CUPTI reports, with
// arguments and return codes, and every kernel's GPU start and end, joined to its launch.
// Needs root or CAP_BPF + CAP_PERFMON, and a GPU (the driver loads the library at cuInit).
// The records are decoded into the run's store while the program runs, on a thread of the
// collector's (tracers/ebpf/spool_follower.h): what is left after the program ends is the
// tail the drain had not written yet.
#include <memory>

#include "tracers/cupti/cupti_injection.h"

namespace cudatrace {

class CuptiSession;
struct CuptiLiveDecode;

// "--set cupti.ring_mb=N" and "--set cupti.per_call=0|1"; throws std::invalid_argument.
struct CuptiOptions {
  uint64_t ring_bytes;
  bool per_call;
};
CuptiOptions cupti_options(const std::map<std::string, std::string>& options);

class CuptiTracer final : public CuptiInjectionTracer {
 public:
  // `max_spool_bytes`: the bound on the records spooled during the run (HostFacts::max_trace_bytes).
  CuptiTracer(std::filesystem::path library, uint64_t ring_bytes, bool per_call, uint64_t max_spool_bytes);
  ~CuptiTracer() override;
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  void attach(pid_t child) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;

 private:
  uint64_t ring_bytes_;
  bool per_call_;
  uint64_t max_spool_bytes_;
  std::filesystem::path run_dir_;
  std::unique_ptr<CuptiSession> session_;
  std::unique_ptr<CuptiLiveDecode> live_;  // the spool decoded into the store as it is written
  double attach_ms_ = 0;
  size_t probes_ = 0;
};

}  // namespace cudatrace
