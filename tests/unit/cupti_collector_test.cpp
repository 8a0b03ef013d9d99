// The cupti method end to end without a GPU: the real injection library and the real eBPF
// collector, with a fake libcupti.so.13 and a program that plays the CUDA driver
// (tests/support/fake_cupti/). Needs root (or CAP_BPF + CAP_PERFMON) for the collector.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "common/clock.h"
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
  EXPECT_EQ(r.report.notes["library_api_calls"], 5) << "parent and forked child each count their own";
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

// A thread still alive at exit (a pool's worker, blocked in a wait) never ends, so it never
// sends its last batch itself: the exiting thread sends it, under the live thread's name.
TEST(CuptiCollectorExit, ALiveThreadsLastBatchIsHandedOverAtExit) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
  FakeRun r = run_fake_app({{"FAKE_APP_LIVE_AT_EXIT", "5"}});
  ASSERT_EQ(r.child.status, ChildStatus::Exited) << r.child.detail;
  ASSERT_EQ(r.child.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.report.notes["library_api_calls"], 6);
  EXPECT_EQ(r.report.loss["api_calls_not_received"], 0) << "the live thread's 5 calls were lost";
  EXPECT_EQ(r.report.notes["calls_handed_over_at_exit"], 5);
  int64_t main_tid = 0;
  std::map<int64_t, int> live_tids;
  for (const auto& e : r.events) {
    ASSERT_EQ(e.name, "cudaGetDevice");
    if (e.corr == 0xE0001000u) main_tid = e.tid;
    else ++live_tids[e.tid];
  }
  EXPECT_EQ(main_tid, r.events.empty() ? -1 : r.events.front().pid) << "the main thread's own call";
  ASSERT_EQ(live_tids.size(), 1u) << "the live thread's calls name one thread";
  EXPECT_NE(live_tids.begin()->first, main_tid) << "named as the thread that made them, not the one that sent them";
  EXPECT_EQ(live_tids.begin()->second, 5);
}

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

namespace {

// The fake app's "bracket CORR BEGIN END" lines (tests/support/fake_cupti/cupti_fake_app.cpp).
std::map<uint64_t, std::pair<int64_t, int64_t>> brackets(const std::filesystem::path& stdout_file) {
  std::map<uint64_t, std::pair<int64_t, int64_t>> out;
  std::ifstream in(stdout_file);
  std::string word;
  uint64_t corr = 0;
  int64_t begin = 0, end = 0;
  while (in >> word)
    if (word == "bracket" && in >> corr >> begin >> end) out[corr] = {begin, end};
  return out;
}

}  // namespace

