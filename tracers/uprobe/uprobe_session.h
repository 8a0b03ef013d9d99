#pragma once
// The BPF half of the uprobe method, through the libbpf skeleton of tracers/uprobe/uprobe.bpf.c:
// load, attach one entry (and exit) probe per function, trace a process tree, drain the
// ring buffer on a thread of its own into a spool file, and take everything down again.
#include <linux/types.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tracers/uprobe/uprobe_event.h"
#include "tracers/ebpf/ring_spool.h"

struct uprobe_bpf;
struct bpf_link;
struct bpf_program;

namespace cudatrace {

class UprobeSession {
 public:
  // Opens and loads the programs; throws std::runtime_error with libbpf's reason.
  UprobeSession(uprobe_mode mode, uint64_t ring_bytes);
  ~UprobeSession();  // detaches whatever is still attached
  UprobeSession(const UprobeSession&) = delete;
  UprobeSession& operator=(const UprobeSession&) = delete;

  // Probes at `offsets` in `binary` (and return probes unless the mode is entry-only), the
  // cookie of each beside it. Returns the offsets that could not be probed, with why.
  std::vector<std::pair<uint64_t, std::string>> attach(const std::string& binary, const std::vector<uint64_t>& offsets,
                                                       const std::vector<uint64_t>& cookies);
  // The probe on the dynamic loader's debugger hook (`offset` of _dl_debug_state in
  // `ld_so`, `to_r_debug` from there to _r_debug, 0 if unknown): each traced process that
  // has just loaded libraries is stopped and announced on loads_fd() (struct
  // uprobe_load_notice). Returns why it could not be attached, or empty.
  std::string attach_loader(const std::string& ld_so, uint64_t offset, int64_t to_r_debug);
  int loads_fd() const;
  // Whether the kernel took uprobe_multi links (one per file, detached in one go).
  bool multi_links() const { return multi_; }
  // The per-call benchmark's in-process A/B: `paused` detaches every call probe (the
  // loader's stays) and false attaches them again, at the offsets attach() probed. Needs
  // uprobe_multi links: per-probe links take seconds per hundred probes to detach. Returns
  // why it could not, or empty.
  std::string pause_calls(bool paused);
  void trace_process(pid_t pid);
  // Drains the ring buffer into `spool` until stop().
  void start(const std::filesystem::path& spool, uint64_t max_bytes);
  // Detaches every probe, drains what is left, closes the spool. Idempotent.
  void stop();

  size_t attached() const { return probes_; }
  uint64_t records() const { return spool_ ? spool_->records() : 0; }
  uint64_t short_records() const { return spool_ ? spool_->short_records() : 0; }
  // Records the spool could not keep: past its bound, or refused by the disk (after stop()).
  uint64_t spool_over_bound() const { return spool_ ? spool_->over_bound_records() : 0; }
  uint64_t spool_unwritten() const { return spool_ ? spool_->unwritten_records() : 0; }
  uint64_t spool_accepted() const { return spool_ ? spool_->accepted() : 0; }
  std::string spool_write_error() const { return spool_ ? spool_->write_error() : std::string(); }
  // Summed over CPUs, indexed by enum uprobe_loss.
  std::vector<uint64_t> losses() const;

 private:
  void detach_all();
  // Entry probes, and return probes unless the mode is entry-only.
  std::vector<bool> directions() const { return mode_ == UPROBE_MODE_ENTER ? std::vector<bool>{false} : std::vector<bool>{false, true}; }
  void open_and_load(bool multi);
  int link_multi(const std::string& binary, const uint64_t* offsets, const uint64_t* cookies, size_t n, bool ret,
                 bpf_program* prog = nullptr);
  uprobe_mode mode_;
  uint64_t ring_bytes_;
  uprobe_bpf* skel_ = nullptr;
  bool multi_ = false;
  size_t probes_ = 0;
  std::vector<bpf_link*> links_;  // per-probe links (kernels without uprobe_multi)
  std::vector<int> multi_fds_;    // uprobe_multi links of the call probes
  std::vector<int> loader_fds_;   // the loader's uprobe_multi link
  // What attach() probed with uprobe_multi links, to attach again after a pause: the file
  // through a descriptor of its own (a name may point elsewhere by then, and a caller's
  // /proc/self/fd/N is closed once attach() returns: N may be another file later).
  struct CallProbes {
    int fd = -1;
    std::vector<uint64_t> offsets, cookies;
  };
  std::vector<CallProbes> call_probes_;
  bool paused_ = false;
  std::mutex probes_mutex_;  // attach() runs on the load follower's thread, pauses on the pause server's
  std::unique_ptr<RingSpool> spool_;
};

}  // namespace cudatrace
