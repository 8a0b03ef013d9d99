// The uprobe method on the errors workload (no GPU needed, root needed): with shared cudart
// the probes sit in libcudart.so, with static cudart on the cudart functions found in the
// executable's own symbol table; either way every runtime call is seen with its arguments
// and error code. (That the probes come off again is checked in privileged_test.cpp.)
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "common/event_store.h"
#include "harness_run.h"

using namespace correctness;

namespace {

// Runs errors under uprobe and checks the runtime layer; the run's record for more checks.
nlohmann::json expect_every_runtime_call(const std::string& linkage) {
  HarnessRun r = run_harness("--workload errors --method uprobe --linkage " + linkage);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json run = r.run_json("errors." + linkage + ".uprobe");
  if (r.exit_code != 0 || run.is_null()) return nullptr;
  EXPECT_TRUE(run["ok"].get<bool>()) << run["failures"].dump() << run["tracer"].dump();
  EXPECT_TRUE(run["ledger"]["consistent"].get<bool>()) << "probes must not change what the program sees";
  const nlohmann::json* rt = layer_of(run, "runtime");
  EXPECT_NE(rt, nullptr) << run["match"].dump() << run["tracer"]["notes"].dump();
  if (!rt) return nullptr;
  EXPECT_EQ((*rt)["expected"], 12);
  EXPECT_EQ((*rt)["matched"], 12) << (*rt)["examples"].dump();
  EXPECT_EQ((*rt)["phantom"], 0) << (*rt)["examples"].dump();
  EXPECT_EQ((*rt)["ret_equal"], (*rt)["ret_compared"]);
  EXPECT_GE((*rt)["ret_compared"].get<int>(), 11);
  EXPECT_EQ((*rt)["args_equal"], (*rt)["args_compared"]) << (*rt)["examples"].dump();
  EXPECT_GE((*rt)["args_compared"].get<int>(), 15);
  EXPECT_EQ((*rt)["order_violations"], 0);
  for (const char* counter : {"ring_full", "nested_too_deep", "exit_without_entry", "threads_full", "malformed_records"})
    EXPECT_EQ(run["tracer"]["loss"][counter], 0) << counter;
  const auto& notes = run["tracer"]["notes"];
  EXPECT_EQ(notes["functions_failed"], 0) << notes["attach_failures"].dump();
  EXPECT_GT(notes["probes_attached"].get<int>(), 300);
  if (!host().gpu) EXPECT_EQ(layer_of(run, "driver"), nullptr) << "no libcuda.so.1 here: the driver layer is not scored";
  return run;
}

}  // namespace

TEST(UprobeErrors, SharedCudartEveryRuntimeCallWithItsCode) {
  if (!host().root) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  nlohmann::json run = expect_every_runtime_call("shared");
  ASSERT_FALSE(run.is_null());
  EXPECT_NE(run["tracer"]["notes"]["runtime"]["file"].get<std::string>().find("libcudart.so"), std::string::npos);
}

TEST(UprobeErrors, StaticCudartFoundInTheExecutable) {
  if (!host().root) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  nlohmann::json run = expect_every_runtime_call("static");
  ASSERT_FALSE(run.is_null());
  EXPECT_NE(run["tracer"]["notes"]["runtime"]["found_via"].get<std::string>().find("symbol table"), std::string::npos);
}

// The cost floor: the same probes, programs that return at once. It must see nothing, and
// claim no layer, so that no one mistakes it for a tracer.
TEST(UprobeErrors, EmptyProgramsSeeNothing) {
  if (!host().root) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  HarnessRun r = run_harness("--workload errors --method uprobe-empty --linkage shared");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json run = r.run_json("errors.shared.uprobe-empty");
  EXPECT_TRUE(run["tracer"]["layers"].empty());
  EXPECT_EQ(run["tracer"]["notes"]["records"], 0);
  EXPECT_GT(run["tracer"]["notes"]["probes_attached"].get<int>(), 300);
}

TEST(UprobeErrors, BadSettingIsAUsageError) {
  HarnessRun r = run_harness("--workload errors --method uprobe --set uprobe.ring_mb=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("power of two"), std::string::npos) << r.output;
  r = run_harness("--workload errors --method uprobe --set uprobe.colour=blue");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no setting 'colour'"), std::string::npos) << r.output;
}

// Following what the traced processes load (#16): every copy of cudart or libcuda a process
// of the tree maps, whenever it maps it, is probed before any of its code runs.
namespace {

std::filesystem::path copy_to(const std::filesystem::path& from, const std::filesystem::path& dir,
                              const std::string& name) {
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(from, dir / name, std::filesystem::copy_options::overwrite_existing);
  return dir / name;
}

// A cudart to copy: the dlopen workload's private one (it travels with the build).
std::filesystem::path a_cudart() {
  const auto dir = std::filesystem::path(HARNESS_PATH).parent_path().parent_path() / "libexec" / "cudatrace" /
                   "private-cudart";
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("libcudart.so.", 0) == 0) return e.path();
  ADD_FAILURE() << "no libcudart.so.N in " << dir;
  return dir / "libcudart.so";
}

const nlohmann::json& following(const nlohmann::json& run) { return run["tracer"]["notes"]["following"]; }

// Files probed while the program ran (not before start), by file name.
std::map<std::string, nlohmann::json> probed_while_running(const nlohmann::json& run) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& f : run["tracer"]["notes"]["files_probed"])
    if (f["found"].get<std::string>().rfind("mapped by pid", 0) == 0)
      out[std::filesystem::path(f["file"].get<std::string>()).filename().string()] = f;
  return out;
}

