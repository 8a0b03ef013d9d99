// The sanitizer method's host half, without a GPU: its options, where it looks for the
// sanitizer library, how it prepares the program, and the decoder on reports and launch
// records written here the way the injection library writes them (sanitizer_format.h).
#include <gtest/gtest.h>

#include <fstream>

#include "common/event_store.h"
#include "common/event_io.h"
#include "common/machine.h"
#include "harness/score/event_tally.h"
#include "harness/score/matcher.h"
#include "test_support.h"
#include "tracers/sanitizer/sanitizer_decode.h"
#include "tracers/sanitizer/sanitizer_format.h"
#include "tracers/sanitizer/sanitizer_tracer.h"
#include "tracers/tracer.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace cudatrace;
using namespace cudatrace::sanitizer;

namespace {

LaunchRecord launch(uint32_t kernel, uint32_t gx, uint64_t blocks, uint32_t flags = 0, uint32_t context = 0) {
  LaunchRecord r{};
  r.host_ns = 1000 + kernel;
  r.blocks = blocks;
  r.kernel = kernel;
  r.context = context;
  r.grid[0] = gx, r.grid[1] = 1, r.grid[2] = 1;
  r.block[0] = 256, r.block[1] = 1, r.block[2] = 1;
  r.flags = flags;
  return r;
}

json report_for(int pid, size_t launches, const std::string& mode = "blocks") {
  return {{"v", 1},
          {"pid", pid},
          {"library", "/usr/local/cuda/compute-sanitizer/libsanitizer-public.so"},
          {"library_error", ""},
          {"mode", mode},
          {"launches", launches},
          {"modules", {{"patched", 3}, {"failed", 0}, {"without_patches", 0}, {"patch_ns_total", 450000},
                       {"patch_ns_max", 200000}}},
          {"kernels", {"_Z6vecaddPKfS0_Pfi", "scale"}},
          {"contexts", {{{"device", 0}, {"pci_bus_id", "0000:00:06.0"}, {"slots_used", launches}, {"error", ""},
                         {"read_at", "at exit"}, {"read_error", ""}}}},
          {"errors", json::array()},
          {"write_error", ""}};
}

fs::path write_output(const std::vector<LaunchRecord>& launches, int pid = 4242, json rep = nullptr) {
  const fs::path dir = testsupport::temp_dir("sanitizer-decode");
  if (rep.is_null()) rep = report_for(pid, launches.size());
  std::ofstream(dir / ("sanitizer." + std::to_string(pid) + ".json")) << rep.dump();
  std::ofstream out(dir / ("sanitizer." + std::to_string(pid) + ".launches"), std::ios::binary);
  out.write(reinterpret_cast<const char*>(launches.data()), std::streamsize(launches.size() * sizeof(LaunchRecord)));
  return dir;
}

// A run's bounds as the harness gives them (1 GiB of trace), for the tests of other things.
const SanitizerBounds kRun = SanitizerBounds::for_run(uint64_t(1) << 30);

// Whether the device layer's partly-observed reason says `text`; the reason, if not.
testing::AssertionResult device_reason_says(const TracerReport& r, const std::string& text) {
  const auto it = r.partly_unobserved.find("device");
  if (it == r.partly_unobserved.end()) return testing::AssertionFailure() << "no partly-observed reason for the device layer";
  if (it->second.find(text) == std::string::npos)
    return testing::AssertionFailure() << "the reason does not say \"" << text << "\": " << it->second;
  return testing::AssertionSuccess();
}

}  // namespace

TEST(SanitizerOptions, ParsedAndRejectedWithTheValidRange) {
  EXPECT_FALSE(sanitizer_options({}).threads);
  EXPECT_TRUE(sanitizer_options({{"threads", "on"}}).threads);
  EXPECT_EQ(sanitizer_options({{"slots", "4096"}}).slots, 4096u);
  EXPECT_EQ(sanitizer_options({{"slots", std::to_string(kMaxSlots)}}).slots, kMaxSlots);
  EXPECT_EQ(sanitizer_options({{"lib", "/opt/x/libsanitizer-public.so"}}).library, "/opt/x/libsanitizer-public.so");
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"threads", "yes"}, {"slots", "0"}, {"slots", "-1"}, {"slots", std::to_string(kMaxSlots + 1)},
           {"slots", "12x"}, {"lib", ""}, {"colour", "red"}}) {
    try {
      sanitizer_options({{key, value}});
      ADD_FAILURE() << key << "=" << value << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("sanitizer"), std::string::npos) << e.what();
    }
  }
}

