#include "tracers/uprobe/load_follower.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/clock.h"

namespace cudatrace {

bool resume_process(pid_t pid) {
  const int fd = int(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    // Gone: nothing to resume. Otherwise (no pidfd on this kernel, no descriptor left) a
    // plain signal: a process left stopped would be worse than the pid-reuse race.
    if (errno == ESRCH) return false;
    return kill(pid, SIGCONT) == 0;
  }
  const bool ok = syscall(SYS_pidfd_send_signal, fd, SIGCONT, nullptr, 0) == 0;
  close(fd);
  return ok;
}

LoadFollower::LoadFollower(int loads_map_fd, Handler on_load) : on_load_(std::move(on_load)) {
  // Every notification wakes us (a process waits on it): the timeout only bounds how long
  // stop() waits for the thread.
  reader_ = std::make_unique<RingReader>(
      loads_map_fd, sizeof(uprobe_load_notice), 100, [this](const void* r) { on_notice(r); },
      "the loader notification ring");
}

LoadFollower::~LoadFollower() { stop(); }

void LoadFollower::on_notice(const void* record) {
  uprobe_load_notice n;
  std::memcpy(&n, record, sizeof n);
  try {
    on_load_(n);
  } catch (...) {
    // Whatever went wrong with the probing, the process must not stay stopped; what
    // could not be probed is the handler's to note.
  }
  bool resumed = true;
  if (n.held) resumed = resume_process(pid_t(n.pid));
  const int64_t held_ns = n.held ? std::max<int64_t>(0, monotonic_ns() - int64_t(n.time_ns)) : 0;
  std::lock_guard lk(mu_);
  ++stats_.notices;
  if (n.held) {
    ++stats_.held;
    stats_.held_ns_total += held_ns;
    stats_.held_ns_max = std::max(stats_.held_ns_max, held_ns);
    if (!resumed) ++stats_.resume_failures;
  }
}

void LoadFollower::stop() { reader_->stop(); }  // what came in since: handled and resumed too

LoadFollower::Stats LoadFollower::stats() const {
  std::lock_guard lk(mu_);
  Stats s = stats_;
  s.malformed = reader_->short_records();
  return s;
}

}  // namespace cudatrace
