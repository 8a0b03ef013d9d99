// A method's tool's own helpers left behind (nsys's agent): named the method's with the
// tracer's reason and asked to end before the harness kills what is left; the program's
// leftovers as before. A stand-in tool (a shell) starts a helper the way nsys starts its
// agent: through a parent that exits at once, so the harness never sees who started it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "harness/run/own_leftovers.h"
#include "harness/run/process_tree.h"
#include "harness/run/runner.h"
#include "test_support.h"
#include "tracers/none/none_tracer.h"

using namespace cudatrace;
namespace fs = std::filesystem;

namespace {

// Owns the processes named `helper`, as nsys owns its agent.
class ToolTracer : public Tracer {
 public:
  explicit ToolTracer(std::string helper) : helper_(std::move(helper)) {}
  void prepare(Launch&, const Target&, const fs::path&) override {}
  TracerReport finish(const fs::path&) override { return {}; }
  std::optional<std::string> owns_leftover(const std::string& name, const std::string&) const override {
    if (name != helper_) return std::nullopt;
    return "the tool's own helper (the tracer's, not the program's)";
  }

 private:
  std::string helper_;
};

// A copy of sleep under another name: its comm is that name.
fs::path helper_program(const fs::path& dir, const std::string& name) {
  const fs::path p = dir / name;
  fs::copy_file("/bin/sleep", p);
  fs::permissions(p, fs::perms::owner_all);
  return p;
}

ChildSpec shell(const std::string& script, const fs::path& dir) {
  ChildSpec s;
  s.launch.argv = {"/bin/sh", "-c", script};
  s.run_dir = dir;
  s.timeout_s = 30;
  return s;
}

Leftover leftover(const std::string& belongs, const std::string& name, const std::string& state) {
  Leftover l;
  l.pid = 1234;
  l.name = name;
  l.belongs = belongs;
  l.why = "as the harness found it";
  l.state = state;
  return l;
}

}  // namespace

TEST(OwnLeftovers, TheToolsHelperIsTheMethodsAndTheProgramsStaysTheProgramsOwn) {
  const ToolTracer tracer("toolhelper");
  Leftover unknown = leftover("unknown", "toolhelper", "Z");
  attribute_own_leftover(unknown, tracer);
  EXPECT_EQ(unknown.belongs, "method");
  EXPECT_NE(unknown.why.find("the tool's own helper"), std::string::npos) << unknown.why;
  EXPECT_NE(unknown.why.find("reaped, not killed"), std::string::npos) << "a zombie had ended: " << unknown.why;
  EXPECT_NE(unknown.line().find("the method's"), std::string::npos) << unknown.line();

  Leftover running = leftover("unknown", "toolhelper", "S");
  attribute_own_leftover(running, tracer);
  EXPECT_NE(running.why.find("still running: killed"), std::string::npos) << running.why;

  Leftover program = leftover("program", "toolhelper", "S");
  attribute_own_leftover(program, tracer);
  EXPECT_EQ(program.belongs, "program") << "placed in the program's tree: the program's";
  EXPECT_EQ(program.why, "as the harness found it");

  Leftover other = leftover("unknown", "somethingelse", "S");
  attribute_own_leftover(other, tracer);
  EXPECT_EQ(other.belongs, "unknown");
  EXPECT_EQ(other.why, "as the harness found it");
}

// The tool's helper ends on SIGTERM within the grace; one that ignores SIGTERM is left for
// kill_leftovers() once the grace is over; anything the tracer does not own is untouched.
TEST(OwnLeftovers, OwnHelpersAreAskedToEndAndNothingElseIs) {
  const fs::path dir = testsupport::temp_dir("own-leftovers");
  const fs::path helper = helper_program(dir, "toolhelper");
  const ToolTracer tracer("toolhelper");
  auto spawn = [](const std::string& path, bool ignore_term) {
    const pid_t p = fork();
    if (p == 0) {
      if (ignore_term) signal(SIGTERM, SIG_IGN);  // kept across exec
      execl(path.c_str(), path.c_str(), "30", static_cast<char*>(nullptr));
      _exit(127);
    }
    return p;
  };
  const pid_t polite = spawn(helper.string(), false);
  const pid_t stubborn = spawn(helper.string(), true);
  const pid_t stranger = spawn("/bin/sleep", false);
  usleep(200000);  // both exec'd: their comm is their program's name

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<pid_t> asked = end_own_leftovers(tracer, std::chrono::milliseconds(500));
  const auto waited = std::chrono::steady_clock::now() - t0;
  std::sort(asked.begin(), asked.end());
  std::vector<pid_t> want = {polite, stubborn};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(asked, want);
  EXPECT_GE(waited, std::chrono::milliseconds(450)) << "it waited for the stubborn one";
  EXPECT_LT(waited, std::chrono::seconds(3)) << "and no longer than its grace";

  int status = 0;
  ASSERT_EQ(waitpid(polite, &status, WNOHANG), polite) << "ended within the grace";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "by SIGTERM, not SIGKILL";
  EXPECT_EQ(waitpid(stubborn, &status, WNOHANG), 0) << "still running after the grace";
  EXPECT_EQ(waitpid(stranger, &status, WNOHANG), 0) << "not the tracer's: untouched";
  for (pid_t p : {stubborn, stranger}) {
    kill(p, SIGKILL);
    waitpid(p, &status, 0);
  }
  EXPECT_TRUE(end_own_leftovers(tracer, std::chrono::milliseconds(500)).empty()) << "nothing left to ask";
}

// Through the runner, as the nsys method meets it: the tool starts its helper through a
// parent that exits at once (the harness never sees who started it), then the program.
// Without the tracer's word the helper is "origin unknown"; with it, the method's, and
// ended by SIGTERM before the harness looked.
TEST(OwnLeftovers, TheRunnerNamesTheToolsHelperTheMethodsAndEndsItFirst) {
  become_subreaper();  // as the harness is: orphans come to us
  const fs::path dir = testsupport::temp_dir("own-leftovers");
  const fs::path helper = helper_program(dir, "toolhelper");
  // After the harness's first look (at the start), before its next (300 ms on).
  const std::string script = "sleep 0.1; (" + helper.string() + " 30 &) ; /bin/true; sleep 0.5; exit 0";

  NoneTracer none;
  fs::create_directory(dir / "none");
  ChildSpec spec = shell(script, dir / "none");
  spec.program = "/bin/true";  // the shell is the method's tool, true the program
  ChildResult plain = run_child(spec, none);
  ASSERT_EQ(plain.left_running_detail.size(), 1u) << plain.left_running_detail.dump();
  EXPECT_EQ(plain.left_running_detail[0]["belongs"], "unknown") << plain.left_running_detail[0].dump();

  ToolTracer tool("toolhelper");
  fs::create_directory(dir / "tool");
  spec.run_dir = dir / "tool";
  ChildResult owned = run_child(spec, tool);
  ASSERT_EQ(owned.status, ChildStatus::Exited) << owned.detail;
  ASSERT_EQ(owned.left_running_detail.size(), 1u) << owned.left_running_detail.dump();
  const auto& l = owned.left_running_detail[0];
  EXPECT_EQ(l["name"], "toolhelper");
  EXPECT_EQ(l["belongs"], "method") << l.dump();
  EXPECT_EQ(l["state"], "Z") << "it had ended on SIGTERM before the harness killed anything";
  EXPECT_NE(l["why"].get<std::string>().find("the tool's own helper"), std::string::npos) << l.dump();
  ASSERT_EQ(owned.left_running.size(), 1u);
  EXPECT_NE(owned.left_running[0].find("the method's"), std::string::npos) << owned.left_running[0];
}
