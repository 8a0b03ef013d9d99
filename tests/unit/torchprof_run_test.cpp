// The torchprof method as a run sees it: the hook's files in the program's folder turned
// into layers, loss and events (convert_torchprof_output), its availability without torch,
// and the hook itself (tracers/torchprof/hook/) in a real interpreter, with a stand-in
// torch package so that neither torch nor a GPU is needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/event_store.h"
#include "test_support.h"
#include "tracers/torchprof/torchprof_tracer.h"

using namespace cudatrace;
using testsupport::temp_dir;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kBase = 1790857026000000000;
const TraceClock kClock{kBase - 1'000'000'000'000, kBase};

fs::path fixture(const std::string& name) { return fs::path(CUDATRACE_FIXTURES) / "torchprof" / name; }

fs::path write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void status(const fs::path& dir, int64_t pid, const std::string& phase, const std::string& more = "") {
  write(dir / ("torchprof." + std::to_string(pid) + ".status.json"),
        "{\"v\": 1, \"pid\": " + std::to_string(pid) + ", \"phase\": \"" + phase + "\"" + more + "}");
}

struct ConvertedRun {
  fs::path dir, events;
  TracerReport report;
};

ConvertedRun convert_dir(const fs::path& dir, const fs::path& stderr_file = {}) {
  ConvertedRun r{dir, dir / "events.msgpack.zst", {}};
  r.report = convert_torchprof_output(dir, r.events, kClock, uint64_t(1) << 30, stderr_file);
  return r;
}

std::vector<Event> stored(const fs::path& file) {
  std::vector<Event> out;
  if (!fs::exists(file)) return out;
  EventReader in(file);
  Event e;
  while (in.next(e)) out.push_back(e);
  return out;
}

int64_t loss(const TracerReport& r, const char* counter) { return r.loss.value(counter, int64_t(-1)); }

}  // namespace

TEST(TorchprofRun, NoHookFileMeansNoLayerObservedAndWhy) {
  const ConvertedRun r = convert_dir(temp_dir("torchprof-none"));
  EXPECT_TRUE(r.report.layers.empty());
  ASSERT_EQ(r.report.unobserved.size(), 3u);
  EXPECT_NE(r.report.unobserved.at(layer::kRuntime).find("no Python process loaded the profiler hook"), std::string::npos);
  EXPECT_FALSE(fs::exists(r.events));
}

TEST(TorchprofRun, PythonThatNeverImportedTorchIsNamed) {
  const fs::path dir = temp_dir("torchprof-notorch");
  status(dir, 10, "ended_without_torch");
  status(dir, 11, "ended_without_torch");
  const ConvertedRun r = convert_dir(dir);
  EXPECT_TRUE(r.report.layers.empty());
  EXPECT_NE(r.report.unobserved.at(layer::kGpuActivity).find("2 Python process(es) ran and none imported torch"),
            std::string::npos)
      << r.report.unobserved.at(layer::kGpuActivity);
  status(dir, 12, "start_failed", ", \"error\": \"RuntimeError('CUPTI_ERROR_INSUFFICIENT_PRIVILEGES')\"");
  EXPECT_NE(convert_dir(dir).report.unobserved.at(layer::kRuntime).find("INSUFFICIENT_PRIVILEGES"), std::string::npos);
}

