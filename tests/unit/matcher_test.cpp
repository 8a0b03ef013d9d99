#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/score/matcher.h"
#include "harness/score/sorted_events.h"

using namespace cudatrace;
using nlohmann::json;

namespace {

Event call(const std::string& layer, const std::string& name, int64_t tid, int64_t ts, int64_t dur,
           std::optional<int64_t> ret, json args = json::object()) {
  Event e;
  e.layer = layer;
  e.name = name;
  e.tid = tid;
  e.pid = 1;
  e.ts = ts;
  e.dur = dur;
  e.ret = ret;
  e.args = std::move(args);
  return e;
}

// A ledger of three calls on thread 7, each 100 ns long, 1000 ns apart.
std::vector<Event> ledger3() {
  return {call("runtime", "cudaMalloc", 7, 1000, 100, 0, {{"bytes", 4096}, {"ptr", "0x7f00"}}),
          call("runtime", "cudaMemcpy", 7, 2000, 100, 0, {{"bytes", 4096}, {"kind", "HtoD"}}),
          call("runtime", "cudaFree", 7, 3000, 100, 1, {{"ptr", "0x7f00"}})};
}

// What a perfect tracer reports: the same calls, entered 10 ns after the ledger's begin.
std::vector<Event> seen3() {
  return {call("runtime", "cudaMalloc", 7, 1010, 80, 0, {{"bytes", 4096}, {"ptr", "0x7F00"}}),
          call("runtime", "cudaMemcpy", 7, 2010, 80, 0, {{"bytes", 4096}, {"kind", "HtoD"}}),
          call("runtime", "cudaFree", 7, 3010, 80, 1, {{"ptr", "0x7f00"}})};
}

LayerScore runtime_score(const std::vector<Event>& ledger, const std::vector<Event>& events) {
  auto scores = match(ledger, events, {"runtime"});
  EXPECT_EQ(scores.size(), 1u);
  return scores.at(0);
}

}  // namespace

TEST(Matcher, PerfectTracerScoresFull) {
  LayerScore s = runtime_score(ledger3(), seen3());
  EXPECT_EQ(s.expected, 3);
  EXPECT_EQ(s.matched, 3);
  EXPECT_EQ(s.missing, 0);
  EXPECT_EQ(s.phantom, 0);
  EXPECT_DOUBLE_EQ(s.recall(), 1.0);
  EXPECT_EQ(s.args_compared, 5);
  EXPECT_EQ(s.args_equal, 5);  // pointer hex compared without regard to case
  EXPECT_EQ(s.ret_compared, 3);
  EXPECT_EQ(s.ret_equal, 3);
  EXPECT_EQ(s.order_violations, 0);
  EXPECT_TRUE(s.examples.empty());
}

TEST(Matcher, MissingCallLowersRecall) {
  auto seen = seen3();
  seen.erase(seen.begin() + 1);
  LayerScore s = runtime_score(ledger3(), seen);
  EXPECT_EQ(s.matched, 2);
  EXPECT_EQ(s.missing, 1);
  EXPECT_EQ(s.phantom, 0);
  EXPECT_NEAR(s.recall(), 2.0 / 3, 1e-9);
  ASSERT_FALSE(s.examples.empty());
  EXPECT_NE(s.examples[0].find("missing: cudaMemcpy"), std::string::npos) << s.examples[0];
}

TEST(Matcher, PhantomDoesNotShiftLaterPairs) {
  auto ledger = ledger3();
  ledger.push_back(call("runtime", "cudaMalloc", 7, 5000, 100, 0, {{"bytes", 8}}));
  auto seen = seen3();
  // A cudaMalloc the workload never made, between its two real ones.
  seen.insert(seen.begin() + 1, call("runtime", "cudaMalloc", 7, 1500, 10, 0, {{"bytes", 99}}));
  seen.push_back(call("runtime", "cudaMalloc", 7, 5010, 10, 0, {{"bytes", 8}}));
  LayerScore s = runtime_score(ledger, seen);
  EXPECT_EQ(s.matched, 4);
  EXPECT_EQ(s.phantom, 1);
  EXPECT_EQ(s.missing, 0);
  EXPECT_EQ(s.args_equal, s.args_compared);  // the phantom's bytes=99 was never compared
}