TEST(SanitizerLibrary, AGivenPathIsUsedOnlyWhenItExists) {
  const fs::path dir = testsupport::temp_dir("sanitizer-lib");
  std::string looked;
  EXPECT_TRUE(find_sanitizer_library(dir / "libsanitizer-public.so", looked).empty());
  EXPECT_EQ(looked, (dir / "libsanitizer-public.so").string());
  std::ofstream(dir / "libsanitizer-public.so") << "x";
  EXPECT_EQ(find_sanitizer_library(dir / "libsanitizer-public.so", looked), dir / "libsanitizer-public.so");
  // A folder is not a library.
  EXPECT_TRUE(find_sanitizer_library(dir, looked).empty());
}

TEST(SanitizerLibrary, FoundUnderCudaHome) {
  const fs::path root = testsupport::temp_dir("sanitizer-home");
  fs::create_directories(root / "compute-sanitizer");
  std::ofstream(root / "compute-sanitizer" / "libsanitizer-public.so") << "x";
  const char* old = std::getenv("CUDA_HOME");
  const std::string saved = old ? old : "";
  setenv("CUDA_HOME", root.c_str(), 1);
  std::string looked;
  EXPECT_EQ(find_sanitizer_library({}, looked), root / "compute-sanitizer" / "libsanitizer-public.so");
  if (old) setenv("CUDA_HOME", saved.c_str(), 1);
  else unsetenv("CUDA_HOME");
}

TEST(SanitizerTracer, PreparesTheInjectionAndRefusesToReplaceAnother) {
  const fs::path dir = testsupport::temp_dir("sanitizer-prepare");
  std::ofstream(dir / "libcudatrace_sanitizer.so") << "x";
  SanitizerTracer tracer(dir / "libcudatrace_sanitizer.so", "/x/libsanitizer-public.so", SanitizerOptions{.threads = true, .slots = 64},
                         uint64_t(1) << 30);
  Launch launch;
  Target target;
  target.writable_dir = dir / "target";
  unsetenv("CUDA_INJECTION64_PATH");
  tracer.prepare(launch, target, dir);
  EXPECT_EQ(launch.env["CUDA_INJECTION64_PATH"], (dir / "libcudatrace_sanitizer.so").string());
  EXPECT_EQ(launch.env[kLibraryEnv], "/x/libsanitizer-public.so");
  EXPECT_EQ(launch.env[kOutDirEnv], (dir / "target").string());
  EXPECT_EQ(launch.env[kThreadsEnv], "on");
  EXPECT_EQ(launch.env[kSlotsEnv], "64");
  setenv("CUDA_INJECTION64_PATH", "/some/other/tool.so", 1);
  Launch again;
  EXPECT_THROW(tracer.prepare(again, target, dir), std::runtime_error);
  unsetenv("CUDA_INJECTION64_PATH");
}

TEST(SanitizerDecode, OneEventPerLaunchWithTheBlocksCounted) {
  const fs::path dir = write_output({launch(0, 256, 256), launch(1, 4, 4, kGraphNode), launch(1, 4, 4, kGraphNode)});
  const TracerReport rep = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_EQ(rep.error, "");
  EXPECT_EQ(rep.layers, std::vector<std::string>{"device"});
  EXPECT_EQ(rep.device_mode, "launch");
  EXPECT_TRUE(rep.partly_unobserved.empty()) << rep.partly_unobserved.begin()->second;
  EXPECT_EQ(rep.notes["launches"], 3);
  EXPECT_EQ(rep.notes["graph_node_launches"], 2);
  EXPECT_EQ(rep.notes["blocks_counted"], 264);
  EXPECT_EQ(rep.notes["modules_patched"], 3);
  EXPECT_DOUBLE_EQ(rep.notes["patch_ms_per_module"].get<double>(), 0.15);
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].layer, "device");
  EXPECT_EQ(events[0].name, "vecadd");  // demangled, without its parameters
  EXPECT_EQ(events[0].args["blocks"], 256);
  EXPECT_EQ(events[0].args["grid"], json({256, 1, 1}));
  EXPECT_EQ(events[0].args["pci_bus_id"], "0000:00:06.0");
  EXPECT_EQ(events[0].args["counted"], "exact");
  EXPECT_EQ(events[1].args["graph_node"], true);
  EXPECT_EQ(events[2].args["launch"], 2);
}

