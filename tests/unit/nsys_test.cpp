// The nsys method's host side, without Nsight Systems: its export read from databases
// built here in the shape of `nsys export --type sqlite` (the tables and columns
// nsys_capture.h names), its install located, and what a run that could not export says.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "common/event_store.h"
#include "common/cuda_names.h"
#include "common/event_io.h"
#include "test_support.h"
#include "tracers/nsys/nsys_capture.h"
#include "tracers/nsys/nsys_tracer.h"

using namespace cudatrace;
using testsupport::temp_dir;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSessionStartUtc = 1'790'000'000'000'000'000;  // TARGET_INFO_SESSION_START_TIME
constexpr int64_t kRealtimeMinusMonotonic = 1'789'000'000'000'000'000;
constexpr int64_t kToMonotonic = kSessionStartUtc - kRealtimeMinusMonotonic;
constexpr int64_t kPid = 4242, kTid = 4250;
constexpr int64_t kGlobalTid = (int64_t(1) << 48) | (kPid << 24) | kTid;  // nsys's packing: vm id, pid, tid

void exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << "\n" << sql;
}

// A capture of: cudaMalloc (ok), a kernel launch through the runtime with its driver call
// inside, the kernel's run, and a failed cudaMemcpy. `with_returns` = false: an export
// without the returnValue column; `with_start` = false: without the session's start.
fs::path make_capture(const fs::path& dir, bool with_returns = true, bool with_start = true) {
  const fs::path file = dir / "nsys.sqlite";
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  const std::string ret_col = with_returns ? ", returnValue INT NOT NULL" : "";
  exec(db, "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)");
  exec(db, "INSERT INTO StringIds VALUES (1, 'cudaMalloc_v3020'), (2, 'cudaLaunchKernel_v7000'), "
           "(3, 'cuLaunchKernel'), (4, 'cudaMemcpy_v3020'), (5, '_Z6vecAddPKfS0_Pfi'), (6, 'vecAdd(const float*, ...)')");
  for (const char* t : {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"})
    exec(db, std::string("CREATE TABLE ") + t +
                 " (start INT NOT NULL, end INT NOT NULL, eventClass INT NOT NULL, globalTid INT, correlationId INT, "
                 "nameId INT NOT NULL" + ret_col + ")");
  const std::string g = std::to_string(kGlobalTid);
  auto row = [&](int64_t start, int64_t end, int corr, int name, int ret) {
    return "(" + std::to_string(start) + ", " + std::to_string(end) + ", 0, " + g + ", " + std::to_string(corr) +
           ", " + std::to_string(name) + (with_returns ? ", " + std::to_string(ret) : "") + ")";
  };
  exec(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES " + row(1000, 5000, 1, 1, 0) + ", " +
               row(6000, 9000, 2, 2, 0) + ", " + row(10000, 12000, 4, 4, 1));
  exec(db, "INSERT INTO CUPTI_ACTIVITY_KIND_DRIVER VALUES " + row(6500, 8500, 3, 3, 0));
  exec(db, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, "
           "contextId INT, streamId INT, correlationId INT, globalPid INT, demangledName INT, shortName INT, "
           "mangledName INT, gridX INT, gridY INT, gridZ INT, blockX INT, blockY INT, blockZ INT)");
  exec(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (9500, 11500, 0, 1, 7, 2, " +
               std::to_string((int64_t(1) << 48) | (kPid << 24)) + ", 6, 6, 5, 256, 1, 1, 128, 1, 1)");
  exec(db, "CREATE TABLE DIAGNOSTIC_EVENT (timestamp INT, timestampType INT, source INT, severity INT, text TEXT, "
           "globalPid INT)");
  exec(db, "INSERT INTO DIAGNOSTIC_EVENT VALUES (0, 0, 0, 1, 'Profiling started', 0), "
           "(10, 0, 0, 2, 'CUPTI dropped 12 activity records: buffers full', 0), "
           "(20, 0, 0, 2, 'Some process did not exit cleanly', 0)");
  if (with_start) {
    exec(db, "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INT, utcTime TEXT, localTime TEXT)");
    exec(db, "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (" + std::to_string(kSessionStartUtc) + ", '', '')");
  }
  sqlite3_close(db);
  return file;
}

// A run folder with the program's folder in it, and `tracer` prepared to run /bin/true there.
struct PreparedRun {
  fs::path dir, prog;
  Launch launch{{"/bin/true"}, {}};
};
PreparedRun prepare(NsysTracer& tracer) {
  PreparedRun r{temp_dir("nsys"), {}};
  r.prog = r.dir / "target";
  fs::create_directory(r.prog);
  tracer.prepare(r.launch, Target{{"/bin/true"}, "none", r.prog}, r.dir);
  return r;
}

}  // namespace

// The capture as the reader streams it, its events kept in order.
struct ReadBack : NsysCapture {
  std::vector<Event> events;
};
ReadBack read_capture(const fs::path& file, int64_t realtime_minus_monotonic_ns) {
  ReadBack r;
  static_cast<NsysCapture&>(r) =
      read_nsys_capture(file, realtime_minus_monotonic_ns, [&r](Event&& e) { r.events.push_back(std::move(e)); });
  return r;
}

TEST(NsysCapture, ApiCallsAndKernelsOnTheHarnessClockWithCodesAndLaunches) {
  const fs::path dir = temp_dir("nsys");
  const ReadBack c = read_capture(make_capture(dir), kRealtimeMinusMonotonic);
  ASSERT_EQ(c.error, "");
  EXPECT_EQ(c.runtime_calls, 3);
  EXPECT_EQ(c.driver_calls, 1);
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.kernels_joined, 1);
  EXPECT_TRUE(c.return_codes);
  EXPECT_TRUE(c.missing_tables.empty());
  EXPECT_EQ(c.warnings, 2);          // severity above 1
  EXPECT_EQ(c.warnings_of_loss, 1);  // "dropped"
  ASSERT_EQ(c.warning_examples.size(), 2u);
  ASSERT_EQ(c.events.size(), 5u);
  const Event& malloc_call = c.events[0];
  EXPECT_EQ(malloc_call.layer, "runtime");
  EXPECT_EQ(malloc_call.name, "cudaMalloc");  // nsys's _v3020 is not part of the name
  EXPECT_EQ(malloc_call.ts, 1000 + kToMonotonic);
  EXPECT_EQ(malloc_call.dur, 4000);
  EXPECT_EQ(malloc_call.pid, kPid);
  EXPECT_EQ(malloc_call.tid, kTid);
  EXPECT_EQ(malloc_call.ret, 0);
  EXPECT_EQ(malloc_call.corr, 1u);
  EXPECT_EQ(c.events[2].name, "cudaMemcpy");
  EXPECT_EQ(c.events[2].ret, 1);  // the failed call keeps its code
  EXPECT_EQ(c.events[3].layer, "driver");
  EXPECT_EQ(c.events[3].name, "cuLaunchKernel");
  const Event& kernel = c.events[4];
  EXPECT_EQ(kernel.layer, "gpu-activity");
  EXPECT_EQ(kernel.name, "_Z6vecAddPKfS0_Pfi");  // mangled, as the other methods record it
  EXPECT_EQ(kernel.ts, 9500 + kToMonotonic);
  EXPECT_EQ(kernel.dur, 2000);
  EXPECT_EQ(kernel.pid, kPid);
  EXPECT_EQ(kernel.tid, kTid);  // the launching thread, through the correlation id
  EXPECT_EQ(kernel.args["launched_by"], "cudaLaunchKernel");
  EXPECT_EQ(kernel.args["grid"], nlohmann::json({256, 1, 1}));
  EXPECT_EQ(kernel.args["block"], nlohmann::json({128, 1, 1}));
  EXPECT_EQ(kernel.args["stream"], 7);
  // Streamed, the launching call (sent before its kernel was) still carries the kernel's
  // device; the other calls name none.
  EXPECT_EQ(c.events[1].name, "cudaLaunchKernel");
  EXPECT_EQ(c.events[1].device, 0);
  EXPECT_FALSE(c.events[0].device.has_value());
  EXPECT_FALSE(c.events[3].device.has_value()) << "the driver launch of another correlation id";
}

TEST(NsysCapture, AnExportWithoutReturnCodesSaysSoAndLeavesThemUnknown) {
  const ReadBack c = read_capture(make_capture(temp_dir("nsys"), false), kRealtimeMinusMonotonic);
  ASSERT_EQ(c.error, "");
  EXPECT_FALSE(c.return_codes);
  ASSERT_EQ(c.events.size(), 5u);
  EXPECT_FALSE(c.events[0].ret.has_value());
}

TEST(NsysCapture, MissingTablesAreNamedAndUnplaceableTimesAreAnError) {
  const fs::path dir = temp_dir("nsys");
  const ReadBack no_start = read_capture(make_capture(dir, true, false), kRealtimeMinusMonotonic);
  EXPECT_NE(no_start.error.find("TARGET_INFO_SESSION_START_TIME"), std::string::npos) << no_start.error;

  // A program that made no driver call and launched nothing: nsys creates no such tables.
  const fs::path only_runtime = temp_dir("nsys") / "nsys.sqlite";
  fs::copy_file(make_capture(temp_dir("nsys")), only_runtime);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(only_runtime.c_str(), &db), SQLITE_OK);
  exec(db, "DROP TABLE CUPTI_ACTIVITY_KIND_DRIVER");
  exec(db, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL");
  sqlite3_close(db);
  const ReadBack c = read_capture(only_runtime, kRealtimeMinusMonotonic);
  ASSERT_EQ(c.error, "");
  EXPECT_EQ(c.runtime_calls, 3);
  EXPECT_EQ(c.missing_tables, (std::vector<std::string>{"CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_KERNEL"}));
}

TEST(NsysCapture, RefusesLinksNonDatabasesAndUnknownLayouts) {
  const fs::path dir = temp_dir("nsys");
  const fs::path real = make_capture(dir);
  const fs::path link = dir / "link.sqlite";
  fs::create_symlink(real, link);
  EXPECT_NE(read_capture(link, 0).error, "");  // the program's user could point it anywhere

  const fs::path text = dir / "text.sqlite";
  std::ofstream(text) << "not a database\n";
  EXPECT_NE(read_capture(text, 0).error, "");
  EXPECT_NE(read_capture(dir / "absent.sqlite", 0).error, "");

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(real.c_str(), &db), SQLITE_OK);
  exec(db, "ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME RENAME COLUMN correlationId TO corr");
  sqlite3_close(db);
  const std::string error = read_capture(real, 0).error;
  EXPECT_NE(error.find("correlationId"), std::string::npos) << error;

  // Over what it may take in memory (half the memory available, here given): refused whole,
  // with the sizes; and a second hard link, as every file the program's user wrote.
  const fs::path big = make_capture(temp_dir("nsys"));
  const std::string over =
      read_nsys_capture(big, 0, [](Event&&) {}, fs::file_size(big) - 1).error;
  EXPECT_NE(over.find("it may take in memory"), std::string::npos) << over;
  const fs::path second = dir / "second.sqlite";
  fs::create_hard_link(big, second);
  EXPECT_NE(read_capture(second, 0).error.find("hard links"), std::string::npos) << read_capture(second, 0).error;
}