// What load_cudarts said it did ("code LIB CODE" per call, then "calls N pid P") and the
// cudaGetDeviceCount events the method recorded.
struct CommandCalls {
  int printed = 0;
  int64_t pid = 0;                    // the process that made the calls (the child with --fork)
  std::multiset<int64_t> codes;       // the codes the program saw
  std::vector<cudatrace::Event> seen;
  std::string stdout_text;
};

CommandCalls run_load_cudarts(HarnessRun& r) {
  CommandCalls c;
  const auto dir = r.root / "runs" / "cmd.uprobe.r1";
  std::ifstream out(dir / "stdout.txt");
  c.stdout_text.assign(std::istreambuf_iterator<char>(out), {});
  std::istringstream lines(c.stdout_text);
  for (std::string word; lines >> word;) {
    if (word == "code") {
      std::string lib;
      int64_t code = 0;
      lines >> lib >> code;
      c.codes.insert(code);
    } else if (word == "calls") {
      std::string pid_word;
      lines >> c.printed >> pid_word >> c.pid;
    }
  }
  for (auto& e : cudatrace::read_events(dir / cudatrace::kEventsFile).events)
    if (e.name == "cudaGetDeviceCount") c.seen.push_back(std::move(e));
  return c;
}

// Every call the program made is recorded once, by the process that made it, with its code.
void expect_every_call(const CommandCalls& c, int calls) {
  ASSERT_EQ(c.printed, calls) << c.stdout_text;
  ASSERT_EQ(c.seen.size(), size_t(calls)) << c.stdout_text;
  std::multiset<int64_t> recorded;
  for (const auto& e : c.seen) {
    ASSERT_TRUE(e.ret.has_value());
    recorded.insert(*e.ret);
    EXPECT_EQ(e.pid, c.pid) << "recorded in another process than the one that called";
  }
  EXPECT_EQ(recorded, c.codes) << c.stdout_text;
}

}  // namespace

TEST(UprobeFollows, DlopenedCudartIsProbedBeforeItsFirstCall) {
  if (!host().root) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  HarnessRun r = run_harness("--workload dlopen --method uprobe");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json run = r.run_json("dlopen.shared.uprobe");
  const nlohmann::json* rt = layer_of(run, "runtime");
  ASSERT_NE(rt, nullptr) << run["unobserved"].dump() << run["tracer"]["notes"].dump();
  EXPECT_GT((*rt)["expected"].get<int>(), 0);
  EXPECT_EQ((*rt)["matched"], (*rt)["expected"]) << (*rt)["examples"].dump();
  EXPECT_EQ((*rt)["ret_equal"], (*rt)["ret_compared"]);
  const auto files = probed_while_running(run);
  const std::string cudart = a_cudart().filename().string();
  ASSERT_EQ(files.count(cudart), 1u) << run["tracer"]["notes"]["files_probed"].dump();
  EXPECT_NE(files.at(cudart)["file"].get<std::string>().find("private-cudart"), std::string::npos);
  EXPECT_GE(following(run)["holds"].get<int>(), 2) << "the start and the dlopen: " << following(run).dump();
  EXPECT_EQ(following(run)["resume_failures"], 0);
  EXPECT_EQ(run["tracer"]["loss"]["load_notices_lost"], 0);
}

// libprivatert.so carries its own cudart (with symbols), multiproc execs a static program:
// both are found as they are mapped, and every runtime call of the ledger is seen.
TEST(UprobeFollows, CudartInsideALibraryAndInAnExecdProgram) {
  if (!host().root) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  HarnessRun r = run_harness("--workload privatert,multiproc --method uprobe");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* label : {"privatert.shared.uprobe", "privatert.static.uprobe", "multiproc.static.uprobe"}) {
    SCOPED_TRACE(label);
    const nlohmann::json run = r.run_json(label);
    const nlohmann::json* rt = layer_of(run, "runtime");
    ASSERT_NE(rt, nullptr) << run["tracer"]["notes"].dump();
    EXPECT_EQ((*rt)["matched"], (*rt)["expected"]) << (*rt)["examples"].dump();
    const auto files = probed_while_running(run);
    const std::string wanted = std::string(label).rfind("privatert", 0) == 0 ? "libprivatert.so" : "vecadd.static";
    ASSERT_EQ(files.count(wanted), 1u) << run["tracer"]["notes"]["files_probed"].dump();
    EXPECT_NE(files.at(wanted)["role"].get<std::string>().find("statically"), std::string::npos);
  }
}