TEST(Matcher, WrongArgumentIsCountedAndExplained) {
  auto seen = seen3();
  seen[1].args["bytes"] = 1024;
  LayerScore s = runtime_score(ledger3(), seen);
  EXPECT_EQ(s.matched, 3);
  EXPECT_EQ(s.args_compared, 5);
  EXPECT_EQ(s.args_equal, 4);
  ASSERT_EQ(s.examples.size(), 1u);
  EXPECT_NE(s.examples[0].find("argument bytes of cudaMemcpy"), std::string::npos) << s.examples[0];
}

TEST(Matcher, UndecodedArgumentsAreNotMismatches) {
  auto seen = seen3();
  seen[1].args = json::object();
  LayerScore s = runtime_score(ledger3(), seen);
  EXPECT_EQ(s.args_undecoded, 2);
  EXPECT_EQ(s.args_compared, 3);
  EXPECT_EQ(s.args_equal, 3);
}

TEST(Matcher, WrongReturnCodeIsCounted) {
  auto seen = seen3();
  seen[2].ret = 0;  // the ledger says cudaFree returned 1
  LayerScore s = runtime_score(ledger3(), seen);
  EXPECT_EQ(s.ret_compared, 3);
  EXPECT_EQ(s.ret_equal, 2);
  ASSERT_FALSE(s.examples.empty());
  EXPECT_NE(s.examples[0].find("return code of cudaFree"), std::string::npos);
}

TEST(Matcher, ReorderedEventsAreOrderViolations) {
  auto seen = seen3();
  std::swap(seen[0], seen[2]);  // right timestamps, written out of program order
  LayerScore s = runtime_score(ledger3(), seen);
  EXPECT_EQ(s.matched, 3);
  EXPECT_GE(s.order_violations, 1);
}

TEST(Matcher, WrongThreadIsMissingPlusPhantom) {
  auto seen = seen3();
  seen[0].tid = 8;
  LayerScore s = runtime_score(ledger3(), seen);
  EXPECT_EQ(s.matched, 2);
  EXPECT_EQ(s.missing, 1);
  EXPECT_EQ(s.phantom, 1);
}

TEST(Matcher, EventOutsideEveryWindowIsNotAMatch) {
  auto seen = seen3();
  seen[0].ts = 1200;  // after cudaMalloc returned at 1100
  EXPECT_EQ(runtime_score(ledger3(), seen).matched, 2);
  MatchOptions wide;
  wide.slack_ns = 200;
  EXPECT_EQ(match(ledger3(), seen, {"runtime"}, wide)[0].matched, 3);
}

TEST(Matcher, VariantNamesAndCudartInternals) {
  std::vector<Event> ledger{call("runtime", "cudaLaunchKernel", 7, 1000, 500, std::nullopt,
                                 {{"kernel", "k"}, {"grid", {4, 1, 1}}, {"via", "<<<>>>"}})};
  std::vector<Event> seen{call("runtime", "__cudaPushCallConfiguration", 7, 1001, 5, 0),
                          call("runtime", "__cudaLaunchKernel", 7, 1100, 50, 0, {{"grid", {4, 1, 1}}})};
  LayerScore s = runtime_score(ledger, seen);
  EXPECT_EQ(s.matched, 1);
  EXPECT_EQ(s.phantom, 0);
  EXPECT_EQ(s.unscored, 1);
  EXPECT_EQ(s.ret_compared, 0);  // <<<>>> gives the ledger no code to compare
  EXPECT_EQ(s.args_compared, 1);
  EXPECT_EQ(s.args_undecoded, 1);  // kernel; "via" is not an argument
}

