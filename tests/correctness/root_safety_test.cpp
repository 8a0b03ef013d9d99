// The harness as a root tool on a shared machine (#22): it follows no link a user planted,
// runs no shell, leaves no process behind, and reports a full disk instead of dying on it.
// The cases that need root skip with that reason; CI runs as root.
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/event_store.h"
#include "harness/run/process_tree.h"
#include "harness_run.h"

using namespace correctness;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A process, as /proc/PID/stat says: its state and its start time (clock ticks since
// boot), which tells it from a later process that got the same pid (pids wrap at 32768 on
// some machines, within seconds when a test suite runs in parallel).
struct ProcState {
  char state = 0;  // 0: gone
  uint64_t start = 0;
};
ProcState proc_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return {};
  auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return {};
  std::istringstream rest(stat.substr(paren + 2));
  ProcState p;
  rest >> p.state;
  std::string field;
  for (int i = 4; i <= 22 && rest >> field; ++i)  // field 22: starttime
    if (i == 22) p.start = std::stoull(field);
  return p;
}

// Running, sleeping, stopped: alive. Gone, a zombie (killed, waiting for a parent to reap
// it), or another process that reuses the pid: not.
bool alive(pid_t pid, uint64_t started) {
  const ProcState p = proc_state(pid);
  return p.state != 0 && p.state != 'Z' && p.start == started;
}

// Pids of live processes whose argv[0] is `marker` (set with `exec -a`; the harness's own
// command line holds the marker too, further along).
std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), {});
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.rfind(marker, 0) == 0) out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

}  // namespace

TEST(RootSafety, OutWithAQuoteRunsNoShellAndStillWritesTheReport) {
  const fs::path cwd = testsupport::temp_dir("quote-cwd");
  const fs::path out = cwd / "a';touch INJECTED;'b c";
  auto res = testsupport::run_command("cd '" + cwd.string() + "' && " + HARNESS_PATH + " --method none --out \"" +
                                      out.string() + "\" -- /bin/true");
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_FALSE(fs::exists(cwd / "INJECTED")) << "a command ran from the folder's name";
  bool report = false;
  for (const auto& e : fs::directory_iterator(out)) report = report || fs::exists(e.path() / "summary.json");
  EXPECT_TRUE(report) << res.output;
}

TEST(RootSafety, TimeoutOutOfRangeIsAUsageError) {
  auto res = testsupport::run_command(std::string(HARNESS_PATH) + " --method none --timeout 1e10 -- /bin/true");
  EXPECT_EQ(res.exit_code, 2) << res.output;
  EXPECT_NE(res.output.find("--timeout wants seconds from"), std::string::npos) << res.output;
}

// A daemon the program leaves behind ends with the run, under every host-side method, and
// the results name it. strace follows the daemon: it must end when the program does.
TEST(RootSafety, WhatTheProgramLeavesRunningIsKilledAndNamed) {
  const std::string marker = "cudatrace_leftover_" + std::to_string(getpid());  // this run's own
  for (const char* method : {"none", "preload", "strace"}) {
    if (!cudatrace::availability(*cudatrace::find_method(method), host()).ok) continue;
    SCOPED_TRACE(method);
    const auto t0 = std::chrono::steady_clock::now();
    HarnessRun r = run_harness(std::string("--method ") + method +
                               " --timeout 60 -- /bin/bash -c '(exec -a " + marker + " sleep 300 &); (setsid sleep 301 &); exit 0'");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_LT(seconds, 20) << "the run waited for what the program left running";
    EXPECT_TRUE(processes_with(marker).empty()) << "the daemon survived the run";
    const json run = r.run_json(std::string("cmd.") + method);
    EXPECT_GE(run["left_running"].size(), 2u) << run.dump(1);
    EXPECT_NE(r.output.find("left running: killed"), std::string::npos) << r.output;
  }
}

namespace {

// Waits until the run's `count` marked processes run, SIGKILLs the harness, and expects none
// of them to outlive it by 5 s (waited on the processes themselves: one that is dying has
// lost its command line, so no longer matches the marker, a moment before it stops).
void expect_killed_harness_leaves_none(pid_t harness, const std::string& marker, size_t count) {
  for (int i = 0; i < 1000 && processes_with(marker).size() < count; ++i) usleep(20000);
  const auto victims = processes_with(marker);
  if (victims.size() != count) {  // never leave the harness (and its sleeps) to ctest
    kill(harness, SIGKILL);
    waitpid(harness, nullptr, 0);
    for (pid_t p : victims) kill(p, SIGKILL);
  }
  ASSERT_EQ(victims.size(), count) << "the run's sleeps did not all start within 20 s";
  std::map<pid_t, uint64_t> started;
  for (pid_t p : victims) started[p] = proc_state(p).start;
  kill(harness, SIGKILL);
  waitpid(harness, nullptr, 0);
  const auto any_alive = [&] {
    return std::any_of(victims.begin(), victims.end(), [&](pid_t p) { return alive(p, started[p]); });
  };
  for (int i = 0; i < 250 && any_alive(); ++i) usleep(20000);
  for (pid_t p : victims) {
    std::ifstream f("/proc/" + std::to_string(p) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), {});
    EXPECT_FALSE(alive(p, started[p])) << "pid " << p << " (" << cmd.c_str() << ") outlived the harness by 5 s";
  }
  for (pid_t p : processes_with(marker)) kill(p, SIGKILL);  // leave nothing for the next test
}

}  // namespace

