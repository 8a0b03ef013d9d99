// The jaxprof method as a run sees it: the hook's status files and the trace folders
// jax.profiler wrote in the program's folder turned into layers, loss and events
// (convert_jaxprof_output), with the real trace of an H200 (tests/fixtures/jaxprof/real/) as
// each process's; traces missing, cut, refused, planted links; and its availability
// without jax.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "common/event_store.h"
#include "test_support.h"
#include "tracers/jaxprof/jaxprof_tracer.h"
#include "tracers/torchprof/torchprof_spool.h"

using namespace cudatrace;
using testsupport::temp_dir;
namespace fs = std::filesystem;

namespace {

const fs::path kRealDir = fs::path(CUDATRACE_FIXTURES) / "jaxprof" / "real" / "jit_loop";

fs::path write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
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
  write(dir / ("jaxprof." + std::to_string(pid) + ".status.json"),
        "{\"v\": 1, \"pid\": " + std::to_string(pid) + ", \"phase\": \"" + phase + "\"" + more + "}");
}

// Where jax.profiler.stop_trace writes a process's trace: jaxprof.<pid>/plugins/profile/<run>/.
fs::path run_folder(const fs::path& dir, int64_t pid, const std::string& run = "2026_11_28_08_00_00") {
  const fs::path p = dir / ("jaxprof." + std::to_string(pid)) / "plugins" / "profile" / run;
  fs::create_directories(p);
  return p;
}

// A process that traced and wrote the recorded H200 trace, as stop_trace leaves it.
void traced(const fs::path& dir, int64_t pid, const std::string& file = "perfetto_trace.json.gz") {
  status(dir, pid, "exported", ", \"profiling_since_ns\": 1790857026000000000");
  fs::copy_file(kRealDir / (file == "perfetto_trace.json.gz" ? "perfetto_trace.json.gz" : "vm.trace.json.gz"),
                run_folder(dir, pid) / file);
}

struct ConvertedRun {
  fs::path events;
  TracerReport report;
};

ConvertedRun convert_dir(const fs::path& dir, uint64_t max_bytes = uint64_t(1) << 30) {
  ConvertedRun r{dir / "events.msgpack.zst", {}};
  r.report = convert_jaxprof_output(dir, r.events, max_bytes);
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

int64_t total_loss(const TracerReport& r) {
  int64_t n = 0;
  for (const auto& [counter, v] : r.loss.items()) n += v.get<int64_t>();
  return n;
}

}  // namespace

