#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/event_store.h"
#include "common/event_io.h"
#include "test_support.h"
#include "tracers/preload/preload_format.h"
#include "tracers/preload/preload_tracer.h"
#include "tracers/preload/shim/generic_hooks.h"
#include "tracers/preload/shim/recorder.h"

extern "C" int cudatrace_pause(int paused);

using namespace cudatrace;
using namespace cudatrace::preload;

namespace {

Record rec(HookId hook, int32_t ret, int64_t ts, std::initializer_list<uint64_t> a) {
  Record r{};
  r.hook = hook;
  r.ret = ret;
  r.ts = ts;
  r.dur = 10;
  size_t i = 0;
  for (uint64_t v : a) r.a[i++] = v;
  return r;
}

// Trailers close with a calibration point at tick 1e6 = 1e6 ns: with the one at 0 that
// calib() gives, ticks convert to ns one to one.
Record trailer(uint64_t emitted, uint64_t dropped) {
  Record r{};
  r.hook = kTrailer;
  r.a[0] = emitted;
  r.a[1] = dropped;
  r.a[2] = kMagic;
  r.a[3] = 1000000;
  r.a[4] = 1000000;
  return r;
}

Record calib(uint64_t tsc, uint64_t mono) {
  Record r{};
  r.hook = kCalibration;
  r.a[0] = tsc;
  r.a[1] = mono;
  return r;
}

void write_records(const std::filesystem::path& p, std::vector<Record> rs) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(rs.data()), std::streamsize(rs.size() * sizeof(Record)));
}

}  // namespace

TEST(PreloadConvert, RecordsBecomeEventsWithDecodedArguments) {
  auto dir = testsupport::temp_dir("preload");
  write_records(dir / "preload.100.101.bin",
                {calib(0, 0), rec(k_cudaMalloc, 0, 1000, {4096, 0x7f00}),
                 rec(k_cudaMemcpyAsync, 0, 2000, {0xa, 0xb, 64, 1, 0x5}),
                 rec(k___cudaLaunchKernel, 0, 3000, {0xfeed, pack_dim3(4096, 2, 1), pack_dim3(256, 1, 1), 0, 0}),
                 rec(k_cudaGetDevice, 35, 4000, {uint64_t(int64_t(-1))}),
                 rec(k_cuLaunchKernel_ptsz, 0, 3100, {0xbeef, pack_dim3(1, 1, 1), pack_dim3(32, 1, 1), 0, 0}),
                 trailer(5, 0)});
  std::ofstream(dir / "preload.100.kernels") << "0xfeed vecadd_kernel\n";
  TracerReport r = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  EXPECT_EQ(r.loss["dropped"], 0);
  EXPECT_EQ(r.loss["missing"], 0);
  EXPECT_EQ(r.loss["unterminated_files"], 0);
  auto ev = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].name, "cudaMalloc");
  EXPECT_EQ(ev[0].pid, 100);
  EXPECT_EQ(ev[0].tid, 101);
  EXPECT_EQ(ev[0].args["bytes"], 4096);
  EXPECT_EQ(ev[0].args["ptr"], "0x7f00");
  EXPECT_EQ(ev[1].args["kind"], "HtoD");
  EXPECT_EQ(ev[1].args["stream"], "0x5");
  EXPECT_EQ(ev[2].name, "__cudaLaunchKernel");
  EXPECT_EQ(ev[2].layer, "runtime");
  EXPECT_EQ(ev[2].args["kernel"], "vecadd_kernel");
  EXPECT_EQ(ev[2].args["grid"], nlohmann::json({4096, 2, 1}));
  EXPECT_EQ(ev[2].args["block"], nlohmann::json({256, 1, 1}));
  EXPECT_EQ(ev[3].ret, 35);
  EXPECT_EQ(ev[3].args["device"], -1);
  EXPECT_EQ(ev[4].layer, "driver");
  EXPECT_EQ(ev[4].args["kernel"], "0xbeef") << "an unnamed kernel keeps its handle";
}