TEST(NsysCapture, RuntimeVersionSuffixesGoDriverRevisionsStay) {
  EXPECT_EQ(without_runtime_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(without_runtime_version("cudaGraphLaunch_v10000"), "cudaGraphLaunch");
  EXPECT_EQ(without_runtime_version("cudaFree"), "cudaFree");
  EXPECT_EQ(without_runtime_version("cudaFoo_v2"), "cudaFoo_v2");
}

TEST(NsysTracer, ACaptureOnlyInstallIsReportedLayerByLayerNotAsZero) {
  NsysTracer tracer("/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys", false);
  const auto [dir, prog, launch] = prepare(tracer);
  EXPECT_EQ(launch.argv, (std::vector<std::string>{"/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys",
                                                   "profile", "--trace=cuda", "--sample=none", "--cpuctxsw=none",
                                                   "--trace-fork-before-exec=true",
                                                   "--output=" + (prog / "nsys").string(), "/bin/true"}));
  EXPECT_FALSE(launch.wrapper);  // nsys writes its report after the program: it is not cut short
  // nsys-all: the same, recording every CUDA API (by default Nsight Systems skips some).
  NsysTracer all("/usr/bin/nsys", true);
  const auto [all_dir, all_prog, all_launch] = prepare(all);
  EXPECT_EQ(std::count(all_launch.argv.begin(), all_launch.argv.end(), "--cuda-trace-all-apis=true"), 1)
      << "nsys-all passes the flag before the program";
  EXPECT_EQ(all_launch.argv.back(), "/bin/true");

  std::ofstream(prog / "nsys.qdstrm") << "capture";
  EXPECT_TRUE(tracer.conversion(dir).empty());  // nothing to export
  const TracerReport r = tracer.finish(dir);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.layers.empty());
  for (const char* l : {"runtime", "driver", "gpu-activity"}) {
    ASSERT_TRUE(r.unobserved.count(l)) << l;
    EXPECT_NE(r.unobserved.at(l).find(".qdstrm"), std::string::npos) << r.unobserved.at(l);
  }
  EXPECT_FALSE(fs::exists(dir / cudatrace::kEventsFile));
}