TEST(JaxprofRun, TheRecordedTraceThroughTheTracerIsKernelsAndDriverCallsOfItsProcess) {
  const fs::path dir = temp_dir("jaxprof-one");
  traced(dir, 4242);
  const ConvertedRun r = convert_dir(dir);
  EXPECT_EQ(r.report.layers, (std::vector<std::string>{layer::kDriver, layer::kGpuActivity}));
  // The runtime layer is never in the trace, and the run says why.
  EXPECT_NE(r.report.unobserved.at(layer::kRuntime).find("no runtime call"), std::string::npos);
  EXPECT_EQ(r.report.partly_unobserved.at(layer::kDriver).rfind("XLA's CUPTI tracer keeps a few driver calls", 0), 0u);
  EXPECT_EQ(total_loss(r.report), 0) << r.report.loss.dump();
  for (const char* counter : {"traces_missing", "traces_cut", "traces_refused", "over_bound_bytes", "events_unread"})
    EXPECT_EQ(loss(r.report, counter), 0) << counter;
  EXPECT_EQ(r.report.notes["kernels"], 40);
  EXPECT_EQ(r.report.notes["driver_calls"], 20);
  EXPECT_EQ(r.report.notes["launches_named_by_kernel"], 40);
  EXPECT_NE(r.report.notes.value("clock", std::string()).find("unknown"), std::string::npos);
  EXPECT_EQ(r.report.notes["processes"][0]["hook_started_unix_ns"], 1790857026000000000);
  const std::vector<Event> events = stored(r.events);
  ASSERT_EQ(events.size(), 60u);
  size_t kernels = 0, host_funcs = 0;
  for (const auto& e : events) {
    EXPECT_EQ(e.pid, 4242);
    // Relative times, as the file has them: no absolute time is made up (a unix time in ns
    // would be past 10^18).
    EXPECT_LT(e.ts, int64_t(1'000'000'000)) << e.name;
    if (e.layer == layer::kGpuActivity) {
      ++kernels;
      EXPECT_EQ(e.device, 0);
      EXPECT_TRUE(e.args.contains("grid")) << e.args.dump();
      EXPECT_TRUE(e.args.contains("block"));
      EXPECT_EQ(e.args.at("stream"), 14);
    } else if (e.layer == layer::kDriver) {
      host_funcs += e.name == "cuLaunchHostFunc";
    }
  }
  EXPECT_EQ(kernels, 40u);
  EXPECT_EQ(host_funcs, 20u);
}

TEST(JaxprofRun, EachProcessTraceIsStoredUnderItsPidAndTheOtherFileIsReadWhereThePerfettoOneIsNot) {
  const fs::path dir = temp_dir("jaxprof-procs");
  traced(dir, 101);
  traced(dir, 202, "host.trace.json.gz");  // the file stop_trace converts: the same events
  status(dir, 303, "ended_without_jax");   // a helper interpreter of the program's
  const ConvertedRun r = convert_dir(dir);
  EXPECT_EQ(r.report.layers.size(), 2u);
  EXPECT_EQ(total_loss(r.report), 0) << r.report.loss.dump();
  EXPECT_EQ(r.report.notes["traces"], 2);
  EXPECT_EQ(r.report.notes["processes_profiled"], 2);
  EXPECT_EQ(r.report.notes["processes_without_jax"], 1);
  std::map<int64_t, int> per_pid;
  for (const auto& e : stored(r.events)) ++per_pid[e.pid];
  EXPECT_EQ(per_pid, (std::map<int64_t, int>{{101, 60}, {202, 60}}));
  EXPECT_EQ(r.report.notes["processes"][1]["traces"][0]["file"], "2026_11_28_08_00_00/host.trace.json.gz");
}

TEST(JaxprofRun, PythonThatNeverImportedJaxIsNamedAndNoHookFileIsNoLayer) {
  const fs::path dir = temp_dir("jaxprof-nojax");
  EXPECT_NE(convert_dir(dir).report.unobserved.at(layer::kGpuActivity).find("no Python process loaded the profiler hook"),
            std::string::npos);
  status(dir, 10, "ended_without_jax");
  status(dir, 11, "ended_without_jax");
  ConvertedRun r = convert_dir(dir);
  EXPECT_TRUE(r.report.layers.empty());
  EXPECT_EQ(r.report.unobserved.at(layer::kGpuActivity),
            "2 Python process(es) ran and none imported jax: nothing for jax.profiler to trace");
  EXPECT_FALSE(fs::exists(r.events));
  status(dir, 12, "jax_without_backend");
  EXPECT_NE(convert_dir(dir).report.unobserved.at(layer::kDriver).find("none initialized a backend"), std::string::npos);
  status(dir, 13, "start_failed", ", \"error\": \"RuntimeError('CUPTI_ERROR_INSUFFICIENT_PRIVILEGES')\"");
  EXPECT_NE(convert_dir(dir).report.unobserved.at(layer::kDriver).find("INSUFFICIENT_PRIVILEGES"), std::string::npos);
}

TEST(JaxprofRun, AProcessThatTracedAndLeftNoTraceIsMissing) {
  const fs::path dir = temp_dir("jaxprof-missing");
  status(dir, 31, "profiling");  // killed, or left through os._exit: stop_trace never ran
  status(dir, 32, "export_failed", ", \"error\": \"OSError(28, 'No space left on device')\"");
  run_folder(dir, 32);           // its run folder began, and holds no trace file
  traced(dir, 33);
  const ConvertedRun r = convert_dir(dir);
  EXPECT_EQ(loss(r.report, "traces_missing"), 2);
  EXPECT_EQ(loss(r.report, "traces_refused"), 1);  // the run folder without a trace
  EXPECT_EQ(r.report.layers.size(), 2u);
  EXPECT_EQ(stored(r.events).size(), 60u);
  EXPECT_NE(r.report.notes["processes"][1].value("error", std::string()).find("No space"), std::string::npos);
}

TEST(JaxprofRun, ACutTraceIsCutAndWhatIsPastTheRunsBoundIsLossNeverACleanZero) {
  const fs::path dir = temp_dir("jaxprof-cut");
  const std::string gz = slurp(kRealDir / "perfetto_trace.json.gz");
  status(dir, 41, "exported");
  write(run_folder(dir, 41) / "perfetto_trace.json.gz", gz.substr(0, gz.size() / 2));
  ConvertedRun r = convert_dir(dir);
  EXPECT_EQ(loss(r.report, "traces_cut"), 1);
  EXPECT_EQ(loss(r.report, "traces_missing"), 0);
  EXPECT_FALSE(r.report.notes["processes"][0]["traces"][0].value("cut", std::string()).empty());

  // Two whole traces and a bound that holds one and 100 bytes: the second is cut there.
  const fs::path two = temp_dir("jaxprof-budget");
  traced(two, 51);
  traced(two, 52);
  r = convert_dir(two, gz.size() + 100);
  EXPECT_EQ(loss(r.report, "traces_cut"), 1);
  EXPECT_EQ(loss(r.report, "over_bound_bytes"), int64_t(gz.size() - 100));
}

TEST(JaxprofRun, PlantedLinksAndGarbageAreRefusedOrCountedNeverFollowed) {
  const fs::path dir = temp_dir("jaxprof-hostile");
  // A real trace elsewhere, reached only through links: the process folder, a folder on the
  // way, the file.
  const fs::path elsewhere = temp_dir("jaxprof-elsewhere");
  traced(elsewhere, 61);
  status(dir, 61, "exported");
  fs::create_directory_symlink(elsewhere / "jaxprof.61", dir / "jaxprof.61");
  status(dir, 62, "exported");
  fs::create_directories(dir / "jaxprof.62" / "plugins");
  fs::create_directory_symlink(elsewhere / "jaxprof.61" / "plugins" / "profile", dir / "jaxprof.62" / "plugins" / "profile");
  status(dir, 63, "exported");
  fs::create_symlink(elsewhere / "jaxprof.61" / "plugins" / "profile" / "2026_11_28_08_00_00" / "perfetto_trace.json.gz",
                     run_folder(dir, 63) / "perfetto_trace.json.gz");
  write(dir / "jaxprof.64", "not a folder");
  write(dir / "jaxprof.65.status.json", "\xff\xfe not json");
  const ConvertedRun r = convert_dir(dir);
  EXPECT_TRUE(stored(r.events).empty());
  EXPECT_EQ(loss(r.report, "traces_refused"), 1) << r.report.loss.dump();  // the linked file
  EXPECT_EQ(loss(r.report, "traces_missing"), 2) << r.report.loss.dump();  // 61 and 62: reached nothing
  EXPECT_GT(total_loss(r.report), 0);
  const auto& processes = r.report.notes["processes"];
  ASSERT_EQ(processes.size(), 5u) << processes.dump();
  EXPECT_NE(processes[0].value("folder", std::string()).find("link"), std::string::npos) << processes.dump();
  EXPECT_NE(processes[1].value("folder", std::string()).find("link"), std::string::npos) << processes.dump();
  EXPECT_NE(processes[2]["traces"][0].value("refused", std::string()).find("link"), std::string::npos) << processes.dump();
  EXPECT_NE(processes[3].value("folder", std::string()).find("not a folder"), std::string::npos) << processes.dump();
  EXPECT_FALSE(processes[4].value("status_error", std::string()).empty());
}

TEST(JaxprofMethod, IsListedComparedAndUnavailableWithoutJaxWithTheReason) {
  const Method* m = find_method("jaxprof");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->kind, MethodKind::kMethod);
  const auto& compared = method_groups().at("compared");
  EXPECT_NE(std::find(compared.begin(), compared.end(), "jaxprof"), compared.end());
  const fs::path dir = temp_dir("jaxprof-python");
  const auto fake_python = [&](const std::string& name, const std::string& prints) {
    const fs::path p = write(dir / name, "#!/bin/sh\necho '" + prints + "'\n");
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  };
  HostFacts host;
  Availability a = availability(*m, host, {{"python", fake_python("with-jax", "/site-packages/jax/__init__.py")}});
  EXPECT_FALSE(a.ok);  // no GPU: said first
  EXPECT_NE(a.reason.find("GPU"), std::string::npos) << a.reason;
  host.gpu = true;  // past the GPU check, to the method's own
  a = availability(*m, host, {{"python", fake_python("no-jax", "")}});
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.reason, "jax not found by " + (dir / "no-jax").string() +
                          " (pip install jax, or --set jaxprof.python=PATH names the interpreter that has it)");
  a = availability(*m, host, {{"python", (dir / "absent").string()}});
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.reason.find("not found"), std::string::npos) << a.reason;
  a = availability(*m, host, {{"python", fake_python("with-jax-too", "/site-packages/jax/__init__.py")}});
  EXPECT_TRUE(a.ok) << a.reason;
  EXPECT_THROW(m->make(host, {{"ring_mb", "4"}}), std::invalid_argument);
}

