#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fstream>
#include <sstream>
#include <thread>

#include "harness/out/results_io.h"
#include "harness/run/guardian.h"
#include "harness/run/process_tree.h"
#include "harness/run/runner.h"
#include "test_support.h"
#include "tracers/none/none_tracer.h"

using namespace cudatrace;

namespace {

ChildSpec shell(const std::string& script, const std::filesystem::path& dir, double timeout = 30) {
  ChildSpec s;
  s.launch.argv = {"/bin/sh", "-c", script};
  s.run_dir = dir;
  s.timeout_s = timeout;
  return s;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Records when it was told the child exists, to prove attach() comes before exec.
class AttachSpy : public Tracer {
 public:
  pid_t attached = 0;
  bool fail = false;
  void prepare(Launch&, const Target&, const std::filesystem::path&) override {}
  void attach(pid_t child) override {
    if (fail) throw std::runtime_error("no probe for you");
    attached = child;
  }
  TracerReport finish(const std::filesystem::path&) override { return {}; }
};

}  // namespace

TEST(Runner, ExitCodeOutputAndEnvironment) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  auto spec = shell("echo out; echo err >&2; echo $CUDATRACE_TEST_VAR; exit 7", dir);
  spec.launch.env["CUDATRACE_TEST_VAR"] = "from-the-tracer";
  ChildResult r = run_child(spec, t);
  EXPECT_EQ(r.status, ChildStatus::Exited);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_GT(r.wall_ns, 0);
  EXPECT_EQ(slurp(dir / "stdout.txt"), "out\nfrom-the-tracer\n");
  EXPECT_EQ(slurp(dir / "stderr.txt"), "err\n");
}

TEST(Runner, CrashIsReportedWithItsSignal) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  ChildResult r = run_child(shell("kill -SEGV $$", dir), t);
  EXPECT_EQ(r.status, ChildStatus::Signaled);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_NE(r.detail.find("signal 11"), std::string::npos) << r.detail;
}

TEST(Runner, TimeoutKillsTheWholeProcessGroup) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  // A grandchild that would outlive a plain kill of the child.
  ChildResult r = run_child(shell("sleep 30 & echo $! > grandchild.pid; wait", dir, 0.5), t);
  EXPECT_EQ(r.status, ChildStatus::TimedOut);
  EXPECT_LT(r.wall_ns, 5'000'000'000);
  std::ifstream pidfile(std::filesystem::current_path() / "grandchild.pid");
  pid_t grandchild = 0;
  ASSERT_TRUE(pidfile >> grandchild) << "the child did not start its grandchild";
  usleep(100000);
  // Dead, or a zombie waiting for init to reap it: either way no longer running.
  std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
  std::string pid, comm, state;
  if (stat >> pid >> comm >> state) EXPECT_EQ(state, "Z") << "grandchild " << grandchild << " survived the timeout";
  std::filesystem::remove("grandchild.pid");
}

// A process left behind is named with the parent it had while the program ran (the
// harness becomes its parent once that one exits), and said to be the program's or the
// method's: here a shell plays a method's tool that starts the program and a helper.
TEST(Runner, LeftoversAreNamedWithTheirParentAndWhoseTheyAre) {
  become_subreaper();  // as the harness is: orphans come to us, not to init
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  ChildResult r = run_child(shell("sleep 30 & sleep 0.7; exit 0", dir), t);
  ASSERT_EQ(r.status, ChildStatus::Exited) << r.detail;
  ASSERT_EQ(r.left_running_detail.size(), 1u) << r.left_running_detail.dump();
  const auto& l = r.left_running_detail[0];
  EXPECT_EQ(l["name"], "sleep");
  EXPECT_EQ(l["belongs"], "program") << l.dump();
  EXPECT_FALSE(l["parent"].is_null()) << "its first parent, the shell, was seen";
  ASSERT_EQ(r.left_running.size(), 1u);
  EXPECT_NE(r.left_running[0].find("the program's"), std::string::npos) << r.left_running[0];

  auto dir2 = testsupport::temp_dir("runner");
  auto tool = shell("sleep 30 & /bin/true; sleep 0.7; exit 0", dir2);
  tool.program = "/bin/true";  // the shell is the method's tool, true the program
  ChildResult m = run_child(tool, t);
  ASSERT_EQ(m.left_running_detail.size(), 1u) << m.left_running_detail.dump();
  EXPECT_EQ(m.left_running_detail[0]["belongs"], "method") << m.left_running_detail[0].dump();
}

// A run stopped at its timeout says what each of its processes was doing then.
TEST(Runner, TimeoutSaysWhatWasStillRunning) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  ChildResult r = run_child(shell("sleep 30", dir, 0.8), t);
  EXPECT_EQ(r.status, ChildStatus::TimedOut);
  ASSERT_FALSE(r.running_when_stopped.empty());
  EXPECT_NE(r.detail.find("still running then:"), std::string::npos) << r.detail;
  bool sleeping = false;
  for (const auto& p : r.running_when_stopped) sleeping |= p["name"] == "sleep" && p["state"] == "S";
  EXPECT_TRUE(sleeping) << r.running_when_stopped.dump();
}