TEST(PreloadConvert, GenericRecordsAreNamedFromTheSlotTables) {
  auto dir = testsupport::temp_dir("preload");
  const ExportInfo* load = find_export("cuModuleLoadData");
  const ExportInfo* graph = find_export("cudaGraphAddKernelNode");
  ASSERT_TRUE(load && graph && load->kind == ExportKind::Generic && graph->kind == ExportKind::Generic);
  // The forwarders record rax whatever the function returns: a string is not a result.
  const ExportInfo* text = find_export("cudaGetErrorString");
  ASSERT_TRUE(text && text->kind == ExportKind::Generic && !text->returns_code);
  const auto dynamic = [](int j) { return HookId(kGenericBase + kMaxStaticSlots + j); };
  write_records(dir / "preload.9.9.bin", {rec(dynamic(3), 0, 5, {}), rec(dynamic(4), 1, 6, {}),
                                          rec(HookId(kGenericBase + load->slot), 218, 7, {}),
                                          rec(HookId(kGenericBase + graph->slot), 0, 8, {}),
                                          rec(HookId(kGenericBase + text->slot), 0x5a5a10, 9, {}),
                                          rec(dynamic(5), 0x5a5a20, 10, {}), trailer(6, 0)});
  std::ofstream(dir / "preload.9.generic") << kMaxStaticSlots + 3 << " driver cuCtxGetCurrent\n"
                                           << kMaxStaticSlots + 5 << " runtime cudaGetErrorString\n";
  std::ofstream(dir / "preload.9.resolved") << "1 cuLaunchKernel\n2 cuCtxGetCurrent\n0 cuTexRefSetBorderColor\n";
  std::ofstream(dir / "preload.9.callers") << "412 /usr/lib/libcudart.so.13\n130 /opt/lib/libprivatert.so\n";
  std::ofstream(dir / "preload.9.uncovered") << "export runtime cudaFutureCall /opt/cuda 14/libcudart.so.14\n"
                                                 "export runtime cudaOtherCall /opt/cuda 14/libcudart.so.14\n"
                                                 "import cudaFutureCall /opt/app/libnew.so\n";
  TracerReport r = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  auto ev = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(ev.size(), 6u);
  EXPECT_EQ(ev[0].layer, "driver");
  EXPECT_EQ(ev[0].name, "cuCtxGetCurrent");
  EXPECT_EQ(ev[1].name, "cu?generic" + std::to_string(kMaxStaticSlots + 4)) << "a slot with no name is still a record";
  EXPECT_EQ(ev[1].ret, 1);
  EXPECT_EQ(ev[2].layer, "driver");
  EXPECT_EQ(ev[2].name, "cuModuleLoadData");
  EXPECT_EQ(ev[2].ret, 218);
  EXPECT_EQ(ev[3].layer, "runtime");
  EXPECT_EQ(ev[3].name, "cudaGraphAddKernelNode");
  EXPECT_EQ(ev[4].name, "cudaGetErrorString");
  EXPECT_EQ(ev[4].ret, 0) << "a static slot's function that returns no code";
  EXPECT_EQ(ev[5].name, "cudaGetErrorString");
  EXPECT_EQ(ev[5].ret, 0) << "a run-time slot's function that returns no code";
  EXPECT_EQ(ev[1].ret, 1) << "a slot no table names keeps its result (assumed a code)";
  EXPECT_EQ(r.notes["runtime_records_without_arguments"], 3);
  EXPECT_EQ(r.notes["driver_entry_points_resolved"], 3);
  EXPECT_EQ(r.notes["driver_entry_points_hooked"], 2);
  EXPECT_EQ(r.notes["driver_entry_points_with_arguments"], 1);
  EXPECT_EQ(r.notes["driver_entry_points_not_hooked"], nlohmann::json({"cuTexRefSetBorderColor"}));
  // Who asked cuGetProcAddress besides libcudart.so: a cudart linked into that library.
  ASSERT_EQ(r.notes["runtime_linked_into"].size(), 1u) << r.notes.dump();
  EXPECT_EQ(r.notes["runtime_linked_into"][0]["object"], "/opt/lib/libprivatert.so");
  EXPECT_EQ(r.notes["runtime_linked_into"][0]["driver_entry_points_resolved"], 130);
  EXPECT_EQ(r.notes["exports_not_covered"]["/opt/cuda 14/libcudart.so.14"],
            nlohmann::json({"cudaFutureCall", "cudaOtherCall"}));
  EXPECT_EQ(r.notes["uncovered_calls_linked_by"]["/opt/app/libnew.so"], nlohmann::json({"cudaFutureCall"}));
}