// The program's folder is the program's: a million files in it cost the harness neither their
// memory nor their time. Names past the bound and statuses past the bytes read in all are
// counted as loss (files), never dropped as if they were not there.
TEST(JaxprofRun, AFolderPastItsBoundsIsReadToTheBoundAndTheRestCounted) {
  const fs::path statuses = temp_dir("jaxprof-flood-statuses");
  traced(statuses, 7);
  const std::string padded = "{\"v\": 1, \"pid\": 1, \"phase\": \"exported\"" + std::string(60 << 10, ' ') + "}";
  const SpoolBounds least;  // what convert_dir's 1 GiB run bound gives: the least the bounds are
  ASSERT_EQ(SpoolBounds::for_run(uint64_t(1) << 30).max_status_bytes, least.max_status_bytes);
  const int64_t big = int64_t(least.max_status_bytes / padded.size()) + 40;  // past the bytes read in all
  for (int64_t pid = 100; pid < 100 + big; ++pid)
    write(statuses / ("jaxprof." + std::to_string(pid) + ".status.json"), padded);
  SpoolBounds bounds;
  read_spool(statuses, "jaxprof", &bounds);
  EXPECT_GE(bounds.statuses_unread, 39) << "statuses past " << least.max_status_bytes << " bytes in all";
  EXPECT_EQ(bounds.names_unread, 0);
  ConvertedRun r = convert_dir(statuses);
  EXPECT_EQ(r.report.loss["statuses_unread"], bounds.statuses_unread) << r.report.loss.dump();

  const fs::path names = temp_dir("jaxprof-flood-names");
  traced(names, 7);
  for (size_t i = 0; i < least.max_names + 8; ++i) write(names / ("other." + std::to_string(i)), "");
  bounds = {};
  const auto spool = read_spool(names, "jaxprof", &bounds);
  EXPECT_LE(spool.size(), 1u);
  EXPECT_EQ(bounds.names_unread, 10) << "8 past the bound, and the traced process's two names";
  r = convert_dir(names);
  EXPECT_GE(r.report.loss["spool_names_unread"].get<int64_t>(), 10) << r.report.loss.dump();
  EXPECT_EQ(r.report.loss["statuses_unread"], 0);

  // A status the program made unreadable leaves its process unjudged: counted, never clean.
  const fs::path garbled = temp_dir("jaxprof-garbled");
  traced(garbled, 7);
  write(garbled / "jaxprof.8.status.json", "{\"phase\": \"exported\"");
  r = convert_dir(garbled);
  EXPECT_EQ(r.report.loss["statuses_unread"], 1) << r.report.loss.dump();

  // The bounds follow the run's: a larger machine reads more of the folder, up to 1 GiB of statuses.
  const SpoolBounds big_run = SpoolBounds::for_run(uint64_t(256) << 30);
  EXPECT_EQ(big_run.max_status_bytes, uint64_t(256) << 20);
  EXPECT_EQ(big_run.max_names, size_t(256) << 10);
  EXPECT_EQ(SpoolBounds::for_run(uint64_t(1) << 50).max_status_bytes, uint64_t(1) << 30);
}
