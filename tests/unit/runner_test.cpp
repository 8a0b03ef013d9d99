#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "harness/out/results_io.h"
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
