#include "harness/run/guardian.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace cudatrace {

namespace {

// What the guardian tells the harness, one record per write (a pipe writes 8 bytes whole).
enum : int32_t { kChildPid = 1, kChildStatus = 2, kForkFailed = 3 };
struct Message {
  int32_t kind;
  int32_t value;
};

// ---- The guardian's side: async-signal-safe calls only, no allocation. ----

void tell(int fd, int32_t kind, int32_t value) {
  const Message m{kind, value};
  while (write(fd, &m, sizeof m) < 0 && errno == EINTR) {
  }
}

// "/proc/" + a + "/" + b ...: into `buf` (size n), without snprintf.
struct Path {
  char buf[96];
  size_t len = 0;
  Path& add(const char* s) {
    while (*s && len + 1 < sizeof buf) buf[len++] = *s++;
    buf[len] = '\0';
    return *this;
  }
  Path& add(long v) {
    char digits[24];
    int n = 0;
    do digits[n++] = char('0' + v % 10);
    while ((v /= 10) > 0 && n < 23);
    while (n > 0 && len + 1 < sizeof buf) buf[len++] = digits[--n];
    buf[len] = '\0';
    return *this;
  }
};

// A decimal name (a /proc entry), or -1.
long as_number(const char* s) {
  if (!*s) return -1;
  long v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9' || v > 0x7fffffff / 10) return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

struct Dirent64 {  // what getdents64 returns
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

// Calls `each(name)` for every entry of the folder at `path` but . and ..
template <class F>
bool for_each_entry(const char* path, F&& each) {
  const int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  alignas(8) static char dents[8192];
  long n;
  while ((n = syscall(SYS_getdents64, fd, dents, sizeof dents)) > 0) {
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const Dirent64*>(dents + at);
      at += d->reclen;
      if (d->name[0] != '.') each(d->name);
    }
  }
  close(fd);
  return true;
}

// Calls `each(pid)` for every number in the file at `path` (a children list). False when
// the file cannot be opened.
template <class F>
bool for_each_number_in(const char* path, F&& each) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  static char buf[4096];
  long v = -1;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < n; ++i) {
      const char c = buf[i];
      if (c >= '0' && c <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (c - '0');
        if (v > 0x7fffffff) v = 0x7fffffff;
      } else if (v >= 0) {
        each(pid_t(v));
        v = -1;
      }
    }
  }
  if (v >= 0) each(pid_t(v));
  close(fd);
  return true;
}