// A harness killed outright leaves no process of its run behind.
TEST(RootSafety, HarnessKilledLeavesNothingRunning) {
  const std::string marker = "cudatrace_orphan_" + std::to_string(getpid());
  const fs::path out = testsupport::temp_dir("killed");
  pid_t harness = fork();
  if (harness == 0) {
    execl(HARNESS_PATH, HARNESS_PATH, "--method", "none", "--out", out.c_str(), "--", "/bin/bash", "-c",
          ("(exec -a " + marker + " sleep 300) & exec -a " + marker + " sleep 301").c_str(), (char*)nullptr);
    _exit(127);
  }
  expect_killed_harness_leaves_none(harness, marker, 2);
}

// #56 item 6: a descendant in a session of its own is in none of the run's process groups:
// PDEATHSIG and kill(-group) never reach it. Killed outright (SIGKILL, the OOM killer), the
// harness can do nothing itself; the run's whole tree must end all the same: a setsid'd
// child of the program, a setsid'd grandchild whose parent left at once (a double fork,
// reparented before the harness died), and the program itself. The program runs as another
// user, as under sudo: what cleans up must be allowed to kill it.
TEST(RootSafety, HarnessKilledLeavesNoSetsidDescendant) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the program runs as another user (SUDO_UID=65534), as under sudo";
  if (access("/usr/bin/setsid", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/setsid (util-linux)";
  const std::string marker = "cudatrace_setsid_" + std::to_string(getpid());
  const fs::path out = testsupport::temp_dir("killed-setsid");
  const std::string script = "(/usr/bin/setsid /bin/bash -c \"exec -a " + marker + "_a sleep 300\" &); "
                             "/usr/bin/setsid /bin/bash -c \"exec -a " + marker + "_b sleep 301\" & "
                             "exec -a " + marker + "_c sleep 302";
  std::vector<std::string> args = {HARNESS_PATH, "--method", "none", "--timeout", "120", "--out", out.string(),
                                   "--", "/bin/bash", "-c", script};
  std::vector<std::string> env = {"SUDO_UID=65534", "SUDO_GID=65534", "PATH=/usr/bin:/bin"};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t harness = fork();
  if (harness == 0) {
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  expect_killed_harness_leaves_none(harness, marker, 3);
}

// Links planted by the user the program runs as, from inside the run (deterministic: the
// program plants them before root writes anything of that run), in its own folder and in
// the folder above it: root follows none of them, and a root-owned file stays as it was.
TEST(RootSafety, PlantedLinksAreNeverFollowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the harness hands the program's folder to SUDO_UID)";
  const fs::path secret_dir = testsupport::temp_dir("victim");
  chmod(secret_dir.c_str(), 0700);
  const fs::path victim = secret_dir / "victim";
  { std::ofstream(victim) << "root's data\n"; }
  chmod(victim.c_str(), 0600);
  const std::string names = "stdout.txt stderr.txt events.jsonl events.msgpack.zst run.json run.json.tmp summary.json.tmp trace.json";
  const std::string plant = "for d in \"$CUDATRACE_PRELOAD_DIR\" \"$CUDATRACE_PRELOAD_DIR/..\"; do for n in " + names +
                            "; do ln -s " + victim.string() + " \"$d/$n\" 2>/dev/null; done; done; true";
  const fs::path out = testsupport::temp_dir("planted");
  chmod(out.c_str(), 0755);  // as a results folder is: the program's user can reach its own folder
  auto r = testsupport::run_command("SUDO_UID=65534 SUDO_GID=65534 " + std::string(HARNESS_PATH) + " --out " +
                                    out.string() + " --method preload --reps 3 -- /bin/sh -c '" + plant + "'");
  struct stat st {};
  ASSERT_EQ(lstat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "the victim was handed to the user";
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream f(victim);
  std::string content((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(content, "root's data\n") << r.output;
  EXPECT_EQ(r.exit_code, 0) << "links in the program's own folder cannot fail the run: " << r.output;
}

// A disk that fills: one line with the path and the reason, a summary of what finished,
// marked incomplete, and no .tmp left.
TEST(RootSafety, FullDiskIsReportedAndTheSummaryKept) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  const fs::path out = testsupport::temp_dir("full");
  if (mount("cudatrace-test", out.c_str(), "tmpfs", 0, "size=1m") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  // Each run's events (strace of a chatty program) is larger than what is left.
  auto res = testsupport::run_command(std::string(HARNESS_PATH) + " --method strace,none --reps 3 --out " + out.string() +
                                      " -- /bin/sh -c 'i=0; while [ $i -lt 3000 ]; do : > /dev/null; i=$((i+1)); done; ls /proc/self/fd >/dev/null'");
  std::vector<fs::path> tmp_left;
  fs::path summary;
  json summary_json;
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    if (e.path().extension() == ".tmp") tmp_left.push_back(e.path());
    if (e.path().filename() == "summary.json") {
      summary = e.path();
      std::ifstream f(summary);
      summary_json = json::parse(f, nullptr, false);
    }
  }
  const std::string output = res.output;
  umount2(out.c_str(), MNT_DETACH);
  if (!cudatrace::availability(*cudatrace::find_method("strace"), host()).ok) GTEST_SKIP() << "strace unavailable";
  EXPECT_NE(res.exit_code, 0) << output;
  EXPECT_NE(output.find("No space left on device"), std::string::npos) << output;
  EXPECT_TRUE(tmp_left.empty()) << tmp_left.front();
  ASSERT_FALSE(summary.empty()) << output;
  ASSERT_TRUE(summary_json.is_object());
  EXPECT_TRUE(summary_json["incomplete"].is_string()) << "the summary says it is incomplete, and why";
}

// A 256 MB sparse file planted in the preload shim's folder (0 bytes on disk): the harness
// reads the part --max-trace-bytes allows, in slices, counts the rest as loss, and stays small.
TEST(RootSafety, HugeSparseSpoolFileIsBoundedAndCountedAsLoss) {
  HarnessRun r = run_harness("--max-trace-bytes 64M --method preload -- /bin/sh -c 'truncate -s 256M "
                             "\"$CUDATRACE_PRELOAD_DIR/preload.1.1.bin\"'");
  struct rusage ru {};
  getrusage(RUSAGE_CHILDREN, &ru);
  EXPECT_LT(ru.ru_maxrss, 200 * 1024) << "kB: the harness read the whole file";
  const json run = r.run_json("cmd.preload");
  ASSERT_TRUE(run.contains("tracer")) << r.output;
  EXPECT_GT(run["tracer"]["loss"]["over_bound_records"].get<int64_t>(), 0) << run["tracer"].dump();
  EXPECT_LT(fs::file_size(r.root / "runs" / "cmd.preload.r1" / cudatrace::kEventsFile), uintmax_t(400) << 20);
}

TEST(RootSafety, BadInputIsRefusedBeforeAnythingRuns) {
  const std::string h = HARNESS_PATH;
  auto dir = testsupport::run_command(h + " --method none -- /tmp");
  EXPECT_EQ(dir.exit_code, 2) << dir.output;
  EXPECT_NE(dir.output.find("it is a folder"), std::string::npos) << dir.output;
  auto sudo = testsupport::run_command("SUDO_UID=abc SUDO_GID=1 " + h + " --method none -- /bin/true");
  if (geteuid() == 0) {
    EXPECT_EQ(sudo.exit_code, 2) << sudo.output;
    EXPECT_NE(sudo.output.find("SUDO_UID/SUDO_GID are not valid"), std::string::npos) << sudo.output;
  }
  auto flag = testsupport::run_command(h + " --workload vecadd --method none --set vecadd.itres=5");
  EXPECT_EQ(flag.exit_code, 2) << flag.output;
  EXPECT_NE(flag.output.find("workload vecadd has no flag 'itres' (valid: "), std::string::npos) << flag.output;
  const auto not_a_run = testsupport::temp_dir("not-a-run");
  auto exp = testsupport::run_command(h + " --export-trace " + not_a_run.string());
  EXPECT_EQ(exp.exit_code, 2) << exp.output;
  EXPECT_NE(exp.output.find("not a run folder"), std::string::npos) << exp.output;
}

// Two runs started at once in two PID namespaces (the same pid inside each): two folders.
TEST(RootSafety, RunsStartedTogetherInPidNamespacesGetTwoFolders) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for PID namespaces";
  if (access("/usr/bin/unshare", X_OK) != 0) GTEST_SKIP() << "needs unshare (util-linux)";
  const fs::path out = testsupport::temp_dir("pidns");
  const std::string one = "/usr/bin/unshare -pf " + std::string(HARNESS_PATH) + " --method none --out " + out.string() +
                          " -- /bin/sleep 0.2";
  auto res = testsupport::run_command(one + " & " + one + " & wait");
  if (res.output.find("unshare failed") != std::string::npos) GTEST_SKIP() << "no PID namespaces here: " << res.output;
  size_t folders = 0;
  for (const auto& e : fs::directory_iterator(out)) folders += fs::exists(e.path() / "summary.json");
  EXPECT_EQ(folders, 2u) << res.output;
}
