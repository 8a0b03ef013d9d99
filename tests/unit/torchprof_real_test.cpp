// The torchprof method on real traces: torch 2.11.0+cu130 on an H100 (CUDA 13.0, driver
// 580.159.04), recorded with tests/fixtures/torchprof/record.sh through the hook of 5dcb22b
// (tests/fixtures/torchprof/real/manifest.txt). The counts below were taken from the files
// with python3's json module, not from this reader: what Kineto wrote is what must come out.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/event_store.h"
#include "test_support.h"
#include "tracers/torchprof/torchprof_trace.h"
#include "tracers/torchprof/torchprof_tracer.h"

using namespace cudatrace;
using testsupport::temp_dir;
namespace fs = std::filesystem;

namespace {

fs::path real(const std::string& name) { return fs::path(CUDATRACE_FIXTURES) / "torchprof" / "real" / name; }

// The hook's status files say when each process's profiler started (unix ns) and the bus
// id of its GPU: 0000:00:06.0 on the recording host.
constexpr int64_t kRecordedAround = 1795821223000000000;  // 2026-11-27T23:13:43Z
const std::map<int64_t, std::string> kBusIds = {{0, "0000:00:06.0"}};

struct Real {
  TraceReading r;
  std::vector<Event> events;
  std::map<std::string, int64_t> by_name(const std::string& layer) const {
    std::map<std::string, int64_t> n;
    for (const auto& e : events) n[e.name] += e.layer == layer;
    return n;
  }
};

// On the harness's clock with CLOCK_REALTIME - CLOCK_MONOTONIC taken as 0: ts is unix ns.
Real read_real(const std::string& file, int64_t pid) {
  Real out;
  const std::function<void(const Event&)> sink = [&out](const Event& e) { out.events.push_back(e); };
  out.r = read_torch_trace(real(file), pid, TraceClock{0, kineto_base_for(kRecordedAround)}, kBusIds, {}, sink);
  return out;
}

// What every real trace must show of itself: read whole, base in the file before its events,
// nothing malformed, every GPU record on device 0 with its stream and bus id, every kernel
// with its grid and block, copies and sets in their own layer, nothing named "INVALID".
void expect_whole_and_well_read(const Real& t, int64_t pid) {
  EXPECT_TRUE(t.r.complete) << t.r.cut;
  EXPECT_TRUE(t.r.base_in_file);
  EXPECT_FALSE(t.r.base_disagrees);
  EXPECT_EQ(t.r.events_malformed, 0);
  EXPECT_EQ(t.r.events_too_large, 0);
  EXPECT_EQ(t.r.calls_of_other_pid, 0);
  EXPECT_EQ(t.r.kineto_stopped_tracing, 0);
  EXPECT_EQ(int64_t(t.events.size()), t.r.events());
  for (const auto& e : t.events) {
    EXPECT_EQ(e.pid, pid) << e.name;
    EXPECT_NE(e.name, "INVALID") << "cbid " << e.args.value("cbid", -1);
    // Microseconds from the file's base, to ns: inside the minute of the recording.
    EXPECT_GT(e.ts, kRecordedAround) << e.name;
    EXPECT_LT(e.ts, kRecordedAround + 60'000'000'000) << e.name;
    ASSERT_TRUE(e.dur.has_value()) << e.name;
    EXPECT_GE(*e.dur, 0) << e.name;
    if (e.layer == layer::kGpuActivity || e.layer == kGpuMemoryLayer) {
      EXPECT_EQ(e.device, 0) << e.name;
      EXPECT_EQ(e.device_id, "0000:00:06.0") << e.name;
      EXPECT_TRUE(e.args.contains("stream")) << e.name;
      EXPECT_TRUE(e.corr.has_value()) << e.name;
      EXPECT_TRUE(e.layer == kGpuMemoryLayer || e.name.rfind("Memcpy", 0) != 0) << e.name;
      EXPECT_TRUE(e.layer == kGpuMemoryLayer || e.name.rfind("Memset", 0) != 0) << e.name;
      if (e.layer == kGpuMemoryLayer) EXPECT_GT(e.args.value("bytes", 0), 0) << e.name;
    }
    if (e.layer == layer::kGpuActivity) {
      EXPECT_EQ(e.args.value("grid", nlohmann::json()).size(), 3u) << e.name;
      EXPECT_EQ(e.args.value("block", nlohmann::json()).size(), 3u) << e.name;
    }
  }
}

// A program's folder as record.sh left it, through the method's whole conversion (status
// files, traces, the program's stderr), in a copy: the run's files are read as the program's.
TracerReport convert_program(const std::string& program, const std::string& tag) {
  const fs::path dir = temp_dir(tag);
  fs::copy(real(program), dir / "target");
  return convert_torchprof_output(dir / "target", dir / "events.msgpack.zst", TraceClock{0, 0}, uint64_t(1) << 30,
                                  dir / "target" / "stderr.txt");
}

void expect_no_loss(const TracerReport& report) {
  EXPECT_EQ(report.layers.size(), 3u) << report.notes.dump();
  EXPECT_TRUE(report.unobserved.empty());
  for (const auto& [counter, n] : report.loss.items()) EXPECT_EQ(n, 0) << counter;
}

}  // namespace

TEST(TorchprofReal, TrainingStepHoldsItsCallsKernelsCopiesAndSets) {
  const Real t = read_real("train_step/torchprof.1921.json", 1921);
  expect_whole_and_well_read(t, 1921);
  EXPECT_EQ(t.r.runtime_calls, 173);
  EXPECT_EQ(t.r.driver_calls, 4);  // cuLaunchKernel on the autograd thread
  EXPECT_EQ(t.r.kernels, 42);
  EXPECT_EQ(t.r.memcpys, 5);
  EXPECT_EQ(t.r.memsets, 2);
  EXPECT_EQ(t.r.calls_given_device, 49);  // every launch, copy and set joined to its GPU record
  EXPECT_EQ(t.r.other_events, 566);
  const std::map<std::string, int64_t> other = {{"cpu_op", 208}, {"ac2g", 226}, {"overhead", 35}, {"fwdbwd", 28},
                                                {"user_annotation", 4}, {"gpu_user_annotation", 2}, {"Trace", 1}};
  EXPECT_EQ(t.r.other_categories, other);  // the 62 without "cat" (metadata, instants) counted, unnamed
  EXPECT_EQ(t.r.kineto_log_lines, 0);

  // Kineto wrote "INVALID" for cbid 468: named from CUPTI's table.
  EXPECT_EQ(t.r.runtime_named_from_cbid, 3);
  auto calls = t.by_name(layer::kRuntime);
  EXPECT_EQ(calls["cudaGetDriverEntryPointByVersion"], 3);
  EXPECT_EQ(calls["cudaLaunchKernel"], 30);
  EXPECT_EQ(calls["cudaLaunchKernelExC"], 8);
  EXPECT_EQ(calls["cudaMalloc"], 10);
  EXPECT_EQ(calls["cudaGetDeviceProperties_v2"], 2);  // the symbol's own _v2 stays
  EXPECT_EQ(t.by_name(layer::kDriver)["cuLaunchKernel"], 4);

  // The first op (model.cuda()) is there from its first call: the profiler started inside
  // torch.cuda._lazy_init, before CUDA did; _lazy_init's own cudaGetDeviceCount comes first,
  // then the first op's cudaMalloc and its four parameter copies, then the first launch.
  std::map<std::string, int64_t> first_ts;
  for (const auto& e : t.events)
    if (e.layer == layer::kRuntime && (!first_ts.count(e.name) || e.ts < first_ts[e.name])) first_ts[e.name] = e.ts;
  int64_t earliest = INT64_MAX;
  for (const auto& [name, ts] : first_ts) earliest = std::min(earliest, ts);
  EXPECT_EQ(first_ts["cudaGetDeviceCount"], earliest);
  EXPECT_LT(first_ts["cudaMalloc"], first_ts["cudaMemcpyAsync"]);
  EXPECT_LT(first_ts["cudaMemcpyAsync"], first_ts["cudaLaunchKernel"]);
  EXPECT_EQ(t.by_name(kGpuMemoryLayer)["Memcpy HtoD (Pageable -> Device)"], 4);
  int launches_with_grid = 0;
  for (const auto& e : t.events) {
    if ((e.name == "cudaLaunchKernel" || e.name == "cudaLaunchKernelExC" || e.name == "cuLaunchKernel") &&
        e.args.contains("grid") && e.args.contains("block") && e.device == 0)
      ++launches_with_grid;
    if (e.name == "cudaMemcpyAsync") EXPECT_GT(e.args.value("bytes", 0), 0);
  }
  EXPECT_EQ(launches_with_grid, 42);  // each kernel's grid and block on its launch
}

TEST(TorchprofReal, CudaGraphReplaysAreOneCallEachAndEveryKernelOfThem) {
  const Real t = read_real("cuda_graph/torchprof.1960.json", 1960);
  expect_whole_and_well_read(t, 1960);
  EXPECT_EQ(t.r.runtime_calls, 660);
  EXPECT_EQ(t.r.driver_calls, 5);
  EXPECT_EQ(t.r.kernels, 441);
  EXPECT_EQ(t.r.memcpys, 105);
  EXPECT_EQ(t.r.memsets, 54);
  // Every GPU record came before its call in this file: all 300 joined all the same.
  EXPECT_EQ(t.r.calls_given_device, 300);
  EXPECT_EQ(t.r.runtime_named_from_cbid, 9);  // cudaStreamGetCaptureInfo (461) x6, 468 x3
  auto calls = t.by_name(layer::kRuntime);
  EXPECT_EQ(calls["cudaStreamGetCaptureInfo"], 6);
  EXPECT_EQ(calls["cudaGraphLaunch"], 50);
  // torch 2.11 still writes Kineto's log into the trace (a top-level WARNING list, after
  // the events): ten "GPU op timestamp < runtime timestamp" lines, no stop.
  EXPECT_EQ(t.r.kineto_log_lines, 10);
  std::map<uint64_t, int> replayed;  // graph launch correlation -> kernels of its replay
  std::set<uint64_t> replays;
  for (const auto& e : t.events)
    if (e.name == "cudaGraphLaunch") {
      replays.insert(*e.corr);
      EXPECT_EQ(e.device, 0);
      EXPECT_FALSE(e.args.contains("grid"));  // six kernels: no one grid is the call's
    }
  std::set<int64_t> streams;
  for (const auto& e : t.events) {
    if (e.layer != layer::kGpuActivity) continue;
    streams.insert(e.args.value("stream", -1));
    if (replays.count(*e.corr)) ++replayed[*e.corr];
  }
  EXPECT_EQ(replayed.size(), 50u);
  for (const auto& [corr, n] : replayed) EXPECT_EQ(n, 6) << corr;  // and a memset node each
  EXPECT_EQ(streams, (std::set<int64_t>{7, 13, 17}));
  auto copies = t.by_name(kGpuMemoryLayer);
  EXPECT_EQ(copies["Memcpy DtoD (Device -> Device)"], 50);
  EXPECT_EQ(copies["Memcpy DtoH (Device -> Pinned)"], 51);
  EXPECT_EQ(copies["Memset (Device)"], 54);
}

TEST(TorchprofReal, SpawnedChildrenAreTracedEachUnderItsOwnPid) {
  for (const int64_t pid : {1998, 2019, 2020}) {
    SCOPED_TRACE(pid);
    const Real t = read_real("spawn/torchprof." + std::to_string(pid) + ".json", pid);
    expect_whole_and_well_read(t, pid);
    EXPECT_EQ(t.r.runtime_calls, 33);
    EXPECT_EQ(t.r.driver_calls, 0);
    EXPECT_EQ(t.r.kernels, 22);
    EXPECT_EQ(t.r.memcpys, 1);
    EXPECT_EQ(t.r.memsets, 0);
    EXPECT_EQ(t.r.calls_given_device, 23);
    EXPECT_EQ(t.by_name(layer::kRuntime)["cudaLaunchKernel"], 22);
  }
}

TEST(TorchprofReal, EachProgramConvertsWholeWithNothingCountedAsLoss) {
  const std::map<std::string, std::vector<int64_t>> programs = {
      {"train_step", {1921}}, {"cuda_graph", {1960}}, {"spawn", {1998, 2019, 2020}}};
  const std::map<std::string, std::vector<int64_t>> counts = {  // runtime, kernels per process
      {"train_step", {173, 42}}, {"cuda_graph", {660, 441}}, {"spawn", {33, 22}}};
  for (const auto& [program, pids] : programs) {
    SCOPED_TRACE(program);
    const fs::path dir = temp_dir("torchprof-real-" + program);
    fs::copy(real(program), dir / "target");
    const TracerReport report = convert_torchprof_output(dir / "target", dir / "events.msgpack.zst", TraceClock{0, 0},
                                                         uint64_t(1) << 30, dir / "target" / "stderr.txt");
    expect_no_loss(report);
    EXPECT_EQ(report.notes["processes_profiled"], int64_t(pids.size())) << report.notes.dump();
    EXPECT_EQ(report.notes["traces"], int64_t(pids.size()));
    std::map<int64_t, std::map<std::string, int64_t>> per_pid;
    EventReader in(dir / "events.msgpack.zst");
    Event e;
    while (in.next(e)) ++per_pid[e.pid][e.layer];
    ASSERT_EQ(per_pid.size(), pids.size());
    for (const int64_t pid : pids) {
      EXPECT_EQ(per_pid[pid][layer::kRuntime], counts.at(program)[0]) << pid;
      EXPECT_EQ(per_pid[pid][layer::kGpuActivity], counts.at(program)[1]) << pid;
    }
  }
}

TEST(TorchprofReal, TheSpawnersResourceTrackerIsAPythonWithoutTorch) {
  const TracerReport report = convert_program("spawn", "torchprof-real-tracker");
  EXPECT_EQ(report.notes["python_processes"], 4) << report.notes.dump();
  EXPECT_EQ(report.notes["processes_without_torch"], 1);  // pid 2018, `python -c` of multiprocessing
  EXPECT_EQ(report.notes["forked_children_untraced"], 0);
}
