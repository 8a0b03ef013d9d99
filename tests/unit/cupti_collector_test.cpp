// The cupti method end to end without a GPU: the real injection library and the real eBPF
// collector, with a fake libcupti.so.13 and a program that plays the CUDA driver
// (tests/support/fake_cupti/). Needs root (or CAP_BPF + CAP_PERFMON) for the collector.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "common/event_store.h"
#include "common/event_io.h"
#include "harness/run/runner.h"
#include "test_support.h"
#include "tracers/cupti/cupti_tracer.h"

using namespace cudatrace;

namespace {

struct FakeRun {
  ChildResult child;
  TracerReport report;
  std::vector<Event> events;
  std::string stderr_text;
};

FakeRun run_fake_app(const std::map<std::string, std::string>& env, bool per_call = false) {
  FakeRun r;
  const auto dir = testsupport::temp_dir("cupti");
  CuptiTracer tracer(CUDATRACE_CUPTI_LIBRARY, 1 << 20, per_call, uint64_t(1) << 30);
  Launch launch{{CUDATRACE_CUPTI_FAKE_APP}, env};
  tracer.prepare(launch, Target{launch.argv, "static"}, dir);
  r.child = run_child(ChildSpec{launch, dir, 60}, tracer);
  r.report = tracer.finish(dir);
  for (auto& e : read_events(dir / cudatrace::kEventsFile).events) r.events.push_back(std::move(e));
  std::ifstream err(dir / "stderr.txt");
  std::stringstream ss;
  ss << err.rdbuf();
  r.stderr_text = ss.str();
  return r;
}

const Event* find(const std::vector<Event>& events, const std::string& name) {
  for (const auto& e : events)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

// Calls handed over per thread batch (the default) or one probe hit per call: the same events.
class CuptiCollector : public ::testing::TestWithParam<bool> {};

TEST_P(CuptiCollector, SeesEveryCallAndTheKernelThroughTheUsdtProbes) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
  FakeRun r = run_fake_app({{"FAKE_CUPTI_DROPPED", "2"}}, GetParam());
  ASSERT_EQ(r.child.status, ChildStatus::Exited) << r.child.detail;
  ASSERT_EQ(r.child.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.report.error, "") << r.report.notes.dump();
  EXPECT_EQ(r.report.layers, (std::vector<std::string>{"runtime", "driver", "gpu-activity"}));
  EXPECT_EQ(r.report.notes["usdt_probes_attached"], 5);
  EXPECT_EQ(r.report.notes["library_summary"], "received") << "the library's atexit summary, parent and child";
  EXPECT_GT(r.report.notes["library_loaded_ns"].get<int64_t>(), 0);
  EXPECT_EQ(r.report.loss["ring_full"], 0);
  EXPECT_EQ(r.report.loss["unreadable_batched_calls"], 0);
  EXPECT_EQ(r.report.loss["api_calls_not_received"], 0);
  EXPECT_EQ(r.report.loss["kernels_not_received"], 0);
  EXPECT_EQ(r.report.loss["activity_dropped_by_cupti"], 2) << "CUPTI's own drops are passed on";

  ASSERT_EQ(r.events.size(), 6u);
  const Event* malloc_ = find(r.events, "cudaMalloc");
  ASSERT_NE(malloc_, nullptr);
  EXPECT_EQ(malloc_->args["bytes"], 4096);
  EXPECT_EQ(malloc_->args["ptr"], "0xdead000") << "out-parameter read after the call";
  EXPECT_EQ(malloc_->ret, 0);
  EXPECT_GT(malloc_->ts, r.report.notes["library_loaded_ns"].get<int64_t>()) << "one clock: CLOCK_MONOTONIC";
  const Event* copy = find(r.events, "cudaMemcpy");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->ret, 1) << "failed calls are reported with their code";
  EXPECT_EQ(copy->args["kind"], "HtoD");
  const Event* launch = find(r.events, "__cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->args["kernel"], "fake_kernel");
  EXPECT_EQ(launch->args["grid"], nlohmann::json({4, 2, 1}));
  const Event* driver = find(r.events, "cuLaunchKernel");
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(driver->layer, "driver");
  EXPECT_GE(driver->ts, launch->ts) << "nested inside the runtime launch";
  const Event* kernel = find(r.events, "fake_kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->layer, "gpu-activity");
  EXPECT_EQ(kernel->args["launched_by"], "__cudaLaunchKernel");
  EXPECT_EQ(kernel->tid, launch->tid);
  const Event* child = find(r.events, "cudaGetDevice");
  ASSERT_NE(child, nullptr) << "a forked child is traced too";
  EXPECT_NE(child->pid, launch->pid);
  EXPECT_EQ(child->args["device"], 0);
  // The device of each call is the current context's; a call with none names no device.
  EXPECT_EQ(malloc_->device, 1) << "context 2 is on device 1 (fake_cupti.cpp)";
  EXPECT_EQ(launch->device, 1);
  EXPECT_EQ(driver->device, 1);
  EXPECT_EQ(kernel->device, 1) << "the activity record's deviceId";
  EXPECT_FALSE(child->device.has_value()) << "no context was current";
}

INSTANTIATE_TEST_SUITE_P(HandOver, CuptiCollector, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "PerCall" : "Batched"; });

// CUPTI has one subscriber per process. When another tool holds it, the run says who, and
// the program itself runs on untouched.
TEST(CuptiCollectorErrors, SubscriberTakenIsReportedAndTheProgramRunsOn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
  FakeRun r = run_fake_app({{"FAKE_CUPTI_TAKEN", "Nsight Systems (fake)"}});
  ASSERT_EQ(r.child.status, ChildStatus::Exited) << r.child.detail;
  EXPECT_EQ(r.child.exit_code, 0);
  EXPECT_NE(r.report.error.find("Nsight Systems (fake)"), std::string::npos) << r.report.error;
  EXPECT_TRUE(r.report.layers.empty());
  EXPECT_NE(r.stderr_text.find("CUPTI is already in use by Nsight Systems (fake)"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(r.events.empty());
}