// The shim's text tables are the program's writing too: one past the bound is refused
// (counted), never read into memory.
// A table past its bound is read up to it: its lines before the bound count, the bytes past
// it are counted as loss (a whole table refused would lose its good lines too).
TEST(PreloadConvert, OversizedTablesAreReadToTheirBoundAndTheRestCounted) {
  auto dir = testsupport::temp_dir("preload");
  write_records(dir / "preload.9.9.bin", {rec(HookId(0), 0, 5, {}), trailer(1, 0)});
  std::ofstream(dir / "preload.9.callers") << "1 /x\n";
  std::filesystem::resize_file(dir / "preload.9.callers", (uint64_t(16) << 20) + 1);
  TracerReport r = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  EXPECT_EQ(r.loss["over_bound_table_bytes"], 1) << r.loss.dump();
  EXPECT_EQ(r.loss["malformed_table_lines"], 1) << "the zeros after the line: one line, cut: " << r.loss.dump();
  EXPECT_EQ(r.loss["unreadable_files"], 0) << r.loss.dump();
  ASSERT_TRUE(r.notes.contains("runtime_linked_into")) << r.notes.dump();
  EXPECT_EQ(r.notes["runtime_linked_into"][0]["object"], "/x");
  EXPECT_NE(r.notes["table_problems"].dump().find("preload.9.callers: 1 bytes past the per file bound (16 MiB)"),
            std::string::npos)
      << r.notes.dump();
  EXPECT_NE(r.notes.value("over_bound_table_bytes", "").find("16 MiB in one file"), std::string::npos) << r.notes.dump();
  EXPECT_EQ(read_events(dir / cudatrace::kEventsFile).events.size(), 1u) << "the records are read all the same";
  // The bounds grow with the run's (a 64th of it per file): a run allowed 4 GiB reads the
  // same table whole.
  std::filesystem::remove(dir / cudatrace::kEventsFile);
  r = convert_preload_output(dir, dir / cudatrace::kEventsFile, uint64_t(4) << 30);
  EXPECT_EQ(r.loss["over_bound_table_bytes"], 0) << r.loss.dump();
  EXPECT_FALSE(r.notes.contains("over_bound_table_bytes")) << r.notes.dump();
}

TEST(PreloadConvert, TicksBecomeMonotonicNanosecondsBetweenCalibrationPoints) {
  auto dir = testsupport::temp_dir("preload");
  // 3 ticks per ns, monotonic clock starting at 5000 ns; a flush point in the middle.
  Record t = trailer(3, 0);
  t.a[3] = 3000 + 3 * 1000;
  t.a[4] = 5000 + 1000 + 1000;
  write_records(dir / "preload.1.1.bin", {calib(3000, 5000), rec(k_cudaFree, 0, 3000 + 300, {0}),
                                          calib(3000 + 3000, 5000 + 1000), rec(k_cudaFree, 0, 3000 + 3600, {0}), t});
  // A file cut short after its start point: the process's average rate still applies.
  write_records(dir / "preload.1.2.bin", {calib(30000, 14000), rec(k_cudaFree, 0, 30000 + 30, {0})});
  TracerReport r = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  auto ev = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].ts, 5100);
  EXPECT_EQ(ev[0].dur, 3) << "10 ticks";
  EXPECT_EQ(ev[1].ts, 6200);
  EXPECT_EQ(ev[2].ts, 14010);
  EXPECT_EQ(r.notes["untimed_records"], 0);
  EXPECT_EQ(r.loss["unterminated_files"], 1);
}

TEST(PreloadConvert, LossIsCountedNeverSilent) {
  auto dir = testsupport::temp_dir("preload");
  // Thread 1: the trailer says 3 records were made and 1 dropped, but only 1 is here.
  write_records(dir / "preload.7.1.bin", {rec(k_cudaFree, 0, 1, {0}), trailer(3, 1)});
  // Thread 2: the process died before the trailer.
  write_records(dir / "preload.7.2.bin", {rec(k_cudaFree, 0, 2, {0})});
  // Thread 3: two segments (a flush before exec, then more calls), each closed.
  write_records(dir / "preload.7.3.bin", {rec(k_cudaFree, 0, 3, {0}), trailer(1, 0), rec(k_cudaFree, 0, 4, {0}), trailer(1, 0)});
  TracerReport r = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  EXPECT_EQ(r.loss["dropped"], 1);
  EXPECT_EQ(r.loss["missing"], 1);
  EXPECT_EQ(r.loss["unterminated_files"], 1);
  EXPECT_EQ(r.notes["records"], 4);
}