// --stall-timeout: a run whose processes neither use CPU nor write ends early, failed,
// saying what each process waited in.
TEST(Runner, StallTimeoutEndsARunThatWaitsForever) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  auto spec = shell("exec sleep 30", dir, 30);
  spec.stall_timeout_s = 1;
  ChildResult r = run_child(spec, t);
  EXPECT_EQ(r.status, ChildStatus::Stalled) << r.detail;
  EXPECT_STREQ(to_string(r.status), "stalled");
  EXPECT_LT(r.wall_ns, 5'000'000'000) << "ended by the stall, not the timeout";
  EXPECT_EQ(r.detail.rfind("no CPU time and no output for 1 s; pid ", 0), 0u) << r.detail;
  EXPECT_NE(r.detail.find(" sleep: 1 thread sleeping"), std::string::npos) << r.detail;
  EXPECT_EQ(r.stall["stalled"], true) << r.stall.dump();
  EXPECT_FALSE(r.running_when_stopped.empty());
}

// Without the option a timeout still says whether the run had stalled, and since when, or
// was busy to the end.
TEST(Runner, TimeoutSaysWhetherTheRunStalledOrWasBusy) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  ChildResult idle = run_child(shell("exec sleep 30", dir, 3), t);
  EXPECT_EQ(idle.status, ChildStatus::TimedOut);
  EXPECT_NE(idle.detail.find("killed after 3 s; stalled since "), std::string::npos) << idle.detail;
  EXPECT_NE(idle.detail.find("still running then: pid "), std::string::npos) << idle.detail;
  EXPECT_EQ(idle.stall["stalled"], true);

  auto dir2 = testsupport::temp_dir("runner");
  ChildResult spinning = run_child(shell("while :; do :; done", dir2, 2.5), t);
  EXPECT_EQ(spinning.status, ChildStatus::TimedOut);
  EXPECT_EQ(spinning.stall["stalled"], false) << spinning.detail;
  // Busy means half a CPU or more; on a loaded test machine the spinner may get less, so
  // what is asserted is the CPU it got (the wording is stall_watch_test.cpp's).
  ASSERT_EQ(spinning.stall["processes"].size(), 1u) << spinning.stall.dump();
  EXPECT_GT(spinning.stall["processes"][0]["cpu_s"].get<double>(), 0.5) << spinning.detail;
  if (spinning.stall["busy"] == true)
    EXPECT_NE(spinning.detail.find("busy to the end"), std::string::npos) << spinning.detail;
}

TEST(Runner, MissingProgramIsExecFailedNotACrash) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  ChildSpec s;
  s.launch.argv = {"/no/such/binary"};
  s.run_dir = dir;
  ChildResult r = run_child(s, t);
  EXPECT_EQ(r.status, ChildStatus::ExecFailed);
  EXPECT_NE(r.detail.find("No such file"), std::string::npos) << r.detail;
}

TEST(Runner, AttachHappensBeforeTheTargetRuns) {
  auto dir = testsupport::temp_dir("runner");
  AttachSpy spy;
  // The child reports its own pid once exec'd; the tracer must have seen that pid first.
  ChildResult r = run_child(shell("echo $$", dir), spy);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(slurp(dir / "stdout.txt"), std::to_string(spy.attached) + "\n");
}

TEST(Runner, AFailingAttachStopsTheChild) {
  auto dir = testsupport::temp_dir("runner");
  AttachSpy spy;
  spy.fail = true;
  ChildResult r = run_child(shell("touch ran", dir), spy);
  EXPECT_EQ(r.status, ChildStatus::TracerFailed);
  EXPECT_NE(r.detail.find("no probe for you"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists("ran"));
}

TEST(Runner, InterruptStopsTheChildPromptly) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  std::thread ctrl_c([] {
    usleep(200000);
    g_interrupted = true;
  });
  ChildResult r = run_child(shell("sleep 30", dir), t);
  ctrl_c.join();
  g_interrupted = false;
  EXPECT_EQ(r.status, ChildStatus::Interrupted);
  EXPECT_LT(r.wall_ns, 5'000'000'000);
}

// The guardian (guardian.h) passes its child's wait status on exactly: an exit code, a
// signal.
namespace {
[[noreturn]] void exit_42(void*, pid_t) { _exit(42); }
[[noreturn]] void raise_usr1(void*, pid_t) {
  signal(SIGUSR1, SIG_DFL);
  raise(SIGUSR1);
  _exit(1);
}
// A process tree that no process group and no PDEATHSIG holds: the child leaves the run's
// session, and a grandchild double-forked into a session of its own is reparented before
// anything ends. Both write their pids to `arg` (a pipe) and wait forever.
[[noreturn]] void scatter(void* arg, pid_t) {
  const int fd = *static_cast<int*>(arg);
  setsid();
  if (fork() == 0) {
    if (fork() == 0) {
      setsid();
      const pid_t me = getpid();
      (void)!write(fd, &me, sizeof me);
      for (;;) pause();
    }
    _exit(0);
  }
  const pid_t me = getpid();
  (void)!write(fd, &me, sizeof me);
  for (;;) pause();
}
}  // namespace

TEST(Guardian, PassesTheChildsWaitStatusOnExactly) {
  Guardian g;
  ASSERT_TRUE(g.start(&exit_42, nullptr)) << std::strerror(errno);
  EXPECT_GT(g.child(), 0);
  const auto status = g.wait_child(10000);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 42) << *status;
  g.finish();

  Guardian s;
  ASSERT_TRUE(s.start(&raise_usr1, nullptr));
  const auto killed = s.wait_child(10000);
  ASSERT_TRUE(killed.has_value());
  EXPECT_TRUE(WIFSIGNALED(*killed) && WTERMSIG(*killed) == SIGUSR1) << *killed;
}

