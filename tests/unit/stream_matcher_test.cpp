// The streaming join (harness/score/stream_matcher.h) against the sort-based Matcher it
// stands in for: on runs made at random (misses, phantoms, calls out of their window, args,
// return codes and devices that disagree, a method's thread a little out of order, slack,
// cudart's internal calls, programs that call the driver themselves), every count, every
// per-(process, device) tally and the order violations are the same; the examples, the
// same ones where all fit. What it cannot stream, it says (NotStreamable).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>

#include "common/event_store.h"
#include "common/packed_args.h"
#include "harness/score/live_scoring.h"
#include "harness/score/matcher.h"
#include "harness/score/stream_matcher.h"
#include "harness/score/verdict.h"
#include "harness/score/workload_score.h"

using namespace cudatrace;
using nlohmann::json;

namespace {

Event call(const std::string& layer, const std::string& name, int64_t pid, int64_t tid, int64_t ts, int64_t dur,
           std::optional<int64_t> ret, json args = json::object()) {
  Event e;
  e.layer = layer;
  e.name = name;
  e.pid = pid;
  e.tid = tid;
  e.ts = ts;
  e.dur = dur;
  e.ret = ret;
  e.args = std::move(args);
  return e;
}

struct TwoSides {
  std::vector<Event> ledger, seen;
  int64_t slack = 0;
};

// A workload's ledger and a method's store, both as they come: the ledger thread by thread,
// the store in time order with each thread's calls as the method hands them over.
TwoSides make_run(unsigned seed) {
  std::mt19937 rng(seed);
  const auto chance = [&](int percent) { return int(rng() % 100) < percent; };
  TwoSides r;
  r.slack = chance(30) ? int64_t(rng() % 300) : 0;
  const int threads = 1 + int(rng() % 4);
  const bool own_driver = chance(30);  // a program that calls the driver itself (driverapi)
  const std::vector<std::string> names = {"cudaLaunchKernel", "cudaMalloc", "cudaFree", "cudaMemcpyAsync", "cudaGetDevice"};
  std::vector<std::pair<int64_t, Event>> seen;  // (time it reaches the store, event)
  for (int t = 0; t < threads; ++t) {
    const int64_t pid = 10 + t % 2, tid = 100 + t;
    int64_t ts = 1000 + int64_t(rng() % 500);
    const int calls = 20 + int(rng() % 150);
    for (int i = 0; i < calls; ++i) {
      ts += 50 + int64_t(rng() % 400);
      const bool driver_call = own_driver && chance(25);
      const std::string name = driver_call ? (chance(50) ? "cuLaunchKernel" : "cuMemAlloc_v2") : names[rng() % names.size()];
      const int64_t dur = 20 + int64_t(rng() % 200);
      json args = {{"bytes", int(rng() % 8)}};
      if (name == "cudaLaunchKernel") args = {{"kernel", "k"}, {"grid", {1 + int(rng() % 2), 1, 1}}, {"block", {32, 1, 1}}};
      Event t_call = call(driver_call ? "driver" : "runtime", name, pid, tid, ts, dur, int64_t(rng() % 3 == 0));
      t_call.args = args;
      if (!driver_call && chance(60)) t_call.device = int64_t(t % 2);
      r.ledger.push_back(t_call);
      const int64_t stored = ts + dur + int64_t(rng() % 30);
      if (!chance(8)) {  // seen (else missing)
        Event e = t_call;
        e.ts = ts + (chance(5) ? -int64_t(rng() % 45) : chance(5) ? dur + int64_t(rng() % 600) : int64_t(rng() % (dur + 1)));
        if (e.ts <= 0) e.ts = 1;
        e.dur = dur / 2;
        if (chance(5)) e.ret = 7;
        if (chance(5)) e.args["bytes"] = -1;
        if (chance(5)) e.args.erase("bytes");
        if (e.device && chance(10)) e.device = 1 - *e.device;
        if (chance(3)) e.device = std::nullopt;
        if (chance(5)) e.device_id = "0000:0" + std::to_string(t % 2) + ":00.0";
        seen.push_back({e.ts + *e.dur, e});  // handed over as it returns, in its own time order
      }
      if (name == "cudaLaunchKernel" && chance(90)) {  // its driver launch, inside it
        Event d = call("driver", chance(90) ? "cuLaunchKernel" : "cuLaunchKernelEx", pid, tid, ts + dur / 3, dur / 3, 0);
        d.device = t_call.device;
        seen.push_back({stored - 1, d});
      }
      if (chance(4)) seen.push_back({stored + 1, call("runtime", "cudaMalloc", pid, tid, ts + dur + 1, 5, 0)});  // phantom
      if (chance(3)) seen.push_back({stored + 1, call("runtime", "__cudaRegisterFunction", pid, tid, ts + 2, 1, 0)});
      if (chance(3)) seen.push_back({stored + 2, call("driver", "cuCtxGetCurrent", pid, tid, ts + 3, 1, 0)});
      if (chance(3)) seen.push_back({stored + 2, call("gpu-activity", "k", pid, 0, ts + 500, 10, std::nullopt, {{"kernel", "k"}})});
    }
  }
  // A thread the ledger never saw (phantoms, and a place of their own).
  if (chance(30))
    for (int i = 0; i < 5; ++i) seen.push_back({5000 + i * 100, call("runtime", "cudaFree", 99, 999, 5000 + i * 100, 10, 0)});
  std::stable_sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [at, e] : seen) r.seen.push_back(std::move(e));
  // A method that hands a call over a little late (within the reorder window).
  if (r.seen.size() > 10 && chance(30)) std::swap(r.seen[4], r.seen[5]);
  return r;
}