TEST(TorchprofRun, EachProcessTraceIsStoredUnderItsPid) {
  const fs::path dir = temp_dir("torchprof-procs");
  status(dir, 4242, "exported", ", \"devices\": {\"0\": \"0000:18:00.0\"}");
  fs::copy_file(fixture("train_step.json"), dir / "torchprof.4242.json");
  status(dir, 5151, "exported");
  fs::copy_file(fixture("graph_replay_2024.json"), dir / "torchprof.5151.json");
  status(dir, 5200, "ended_without_torch");  // a helper interpreter of the program's
  const ConvertedRun r = convert_dir(dir);
  EXPECT_EQ(r.report.layers, (std::vector<std::string>{layer::kRuntime, layer::kDriver, layer::kGpuActivity}));
  EXPECT_NE(r.report.partly_unobserved.at(layer::kRuntime).find("no return codes"), std::string::npos);
  // The verdict's "why" for a runtime shortfall is this text: what explains one comes first.
  EXPECT_EQ(r.report.partly_unobserved.at(layer::kRuntime).rfind("Kineto leaves out the runtime calls on its blocklist", 0), 0u)
      << r.report.partly_unobserved.at(layer::kRuntime);
  for (const auto& [counter, n] : r.report.loss.items())
    EXPECT_EQ(n, counter == "kineto_stopped_tracing" ? 1 : 0) << counter;  // the 2024 trace's own WARNING
  EXPECT_EQ(r.report.notes["runtime_calls"], 7);
  EXPECT_EQ(r.report.notes["kernels"], 5);
  EXPECT_EQ(r.report.notes["processes_without_torch"], 1);
  const std::vector<Event> events = stored(r.events);
  ASSERT_EQ(events.size(), 15u);
  std::map<int64_t, int> per_pid;
  for (const auto& e : events) ++per_pid[e.pid];
  EXPECT_EQ(per_pid[4242], 10);
  EXPECT_EQ(per_pid[5151], 5);
  for (const auto& e : events) {
    if (e.pid == 4242 && e.layer == layer::kGpuActivity) {
      EXPECT_EQ(e.device_id, "0000:18:00.0");  // from its status
    }
  }
}

TEST(TorchprofRun, AProcessThatProfiledAndLeftNoTraceIsLoss) {
  const fs::path dir = temp_dir("torchprof-missing");
  status(dir, 31, "profiling");  // killed, or left through os._exit
  status(dir, 32, "export_failed", ", \"error\": \"OSError(28, 'No space left on device')\"");
  status(dir, 33, "exported");
  fs::copy_file(fixture("train_step.json"), dir / "torchprof.33.json");
  const ConvertedRun r = convert_dir(dir);
  EXPECT_EQ(loss(r.report, "traces_missing"), 2);
  EXPECT_EQ(r.report.layers.size(), 3u);
  EXPECT_EQ(stored(r.events).size(), 10u);
}

TEST(TorchprofRun, ATruncatedOrUnrenamedTraceIsCutNeverACleanZero) {
  const fs::path dir = temp_dir("torchprof-cut");
  const std::string text = slurp(fixture("train_step.json"));
  status(dir, 41, "exported");
  write(dir / "torchprof.41.json", text.substr(0, text.size() / 2));
  status(dir, 42, "profiling");  // Kineto writes <name>.tmp and renames it when whole
  write(dir / "torchprof.42.json.tmp", text);
  const ConvertedRun r = convert_dir(dir);
  EXPECT_EQ(loss(r.report, "traces_cut"), 2);
  EXPECT_EQ(loss(r.report, "traces_missing"), 0);
  EXPECT_GT(stored(r.events).size(), 10u);  // what the cut trace held is kept, and the whole .tmp
  EXPECT_EQ(r.report.notes["processes"][0]["pid"], 41);
  EXPECT_FALSE(r.report.notes["processes"][0].value("cut", std::string()).empty());
}

TEST(TorchprofRun, TheRunsBoundIsSharedByItsTracesAndWhatIsPastItIsLoss) {
  const fs::path dir = temp_dir("torchprof-budget");
  const uint64_t size = fs::file_size(fixture("train_step.json"));
  for (int64_t pid : {81, 82}) {
    status(dir, pid, "exported");
    fs::copy_file(fixture("train_step.json"), dir / ("torchprof." + std::to_string(pid) + ".json"));
  }
  const TracerReport r = convert_torchprof_output(dir, dir / "events.msgpack.zst", kClock, size + 100, {});
  EXPECT_EQ(loss(r, "traces_cut"), 1);  // the second had 100 bytes left of the run's bound
  EXPECT_EQ(loss(r, "over_bound_bytes"), int64_t(size - 100));
  EXPECT_EQ(r.notes["processes"][0].value("cut", std::string()), "");
  EXPECT_NE(r.notes["processes"][1].value("cut", std::string()).find("bound"), std::string::npos);
}

