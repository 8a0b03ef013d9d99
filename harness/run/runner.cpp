#include "harness/run/runner.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/clock.h"
#include "harness/run/guardian.h"
#include "harness/run/own_leftovers.h"
#include "harness/run/process_tree.h"
#include "harness/run/stall_watch.h"

extern char** environ;

namespace cudatrace {

std::atomic<bool> g_interrupted{false};

namespace {

void on_interrupt(int) { g_interrupted = true; }

// Kill the child's process group: a polite SIGTERM, then SIGKILL after a grace period.
// Members that ignore SIGTERM, or outlive the child, get SIGKILL at the end either way.
void stop_group(Guardian& guardian, int& wstatus) {
  const pid_t pid = guardian.child();
  kill(-pid, SIGTERM);
  std::optional<int> status = guardian.wait_child(2000);
  kill(-pid, SIGKILL);
  if (!status) status = guardian.wait_child(-1);
  wstatus = *status;
}

std::vector<std::string> child_environment(const Launch& launch) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!launch.env.count(key)) env.push_back(kv);
  }
  for (const auto& [k, v] : launch.env) env.push_back(k + "=" + v);
  return env;
}


// A descriptor closed when it goes out of scope.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Keeps one output file at its cap while the program writes it: past the cap the file is
// truncated back to it. The program's own descriptor keeps its offset, so its later writes
// land past a hole, which takes no space, and are freed at the next check.
struct OutputTrim {
  int fd;
  uint64_t cap;
  uint64_t end_seen = 0;  // the furthest end of file seen: what the program wrote, at least
  void check() {
    struct stat st {};
    if (fstat(fd, &st) != 0) return;
    end_seen = std::max(end_seen, uint64_t(st.st_size));
    if (uint64_t(st.st_size) > cap) (void)!ftruncate(fd, off_t(cap));
  }
  OutputKept finish() {
    check();
    OutputKept k;
    k.written = end_seen;
    k.kept = std::min(end_seen, cap);
    if (end_seen > cap) k.cut_reason = "over the cap of " + std::to_string(cap >> 20) + " MiB per output file";
    return k;
  }
};

// How often the stall watch samples the run's processes (one stat file each).
constexpr int64_t kStallSampleNs = 500000000;

// "2", "0.5": the seconds a person gave.
std::string given_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

[[noreturn]] void child_fail(int report_fd, int err) {
  (void)!write(report_fd, &err, sizeof err);
  _exit(127);
}

// What the run's process needs, all made before the fork: after it, only async-signal-safe
// calls.
struct ChildSetup {
  int gate_read, gate_write, report_read, report_write;  // gate: "go" from the harness; report: exec's errno
  int out, err;
  char** argv;
  char** envp;
  const std::optional<Credentials>* run_as;
  const std::vector<gid_t>* groups;
};

// The run's process, forked by its guardian (guardian.h): waits at the gate, becomes the
// program's user, and execs the program.
[[noreturn]] void child_main(void* arg, pid_t guardian) {
  const ChildSetup& c = *static_cast<const ChildSetup*>(arg);
  setpgid(0, 0);  // its own group: a timeout or ^C takes down its children too
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  close(c.gate_write);
  close(c.report_read);
  if (dup2(c.out, 1) < 0 || dup2(c.err, 2) < 0) child_fail(c.report_write, errno);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  char go;
  if (read(c.gate_read, &go, 1) != 1) _exit(126);  // the harness gave up before the gate opened
  if (*c.run_as) {
    const Credentials& who = **c.run_as;
    if (setgroups(c.groups->size(), c.groups->data()) != 0 || setgid(who.gid) != 0 || setuid(who.uid) != 0)
      child_fail(c.report_write, errno);
  }
  // Dies with its guardian (set after setuid, which clears it). A guardian that is already
  // gone by now would never know: stop. (The guardian outlives the harness to kill the rest.)
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != guardian) _exit(126);
  execve(c.argv[0], c.argv, c.envp);
  child_fail(c.report_write, errno);
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // a closed terminal: stop the run and keep what finished
}

const char* to_string(ChildStatus s) {
  switch (s) {
    case ChildStatus::Exited: return "exited";
    case ChildStatus::Signaled: return "crashed";
    case ChildStatus::TimedOut: return "timeout";
    case ChildStatus::Interrupted: return "interrupted";
    case ChildStatus::ExecFailed: return "exec-failed";
    case ChildStatus::TracerFailed: return "tracer-failed";
    case ChildStatus::Stalled: return "stalled";
  }
  return "?";
}

