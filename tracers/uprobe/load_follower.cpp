#include "tracers/uprobe/load_follower.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

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
  ring_ = ring_buffer__new(loads_map_fd, on_record, this, nullptr);
  if (!ring_) throw std::runtime_error(std::string("cannot open the loader notification ring: ") + std::strerror(errno));
  // Every notification wakes us (a process waits on it): the timeout only bounds how long
  // stop() waits for the thread.
  reader_ = std::thread([this] {
    while (!stopping_.load(std::memory_order_relaxed)) ring_buffer__poll(ring_, 100);
  });
}

LoadFollower::~LoadFollower() {
  stop();
  if (ring_) ring_buffer__free(ring_);
}

int LoadFollower::on_record(void* self, void* data, size_t size) {
  auto* f = static_cast<LoadFollower*>(self);
  if (size < sizeof(uprobe_load_notice)) return 0;
  uprobe_load_notice n;
  std::memcpy(&n, data, sizeof n);
  try {
    f->on_load_(n);
  } catch (...) {
    // Whatever went wrong with the probing, the process must not stay stopped; what
    // could not be probed is the handler's to note.
  }
  bool resumed = true;
  if (n.held) resumed = resume_process(pid_t(n.pid));
  const int64_t held_ns = n.held ? std::max<int64_t>(0, monotonic_ns() - int64_t(n.time_ns)) : 0;
  std::lock_guard lk(f->mu_);
  ++f->stats_.notices;
  if (n.held) {
    ++f->stats_.held;
    f->stats_.held_ns_total += held_ns;
    f->stats_.held_ns_max = std::max(f->stats_.held_ns_max, held_ns);
    if (!resumed) ++f->stats_.resume_failures;
  }
  return 0;
}

void LoadFollower::stop() {
  stopping_ = true;
  if (reader_.joinable()) reader_.join();
  if (ring_) ring_buffer__consume(ring_);  // what came in since: handled and resumed too
}

LoadFollower::Stats LoadFollower::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

}  // namespace cudatrace