// The parent of `pid` from /proc/PID/stat (the field after the name's last ')'), or -1.
pid_t parent_from_stat(pid_t pid) {
  Path p;
  p.add("/proc/").add(long(pid)).add("/stat");
  const int fd = open(p.buf, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  static char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  ssize_t close_paren = -1;
  for (ssize_t i = 0; i < n; ++i)
    if (buf[i] == ')') close_paren = i;
  // ") S 1234 ..."
  ssize_t i = close_paren + 4;
  if (close_paren < 0 || i >= n) return -1;
  long v = 0;
  for (; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) v = v * 10 + (buf[i] - '0');
  return pid_t(v);
}

// Sends SIGKILL to every process below `self` that can be found now, top down: a process
// is killed before its children list is read, and a process with SIGKILL pending cannot
// fork, so none of its children is missed. What a bounded queue leaves, or what a process
// killed before its children were listed leaves, is reparented to `self` (a subreaper)
// and found by the next call. Returns how many were signalled.
size_t kill_everything_below(pid_t self) {
  static pid_t queue[16384];
  size_t head = 0, tail = 0, killed = 0;
  queue[tail++] = self;
  bool listed = false;  // whether the kernel has children lists (CONFIG_PROC_CHILDREN)
  while (head < tail) {
    const pid_t p = queue[head++];
    Path tasks;
    tasks.add("/proc/").add(long(p)).add("/task");
    for_each_entry(tasks.buf, [&](const char* tid) {
      if (as_number(tid) < 0) return;
      Path children = tasks;
      children.add("/").add(tid).add("/children");
      listed |= for_each_number_in(children.buf, [&](pid_t c) {
        if (c <= 1 || c == self) return;
        if (kill(c, SIGKILL) == 0) ++killed;
        if (tail < sizeof queue / sizeof queue[0]) queue[tail++] = c;
      });
    });
  }
  if (!listed) {
    // No children lists: our own children, from every process's stat; their children are
    // reparented to us once they die, and killed at the next call.
    for_each_entry("/proc", [&](const char* name) {
      const long pid = as_number(name);
      if (pid > 1 && pid != self && parent_from_stat(pid_t(pid)) == self && kill(pid_t(pid), SIGKILL) == 0) ++killed;
    });
  }
  return killed;
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

// Closes every descriptor but the `n` in `keep` (sorted, ascending).
void close_all_but(const int* keep, int n) {
  int from = 3;
  for (int i = 0; i <= n; ++i) {
    const int to = i < n ? keep[i] - 1 : 0x7fffffff;  // close [from, to]
    if (to >= from) {
#ifdef SYS_close_range
      if (syscall(SYS_close_range, unsigned(from), unsigned(to), 0u) == 0) {
        if (i < n) from = keep[i] + 1;
        continue;
      }
#endif
      rlimit rl{};
      long last = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? long(rl.rlim_cur) : 65536;
      if (last > (1 << 20)) last = 1 << 20;
      for (long fd = from; fd <= to && fd < last; ++fd) close(int(fd));
    }
    if (i < n) from = keep[i] + 1;
  }
}

[[noreturn]] void guardian_main(int control, int status, void (*child)(void*, pid_t), void* arg) {
  // Nothing meant for the harness stops the guardian: every signal that can be blocked is,
  // and it leaves the terminal's process group (^C goes to the harness alone).
  sigset_t all, before;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &before);
  setpgid(0, 0);
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);  // not inherited by the child
  prctl(PR_SET_NAME, "cudatrace-guard", 0, 0, 0);
  const pid_t self = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    tell(status, kForkFailed, errno);
    _exit(1);
  }
  if (pid == 0) {
    close(control);
    close(status);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    child(arg, self);
    _exit(127);
  }
  setpgid(pid, pid);  // the child does too: kill(-pid) works whoever runs first
  tell(status, kChildPid, pid);
  // Spared by the OOM killer (allowed for root; the child, forked before, keeps the
  // harness's own setting).
  const int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) {
    (void)!write(oom, "-1000", 5);
    close(oom);
  }
  int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
  {
    int keep[3] = {control, status, pidfd};
    int n = pidfd >= 0 ? 3 : 2;
    for (int i = 0; i < n; ++i)  // sort three
      for (int j = i + 1; j < n; ++j)
        if (keep[j] < keep[i]) {
          const int t = keep[i];
          keep[i] = keep[j];
          keep[j] = t;
        }
    close_all_but(keep, n);
  }
  // Until the harness closes its end (done with the run, or dead): pass the child's wait
  // status on the moment it ends.
  bool reported = false;
  for (;;) {
    pollfd fds[2] = {{control, POLLIN, 0}, {pidfd, POLLIN, 0}};
    const bool watch_child = !reported && pidfd >= 0;
    const int timeout = reported || pidfd >= 0 ? -1 : 1;  // no pidfd: look every ms
    const int r = poll(fds, watch_child ? 2 : 1, timeout);
    if (r < 0 && errno != EINTR) break;
    if (!reported) {
      int ws = 0;
      if (waitpid(pid, &ws, WNOHANG) == pid) {
        tell(status, kChildStatus, ws);
        reported = true;
        if (pidfd >= 0) close(pidfd);
        pidfd = -1;
      }
    }
    if (r > 0 && fds[0].revents) {
      char buf[64];
      const ssize_t n = read(control, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;  // the harness is gone, or done
    }
  }
  // Nothing of the run outlives this: kill everything below, until nothing is left to reap.
  long pause = 1;
  for (;;) {
    kill_everything_below(self);
    int ws;
    pid_t r;
    while ((r = waitpid(-1, &ws, WNOHANG)) > 0) {
    }
    if (r < 0 && errno == ECHILD) break;
    sleep_ms(pause);
    pause = pause < 100 ? pause * 2 : 100;
  }
  _exit(0);
}

// ---- The harness's side. ----

// Reads one whole message, or returns false at the end of the pipe or an error.
bool read_message(int fd, Message& m) {
  size_t got = 0;
  char* p = reinterpret_cast<char*>(&m);
  while (got < sizeof m) {
    const ssize_t n = read(fd, p + got, sizeof m - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += size_t(n);
  }
  return true;
}

}  // namespace

bool Guardian::start(void (*child)(void*, pid_t), void* arg) {
  int control[2], status[2];
  if (pipe2(control, O_CLOEXEC) != 0) return false;
  if (pipe2(status, O_CLOEXEC) != 0) {
    const int e = errno;
    close(control[0]);
    close(control[1]);
    errno = e;
    return false;
  }
  const pid_t g = fork();
  if (g < 0) {
    const int e = errno;
    for (int fd : {control[0], control[1], status[0], status[1]}) close(fd);
    errno = e;
    return false;
  }
  if (g == 0) {
    close(control[1]);
    close(status[0]);
    guardian_main(control[0], status[1], child, arg);
  }
  close(control[0]);
  close(status[1]);
  guardian_ = g;
  control_fd_ = control[1];
  status_fd_ = status[0];
  Message m{};
  if (read_message(status_fd_, m) && m.kind == kChildPid) {
    child_ = pid_t(m.value);
    return true;
  }
  const int e = m.kind == kForkFailed ? m.value : ECHILD;
  finish();
  errno = e;
  return false;
}

std::optional<int> Guardian::wait_child(int timeout_ms) {
  if (status_ || status_fd_ < 0) return status_;
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int left = -1;
    if (timeout_ms >= 0) {
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      const long spent = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
      left = spent >= timeout_ms ? 0 : int(timeout_ms - spent);
    }
    pollfd p{status_fd_, POLLIN, 0};
    const int r = poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return std::nullopt;
    Message m{};
    // The end of the pipe without a status: the guardian died, and its child with it.
    status_ = read_message(status_fd_, m) && m.kind == kChildStatus ? m.value : SIGKILL;
    return status_;
  }
}

void Guardian::finish() {
  if (control_fd_ >= 0) close(control_fd_);  // the guardian kills what is left below it
  control_fd_ = -1;
  if (guardian_ > 0) {
    while (waitpid(guardian_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  guardian_ = -1;
  if (status_fd_ >= 0) close(status_fd_);
  status_fd_ = -1;
}

}  // namespace cudatrace