// The recorder, end to end: full buffers, threads, records made after a thread's exit hook
// and from an atexit handler, a forked child, through both live paths of the generic
// forwarder. Every call made must come back, in order, with its name and return code, and
// no loss may be reported.
TEST(PreloadRecorder, EveryRecordReachesDiskThroughFlushesThreadsForkAndExit) {
  auto dir = testsupport::temp_dir("recorder");
  auto r = testsupport::run_command(std::string(kDirEnv) + "=" + dir.string() + " " + CUDATRACE_RECORDER_EXERCISER);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int64_t main_calls = 0, atexit_calls = 0, thread_calls = 0, late_calls = 0, child_calls = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str(), "%ld %ld %ld %ld %ld", &main_calls, &atexit_calls, &thread_calls, &late_calls,
                        &child_calls),
            5)
      << r.output;

  TracerReport rep = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  for (const char* kind : {"dropped", "missing", "unterminated_files", "corrupt_records"})
    EXPECT_EQ(rep.loss[kind], 0) << kind;
  auto events = read_events(dir / cudatrace::kEventsFile).events;
  std::map<std::pair<int64_t, int64_t>, std::vector<const Event*>> by_thread;
  for (const auto& e : events) by_thread[{e.pid, e.tid}].push_back(&e);
  std::map<int64_t, int> threads_of;
  for (const auto& [key, _] : by_thread) ++threads_of[key.first];
  ASSERT_EQ(threads_of.size(), 2u) << "the exerciser and its child";
  const int64_t parent = threads_of.begin()->second == 5 ? threads_of.begin()->first : threads_of.rbegin()->first;
  const int64_t child = threads_of.begin()->first == parent ? threads_of.rbegin()->first : threads_of.begin()->first;
  EXPECT_EQ(threads_of[parent], 5) << "main thread and four others";
  EXPECT_EQ(threads_of[child], 1);
  for (const auto& [key, evs] : by_thread) {
    const auto [pid, tid] = key;
    // The child runs the atexit handler it inherited, too.
    const int64_t expected = pid == child ? child_calls + atexit_calls
                             : tid == pid ? main_calls + atexit_calls
                                          : thread_calls + late_calls;
    EXPECT_EQ(int64_t(evs.size()), expected) << "pid " << pid << " tid " << tid;
    // Calls i = 0, 1, 2, ... return i % 3: order and codes survive every flush.
    const size_t first_run = size_t(pid == child ? child_calls : tid == pid ? main_calls : thread_calls);
    for (size_t i = 0; i < std::min(first_run, evs.size()); ++i) {
      if (evs[i]->ret != int64_t(i % 3) || evs[i]->name != (i % 2 ? "cuFakeCall" : "cuCtxGetDevice")) {
        ADD_FAILURE() << "pid " << pid << " tid " << tid << " record " << i << ": " << evs[i]->name << " ret "
                      << evs[i]->ret.value_or(-1);
        break;
      }
    }
    for (size_t i = 1; i < evs.size(); ++i)
      if (evs[i]->ts < evs[i - 1]->ts) {
        ADD_FAILURE() << "time goes back at record " << i << " of tid " << tid;
        break;
      }
  }
}

// A thread whose buffer cannot be mapped (address space capped) writes each record on its
// own: slower, but every call is on disk, none through a null buffer.
TEST(PreloadRecorder, WithoutABufferEveryRecordIsWrittenAlone) {
  auto dir = testsupport::temp_dir("recorder-nomap");
  auto r = testsupport::run_command(std::string(kDirEnv) + "=" + dir.string() + " " + CUDATRACE_RECORDER_EXERCISER +
                                    " nomap");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const int64_t calls = std::stoll(r.output);
  TracerReport rep = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  for (const char* kind : {"dropped", "missing", "unterminated_files", "corrupt_records"})
    EXPECT_EQ(rep.loss[kind], 0) << kind;
  auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(int64_t(events.size()), calls);
  for (size_t i = 0; i < events.size(); ++i)
    ASSERT_EQ(events[i].ret, int64_t(i % 3)) << "record " << i << " out of order or with the wrong code";
}

