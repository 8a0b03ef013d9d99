#pragma once
// The collector of the cupti method, through the libbpf skeleton of tracers/cupti/cupti.bpf.c: one
// program per USDT probe of the injection library, attached for every process that maps
// the library (the kernel raises each probe's semaphore there) and filtered in BPF to the
// target's process tree; a ring buffer drained into a spool file.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tracers/cupti/cupti_event.h"
#include "tracers/ebpf/ring_spool.h"

struct cupti_bpf;
struct bpf_link;

namespace cudatrace {

class CuptiSession {
 public:
  // Loads the programs; throws std::runtime_error with libbpf's reason.
  explicit CuptiSession(uint64_t ring_bytes);
  ~CuptiSession();
  CuptiSession(const CuptiSession&) = delete;
  CuptiSession& operator=(const CuptiSession&) = delete;

  // Attaches to the library's probes; throws if one is missing or refused. `per_call`:
  // a probe hit per API call (api_exit) instead of one per thread's batch (api_batch).
  void attach(const std::filesystem::path& library, bool per_call);
  void trace_process(pid_t pid);
  void start(const std::filesystem::path& spool, uint64_t max_bytes);
  // Detaches, drains the rest, closes the spool. Idempotent.
  void stop();

  size_t probes() const { return links_.size(); }
  uint64_t records() const { return spool_ ? spool_->records() : 0; }
  uint64_t short_records() const { return spool_ ? spool_->short_records() : 0; }
  // Records the spool could not keep: past its bound, or refused by the disk (after stop()).
  uint64_t spool_over_bound() const { return spool_ ? spool_->over_bound_records() : 0; }
  uint64_t spool_unwritten() const { return spool_ ? spool_->unwritten_records() : 0; }
  uint64_t spool_accepted() const { return spool_ ? spool_->accepted() : 0; }
  std::string spool_write_error() const { return spool_ ? spool_->write_error() : std::string(); }
  std::vector<uint64_t> losses() const;  // indexed by enum cupti_loss

 private:
  cupti_bpf* skel_ = nullptr;
  std::vector<bpf_link*> links_;
  std::unique_ptr<RingSpool> spool_;
};

}  // namespace cudatrace