TEST(TorchprofRun, LinksAndGarbageAmongTheHookFilesAreRefusedOrCounted) {
  const fs::path dir = temp_dir("torchprof-hostile");
  const fs::path secret = write(dir / "secret", "{\"phase\": \"exported\"}");
  fs::create_symlink(secret, dir / "torchprof.51.status.json");
  fs::create_symlink(fixture("train_step.json"), dir / "torchprof.51.json");
  write(dir / "torchprof.52.status.json", std::string(100000, '['));
  write(dir / "torchprof.53.status.json", "\xff\xfe not json");
  write(dir / "torchprof.x.json", "{}");  // not a pid: never read
  const ConvertedRun r = convert_dir(dir);
  EXPECT_EQ(loss(r.report, "traces_refused"), 1);
  EXPECT_TRUE(stored(r.events).empty());
  const auto& processes = r.report.notes["processes"];
  ASSERT_EQ(processes.size(), 3u);
  EXPECT_NE(processes[0].value("status_error", std::string()).find("link"), std::string::npos) << processes.dump();
  EXPECT_FALSE(processes[1].value("status_error", std::string()).empty());
  EXPECT_FALSE(processes[2].value("status_error", std::string()).empty());
}

TEST(TorchprofRun, KinetoSayingItStoppedOrDroppedOnStderrIsLoss) {
  const fs::path dir = temp_dir("torchprof-stderr");
  status(dir, 61, "exported");
  fs::copy_file(fixture("train_step.json"), dir / "torchprof.61.json");
  const fs::path err = write(
      dir / "stderr.txt",
      "STAGE:2026-08-01 10:00:00 61:61 ActivityProfilerController.cpp:322] Completed Stage: Warm Up\n"
      "WARNING:2026-08-01 10:00:01 61:70 CuptiActivityApi.cpp:161] Exceeded max GPU buffer count (32 >= 32) - "
      "terminating tracing\n"
      "WARNING:2026-08-01 10:00:02 61:70 CuptiActivityApi.cpp:326] Dropped 12 activity records\n");
  const ConvertedRun r = convert_dir(dir, err);
  EXPECT_EQ(loss(r.report, "kineto_stopped_tracing"), 1);
  EXPECT_EQ(loss(r.report, "kineto_dropped_records"), 12);
  EXPECT_EQ(r.report.notes["kineto_loss_lines"].size(), 2u);
  EXPECT_EQ(loss(r.report, "kineto_log_unread_bytes"), 0);

  // Past the run's bound, the rest of stderr may hold Kineto's drop lines: counted as loss,
  // under the bound the run gives (the free space's), not a size of the method's own.
  const uint64_t size = fs::file_size(err);
  const TracerReport cut = convert_torchprof_output(dir, dir / "cut.msgpack.zst", kClock, size - 40, err);
  EXPECT_GT(loss(cut, "kineto_log_unread_bytes"), 0) << cut.loss.dump();
  EXPECT_NE(cut.notes.value("program_stderr", std::string()).find("bytes only"), std::string::npos) << cut.notes.dump();
}

TEST(TorchprofRun, AForkedChildIsSaidNotTraced) {
  const fs::path dir = temp_dir("torchprof-fork");
  status(dir, 71, "exported");
  fs::copy_file(fixture("train_step.json"), dir / "torchprof.71.json");
  status(dir, 72, "forked", ", \"forked_from\": 71");
  const ConvertedRun r = convert_dir(dir);
  EXPECT_NE(r.report.partly_unobserved.at(layer::kRuntime).find("1 forked child"), std::string::npos);
  EXPECT_NE(r.report.partly_unobserved.at(layer::kGpuActivity).find("1 forked child"), std::string::npos);
}

TEST(TorchprofMethod, IsListedAndUnavailableWithoutTorchWithTheReason) {
  const Method* m = find_method("torchprof");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->kind, MethodKind::kMethod);
  const fs::path dir = temp_dir("torchprof-python");
  const auto fake_python = [&](const std::string& name, const std::string& prints) {
    const fs::path p = write(dir / name, "#!/bin/sh\necho '" + prints + "'\n");
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  };
  HostFacts host;
  host.gpu = true;  // past the GPU check, to the method's own
  Availability a = availability(*m, host, {{"python", fake_python("no-torch", "")}});
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.reason.find("torch not found"), std::string::npos) << a.reason;
  a = availability(*m, host, {{"python", (dir / "absent").string()}});
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.reason.find("not found"), std::string::npos) << a.reason;
  a = availability(*m, host, {{"python", fake_python("with-torch", "/site-packages/torch/__init__.py")}});
  EXPECT_TRUE(a.ok) << a.reason;
  EXPECT_THROW(m->make(host, {{"ring_mb", "4"}}), std::invalid_argument);
}
