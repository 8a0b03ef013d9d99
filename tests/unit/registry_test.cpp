#include <gtest/gtest.h>

#include <cstdlib>

#include "tracers/tracer.h"

using namespace cudatrace;

// The six methods of the design, plus the cost references of uprobe and cupti.
TEST(Registry, ListsEveryMethodOnce) {
  std::vector<std::string> names;
  for (const auto& m : methods()) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"none", "preload", "uprobe", "uprobe-enter", "uprobe-empty", "cupti",
                                             "cupti-inject", "cupti-bare", "devhook", "devhook-thread",
                                             "bpftime", "sanitizer", "strace", "nsys"}));
  EXPECT_EQ(find_method("nope"), nullptr);
}

// Nsight Systems is the reference users already have: where it is missing, the reason
// says where it was looked for and where to get it.
TEST(Registry, NsysUnavailableSaysWhy) {
  const Method* nsys = find_method("nsys");
  ASSERT_NE(nsys, nullptr);
  if (!nsys->built) GTEST_SKIP() << "nsys method not built here: " << nsys->not_built_reason;
  const char* old = std::getenv("NSYS");
  const std::string saved = old ? old : "";
  setenv("NSYS", "/nonexistent/nsys", 1);
  const Availability a = availability(*nsys, HostFacts{.root = true, .gpu = true});
  if (old)
    setenv("NSYS", saved.c_str(), 1);
  else
    unsetenv("NSYS");
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.reason, "NSYS=/nonexistent/nsys is not an executable file");
  EXPECT_EQ(availability(*nsys, HostFacts{.root = true, .gpu = false}).reason.rfind("needs a GPU", 0), 0u);
}

TEST(Registry, UnbuiltMethodsSaySoAndHaveNoFactory) {
  HostFacts everything{.root = true, .gpu = true};
  for (const auto& m : methods()) {
    Availability a = availability(m, everything);
    if (m.built) {
      EXPECT_TRUE(m.make) << m.name;
      continue;
    }
    EXPECT_FALSE(a.ok) << m.name;
    if (m.not_built_reason.empty())
      EXPECT_EQ(a.reason, "not built yet (issue #" + std::to_string(m.issue) + ")");
    else
      EXPECT_EQ(a.reason, "not built: " + m.not_built_reason);
    EXPECT_FALSE(m.make) << m.name << " must not be runnable while unbuilt";
  }
}

TEST(Registry, MissingPrivilegeGpuOrToolIsAReason) {
  Method m{.name = "x", .built = true, .needs_root = true, .needs_gpu = true, .tools = {"no-such-tool-xyz"},
           .tool_packages = {{"no-such-tool-xyz", "xyz-pkg"}}};
  HostFacts bare{.root = false, .gpu = false, .gpu_reason = "no NVIDIA driver"};
  EXPECT_EQ(availability(m, bare).reason, "needs root or CAP_BPF+CAP_PERFMON (run the harness with sudo)");
  bare.root = true;
  EXPECT_EQ(availability(m, bare).reason, "needs a GPU: no NVIDIA driver");
  bare.gpu = true;
  EXPECT_EQ(availability(m, bare).reason, "no-such-tool-xyz not found on PATH (apt-get install xyz-pkg)");
  m.tools = {"sh"};
  EXPECT_TRUE(availability(m, bare).ok);
}

// bpftime has no package: without it the method is listed with where to get it.
TEST(Registry, BpftimeNotInstalledSaysWhereToGetIt) {
  const Method* m = find_method("bpftime");
  ASSERT_NE(m, nullptr);
  HostFacts everything{.root = true, .gpu = true};
  setenv("BPFTIME_ROOT", "/nonexistent-bpftime", 1);
  const Availability a = availability(*m, everything);
  unsetenv("BPFTIME_ROOT");
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.reason.find("bpftime is not installed"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("github.com/eunomia-bpf/bpftime"), std::string::npos) << a.reason;
}