json without_examples(const LayerScore& s) {
  json j = to_json(s);
  j.erase("examples");
  return j;
}

struct Scored {
  std::vector<LayerScore> layers;
  std::string not_streamed;
};

// `shards`: the stream's workers (join_shard.h); each pairs its share of the threads.
Scored score_both_ways(const TwoSides& r, const std::vector<std::string>& layers, std::vector<LayerScore>& sorted,
                       size_t shards = 1) {
  ProcessLabels labels = {{10, "process 1"}, {11, "process 2"}};
  DeviceNames names;
  for (const auto& e : r.seen) names.learn(e);
  MatchOptions opts;
  opts.slack_ns = r.slack;
  opts.buckets = {&labels, &names};
  opts.stream_shards = shards;
  sorted = match(r.ledger, r.seen, layers, opts);
  Scored out;
  try {
    out.layers = stream_match(r.ledger, r.seen, layers, opts);
  } catch (const NotStreamable& e) {
    out.not_streamed = e.what();
  }
  return out;
}

}  // namespace

TEST(StreamMatcher, ScoresAsTheSortedMatcherOnRandomRuns) {
  const std::vector<std::string> layers = {"runtime", "driver", "gpu-activity"};
  int streamed = 0, with_violations = 0, with_own_driver = 0;
  for (unsigned seed = 1; seed <= 300; ++seed) {
    const TwoSides r = make_run(seed);
    std::vector<LayerScore> sorted;
    const Scored s = score_both_ways(r, layers, sorted, 1 + seed % 3);
    if (!s.not_streamed.empty()) {
      ADD_FAILURE() << "seed " << seed << ": " << s.not_streamed;
      continue;
    }
    ++streamed;
    ASSERT_EQ(s.layers.size(), sorted.size()) << "seed " << seed;
    for (size_t i = 0; i < sorted.size(); ++i) {
      EXPECT_EQ(without_examples(s.layers[i]), without_examples(sorted[i])) << "seed " << seed << " layer " << layers[i];
      // The same examples where all of them fit, in whatever order; as many otherwise.
      auto a = s.layers[i].examples, b = sorted[i].examples;
      ASSERT_EQ(a.size(), b.size()) << "seed " << seed;
      if (a.size() < 8) {
        std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b) << "seed " << seed << " layer " << layers[i];
      }
    }
    with_violations += sorted[0].order_violations > 0;
    with_own_driver += sorted[1].expectation.find("every driver call") != std::string::npos;
  }
  // The runs reach what they are made to: streamed, with order violations and own driver calls.
  EXPECT_EQ(streamed, 300);
  EXPECT_GT(with_violations, 10);
  EXPECT_GT(with_own_driver, 30);
}