// A program that execs or dies of a fatal signal: the shim writes what it holds first, so
// every call is on disk and its thread's file is closed by a trailer. Twice: a few calls,
// and two buffers' worth, whose last call hands a full buffer to the writer thread just
// before the program leaves (the flush waits for it).
TEST(PreloadShim, FlushesBeforeExecAndOnFatalSignals) {
  for (const int kCalls : {5, 2 * int(kBufferRecords)}) {
    for (const auto& [mode, exit_code] : {std::pair{"execl", 0}, {"execlp", 0}, {"execle", 0}, {"abort", 128 + SIGABRT}, {"segv", 128 + SIGSEGV}}) {
      auto dir = testsupport::temp_dir("exit-paths");
      auto r = testsupport::run_command("LD_PRELOAD=" + std::string(CUDATRACE_PRELOAD_SHIM) + " " + kDirEnv + "=" +
                                        dir.string() + " " + CUDATRACE_EXIT_PATHS + " " + mode + " " +
                                        std::to_string(kCalls));
      EXPECT_EQ(r.exit_code, exit_code) << mode << " " << kCalls << ": " << r.output;
      TracerReport rep = convert_preload_output(dir, dir / cudatrace::kEventsFile);
      for (const char* kind : {"dropped", "missing", "unterminated_files", "corrupt_records"})
        EXPECT_EQ(rep.loss[kind], 0) << mode << " " << kCalls << " " << kind;
      int seen = 0;
      for (const auto& e : read_events(dir / cudatrace::kEventsFile).events) seen += e.name == "cudaGetDeviceCount";
      EXPECT_EQ(seen, kCalls) << mode << " " << kCalls;
    }
  }
}

// Python's subprocess vforks and execs: the child runs the shim's exec hook in the
// parent's memory. Every record must stay the parent's (one pid, nothing lost), not be
// written under the child's pid with the parent's descriptors closed in the child's table.
TEST(PreloadShim, AVforkChildThatExecsLeavesTheParentsRecordsToIt) {
  constexpr int kCalls = 5;
  auto dir = testsupport::temp_dir("vfork");
  auto r = testsupport::run_command("LD_PRELOAD=" + std::string(CUDATRACE_PRELOAD_SHIM) + " " + kDirEnv + "=" +
                                    dir.string() + " " + CUDATRACE_EXIT_PATHS + " vfork " + std::to_string(kCalls));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  TracerReport rep = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  for (const char* kind : {"dropped", "missing", "unterminated_files", "corrupt_records"}) EXPECT_EQ(rep.loss[kind], 0) << kind;
  std::set<int64_t> pids;
  int seen = 0;
  for (const auto& e : read_events(dir / cudatrace::kEventsFile).events) {
    pids.insert(e.pid);
    seen += e.name == "cudaGetDeviceCount";
  }
  EXPECT_EQ(seen, 2 * kCalls);
  EXPECT_EQ(pids.size(), 1u) << "the parent's records were split over " << pids.size() << " pids";
}

// The shim must hook every CUDA runtime function the workloads call (cudart's fatbin
// registration and <<<>>> call-configuration plumbing aside).
TEST(PreloadShim, CoversEveryCudaFunctionTheWorkloadsCall) {
  auto exported = testsupport::dynamic_symbols("--defined-only", CUDATRACE_PRELOAD_SHIM);
  ASSERT_FALSE(exported.empty()) << "nm found nothing in " << CUDATRACE_PRELOAD_SHIM;
  for (const char* wl : {"vecadd", "streams", "memheavy", "errors", "burst"}) {
    const std::string bin = std::string(CUDATRACE_WORKLOAD_DIR) + "/" + wl + ".shared";
    auto used = testsupport::dynamic_symbols("--undefined-only", bin);
    int cuda_calls = 0;
    for (const auto& sym : used) {
      if (sym.rfind("cuda", 0) != 0 && sym != "__cudaLaunchKernel") continue;
      ++cuda_calls;
      EXPECT_TRUE(exported.count(sym)) << wl << " calls " << sym << ", which the shim does not hook";
    }
    EXPECT_GT(cuda_calls, 3) << wl;
  }
}