namespace {
// A whole decimal id from 1 to 2^31 - 1, or nothing.
std::optional<uint32_t> parse_id(const char* s) {
  if (!s || !*s || std::strlen(s) > 10) return std::nullopt;
  uint64_t v = 0;
  for (const char* p = s; *p; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    v = v * 10 + uint64_t(*p - '0');
  }
  if (v == 0 || v > 0x7fffffff) return std::nullopt;
  return uint32_t(v);
}
}  // namespace

std::optional<Credentials> invoking_user() {
  const char* uid = getenv("SUDO_UID");
  const char* gid = getenv("SUDO_GID");
  if (geteuid() != 0 || !uid) return std::nullopt;             // not started through sudo
  if (std::strcmp(uid, "0") == 0) return std::nullopt;          // root ran sudo: nothing to hand over
  const auto u = parse_id(uid), g = parse_id(gid);
  if (!u || !g)
    throw std::invalid_argument(std::string("SUDO_UID/SUDO_GID are not valid ids (") + (uid ? uid : "unset") + "/" +
                                (gid ? gid : "unset") + "): refusing to hand results to an unknown user");
  const char* user = getenv("SUDO_USER");
  return Credentials{uid_t(*u), gid_t(*g), user ? user : ""};
}

namespace {

ChildResult run_child_with(const ChildSpec& spec, Tracer& tracer, const Fd& out, const Fd& err, OutputTrim& trim_out,
                           OutputTrim& trim_err) {
  ChildResult res;
  int gate[2], report[2];  // gate: parent -> child "go"; report: child -> parent exec errno
  if (pipe2(gate, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
    res.detail = std::string("pipe: ") + std::strerror(errno);
    return res;
  }
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env = child_environment(spec.launch);
  std::vector<char*> envp, argv;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.launch.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<gid_t> groups;
  if (spec.run_as && !spec.run_as->user.empty()) {
    int n = 64;
    groups.resize(size_t(n));
    if (getgrouplist(spec.run_as->user.c_str(), spec.run_as->gid, groups.data(), &n) < 0) n = 0;
    groups.resize(size_t(n));
  }

  // The run's process is the guardian's child: whatever the run starts stays below the
  // guardian, which kills it all if the harness dies (guardian.h).
  ChildSetup setup{gate[0], gate[1], report[0], report[1], out.fd, err.fd, argv.data(), envp.data(), &spec.run_as, &groups};
  Guardian guardian;
  if (!guardian.start(&child_main, &setup)) {
    res.detail = std::string("fork: ") + std::strerror(errno);
    for (int fd : {gate[0], gate[1], report[0], report[1]}) close(fd);
    return res;
  }
  const pid_t pid = guardian.child();
  // The run's processes, the guardian not among them.
  const auto run_processes = [&](std::vector<pid_t> pids) {
    pids.erase(std::remove(pids.begin(), pids.end(), guardian.guardian()), pids.end());
    return pids;
  };
  janitor_watch(pid);  // a second line: if the harness and the guardian both die, this group goes
  struct Forget {
    pid_t group;
    ~Forget() { janitor_forget(group); }
  } forget{pid};
  close(gate[0]);
  close(report[1]);

  // Whose each leftover is: the program's executable, and the tool's when a method's tool
  // starts the program.
  std::error_code ec;
  const auto resolved = [&](const std::string& path) {
    const auto r = std::filesystem::canonical(path, ec);
    return ec ? path : r.string();
  };
  const std::string launched = resolved(spec.launch.argv[0]);
  const std::string program_exe = spec.program.empty() ? launched : resolved(spec.program);
  const std::string tool_exe = program_exe == launched ? "" : launched;
  ProcessWatch watch;
  watch.set_adopter(guardian.guardian());
  // A describer for kill_leftovers: the line it returns, and the same as an object in `*details`.
  const auto describe = [&](nlohmann::json* details) {
    return [&, details](pid_t p) {
      Leftover l = describe_leftover(p, watch, pid, program_exe, tool_exe);
      attribute_own_leftover(l, tracer);  // a helper of the method's tool (nsys's agent)
      details->push_back({{"pid", l.pid},
                         {"name", l.name},
                         {"exe", l.exe},
                         {"parent", l.parent ? nlohmann::json(l.parent) : nlohmann::json(nullptr)},
                         {"parent_name", l.parent_name},
                         {"state", l.state},
                         {"threads", l.threads},
                         {"belongs", l.belongs},
                         {"why", l.why}});
      return l.line();
    };
  };

  int wstatus = 0;
  try {
    tracer.attach(pid);
  } catch (const std::exception& e) {
    close(gate[1]);
    close(report[0]);
    stop_group(guardian, wstatus);
    res.status = ChildStatus::TracerFailed;
    res.detail = std::string("tracer could not attach: ") + e.what();
    return res;
  }

  const int64_t start = monotonic_ns();
  res.start_ns = start;
  (void)!write(gate[1], "g", 1);
  close(gate[1]);
  int exec_errno = 0;
  ssize_t got = read(report[0], &exec_errno, sizeof exec_errno);  // EOF = exec succeeded
  close(report[0]);
  if (got == ssize_t(sizeof exec_errno)) {
    wstatus = *guardian.wait_child(-1);
    res.status = ChildStatus::ExecFailed;
    res.detail = "cannot run " + spec.launch.argv[0] + ": " + std::strerror(exec_errno);
    return res;
  }

  // Wait for the exit: the guardian passes it on the moment it happens (exact wall time).
  const int64_t deadline = start + int64_t(spec.timeout_s * 1e9);
  bool reaped = false, interrupted = false;
  // Under a wrapper (strace), the program is the wrapper's child. What the program leaves
  // behind is reparented to the guardian, not to the wrapper, so the program has ended once the
  // wrapper has no child left: then what it left running is killed, and the wrapper, which
  // follows those processes, ends too. (Before its first fork the wrapper has no child
  // either: a child seen, or half a second gone, tells the two apart.)
  bool wrapper_had_child = false, program_ended = false;
  int64_t next_snapshot = start;
  // Every process below the harness (the child's tree and what it left to us), with the
  // program's output so far: whether the run is still getting anywhere.
  StallSettings stall_settings;
  if (const long tck = sysconf(_SC_CLK_TCK); tck > 0) stall_settings.ticks_per_s = double(tck);
  stall_settings.stall_timeout_s = spec.stall_timeout_s;
  StallWatch stall(stall_settings);
  const auto sample = [&](bool with_threads) {
    trim_out.check();
    trim_err.check();
    return read_tree_sample(run_processes(tree_below(getpid())), monotonic_ns() - start, trim_out.end_seen + trim_err.end_seen,
                            with_threads);
  };
  int64_t next_stall_sample = start;
  bool stalled = false;
  while (!reaped) {
    if (g_interrupted) {
      interrupted = true;
      break;
    }
    int64_t now = monotonic_ns();
    if (now >= deadline) break;
    if (now >= next_snapshot) {  // who started whom, while the parents are still there
      watch.snapshot(pid);
      next_snapshot = now + 300000000;
    }
    if (now >= next_stall_sample) {
      stall.add(sample(false));
      next_stall_sample = now + kStallSampleNs;
      if (stall.stall_timeout_reached()) {
        stalled = true;
        break;
      }
    }
    if (spec.launch.wrapper && !program_ended) {
      const bool has_child = has_children(pid);
      wrapper_had_child = wrapper_had_child || has_child;
      if (!has_child && (wrapper_had_child || now - start > 500000000)) {
        program_ended = true;
        for (auto& who : kill_leftovers({pid, guardian.guardian()}, describe(&res.left_running_detail)))
          res.left_running.push_back(who);
      }
    }
    trim_out.check();
    trim_err.check();
    int slice_ms = int(std::min<int64_t>((deadline - now) / 1000000 + 1, 100));
    if (const auto status = guardian.wait_child(slice_ms)) {
      reaped = true;
      wstatus = *status;
    }
  }
  res.wall_ns = monotonic_ns() - start;
  if (!reaped) {
    // What every process of the run was doing when it was stopped: a hang names its waiters,
    // each thread's state and wait channel, and whether the run had stalled or was busy.
    const TreeSample last = sample(true);
    stall.add(last);
    const double window = stalled ? spec.stall_timeout_s
                                  : std::min(stall_settings.report_window_s, double(last.t_ns) / 1e9);
    const StallVerdict verdict = judge_stall(stall, last, window);
    res.stall = verdict.json;
    watch.snapshot(pid);
    const auto say = describe(&res.running_when_stopped);
    say(pid);
    for (pid_t p : run_processes(descendants(getpid())))
      if (p != pid) say(p);
    stop_group(guardian, wstatus);
    for (auto& who : kill_leftovers({guardian.guardian()}, describe(&res.left_running_detail)))
      res.left_running.push_back(who);
    const std::string waiting = join_process_lines(verdict.processes);
    if (stalled) {
      res.status = ChildStatus::Stalled;
      res.detail = "no CPU time and no output for " + given_seconds(spec.stall_timeout_s) + " s" +
                   (waiting.empty() ? "" : "; " + waiting);
      return res;
    }
    res.status = interrupted ? ChildStatus::Interrupted : ChildStatus::TimedOut;
    res.detail = interrupted ? "interrupted" : "killed after " + given_seconds(spec.timeout_s) + " s";
    res.detail += "; " + verdict.summary;
    if (!waiting.empty()) res.detail += "; still running then: " + waiting;
    return res;
  }
  // What the program left running (a daemon, a setsid() child) was reparented to the
  // guardian. The method's tool's own helpers are asked to end first.
  end_own_leftovers(tracer, std::chrono::milliseconds(2000));
  for (auto& who : kill_leftovers({guardian.guardian()}, describe(&res.left_running_detail)))
    res.left_running.push_back(who);
  if (WIFEXITED(wstatus)) {
    res.status = ChildStatus::Exited;
    res.exit_code = WEXITSTATUS(wstatus);
    res.detail = "exit " + std::to_string(res.exit_code);
  } else {
    res.status = ChildStatus::Signaled;
    res.signal = WTERMSIG(wstatus);
    res.detail = std::string("killed by signal ") + std::to_string(res.signal) + " (" + strsignal(res.signal) + ")";
  }
  return res;
}

}  // namespace

ChildResult run_child(const ChildSpec& spec, Tracer& tracer) {
  ChildResult res;
  const std::string out_path = (spec.run_dir / "stdout.txt").string();
  const std::string err_path = (spec.run_dir / "stderr.txt").string();
  // Created here by root, exclusively and never through a link, and kept open: the cap is
  // applied through these descriptors while the program runs.
  Fd out{open(out_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)};
  Fd err{open(err_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)};
  if (out.fd < 0 || err.fd < 0 ||
      (spec.run_as && (fchown(out.fd, spec.run_as->uid, spec.run_as->gid) != 0 ||
                       fchown(err.fd, spec.run_as->uid, spec.run_as->gid) != 0))) {
    res.detail = "cannot create " + (out.fd < 0 ? out_path : err_path) + ": " + std::strerror(errno);
    return res;
  }
  OutputTrim trim_out{out.fd, spec.output_cap}, trim_err{err.fd, spec.output_cap};
  res = run_child_with(spec, tracer, out, err, trim_out, trim_err);
  // Whichever way the run ended, the files are cut to the cap and what was cut is said.
  res.stdout_kept = trim_out.finish();
  res.stderr_kept = trim_err.finish();
  return res;
}

nlohmann::json to_json(const ChildResult& r, uint64_t cap) {
  const auto one = [](const OutputKept& k) {
    nlohmann::json j = {{"bytes_written", k.written}, {"bytes_kept", k.kept}, {"bytes_cut", k.written - k.kept}};
    if (!k.cut_reason.empty()) j["cut"] = k.cut_reason;
    return j;
  };
  return {{"cap_bytes", cap}, {"stdout", one(r.stdout_kept)}, {"stderr", one(r.stderr_kept)}};
}

uint64_t cut_program_output(const std::filesystem::path& file, uint64_t keep, OutputKept& kept) {
  // Root's run folder, a file root created: still opened never through a link.
  const int fd = open(file.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  struct stat st {};
  uint64_t freed = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && uint64_t(st.st_size) > keep &&
      ftruncate(fd, off_t(keep)) == 0) {
    freed = uint64_t(st.st_size) - keep;
    kept.kept = std::min(kept.kept, keep);
    kept.cut_reason = "out of space: cut to its first " + std::to_string(keep) + " bytes to keep the run's summary";
  }
  close(fd);
  return freed;
}

std::string how_it_ended(const ChildResult& c) {
  if (c.status == ChildStatus::Exited) return "exit " + std::to_string(c.exit_code);
  if (c.status == ChildStatus::Signaled) return "signal " + std::to_string(c.signal);
  return to_string(c.status);
}

}  // namespace cudatrace