TEST(StreamMatcher, SaysWhatItCannotStream) {
  const std::vector<std::string> layers = {"runtime"};
  TwoSides r;
  for (int i = 0; i < 100; ++i) r.ledger.push_back(call("runtime", "cudaFree", 1, 7, 1000 + 100 * i, 50, 0));
  r.seen = r.ledger;
  std::vector<LayerScore> sorted;
  // A method's thread far out of order (past the reorder window).
  std::reverse(r.seen.begin(), r.seen.end());
  EXPECT_NE(score_both_ways(r, layers, sorted).not_streamed.find("out of time order"), std::string::npos);
  EXPECT_EQ(sorted[0].matched, 100);
  // A ledger call without an entry time.
  r.seen = r.ledger;
  r.ledger[3].ts = 0;
  EXPECT_NE(score_both_ways(r, layers, sorted).not_streamed.find("without an entry time"), std::string::npos);
  // A ledger's thread out of time order.
  r.ledger[3].ts = 100;
  EXPECT_NE(score_both_ways(r, layers, sorted).not_streamed.find("ledger calls are out of time order"), std::string::npos);
  // What a made-up ledger can ask a thread to hold: more call families than a join pairs.
  r.ledger.clear();
  for (int i = 0; i < 1100; ++i)
    r.ledger.push_back(call("runtime", "cudaMadeUp" + std::to_string(i), 1, 7, 1000 + 100 * i, 50, 0));
  EXPECT_NE(score_both_ways(r, layers, sorted).not_streamed.find("more call families"), std::string::npos);
  EXPECT_EQ(sorted[0].missing, 1100);
  // A bus id of its own on every call: more places than the join tallies.
  r.ledger.clear();
  for (int i = 0; i < 70000; ++i) {
    r.ledger.push_back(call("runtime", "cudaFree", 1, 7, 1000 + 100 * i, 50, 0));
    r.ledger.back().device_id = "0000:" + std::to_string(i) + ":00.0";
  }
  EXPECT_NE(score_both_ways(r, layers, sorted).not_streamed.find("places"), std::string::npos);
  // A window past the clock's range.
  r.ledger = {call("runtime", "cudaFree", 1, 7, INT64_MAX - 10, 50, 0)};
  EXPECT_NE(score_both_ways(r, layers, sorted).not_streamed.find("clock's range"), std::string::npos);
}

// A method that saw none of a family holds none of its ledger calls waiting (they are
// decided missing as the method's thread moves past them), and one that saw nothing of a
// thread has every call missing.
TEST(StreamMatcher, AFamilyOrAThreadNeverSeenIsMissing) {
  TwoSides r;
  for (int i = 0; i < 1000; ++i) {
    r.ledger.push_back(call("runtime", i % 2 ? "cudaFree" : "cudaGetDevice", 1, 7, 1000 + 100 * i, 50, 0));
    r.ledger.push_back(call("runtime", "cudaFree", 1, 8, 1000 + 100 * i, 50, 0));
    if (i % 2) r.seen.push_back(call("runtime", "cudaFree", 1, 7, 1010 + 100 * i, 20, 0));
  }
  std::vector<LayerScore> sorted;
  const Scored s = score_both_ways(r, {"runtime"}, sorted);
  ASSERT_TRUE(s.not_streamed.empty()) << s.not_streamed;
  EXPECT_EQ(s.layers[0].matched, 500);
  EXPECT_EQ(s.layers[0].missing, 1500);
  EXPECT_EQ(without_examples(s.layers[0]), without_examples(sorted[0]));
}

// A run scored as its store is written (the harness's tap, live_scoring.h) scores as the same
// run read back from its files: every layer, the per-(process, device) tallies included,
// though the labels are learnt from the ledger only after the method's events have gone by.
TEST(LiveScoring, ScoresAsTheStoreReadBackAfterTheRun) {
  const auto dir = std::filesystem::temp_directory_path() / ("live-scoring." + std::to_string(getpid()));
  for (unsigned seed : {3u, 8u, 21u}) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "target");
    const TwoSides r = make_run(seed);
    {
      EventStoreWriter ledger(dir / "target" / "ledger.msgpack.zst");
      Event header;
      header.layer = layer::kMeta;
      header.name = "ledger";
      header.pid = 10;
      header.args = {{"records", r.ledger.size()}, {"intended", json::object()}};
      ledger.write(header);
      for (const auto& t : r.ledger) ledger.write(t);
      ledger.close();
    }
    EventTally tally(false, false, nullptr);
    LiveScoring live(tally, dir / "live-sort");
    {
      ScopedEventTap tap(dir / "events.msgpack.zst", live);
      EventStoreWriter store(dir / "events.msgpack.zst");
      for (const auto& e : r.seen) store.write(e);
      store.close();
    }
    TracerReport report;
    report.layers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity};
    report.match_slack_ns = r.slack;
    LiveScoring::Taken taken = live.take(report);
    ASSERT_TRUE(taken.matcher) << taken.unused << taken.not_streamable;
    WorkloadScoreInput in{dir / "target", dir / "events.msgpack.zst", dir / "sort", uint64_t(1) << 30,
                          report.layers, r.slack, "block"};
    // The names the method's events teach: learnt by the tally as the store is read back, or
    // as it was written.
    EventTally read_back(false, false, nullptr);
    in.tally = &read_back;
    const WorkloadScore after = score_workload(in, read_back.names);
    in.tally = nullptr;
    in.live = taken.matcher.get();
    const WorkloadScore as_run = score_workload(in, tally.names);
    EXPECT_EQ(as_run.scored_by, "stream, as the program ran");
    EXPECT_EQ(after.scored_by, "stream");
    ASSERT_EQ(as_run.layers.size(), 3u);
    ASSERT_EQ(after.layers.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(without_examples(as_run.layers[i]), without_examples(after.layers[i])) << "seed " << seed;
      EXPECT_FALSE(as_run.layers[i].buckets.empty()) << "seed " << seed << " " << as_run.layers[i].layer;
    }
  }
  std::filesystem::remove_all(dir);
}