// Volume on several threads: batches handed over full and, at each thread's end, part full
// (one thread's only batch holds one call);
// driver calls made inside runtime calls, and batches that end inside a runtime call (one of
// them 30 ms long). Every call the library counted arrives; each thread's calls begin in the
// order it made them, on the CLOCK_MONOTONIC scale (however the library took its stamps); a
// nested call lies inside the call around it; and calls bracketed by the program's own clock
// reads fall inside their brackets.
TEST(CuptiCollectorVolume, EveryCallArrivesTimedInOrderOnTheLedgersClock) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
  constexpr int64_t kThreads = 4, kRounds = 1000;
  for (const char* clock : {"", "monotonic"}) {
    SCOPED_TRACE(std::string("CUDATRACE_CUPTI_CLOCK=") + clock);
    const auto dir = testsupport::temp_dir("cupti-volume");
    CuptiTracer tracer(CUDATRACE_CUPTI_LIBRARY, 8 << 20, false, uint64_t(1) << 30);
    Launch launch{{CUDATRACE_CUPTI_FAKE_APP},
                  {{"FAKE_APP_LOOP", std::to_string(kRounds)},
                   {"FAKE_APP_THREADS", std::to_string(kThreads)},
                   {"FAKE_APP_EXPECT_RECORDS", "1"},  // the library's count, which percall divides by
                   {"CUDATRACE_CUPTI_CLOCK", clock}}};
    tracer.prepare(launch, Target{launch.argv, "static"}, dir);
    const int64_t started = monotonic_ns();
    const ChildResult child = run_child(ChildSpec{launch, dir, 120}, tracer);
    const int64_t ended = monotonic_ns();
    TracerReport report = tracer.finish(dir);
    ASSERT_EQ(child.status, ChildStatus::Exited) << child.detail;
    ASSERT_EQ(child.exit_code, 0);
    EXPECT_EQ(report.error, "") << report.notes.dump();
    EXPECT_EQ(report.loss.at("api_calls_not_received"), 0) << report.loss.dump();
    EXPECT_EQ(report.loss.at("ring_full"), 0);
    std::vector<Event> events = read_events(dir / cudatrace::kEventsFile).events;

    std::map<std::string, int64_t> count;
    std::map<int64_t, std::vector<const Event*>> by_thread;
    for (const Event& e : events) {
      ++count[e.name];
      by_thread[e.tid].push_back(&e);
    }
    EXPECT_EQ(report.notes["library_api_calls"], report.notes["api_calls"]) << "the summary counts what was emitted";
    EXPECT_EQ(count["cudaGetDevice"], 2 * kThreads * kRounds + 2);
    EXPECT_EQ(count["cudaStreamSynchronize"], 1);
    EXPECT_EQ(count["cuCtxGetDevice"], 300);
    EXPECT_EQ(count["__cudaLaunchKernel"], kThreads * kRounds);
    EXPECT_EQ(count["cuLaunchKernel"], kThreads * kRounds) << "a nested driver launch is scored: kept";
    EXPECT_EQ(count["cuKernelGetName"], kThreads * kRounds) << "the program's own, not the ones inside launches";
    EXPECT_EQ(report.notes["driver_calls_left_out"]["cuKernelGetName inside a runtime call"], kThreads * kRounds)
        << report.notes.dump();
    EXPECT_EQ(by_thread.size(), size_t(kThreads + 1)) << "the loop's threads and one that made one call";

    // Calls of one batch are mapped with its clock, a call in flight over a batch's end with
    // the next one's: they agree within the points' stated error.
    const int64_t slack = int64_t(std::ceil(report.notes["clock_spread_ns_max"].get<double>()));
    EXPECT_LT(slack, 1000);
    EXPECT_EQ(report.notes["calls_extrapolated"], 0) << "each batch's first point comes before its calls began";
    EXPECT_EQ(report.notes["calls_untimed"], 0);
    for (auto& [tid, calls] : by_thread) {
      // Program order: correlation ids count up; a nested call shares its runtime call's id.
      std::stable_sort(calls.begin(), calls.end(), [](const Event* a, const Event* b) {
        return std::tie(a->corr, b->layer) < std::tie(b->corr, a->layer);  // runtime before driver
      });
      const Event* prev = nullptr;  // the last call made at the top, not inside another
      int64_t disorder = 0, outside = 0, backwards = 0;
      for (const Event* e : calls) {
        backwards += !e->dur || *e->dur < 0;
        outside += e->ts < started || e->ts + e->dur.value_or(0) > ended;
        if (prev && prev->corr == e->corr) {  // nested in prev, the runtime launch
          outside += e->ts + slack < prev->ts || e->ts + *e->dur > prev->ts + *prev->dur + slack;
          continue;
        }
        if (prev) disorder += e->ts + slack < prev->ts + prev->dur.value_or(0);
        prev = e;
      }
      EXPECT_EQ(backwards, 0) << "tid " << tid << ": an exit stamped before its entry";
      EXPECT_EQ(outside, 0) << "tid " << tid << ": outside the run, or a nested call outside its runtime call";
      EXPECT_EQ(disorder, 0) << "tid " << tid << ": a call began before the one before it returned";
    }

    const auto bracket = brackets(dir / "stdout.txt");
    ASSERT_EQ(bracket.size(), 2u);
    // Within the error the tracer states for its clock points (0 when it read CLOCK_MONOTONIC
    // itself): a call mapped with a rate or a point that does not hold over its whole span is
    // off by far more over 30 ms.
    const int64_t kTolerance = slack + 1;
    for (const Event& e : events) {
      const auto it = bracket.find(e.corr.value_or(0));
      if (it == bracket.end()) continue;
      const auto [begin, end] = it->second;
      EXPECT_GE(e.ts, begin - kTolerance) << it->first;
      EXPECT_LE(e.ts + e.dur.value_or(0), end + kTolerance) << it->first;
    }
  }
}