TEST(Matcher, DriverLayerExpectsOneLaunchPerRuntimeLaunch) {
  std::vector<Event> ledger{call("runtime", "cudaLaunchKernel", 7, 1000, 500, std::nullopt, {{"kernel", "k"}}),
                            call("runtime", "cudaLaunchKernel", 7, 2000, 500, std::nullopt, {{"kernel", "k"}}),
                            call("runtime", "cudaMalloc", 7, 3000, 500, 0)};
  std::vector<Event> seen{call("driver", "cuLaunchKernel", 7, 1200, 50, 0),
                          call("driver", "cuMemAlloc_v2", 7, 3100, 50, 0),  // real, but nothing to score it against
                          call("driver", "cuLaunchKernel_ptsz", 7, 9000, 50, 0)};  // in no ledger launch
  auto scores = match(ledger, seen, {"driver"});
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].expected, 2);
  EXPECT_EQ(scores[0].matched, 1);
  EXPECT_EQ(scores[0].missing, 1);
  EXPECT_EQ(scores[0].phantom, 1);
  EXPECT_EQ(scores[0].unscored, 1);
}

TEST(Matcher, KernelLayersCountPerKernel) {
  std::vector<Event> ledger{
      call("runtime", "cudaLaunchKernel", 7, 1000, 10, std::nullopt, {{"kernel", "a"}, {"grid", {2, 2, 1}}, {"block", {32, 1, 1}}}),
      call("runtime", "cudaLaunchKernel", 7, 2000, 10, std::nullopt, {{"kernel", "b"}, {"grid", {3, 1, 1}}, {"block", {64, 1, 1}}})};
  std::vector<Event> seen{call("gpu-activity", "a", 0, 1500, 5, std::nullopt),
                          call("gpu-activity", "a", 0, 2500, 5, std::nullopt)};
  auto gpu = match(ledger, seen, {"gpu-activity"})[0];
  EXPECT_EQ(gpu.expected, 2);
  EXPECT_EQ(gpu.matched, 1);
  EXPECT_EQ(gpu.missing, 1);  // b never ran, as far as the tracer knows
  EXPECT_EQ(gpu.phantom, 1);  // a ran once too often

  std::vector<Event> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(call("device", "entry", 0, 1, 0, std::nullopt, {{"kernel", "a"}}));
  for (int i = 0; i < 3; ++i) blocks.push_back(call("device", "entry", 0, 1, 0, std::nullopt, {{"kernel", "b"}}));
  auto dev = match(ledger, blocks, {"device"})[0];
  EXPECT_EQ(dev.expected, 7);
  EXPECT_EQ(dev.matched, 7);
  MatchOptions per_thread;
  per_thread.device_mode = "thread";
  EXPECT_EQ(match(ledger, blocks, {"device"}, per_thread)[0].expected, 4 * 32 + 3 * 64);
}

TEST(Matcher, SyscallVisibilityIsPerLedgerCall) {
  std::vector<Event> seen{call("syscall", "ioctl", 7, 1050, 10, 0),   // inside cudaMalloc
                          call("syscall", "ioctl", 8, 2050, 10, 0),   // other thread, during cudaMemcpy
                          call("syscall", "mmap", 7, 3150, 10, 0)};   // after cudaFree returned
  auto s = match(ledger3(), seen, {"syscall"})[0];
  EXPECT_EQ(s.expected, 3);
  EXPECT_EQ(s.matched, 1);
  EXPECT_EQ(s.by_name["cudaMalloc"].matched, 1);
  EXPECT_EQ(s.by_name["cudaMemcpy"].matched, 0);
  EXPECT_EQ(s.seen_during["cudaMalloc"]["ioctl"], 1);
  EXPECT_TRUE(s.seen_during["cudaMemcpy"].empty()) << "the other thread's ioctl is not cudaMemcpy's";
}