// A tally counts a kernel from its args (its symbol, grid, blocks, launch): fed by a writer
// whose tracer packs args itself (PackedArgs: the sanitizer, torchprof, jaxprof), directly
// or through the live scoring, it counts what it counts of the same events written whole.
// It did not once (it wanted no args, and every launch counted one block under one name).
TEST(EventTally, CountsKernelsAlikeWhetherTheirArgsCameWholeOrPacked) {
  const auto dir = std::filesystem::temp_directory_path() / ("tally-packed." + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<Event> events;
  for (int64_t i = 0; i < 3; ++i) {
    events.push_back(call(layer::kDevice, "vecadd", 10, 11, 100 + i, 0, std::nullopt,
                          {{"launch", i}, {"blocks", 200 + i}, {"grid", {200 + i, 1, 1}}, {"symbol", "_Z6vecaddPfi"}}));
    events.push_back(call(layer::kGpuActivity, "k", 10, 11, 100 + i, 5, std::nullopt,
                          {{"grid", {4, 2, 1}}, {"kernel", "scale"}}));
    events.push_back(call(layer::kRuntime, "cudaLaunchKernel", 10, 11, 100 + i, 5, 0, {{"stream", 0}}));
  }
  const auto tally_of = [&](bool packed, bool live) {
    std::filesystem::remove(dir / "events.msgpack.zst");  // the store is created exclusively
    auto tally = std::make_unique<EventTally>(false, true, nullptr);
    LiveScoring scoring(*tally, dir / "sort");
    ScopedEventTap tap(dir / "events.msgpack.zst", live ? static_cast<EventTap&>(scoring) : *tally);
    EventStoreWriter store(dir / "events.msgpack.zst");
    PackedArgs args;
    for (const auto& e : events) {
      if (!packed) {
        store.write(e);
        continue;
      }
      args.start(e.args.size());  // a JSON object's keys come sorted, as the store writes them
      for (const auto& [k, v] : e.args.items()) {
        args.key(k);
        if (v.is_string()) args.text(v.get<std::string>());
        else if (v.is_array()) args.dim3(v[0].get<uint32_t>(), v[1].get<uint32_t>(), v[2].get<uint32_t>());
        else args.integer(v.get<int64_t>());
      }
      EXPECT_EQ(std::string(args.bytes()), pack_json_args(e.args));
      Event bare = e;
      bare.args = json::object();
      store.write(bare, args);
    }
    store.close();
    return tally;
  };
  const auto whole = tally_of(false, false);
  EXPECT_EQ(whole->families[kDeviceBlocks]["vecadd"], 603);
  EXPECT_EQ(whole->families[kDeviceGridBlocks]["vecadd"], 603);
  EXPECT_EQ(whole->families[kActivityBlocks]["scale"], 24);
  for (bool live : {false, true}) {
    const auto packed = tally_of(true, live);
    EXPECT_EQ(packed->families, whole->families) << (live ? "through the live scoring" : "as the tap");
    EXPECT_EQ(packed->by_name, whole->by_name);
    if (live) continue;  // the live scoring keeps no per-process counts of its own
    const auto per_process = [](EventTally& t) {
      std::map<int64_t, FamilyCounts> out;
      for (const auto& p : t.processes.finish(t.names))
        for (const auto& [device, counts] : p.by_device) out[p.pid] = counts;
      return out;
    };
    const auto again = tally_of(false, false);
    EXPECT_EQ(per_process(*packed), per_process(*again)) << "per process, read packed as whole";
    EXPECT_EQ(per_process(*packed)[10][kDeviceBlocks]["vecadd"], 603);
  }
  std::filesystem::remove_all(dir);
}
