#pragma once
// A run's guardian: the process that makes sure nothing of a run outlives the harness, even
// a harness killed outright (SIGKILL, the OOM killer), which can do nothing itself.
//
// The harness forks the guardian, and the guardian forks the run's process: it is the
// ancestor of everything the run starts. It is a child subreaper, so whatever the run leaves
// behind (a daemon, a double fork, a setsid()'d process in a session of its own, which no
// kill(-group) and no PDEATHSIG reaches) is reparented to it, never to init. It holds a pipe
// from the harness: when that pipe closes, because the harness finished the run or because
// the harness died, it kills every process below it, generation after generation, reaps
// them all and exits. It sits in a process group of its own, ignores ^C and SIGTERM, and
// tells the kernel's OOM killer to spare it (the program's process is forked before that,
// so it does not inherit it).
//
// The run's process is the guardian's child, not the harness's: the guardian waits for it
// and passes its wait status on, exactly, through a second pipe that the harness polls
// (readable the moment the process ended).
//
// After its fork the guardian only makes async-signal-safe calls (no allocation): the
// harness may have threads.
#include <sys/types.h>

#include <optional>

namespace cudatrace {

class Guardian {
 public:
  Guardian() = default;
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;
  ~Guardian() { finish(); }

  // Forks the guardian, which forks the run's process and calls `child(arg, guardian_pid)`
  // in it; `child` must not return (it execs or _exits) and may only make async-signal-safe
  // calls. SIGINT, SIGTERM, SIGHUP and SIGQUIT are at their defaults there. Returns false,
  // with errno, when either fork failed.
  bool start(void (*child)(void* arg, pid_t guardian), void* arg);

  pid_t guardian() const { return guardian_; }
  pid_t child() const { return child_; }
  // Readable once the child has ended (poll it); -1 before start().
  int exit_fd() const { return status_fd_; }

  // The child's wait status, once it has ended: waits up to `timeout_ms` for it (-1:
  // however long it takes, 0: not at all). A guardian that died before telling it gives
  // the status of a SIGKILL (its child dies with it: PDEATHSIG).
  std::optional<int> wait_child(int timeout_ms);

  // Ends the run's containment: the guardian kills whatever is still below it, reaps it
  // all and exits; this waits for it. Safe to call twice.
  void finish();

 private:
  pid_t guardian_ = -1, child_ = -1;
  int control_fd_ = -1;  // ours to write; closed: the guardian cleans up
  int status_fd_ = -1;   // the guardian's: the child's pid, then its wait status
  std::optional<int> status_;
};

}  // namespace cudatrace
