#pragma once
// Follows what the traced processes load while they run. The BPF side stops a process at
// the dynamic loader's notification that it has mapped new libraries (before any of their
// code runs: tracers/uprobe/uprobe.bpf.c, loader_notice) and announces it here; a thread of ours hands
// the process to `on_load` (which probes what is new) and resumes it. So no call into a
// library loaded with dlopen, by a forked child or after an exec goes unseen, and the
// time each process was held is measured.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "tracers/uprobe/uprobe_event.h"
#include "tracers/ebpf/ring_reader.h"

namespace cudatrace {

class LoadFollower {
 public:
  using Handler = std::function<void(const uprobe_load_notice&)>;
  // Starts reading the `loads` ring buffer map; throws std::runtime_error.
  LoadFollower(int loads_map_fd, Handler on_load);
  ~LoadFollower();
  LoadFollower(const LoadFollower&) = delete;
  LoadFollower& operator=(const LoadFollower&) = delete;

  // Handles what is still queued, resumes every process it holds and stops. Idempotent.
  void stop();

  struct Stats {
    uint64_t notices = 0;          // loader notifications handled
    uint64_t held = 0;             // of them, with the process stopped until handled
    uint64_t resume_failures = 0;  // held processes that could not be resumed (gone)
    int64_t held_ns_total = 0;     // notification to resume, summed over held ones
    int64_t held_ns_max = 0;
    uint64_t malformed = 0;        // notices shorter than their struct: unreadable, unhandled
  };
  Stats stats() const;

 private:
  void on_notice(const void* record);
  Handler on_load_;
  mutable std::mutex mu_;
  Stats stats_;
  std::unique_ptr<RingReader> reader_;  // last: its thread stops before the rest goes
};

// Resumes a process stopped by the loader probe (SIGCONT through a pidfd, so that a pid
// reused meanwhile is never signalled). False when it is gone.
bool resume_process(pid_t pid);

}  // namespace cudatrace
