// Tests that need root. They skip, with the reason, when run without it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "harness/runner.h"
#include "test_support.h"
#include "tracers/none/none_tracer.h"

using namespace cudatrace;

TEST(Privileged, WorkloadRunsAsTheInvokingUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to change user";
  auto dir = testsupport::temp_dir("runner");
  NoneTracer t;
  ChildSpec spec;
  spec.launch.argv = {"/bin/sh", "-c", "id -u; id -g"};
  spec.run_dir = dir;
  spec.run_as = Credentials{65534, 65534, ""};  // nobody
  ChildResult r = run_child(spec, t);
  EXPECT_EQ(r.exit_code, 0);
  std::ifstream f(dir / "stdout.txt");
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), "65534\n65534\n");
}

TEST(Privileged, SudoUserIsWhoWorkloadsRunAs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: invoking_user() only applies to a root harness";
  setenv("SUDO_UID", "1234", 1);
  setenv("SUDO_GID", "2345", 1);
  setenv("SUDO_USER", "alice", 1);
  auto who = invoking_user();
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->uid, 1234u);
  EXPECT_EQ(who->gid, 2345u);
  EXPECT_EQ(who->user, "alice");
  setenv("SUDO_UID", "0", 1);  // sudo from root: stay root
  EXPECT_FALSE(invoking_user().has_value());
  unsetenv("SUDO_UID");
  EXPECT_FALSE(invoking_user().has_value());
}