// What the harness counts of the events as they are written (its tap, not a second read): a
// launch's blocks and its launch index come from the args the converter packs, so the tap
// must be given them. A command's verdict read 67 blocks over 2 launches for 67 launches of
// 256 blocks when it was not (a tally that wanted no args for any event).
TEST(SanitizerDecode, TheTapCountsEachLaunchAndItsBlocks) {
  const fs::path dir = write_output({launch(0, 256, 256), launch(0, 256, 256), launch(1, 4, 4, kGraphNode)});
  EventTally tally(/*keep_events=*/false, /*per_process=*/true, nullptr);
  {
    ScopedEventTap tap(dir / cudatrace::kEventsFile, tally);
    ASSERT_EQ(convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun).error, "");
  }
  EXPECT_TRUE(tally.whole());
  EXPECT_EQ(tally.families[layer::kDevice]["vecadd"], 2);
  EXPECT_EQ(tally.families[kDeviceBlocks]["vecadd"], 512);
  EXPECT_EQ(tally.families[kDeviceGridBlocks]["vecadd"], 512);
  EXPECT_EQ(tally.families[kDeviceBlocks]["scale"], 4);
}

// The args a launch's event stores, byte for byte: what the JSON object the converter once
// built stored (its keys in sorted order), in both modes, for a graph node, a context the
// report does not describe and a kernel index past the report's.
TEST(SanitizerDecode, StoredArgsAreTheJsonObjectsBytes) {
  for (const std::string mode : {"blocks", "threads"}) {
    SCOPED_TRACE(mode);
    LaunchRecord graph = launch(1, 4, 4, kGraphNode);
    graph.graph_launch = 9, graph.threads = 4 * 256, graph.stream = 2, graph.module = 3;
    const fs::path dir = write_output({launch(0, 8, 8), graph, launch(7, 2, 0, kNoSlot, 3)}, 4242, report_for(4242, 3, mode));
    ASSERT_EQ(convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun).error, "");
    json want[3] = {
        {{"kernel", "vecadd"}, {"symbol", "_Z6vecaddPKfS0_Pfi"}, {"launch", 0}, {"grid", {8, 1, 1}}, {"block", {256, 1, 1}},
         {"blocks", 8}, {"stream", 0}, {"device", 0}, {"pci_bus_id", "0000:00:06.0"}, {"graph_node", false},
         {"counted", "exact"}, {"module", 0}},
        {{"kernel", "scale"}, {"symbol", "scale"}, {"launch", 1}, {"grid", {4, 1, 1}}, {"block", {256, 1, 1}},
         {"blocks", 4}, {"stream", 2}, {"device", 0}, {"pci_bus_id", "0000:00:06.0"}, {"graph_node", true},
         {"counted", "exact, with its graph launch"}, {"graph_launch", 9}, {"module", 3}},
        {{"kernel", "?"}, {"symbol", "?"}, {"launch", 2}, {"grid", {2, 1, 1}}, {"block", {256, 1, 1}}, {"blocks", 0},
         {"stream", 0}, {"device", nullptr}, {"pci_bus_id", nullptr}, {"graph_node", false}, {"counted", "no slot"},
         {"module", 0}}};
    if (mode == "threads") {
      want[0].update({{"threads", 0}, {"threads_launched", 8 * 256}});
      want[1].update({{"threads", 4 * 256}, {"threads_launched", 4 * 256}});
      want[2].update({{"threads", 0}, {"threads_launched", 2 * 256}});
    }
    EventReader in(dir / cudatrace::kEventsFile);
    cudatrace::Event e;
    std::string packed;
    for (const json& w : want) {
      ASSERT_TRUE(in.next(e, &packed));
      EXPECT_EQ(packed, pack_json_args(w)) << unpack_args(packed).dump() << "\n" << w.dump();
    }
    EXPECT_FALSE(in.next(e, &packed));
  }
}

