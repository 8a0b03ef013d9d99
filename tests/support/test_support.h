#pragma once
// Helpers shared by the tests: temporary folders, running a command and capturing it, and
// two decodings of the same records compared event by event.
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/event.h"

namespace testsupport {

// The folders temp_dir() made go away when the test program ends with no test failed; a
// failing program keeps them to be looked at (so does CUDATRACE_KEEP_TEST_DIRS=1). Only
// the process that made them removes them: a forked child's exit must not.
class TempDirs {
 public:
  static TempDirs& instance() {
    static TempDirs dirs;
    return dirs;
  }
  void add(const std::filesystem::path& dir) {
    std::lock_guard lk(mu_);
    dirs_.push_back(dir);
  }
  ~TempDirs() {
    if (getpid() != owner_ || std::getenv("CUDATRACE_KEEP_TEST_DIRS")) return;
    if (::testing::UnitTest::GetInstance()->Failed()) return;
    std::error_code ec;
    for (const auto& dir : dirs_) std::filesystem::remove_all(dir, ec);
  }

 private:
  pid_t owner_ = getpid();
  std::mutex mu_;
  std::vector<std::filesystem::path> dirs_;
};

inline std::filesystem::path temp_dir(const std::string& tag) {
  std::string templ = (std::filesystem::temp_directory_path() / ("cudatrace-" + tag + "-XXXXXX")).string();
  char* made = mkdtemp(templ.data());
  if (!made) throw std::runtime_error("mkdtemp failed");
  TempDirs::instance().add(made);
  return made;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The names of `file`'s dynamic symbols that `nm -D NM_ARGS` lists (--defined-only,
// --undefined-only), version suffixes dropped.
inline std::set<std::string> dynamic_symbols(const std::string& nm_args, const std::string& file) {
  auto out = run_command("nm -D " + nm_args + " " + file + " | awk '{print $NF}' | sed 's/@.*//'");
  std::set<std::string> s;
  std::istringstream in(out.output);
  std::string sym;
  while (in >> sym) s.insert(sym);
  return s;
}

// Two paths to the same events (a decoder's packed hand-over and its whole events): every
// field the same, event by event.
inline void expect_same_events(const std::vector<cudatrace::Event>& got, const std::vector<cudatrace::Event>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name + " (event " + std::to_string(i) + ")");
    EXPECT_EQ(got[i].layer, want[i].layer);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].ts, want[i].ts);
    EXPECT_EQ(got[i].dur, want[i].dur);
    EXPECT_EQ(got[i].pid, want[i].pid);
    EXPECT_EQ(got[i].tid, want[i].tid);
    EXPECT_EQ(got[i].ret, want[i].ret);
    EXPECT_EQ(got[i].corr, want[i].corr);
    EXPECT_EQ(got[i].device, want[i].device);
    EXPECT_EQ(got[i].device_id, want[i].device_id);
    EXPECT_EQ(got[i].args, want[i].args);
  }
}

}  // namespace testsupport