// CUDA calls that hooks.def does not list, each recorded with the code the program got:
// linked (-lcudart, -lcuda: the shim exports every function of both) and through dlsym on
// a dlopen'ed handle. The toolkit's stub stands in for libcuda.so.1, here and on a GPU
// host alike (it comes first on LD_LIBRARY_PATH), so every driver call fails the same way.
TEST(PreloadShim, EveryUnlistedCallIsRecordedWithItsCode) {
  const std::filesystem::path stub = CUDATRACE_TOOLKIT_LIBCUDA;
  ASSERT_TRUE(std::filesystem::exists(stub)) << stub;
  for (const std::string layer : {"runtime", "driver"}) {
    for (const std::string how : {"direct", "dlsym"}) {
      SCOPED_TRACE(layer + " " + how);
      auto dir = testsupport::temp_dir("unlisted");
      std::filesystem::create_directory(dir / "lib");
      std::filesystem::create_symlink(stub, dir / "lib" / "libcuda.so.1");
      std::filesystem::create_directory(dir / "spool");
      auto r = testsupport::run_command("LD_LIBRARY_PATH=" + (dir / "lib").string() + " LD_PRELOAD=" +
                                        CUDATRACE_PRELOAD_SHIM + " " + kDirEnv + "=" + (dir / "spool").string() + " " +
                                        CUDATRACE_UNLISTED_CALLS + " " + layer + " " + how + " 2>&1");
      ASSERT_EQ(r.exit_code, 0) << r.output;
      std::vector<std::pair<std::string, int>> made;
      std::istringstream in(r.output);
      std::string name;
      int code;
      while (in >> name >> code) made.push_back({name, code});
      ASSERT_GE(made.size(), layer == "runtime" ? 20u : 30u) << r.output;
      TracerReport rep = convert_preload_output(dir / "spool", dir / cudatrace::kEventsFile);
      std::vector<std::pair<std::string, int>> recorded;
      for (const auto& e : read_events(dir / cudatrace::kEventsFile).events)
        if (e.layer == layer) recorded.push_back({e.name, int(e.ret.value_or(-999))});
      EXPECT_EQ(recorded, made) << "every call, in order, with its code";
      for (const auto& [k, v] : rep.loss.items()) EXPECT_EQ(v, 0) << k;
    }
  }
}

// Which device a record carries, asked of the driver once per change of the thread's
// context rather than after every call (recorder.h, device_tag()). A fake libcuda.so.1 and
// libcudart (tests/support/preload_devices/) count how often cuCtxGetCurrent is asked; the
// program prints that per phase and tags each call with its phase (device_calls.cpp).
namespace {

struct DeviceRun {
  std::map<int, long> asked;                          // phase -> cuCtxGetCurrent calls
  std::map<int, std::vector<Event>> by_phase;  // phase -> its calls, both layers
  std::vector<Event> events;
  int calls = 0;
};

DeviceRun run_device_calls(const std::string& env) {
  DeviceRun run;
  auto dir = testsupport::temp_dir("preload-devices");
  auto r = testsupport::run_command(env + " LD_PRELOAD=" + CUDATRACE_PRELOAD_SHIM + " " + kDirEnv + "=" + dir.string() +
                                    " " + CUDATRACE_DEVICE_CALLS + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    int phase = 0;
    long n = 0;
    if (std::sscanf(line.c_str(), "%d asked %ld", &phase, &n) == 2) run.asked[phase] = n;
    std::sscanf(line.c_str(), "calls %d", &run.calls);
  }
  EXPECT_GT(run.calls, 0) << r.output;
  convert_preload_output(dir, dir / cudatrace::kEventsFile);
  run.events = read_events(dir / cudatrace::kEventsFile).events;
  for (const auto& e : run.events)
    if ((e.name == "cudaEventRecord" || e.name == "cuEventRecord") && e.args.contains("event"))
      run.by_phase[int(std::stoull(e.args["event"].get<std::string>(), nullptr, 16) >> 16)].push_back(e);
  return run;
}

}  // namespace

TEST(PreloadShim, AsksTheDeviceOncePerContextNotPerCall) {
  const DeviceRun run = run_device_calls("");
  ASSERT_EQ(run.asked.size(), 8u) << "the program printed every phase";
  // Phase 0: a call with no context current asks, and keeps nothing. Phases 1, 2, 5: one question, at the first record after the context changed (a
  // thread's first runtime call, cudaSetDevice, a new thread). 3: cuDevicePrimaryCtxRetain
  // and cuCtxSetCurrent each ask once, twice over. 4 and 6: the context did not change, nothing asked.
  // 7: resuming from a pause asks once. Asked after every call, each would be 100.
  const std::map<int, long> expected = {{0, 1}, {1, 1}, {2, 1}, {3, 4}, {4, 0}, {5, 1}, {6, 0}, {7, 1}};
  EXPECT_EQ(run.asked, expected);
}