// The launch records read follow the run's bound, not a fixed count: past it they are a
// named loss and the reason says which bound; a bigger run reads them all.
TEST(SanitizerDecode, LaunchRecordsPastTheRunsBoundAreANamedLoss) {
  EXPECT_EQ(SanitizerBounds::for_run(uint64_t(1) << 40).launch_records, (uint64_t(1) << 40) / sizeof(LaunchRecord));
  std::vector<LaunchRecord> ls;
  for (int i = 0; i < 10; ++i) ls.push_back(launch(0, 8, 8));
  const fs::path dir = write_output(ls);
  const TracerReport cut = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242,
                                                      SanitizerBounds::for_run(4 * sizeof(LaunchRecord)));
  EXPECT_EQ(cut.loss["launch_records_over_bound"], 6);
  EXPECT_EQ(read_events(dir / cudatrace::kEventsFile).events.size(), 4u);
  EXPECT_TRUE(device_reason_says(cut, "6 launch records over the bound of 4 per run (--max-trace-bytes)"));
  fs::remove(dir / cudatrace::kEventsFile);
  const TracerReport whole = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_EQ(whole.loss["launch_records_over_bound"], 0);
  EXPECT_EQ(read_events(dir / cudatrace::kEventsFile).events.size(), 10u);
}

// A process's conversion holds one sum per graph launch: past its bound the nodes of further
// graph launches are not judged, and that is a named loss, never a count taken as exact.
TEST(SanitizerDecode, GraphLaunchesPastTheBoundAreANamedLoss) {
  // The bound follows the memory available now (an eighth of it), never under 2^20.
  const uint64_t before = available_memory_bytes();
  const size_t bound = SanitizerBounds::for_run(uint64_t(1) << 30).graph_launches;
  const uint64_t after = available_memory_bytes();
  EXPECT_GE(bound, size_t(1) << 20);
  EXPECT_GE(bound, std::min(before, after) / 8 / kSanitizerBytesPerGraphLaunch);
  EXPECT_LE(bound, std::max<uint64_t>(uint64_t(1) << 20, std::max(before, after) / 8 / kSanitizerBytesPerGraphLaunch));
  std::vector<LaunchRecord> ls;
  for (uint64_t g = 1; g <= 3; ++g)
    for (int node = 0; node < 2; ++node) {
      LaunchRecord r = launch(0, 4, 8, kGraphNode);  // two nodes of 4 blocks share a count of 8
      r.graph_launch = g;
      ls.push_back(r);
    }
  const fs::path dir = write_output(ls);
  SanitizerBounds two = kRun;
  two.graph_launches = 2;
  const TracerReport rep = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, two);
  EXPECT_EQ(rep.loss["graph_node_launches_over_bound"], 2);
  EXPECT_EQ(rep.notes["launches_counted_exactly"], 4);
  EXPECT_TRUE(device_reason_says(rep, "2 kernel-node launches not judged: their graph launches came past the 2 "));
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[5].args["counted"], "graph launch past the bound");
  EXPECT_EQ(events[5].args["blocks"], 0);
}

// A report whose contexts are a map, not a list, is the program's doing: its launches are
// placed on no device rather than on whatever the map's entries say.
TEST(SanitizerDecode, ContextsThatAreNoListPlaceNoLaunch) {
  json rep = report_for(4242, 1);
  rep["contexts"] = {{"0", {{"device", 3}, {"pci_bus_id", "0000:99:00.0"}}}};
  const fs::path dir = write_output({launch(0, 8, 8)}, 4242, rep);
  const TracerReport r = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_EQ(r.error, "");
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].device.has_value());
  EXPECT_EQ(events[0].args["device"], nullptr);
  EXPECT_EQ(events[0].args["pci_bus_id"], nullptr);
}

