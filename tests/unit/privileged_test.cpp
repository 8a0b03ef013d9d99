// Tests that need root. They skip, with the reason, when run without it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/event_store.h"
#include "harness/run/runner.h"
#include "test_support.h"
#include "tracers/none/none_tracer.h"
#ifdef CUDATRACE_HAVE_BPF
#include <bpf/bpf.h>

#include "common/elf_file.h"
#include "common/event_io.h"
#include "tracers/uprobe/uprobe_session.h"
#include "tracers/uprobe/uprobe_tracer.h"
#endif

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

#ifdef CUDATRACE_HAVE_BPF
// Every BPF link in the kernel, whoever owns it.
static int bpf_links_in_kernel() {
  int n = 0;
  for (__u32 id = 0; bpf_link_get_next_id(id, &id) == 0;) ++n;
  return n;
}

// stop() takes every probe off at once (uprobe_multi links), and the session's end takes
// the fork/exit tracepoints off too: nothing is left attached for the kernel to clean up.
TEST(Privileged, UprobeSessionDetachesEverything) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
  std::string error;
  const auto self = std::filesystem::canonical("/proc/self/exe");
  std::vector<uint64_t> offsets, cookies;
  for (const auto& f : function_symbols(self, false, error)) {
    if (offsets.size() == 3) break;
    offsets.push_back(f.file_offset);
    cookies.push_back(offsets.size());
  }
  ASSERT_EQ(offsets.size(), 3u) << error;
  const int before = bpf_links_in_kernel();
  {
    UprobeSession session(UPROBE_MODE_FULL, 1 << 20);
    EXPECT_TRUE(session.attach(self.string(), offsets, cookies).empty());
    EXPECT_EQ(session.attached(), 6u);  // entry and return probe for each
    EXPECT_GT(bpf_links_in_kernel(), before + 2) << "probes and the two tracepoints are links";
    session.stop();
    EXPECT_EQ(bpf_links_in_kernel(), before + 2) << "stop() leaves only the fork/exit tracepoints";
  }
  EXPECT_EQ(bpf_links_in_kernel(), before);
}

// The per-call benchmark's in-process A/B under uprobe: the program asks through the
// pause channel, the harness detaches the call probes and attaches them again. Of 30
// calls, the 10 made while paused are not seen, the 20 around them are; the links are
// the same in number after the resume as before the pause.
TEST(Privileged, UprobePauseDetachesAndReattachesTheCallProbes) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
  const auto dir = testsupport::temp_dir("uprobe-pause");
  UprobeTracer tracer(UPROBE_MODE_FULL, 1 << 20, uint64_t(1) << 30);
  Launch launch{{CUDATRACE_UPROBE_PAUSE_CALLS}, {}};
  tracer.prepare(launch, Target{launch.argv, "shared"}, dir);
  ASSERT_TRUE(launch.env.count("CUDATRACE_PAUSE_FD"));
  const ChildResult child = run_child(ChildSpec{launch, dir, 60}, tracer);
  // What the benchmark learns without events (it abandons them) is what finish() reports.
  const TracerReport layers = tracer.layers_without_events();
  const TracerReport report = tracer.finish(dir);
  ASSERT_EQ(child.status, ChildStatus::Exited) << child.detail;
  EXPECT_EQ(layers.layers, report.layers);
  EXPECT_EQ(layers.unobserved, report.unobserved);
  EXPECT_EQ(layers.partly_unobserved, report.partly_unobserved);
  EXPECT_EQ(layers.unobserved.count("runtime"), 0u) << layers.unobserved.at("runtime");
  std::ifstream out(dir / "stdout.txt");
  std::stringstream printed;
  printed << out.rdbuf();
  if (report.notes.value("links", "") != "uprobe_multi, one per file and direction") {
    EXPECT_EQ(printed.str(), "pause -1 resume -1\n") << "per-probe links refuse to pause";
    GTEST_SKIP() << "this kernel has no uprobe_multi: the pause is refused, as checked";
  }
  EXPECT_EQ(printed.str(), "pause 0 resume 1\n") << report.notes.dump();
  EXPECT_EQ(report.notes["pause_requests"]["requests"], 2) << report.notes.dump();
  int seen = 0;
  for (const auto& e : read_events(dir / cudatrace::kEventsFile).events) seen += e.layer == "runtime" && e.name == "cudaGetDevice";
  EXPECT_EQ(seen, 20) << "10 before the pause and 10 after the resume";
}

// The spool of a run is bounded (HostFacts::max_trace_bytes): a bound of 5 records keeps 5,
// and every record past it is counted as loss, never dropped unseen.
TEST(Privileged, UprobeSpoolPastItsBoundIsCountedAsLoss) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
  const auto dir = testsupport::temp_dir("uprobe-bound");
  UprobeTracer tracer(UPROBE_MODE_FULL, 1 << 20, 5 * sizeof(uprobe_call));
  Launch launch{{CUDATRACE_UPROBE_PAUSE_CALLS}, {}};
  tracer.prepare(launch, Target{launch.argv, "shared"}, dir);
  const ChildResult child = run_child(ChildSpec{launch, dir, 60}, tracer);
  const TracerReport report = tracer.finish(dir);
  ASSERT_EQ(child.status, ChildStatus::Exited) << child.detail;
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  EXPECT_LE(events.size(), 5u);
  EXPECT_EQ(report.notes["records"].get<int64_t>(), 5) << report.notes.dump();
  EXPECT_GE(report.loss.value("over_bound_records", int64_t(0)), 15) << report.loss.dump();
}
#endif