TEST(PreloadShim, RecordsCarryTheDeviceCurrentAfterEachContextChange) {
  const DeviceRun run = run_device_calls("");
  // The device current in each phase: cudart's implicit primary context (0), cudaSetDevice(1),
  // cuCtxSetCurrent to device 2's context, kept by later runtime calls; another thread's own
  // first call (0); a context set while recording was paused (3).
  // Phase 0's call, made with no context current, names none; had that been kept, the
  // runtime's implicit context (phase 1) would go unseen.
  ASSERT_EQ(run.by_phase.count(0), 1u);
  ASSERT_EQ(run.by_phase.at(0).size(), 1u);
  EXPECT_FALSE(run.by_phase.at(0)[0].device.has_value());
  const std::map<int, int64_t> device = {{1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 0}, {6, 2}, {7, 3}};
  for (const auto& [phase, want] : device) {
    SCOPED_TRACE("phase " + std::to_string(phase));
    const auto it = run.by_phase.find(phase);
    ASSERT_NE(it, run.by_phase.end());
    // Runtime phases record cudart's call and the driver call inside it; driver phases one.
    EXPECT_EQ(int(it->second.size()), (phase == 3 || phase == 7 ? 1 : 2) * run.calls);
    int wrong = 0;
    for (const Event& e : it->second)
      if (e.device != want || e.device_id != "0000:1" + std::to_string(want) + ":00.0") ++wrong;  // fake_libcuda's ids
    EXPECT_EQ(wrong, 0) << "records of phase " << phase << " not on device " << want;
  }
  // The calls that changed the context carry the device current after them.
  std::map<std::string, std::vector<int64_t>> changers;
  for (const auto& e : run.events)
    if (e.name == "cudaSetDevice" || e.name == "cuCtxSetCurrent" || e.name == "cuDevicePrimaryCtxRetain")
      changers[e.name].push_back(e.device.value_or(-1));
  EXPECT_EQ(changers["cudaSetDevice"], std::vector<int64_t>({1}));
  EXPECT_EQ(changers["cuDevicePrimaryCtxRetain"], std::vector<int64_t>({1, 0})) << "it makes nothing current";
  EXPECT_EQ(changers["cuCtxSetCurrent"], std::vector<int64_t>({0, 2})) << "the one made while paused is not recorded";
}

// --set preload.devices=off: the driver is never asked, and no record names a device.
TEST(PreloadShim, DevicesOffAsksNothing) {
  const DeviceRun run = run_device_calls(std::string(kDevicesEnv) + "=off");
  ASSERT_EQ(run.asked.size(), 8u);
  for (const auto& [phase, n] : run.asked) EXPECT_EQ(n, 0) << "phase " << phase;
  int with_device = 0;
  for (const auto& e : run.events) with_device += e.device.has_value();
  EXPECT_EQ(with_device, 0);
  ASSERT_TRUE(run.by_phase.contains(1));
  EXPECT_EQ(int(run.by_phase.at(1).size()), 2 * run.calls);
}