// Kernel nodes of one graph launch share a counter: they are exact together when it holds
// their grids' sum, short together when not (the file is read twice: summed, then converted).
TEST(SanitizerDecode, GraphNodesOfOneLaunchAreCountedTogether) {
  std::vector<LaunchRecord> ls = {launch(0, 4, 8, kGraphNode), launch(1, 4, 8, kGraphNode), launch(0, 4, 5, kGraphNode),
                                  launch(1, 4, 5, kGraphNode), launch(0, 16, 16)};
  ls[0].graph_launch = ls[1].graph_launch = 7;
  ls[2].graph_launch = ls[3].graph_launch = 8;
  const fs::path dir = write_output(ls);
  const TracerReport rep = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].args["counted"], "exact, with its graph launch");
  EXPECT_EQ(events[1].args["blocks"], 4);
  EXPECT_EQ(events[2].args["counted"], "graph launch short");
  EXPECT_EQ(events[3].args["blocks"], 0);
  EXPECT_EQ(events[4].args["launch"], 4);
  EXPECT_EQ(rep.loss["launches_short"], 2);
  EXPECT_EQ(rep.loss["blocks_missing"], 8);
}

// Every way a launch can be counted short is named with its reason and counted as loss;
// the layer is partly observed, never a clean total.
TEST(SanitizerDecode, EveryShortfallIsNamedAndCounted) {
  const fs::path dir = write_output({launch(0, 8, 8), launch(0, 8, 0, kNoSlot), launch(1, 8, 0, kUnpatched),
                                     launch(1, 8, 0, kUnread), launch(0, 8, 5), launch(0, 8, 9)});
  const TracerReport rep = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_EQ(rep.layers, std::vector<std::string>{"device"});
  EXPECT_EQ(rep.loss["launches_without_slot"], 1);
  EXPECT_EQ(rep.loss["launches_in_unpatched_modules"], 1);
  EXPECT_EQ(rep.loss["launches_unread"], 1);
  EXPECT_EQ(rep.loss["launches_short"], 1);
  EXPECT_EQ(rep.loss["blocks_missing"], 3);
  EXPECT_EQ(rep.loss["launches_over"], 1);
  ASSERT_EQ(rep.partly_unobserved.count("device"), 1u);
  const std::string why = rep.partly_unobserved.at("device");
  for (const char* part : {"1 launches ran uncounted", "modules that could not be patched", "could not be read back",
                           "fewer blocks than their grid (3 blocks)", "more blocks than their grid", "vecadd (3)"})
    EXPECT_NE(why.find(part), std::string::npos) << part << " not in: " << why;
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[1].args["counted"], "no slot");
  EXPECT_EQ(events[4].args["counted"], "short");
}

TEST(SanitizerDecode, NoReportIsNotObservedWithTheReason) {
  const fs::path dir = testsupport::temp_dir("sanitizer-empty");
  const TracerReport rep = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_TRUE(rep.layers.empty());
  ASSERT_EQ(rep.unobserved.count("device"), 1u);
  EXPECT_NE(rep.unobserved.at("device").find("never initialised the CUDA driver"), std::string::npos);
}

// The program's own process owes a report only if it initialised CUDA (the library's
// marker): a launcher whose children did the CUDA work is not "partly observed".
TEST(SanitizerDecode, AProcessThatNeverUsedCudaOwesNoReport) {
  const fs::path dir = write_output({launch(0, 8, 8)}, 5000);  // only the child reported
  TracerReport rep = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_TRUE(rep.partly_unobserved.empty()) << rep.partly_unobserved.begin()->second;
  EXPECT_NE(rep.notes.value("program_process", "").find("owes no report"), std::string::npos) << rep.notes.dump();
  // One that did initialise CUDA and left no report ended without its exit handlers.
  std::ofstream(dir / "sanitizer.4242.started");
  fs::remove(dir / cudatrace::kEventsFile);
  rep = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_TRUE(device_reason_says(rep, "initialised the CUDA driver and ended without"));
}

TEST(SanitizerDecode, ALibraryThatCouldNotStartIsTheReason) {
  json rep = report_for(4242, 0);
  rep["library_error"] = "cannot load /nowhere/libsanitizer-public.so: No such file";
  rep["contexts"] = json::array();
  const fs::path dir = write_output({}, 4242, rep);
  const TracerReport r = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_TRUE(r.layers.empty());
  ASSERT_EQ(r.unobserved.count("device"), 1u);
  EXPECT_NE(r.unobserved.at("device").find("could not start: cannot load /nowhere"), std::string::npos);
}