TEST(Matcher, SyscallsDuringACallAreNamedByIoctlRequest) {
  std::vector<Event> seen{call("syscall", "ioctl", 7, 1010, 5, 0, {{"request", "NV_ESC_RM_ALLOC"}}),
                          call("syscall", "ioctl", 7, 1020, 5, 0, {{"request", "NV_ESC_RM_ALLOC"}}),
                          call("syscall", "mmap", 7, 1030, 5, 0)};
  auto s = match(ledger3(), seen, {"syscall"})[0];
  EXPECT_EQ(s.seen_during["cudaMalloc"]["ioctl:NV_ESC_RM_ALLOC"], 2);
  EXPECT_EQ(s.seen_during["cudaMalloc"]["mmap"], 1);
}

TEST(Matcher, OnlyObservedLayersAreScored) {
  EXPECT_TRUE(match(ledger3(), seen3(), {}).empty());
  auto scores = match(ledger3(), seen3(), {"driver"});
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].expected, 0);  // no launches in this ledger
  EXPECT_EQ(scores[0].seen, 0);      // runtime events are not driver events
}

TEST(Matcher, ScoresAddUpAcrossRepetitions) {
  LayerScore total;
  total.add(runtime_score(ledger3(), seen3()));
  auto seen = seen3();
  seen.pop_back();
  total.add(runtime_score(ledger3(), seen));
  EXPECT_EQ(total.expected, 6);
  EXPECT_EQ(total.matched, 5);
  EXPECT_EQ(total.by_name["cudaFree"].expected, 2);
  EXPECT_EQ(total.by_name["cudaFree"].matched, 1);
}