// The same cudart opened twice (one handle), a second copy elsewhere (another file), and
// all of it again in a child forked before anything was loaded.
TEST(UprobeFollows, SameCudartTwiceASecondCopyAndAForkedChild) {
  if (!host().root) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  const auto dir = testsupport::temp_dir("two-cudarts");
  const auto a = copy_to(a_cudart(), dir / "a", a_cudart().filename().string());
  const auto b = copy_to(a_cudart(), dir / "b", a_cudart().filename().string());
  for (const std::string fork : {"", "--fork "}) {
    SCOPED_TRACE(fork.empty() ? "in the traced process" : "in a forked child");
    HarnessRun r = run_harness("--method uprobe -- " + std::string(LOAD_CUDARTS) + " " + fork + a.string() + " " +
                               a.string() + " " + b.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_every_call(run_load_cudarts(r), 3);
    const nlohmann::json run = r.run_json("cmd.uprobe");
    int copies = 0;
    for (const auto& f : run["tracer"]["notes"]["files_probed"])
      copies += f["file"] == a.string() || f["file"] == b.string();
    EXPECT_EQ(copies, 2) << "one probe set per file: " << run["tracer"]["notes"]["files_probed"].dump();
    EXPECT_EQ(run["tracer"]["loss"]["load_notices_lost"], 0);
  }
}

// Twenty libraries loaded one after another: each probed at its load, the time the
// processes were held reported (the figure #16 asks for).
TEST(UprobeFollows, TwentyLibrariesLoadedOneAfterAnother) {
  if (!host().root) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  const auto dir = testsupport::temp_dir("twenty-cudarts");
  std::string libs;
  for (int i = 0; i < 20; ++i)
    libs += " " + copy_to(a_cudart(), dir / std::to_string(i), a_cudart().filename().string()).string();
  HarnessRun r = run_harness("--method uprobe -- " + std::string(LOAD_CUDARTS) + libs);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_every_call(run_load_cudarts(r), 20);
  const nlohmann::json run = r.run_json("cmd.uprobe");
  int copies = 0, functions = 0;  // (with a GPU, cudart's dlopen of libcuda is a file probed too)
  for (const auto& file : run["tracer"]["notes"]["files_probed"]) {
    if (file["file"].get<std::string>().rfind(dir.string(), 0) != 0) continue;
    ++copies;
    functions = file["functions"].get<int>();
    EXPECT_EQ(file["functions_failed"], 0) << file.dump();
  }
  EXPECT_EQ(copies, 20) << run["tracer"]["notes"]["files_probed"].dump();
  const auto& f = following(run);
  EXPECT_GE(f["holds"].get<int>(), 21);
  std::printf("20 libraries (%d functions each): %d holds, %.1f ms held in all, longest %.1f ms\n", functions,
              f["holds"].get<int>(), f["held_ms_total"].get<double>(), f["held_ms_max"].get<double>());
}

// A library with cudart linked in and its symbols stripped cannot be probed: the run
// says so by name, and the runtime layer is reported as partly observed.
TEST(UprobeFollows, StrippedStaticCudartIsNamedNotSilentlyMissed) {
  if (!host().root) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  const std::filesystem::path workloads = std::filesystem::path(HARNESS_PATH).parent_path().parent_path() /
                                          "libexec" / "cudatrace";
  const auto dir = testsupport::temp_dir("stripped-privatert");
  copy_to(workloads / "privatert.shared", dir, "privatert.shared");
  const auto lib = copy_to(workloads / "libprivatert.so", dir, "libprivatert.so");
  ASSERT_EQ(testsupport::run_command("strip --strip-all " + lib.string()).exit_code, 0);
  HarnessRun r = run_harness("--method uprobe -- " + (dir / "privatert.shared").string() + " --host_path 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json run = r.run_json("cmd.uprobe");
  std::string why;
  for (const auto& p : run["partly_observed"])
    if (p["layer"] == "runtime") why = p["reason"];
  EXPECT_NE(why.find("runtime calls from " + lib.string() + " not observable"), std::string::npos)
      << run["partly_observed"].dump() << run["tracer"]["notes"].dump();
  EXPECT_NE(r.output.find("PARTLY OBSERVED"), std::string::npos) << r.output;
}