// The folder is the program's: a report that is not what the library writes costs that
// report (the run's error names it), never the harness; a launches file shorter or longer
// than the report says is named.
TEST(SanitizerDecode, HostileOutputIsNamedNotTrusted) {
  const fs::path dir = write_output({launch(0, 8, 8)}, 4242, report_for(4242, 5));
  {
    std::ofstream(dir / "sanitizer.77.json") << "[1,2";
    std::ofstream out(dir / "sanitizer.4242.launches", std::ios::binary | std::ios::app);
    out << "abc";  // a partial record
  }
  json odd = report_for(88, 1);
  odd["kernels"] = 7;        // not a list
  odd["contexts"] = "none";  // not a list
  std::ofstream(dir / "sanitizer.88.json") << odd.dump();
  std::vector<LaunchRecord> bad = {launch(9, 4, 4, 0, 5)};  // kernel and context out of range
  std::ofstream(dir / "sanitizer.88.launches", std::ios::binary)
      .write(reinterpret_cast<const char*>(bad.data()), sizeof(LaunchRecord));
  const TracerReport rep = convert_sanitizer_output(dir, dir / cudatrace::kEventsFile, 4242, kRun);
  EXPECT_NE(rep.error.find("sanitizer.77.json unreadable"), std::string::npos) << rep.error;
  EXPECT_EQ(rep.loss["launch_records_truncated"], 1);
  EXPECT_TRUE(device_reason_says(rep, "announces 5 launches, the launches file holds 1"));
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  EXPECT_EQ(events.size(), 2u);
}

// The matcher reads a launch's args.blocks as that many blocks (device mode "launch"), and
// args.threads as threads ("launch-thread"), against the ledger's grid.
TEST(SanitizerMatch, BlocksPerLaunchAgainstTheLedgersGrid) {
  Event ledger_launch;
  ledger_launch.layer = "runtime";
  ledger_launch.name = "cudaLaunchKernel";
  ledger_launch.ret = 0;
  ledger_launch.args = {{"kernel", "vecadd"}, {"grid", {4, 2, 1}}, {"block", {32, 1, 1}}};
  Event seen;
  seen.layer = "device";
  seen.name = "vecadd";
  seen.args = {{"kernel", "vecadd"}, {"blocks", 8}, {"threads", 256}};
  MatchOptions opts;
  opts.device_mode = "launch";
  auto scores = match({ledger_launch, ledger_launch}, {seen, seen}, {"device"}, opts);
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].expected, 16);
  EXPECT_EQ(scores[0].matched, 16);
  EXPECT_EQ(scores[0].missing, 0);
  seen.args["blocks"] = 7;  // one block short
  scores = match({ledger_launch, ledger_launch}, {seen, seen}, {"device"}, opts);
  EXPECT_EQ(scores[0].missing, 2);
  opts.device_mode = "launch-thread";
  scores = match({ledger_launch}, {seen}, {"device"}, opts);
  EXPECT_EQ(scores[0].expected, 256);
  EXPECT_EQ(scores[0].matched, 256);
}

// Where the method cannot run, --list and every run say why in one line: not built (no
// sanitizer headers at build time: CI), or its library not where it was looked for.
TEST(SanitizerRegistry, SaysInOneLineWhyItCannotRun) {
  const Method* m = find_method("sanitizer");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->layers, std::vector<std::string>{"device"});
  const HostFacts gpu{.root = true, .gpu = true};
  if (!m->built) {
    const Availability a = availability(*m, gpu);
    EXPECT_FALSE(a.ok);
    EXPECT_NE(a.reason.find("Compute Sanitizer headers"), std::string::npos) << a.reason;
    EXPECT_EQ(a.reason.find('\n'), std::string::npos);
    return;
  }
  const Availability missing = availability(*m, gpu, {{"lib", "/nonexistent/libsanitizer-public.so"}});
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(missing.reason.find("is not at /nonexistent/libsanitizer-public.so"), std::string::npos) << missing.reason;
  EXPECT_NE(missing.reason.find("--set sanitizer.lib=PATH"), std::string::npos);
  EXPECT_EQ(missing.reason.find('\n'), std::string::npos);
  EXPECT_EQ(availability(*m, HostFacts{.root = true, .gpu = false}).reason.rfind("needs a GPU", 0), 0u);
}