// #56 item 6: a harness killed outright (SIGKILL) leaves nothing of its run: the guardian
// kills a child that left the session and a double-forked grandchild in a session of its
// own, neither of which a kill(-group) or PDEATHSIG reaches.
TEST(Guardian, AKilledOwnerLeavesNothingOfTheTree) {
  int pids[2], guardian_pid[2];
  ASSERT_EQ(pipe(pids), 0);
  ASSERT_EQ(pipe(guardian_pid), 0);
  const pid_t owner = fork();  // plays the harness
  if (owner == 0) {
    close(pids[0]);
    close(guardian_pid[0]);
    static int fd;
    fd = pids[1];
    Guardian g;
    if (!g.start(&scatter, &fd)) _exit(1);
    const pid_t gp = g.guardian();
    (void)!write(guardian_pid[1], &gp, sizeof gp);
    for (;;) pause();
  }
  close(pids[1]);
  close(guardian_pid[1]);
  pid_t guardian = 0;
  if (read(guardian_pid[0], &guardian, sizeof guardian) != ssize_t(sizeof guardian)) guardian = 0;
  close(guardian_pid[0]);
  std::vector<int> alive;  // pidfds: readable once the process has ended
  for (int i = 0; i < 2; ++i) {
    pollfd p{pids[0], POLLIN, 0};
    pid_t victim = 0;
    if (poll(&p, 1, 10000) != 1 || read(pids[0], &victim, sizeof victim) != ssize_t(sizeof victim)) break;
    const int fd = int(syscall(SYS_pidfd_open, victim, 0));
    if (fd >= 0) alive.push_back(fd);
  }
  close(pids[0]);
  kill(owner, SIGKILL);
  waitpid(owner, nullptr, 0);
  ASSERT_EQ(alive.size(), 2u) << "the tree did not start (or this kernel has no pidfd_open)";
  for (int fd : alive) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 5000), 1) << "a process of the tree outlived its harness by 5 s";
    if (p.revents == 0) syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);  // leave nothing running
    close(fd);
  }
  // The orphaned guardian ends once its tree is gone; a subreaper test process (an earlier
  // test made it one) is its parent now and reaps it, so that later tests find nothing.
  for (int i = 0; guardian > 0 && i < 500; ++i) {
    const pid_t r = waitpid(guardian, nullptr, WNOHANG);
    if (r != 0) break;  // reaped, or not ours to reap
    usleep(10000);
  }
}

// After a run, nothing is left below the harness: not the run's processes, not its guardian.
TEST(Guardian, NothingIsLeftBelowTheHarnessAfterARun) {
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  const std::vector<pid_t> before = descendants(getpid());  // another test's, if any
  ChildResult r = run_child(shell("setsid sleep 30 & (setsid sleep 31 &); sleep 0.5; exit 3", dir), t);
  EXPECT_EQ(r.status, ChildStatus::Exited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.left_running.size(), 2u) << r.left_running_detail.dump();
  for (pid_t p : descendants(getpid()))
    EXPECT_NE(std::find(before.begin(), before.end(), p), before.end()) << "left below the test: " << describe_process(p);
}

// The report's Python: the first python3 on PATH that imports matplotlib, never a relative
// PATH entry, the system's last.
TEST(ReportPython, FirstOnPathThatHasMatplotlibThenTheSystemOne) {
  const auto dir = testsupport::temp_dir("report-python");
  auto fake = [&](const std::string& name, int exit_code) {
    std::filesystem::create_directories(dir / name);
    const auto p = dir / name / "python3";
    std::ofstream(p) << "#!/bin/sh\nexit " << exit_code << "\n";
    std::filesystem::permissions(p, std::filesystem::perms::owner_all);
    return (dir / name).string();
  };
  const std::string without = fake("without", 1), with = fake("with", 0), also = fake("also", 0);
  cudatrace::ReportPython p = cudatrace::find_report_python(without + ":relative:" + with + ":" + also);
  EXPECT_EQ(p.path, with + "/python3");
  ASSERT_GE(p.tried.size(), 2u);
  EXPECT_EQ(p.tried[0], without + "/python3");
  p = cudatrace::find_report_python(without);
  EXPECT_NE(p.path, without + "/python3");
  EXPECT_EQ(p.tried.front(), without + "/python3");
  if (std::filesystem::exists("/usr/bin/python3")) EXPECT_EQ(p.tried.back(), "/usr/bin/python3");
}