TEST(NsysTracer, ExportsAReportAsTheProgramsUserAndReadsItsEvents) {
  NsysTracer tracer("/usr/bin/nsys", false);
  const auto [dir, prog, launch] = prepare(tracer);
  std::ofstream(prog / "nsys.nsys-rep") << "report";
  EXPECT_EQ(tracer.conversion(dir),
            (std::vector<std::string>{"/usr/bin/nsys", "export", "--type=sqlite",
                                      "--output=" + (prog / "nsys.sqlite").string(), (prog / "nsys.nsys-rep").string()}));
  make_capture(prog);  // what the export wrote
  tracer.converted(true, "");
  const TracerReport r = tracer.finish(dir);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.layers, (std::vector<std::string>{"runtime", "driver", "gpu-activity"}));
  EXPECT_TRUE(r.unobserved.empty());
  EXPECT_EQ(r.loss["kernels_without_launch"], 0);
  EXPECT_EQ(r.loss["nsys_warnings_of_loss"], 1);  // its own word on loss is a loss counter
  EXPECT_GT(r.match_slack_ns, 0);
  EXPECT_EQ(read_events(dir / cudatrace::kEventsFile).events.size(), 5u);

  // The export failed: every layer says why, nothing is read.
  NsysTracer failed("/usr/bin/nsys", false);
  const PreparedRun second = prepare(failed);
  std::ofstream(second.prog / "nsys.nsys-rep") << "report";
  failed.converted(false, "/usr/bin/nsys: exit 1 (see conversion/stderr.txt)");
  const TracerReport f = failed.finish(second.dir);
  ASSERT_TRUE(f.unobserved.count("gpu-activity"));
  EXPECT_NE(f.unobserved.at("gpu-activity").find("exit 1"), std::string::npos);
}