// Past its chunk, the sorter writes sorted files and merges them back (in several rounds
// past kFanIn files): the order is (thread, family, time, sequence) all the same, and the
// files are gone after.
TEST(SortedEvents, SpilledChunksComeBackInOrderAndLeaveNoFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("sorted-events-test." + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::vector<std::tuple<int64_t, uint32_t, int64_t, uint64_t>> want;
  {
    SortedEvents sorter(dir, "t", 3);
    uint64_t seq = 0;
    for (int i = 0; i < 500; ++i) {  // 167 chunks of 3: more than kFanIn, so merged twice
      Event e = call("runtime", i % 3 ? "cudaMalloc" : "cudaFree", (i * 7) % 5, (i * 7919) % 1000, 1, i % 2 ? std::optional<int64_t>(i) : std::nullopt);
      e.device = i % 4 ? std::optional<int64_t>(i % 4) : std::nullopt;
      e.device_id = i % 4 ? "0000:18:00.0" : "";
      const uint32_t family = i % 3 ? 1 : 0;
      want.push_back({e.tid, family, e.ts, seq});
      sorter.add(e, "args" + std::to_string(i), family, seq++);
    }
    std::sort(want.begin(), want.end());
    SortedCall c;
    size_t i = 0;
    while (sorter.next(c)) {
      ASSERT_LT(i, want.size());
      EXPECT_EQ(std::make_tuple(c.e.tid, c.family, c.e.ts, c.seq), want[i]) << "at " << i;
      // Every field comes back as given.
      const int n = std::stoi(c.args.substr(4));
      EXPECT_EQ(uint64_t(n), c.seq);
      EXPECT_EQ(c.e.name, n % 3 ? "cudaMalloc" : "cudaFree");
      EXPECT_EQ(c.e.layer, "runtime");
      EXPECT_EQ(c.e.pid, 1);
      EXPECT_EQ(c.e.dur, 1);
      EXPECT_EQ(c.e.ret, n % 2 ? std::optional<int64_t>(n) : std::nullopt);
      EXPECT_EQ(c.e.device, n % 4 ? std::optional<int64_t>(n % 4) : std::nullopt);
      EXPECT_EQ(c.e.device_id, n % 4 ? "0000:18:00.0" : "");
      ++i;
    }
    EXPECT_EQ(i, want.size());
    EXPECT_GT(sorter.spill_files(), SortedEvents::kFanIn);
  }
  EXPECT_TRUE(!std::filesystem::exists(dir) || std::filesystem::is_empty(dir));
  // What it was given comes back whole from its own files, past the bounds a reader of
  // outside files applies (a 2 MiB argument).
  {
    SortedEvents sorter(dir, "big", 1);
    for (int i = 0; i < 2; ++i) {
      const Event e = call("runtime", "cudaMalloc", 1, i, 1, 0);
      sorter.add(e, std::string(size_t(2) << 20, 'b'), 0, uint64_t(i));
    }
    SortedCall c;
    int n = 0;
    while (sorter.next(c)) n += c.args.size() == (size_t(2) << 20);
    EXPECT_EQ(n, 2);
  }
  std::filesystem::remove_all(dir);
}

// A chunk is written by a thread of its own: what fails there is not lost, it comes up to
// the caller (here a scratch file that cannot be made: one is in its place already).
TEST(SortedEvents, AChunkThatCannotBeWrittenFailsTheSort) {
  const auto dir = std::filesystem::temp_directory_path() / ("sorted-events-fail." + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "t.1.sort.zst") << "in the way"; }
  std::string error;
  try {
    SortedEvents sorter(dir, "t", 3);
    for (int i = 0; i < 20; ++i) sorter.add(call("runtime", "cudaFree", 1, i, 1, 0), "", 0, uint64_t(i));
    SortedCall c;
    while (sorter.next(c)) {
    }
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("t.1.sort.zst"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

// The matcher sorts on disk past its chunk: every count, example and order violation is
// the same as when everything fits in memory, for every kind of layer.
TEST(Matcher, ScoresTheSameWhenItsSortSpillsToDisk) {
  std::vector<Event> ledger, seen;
  for (int i = 0; i < 300; ++i) {
    const int64_t tid = 1 + i % 3, ts = 1000 + 1000 * i;
    const std::string name = i % 4 == 0 ? "cudaLaunchKernel" : i % 4 == 1 ? "cudaMalloc" : "cudaFree";
    json args = {{"bytes", i}};
    if (name == "cudaLaunchKernel") args = {{"kernel", "k" + std::to_string(i % 2)}, {"grid", {2, 1, 1}}, {"block", {32, 1, 1}}};
    ledger.push_back(call("runtime", name, tid, ts, 100, 0, args));
    if (i % 17 == 0) continue;  // missed
    if (i % 13 == 0) args["bytes"] = -1;  // decoded otherwise
    seen.push_back(call("runtime", name, tid, ts + 10, 80, i % 11 ? 0 : 2, args));
    if (name == "cudaLaunchKernel") {
      seen.push_back(call("driver", "cuLaunchKernel", tid, ts + 20, 50, 0));
      Event k = call("gpu-activity", args["kernel"].get<std::string>(), 0, ts + 500, 10, std::nullopt);
      seen.push_back(k);
    }
    if (i % 5 == 0) seen.push_back(call("syscall", "ioctl", tid, ts + 30, 5, 0, {{"request", "NV_ESC"}}));
    if (i % 19 == 0) seen.push_back(call("runtime", "cudaMalloc", tid, ts + 500, 10, 0));  // phantom
  }
  std::swap(seen[10], seen[20]);  // out of order in the store
  const std::vector<std::string> layers = {"runtime", "driver", "gpu-activity", "syscall"};
  MatchOptions small;
  small.sort_chunk = 4;
  const auto in_memory = match(ledger, seen, layers);
  const auto spilled = match(ledger, seen, layers, small);
  ASSERT_EQ(in_memory.size(), 4u);
  ASSERT_EQ(spilled.size(), 4u);
  for (size_t i = 0; i < in_memory.size(); ++i) EXPECT_EQ(to_json(in_memory[i]), to_json(spilled[i])) << layers[i];
  EXPECT_GT(in_memory[0].missing, 0);
  EXPECT_GT(in_memory[0].phantom, 0);
  EXPECT_GT(in_memory[0].order_violations, 0);
  EXPECT_LT(in_memory[0].args_equal, in_memory[0].args_compared);
  EXPECT_GT(in_memory[3].matched, 0);
}