// A library loaded with RTLD_LOCAL, with its cudart (a Python extension module): the shim,
// global, comes first for its calls, and must forward them to the cudart in that
// library's own scope, which RTLD_NEXT does not reach.
TEST(PreloadShim, ForwardsCallsOfALibraryLoadedLocally) {
  auto dir = testsupport::temp_dir("rtld-local");
  auto r = testsupport::run_command("LD_PRELOAD=" + std::string(CUDATRACE_PRELOAD_SHIM) + " " + kDirEnv + "=" +
                                    dir.string() + " " + CUDATRACE_RTLD_LOCAL_LOADER + " " + CUDATRACE_RTLD_LOCAL_LIB +
                                    " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::pair<std::string, int>> made, recorded;
  std::istringstream in(r.output);
  std::string name;
  int code;
  while (in >> name >> code) made.push_back({name, code});
  ASSERT_EQ(made.size(), 2u) << r.output;
  convert_preload_output(dir, dir / cudatrace::kEventsFile);
  for (const auto& e : read_events(dir / cudatrace::kEventsFile).events)
    if (e.layer == "runtime") recorded.push_back({e.name, int(e.ret.value_or(-999))});
  EXPECT_EQ(recorded, made);
}

// A driver newer than the shim's toolkit exports a function the shim does not; a program
// linked to call it binds past the shim. The shim says so: which export, who links it.
TEST(PreloadShim, NamesExportsItDoesNotCoverAndWhoCallsThem) {
  auto dir = testsupport::temp_dir("newer-driver");
  auto r = testsupport::run_command("LD_PRELOAD=" + std::string(CUDATRACE_PRELOAD_SHIM) + " " + kDirEnv + "=" +
                                    dir.string() + " " + CUDATRACE_FUTURE_CALLER + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "0 42\n");
  TracerReport rep = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  ASSERT_TRUE(rep.notes.contains("exports_not_covered")) << rep.notes.dump(1);
  const auto& u = rep.notes["exports_not_covered"];
  ASSERT_EQ(u.size(), 1u) << u.dump();
  EXPECT_NE(u.begin().key().find("libcuda.so.1"), std::string::npos);
  EXPECT_EQ(u.begin().value(), nlohmann::json({"cuFutureCall"})) << "cuInit is covered";
  ASSERT_TRUE(rep.notes.contains("uncovered_calls_linked_by")) << rep.notes.dump(1);
  EXPECT_EQ(rep.notes["uncovered_calls_linked_by"].begin().value(), nlohmann::json({"cuFutureCall"}));
  int inits = 0;
  for (const auto& e : read_events(dir / cudatrace::kEventsFile).events) inits += e.name == "cuInit";
  EXPECT_EQ(inits, 1) << "the covered call is recorded";
}

// In a program that never touches CUDA, and across fork, the shim stays out of the way.
TEST(PreloadShim, HarmlessInAnyProcessAndAcrossFork) {
  auto dir = testsupport::temp_dir("preload");
  auto r = testsupport::run_command("LD_PRELOAD=" + std::string(CUDATRACE_PRELOAD_SHIM) + " " + kDirEnv + "=" +
                                    dir.string() + " /bin/sh -c 'echo parent; (echo child) & wait; exit 3'");
  EXPECT_EQ(r.exit_code, 3) << "exit status passes through";
  EXPECT_EQ(r.output, "parent\nchild\n");
  TracerReport rep = convert_preload_output(dir, dir / cudatrace::kEventsFile);
  EXPECT_EQ(rep.notes["records"], 0);
}

// The benchmark's in-process A/B pauses the shim: paused hooks only forward. Pausing never
// turns recording on where it was off (no CUDATRACE_PRELOAD_DIR in this process).
TEST(PreloadShim, PauseSwitchesTheHooksToForwardOnly) {
  const bool live = hooks_live();
  EXPECT_EQ(live, recording());
  EXPECT_EQ(cudatrace_pause(1), live ? 0 : 1);
  EXPECT_FALSE(hooks_live());
  EXPECT_EQ(cudatrace_pause(0), 1);
  EXPECT_EQ(hooks_live(), recording());
  g_shim.live = true;  // as a recording process has it
  EXPECT_EQ(cudatrace_pause(1), 0);
  EXPECT_FALSE(hooks_live());
  g_shim.live = live;
}

// The per-call benchmark keeps no events, yet must say when preload ran without a layer:
// on static cudart the shim never sees a runtime call, so its cost there is the driver's.
// What it is told of the runtime layer is what finish() reports of it.
TEST(PreloadTracer, SaysWithoutEventsThatStaticCudartLeavesTheRuntimeOut) {
  const auto dir = testsupport::temp_dir("preload-uncovered");
  std::ofstream(dir / "libcudatrace_preload.so") << "";  // prepare() checks that the shim exists
  for (const std::string linkage : {"static", "shared"}) {
    const auto run_dir = dir / linkage;  // finish() creates its events file exclusively
    std::filesystem::create_directory(run_dir);
    PreloadTracer tracer(dir / "libcudatrace_preload.so");
    Launch launch{{"/bin/true"}, {}};
    tracer.prepare(launch, Target{launch.argv, linkage, run_dir}, run_dir);
    const TracerReport layers = tracer.layers_without_events();
    const TracerReport report = tracer.finish(run_dir);  // no records: nothing ran
    const auto has_runtime = [](const TracerReport& r) {
      return std::count(r.layers.begin(), r.layers.end(), "runtime") == 1;
    };
    EXPECT_EQ(has_runtime(layers), has_runtime(report)) << linkage;
    EXPECT_EQ(layers.unobserved.count("runtime"), report.unobserved.count("runtime")) << linkage;
    EXPECT_TRUE(layers.partly_unobserved.empty()) << linkage;
    if (linkage == "static") {
      ASSERT_EQ(layers.unobserved.count("runtime"), 1u);
      EXPECT_EQ(layers.unobserved.at("runtime"), report.unobserved.at("runtime"));
      EXPECT_NE(layers.unobserved.at("runtime").find("linked statically"), std::string::npos);
    } else {
      EXPECT_TRUE(has_runtime(layers));
      EXPECT_TRUE(layers.unobserved.empty()) << layers.unobserved.begin()->first;
    }
  }
}