TEST(NsysLocate, NsysVariableWinsAndABadOneIsTheReason) {
  const fs::path dir = temp_dir("nsys");
  const fs::path fake = dir / "nsys";
  std::ofstream(fake) << "#!/bin/sh\n";
  fs::permissions(fake, fs::perms::owner_all);
  const char* old = std::getenv("NSYS");
  const std::string saved = old ? old : "";
  setenv("NSYS", fake.c_str(), 1);
  NsysLocation found = locate_nsys();
  EXPECT_EQ(found.nsys, fake);
  EXPECT_EQ(found.how, "NSYS");
  setenv("NSYS", (dir / "absent").c_str(), 1);
  found = locate_nsys();
  EXPECT_TRUE(found.nsys.empty());
  EXPECT_NE(found.how.find("not an executable"), std::string::npos) << found.how;
  if (old)
    setenv("NSYS", saved.c_str(), 1);
  else
    unsetenv("NSYS");
}

// nsys's agent, launcher and tools can outlive `nsys profile` (seen on the GPU host with the
// capture CLI of Nsight Compute 2025.3.1: `nsys --start-agent`, a daemon reparented to the
// harness, and nsys-launcher): the method says they are its own, by name, or by an
// executable of those names in the folder nsys was found in; nothing else.
TEST(NsysTracer, OwnsItsHelpersLeftBehindAndNothingElse) {
  const fs::path root = temp_dir("nsys-install");
  fs::create_directories(root / "host" / "target-linux-x64");
  fs::create_directories(root / "host" / "linux-desktop-glibc_2_11_3-x64");
  const fs::path nsys = root / "host" / "target-linux-x64" / "nsys";
  std::ofstream(nsys) << "#!/bin/sh\n";
  const NsysTracer tracer(nsys, false);
  for (const char* name : {"nsys", "nsys-launcher", "nsys-tee", "QdstrmImporter", "CudaGpuInfoDump"}) {
    const auto why = tracer.owns_leftover(name, "");
    ASSERT_TRUE(why) << name << ", its executable unreadable (it had ended)";
    EXPECT_NE(why->find("nsys's own helper (the tracer's, not the program's)"), std::string::npos) << *why;
  }
  EXPECT_TRUE(tracer.owns_leftover("renamed", (root / "host" / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter").string()));
  EXPECT_FALSE(tracer.owns_leftover("python3", "/usr/bin/python3"));
  EXPECT_FALSE(tracer.owns_leftover("sleep", ""));
  EXPECT_FALSE(tracer.owns_leftover("vecadd", (root / "host" / "vecadd").string())) << "in its folder, not its name";
  EXPECT_FALSE(tracer.owns_leftover("renamed", "/elsewhere/nsys-launcher")) << "its name, not its folder";
  // Any other method owns nothing.
  struct Plain : Tracer {
    void prepare(Launch&, const Target&, const fs::path&) override {}
    TracerReport finish(const fs::path&) override { return {}; }
  } plain;
  EXPECT_FALSE(plain.owns_leftover("nsys", ""));
}
