// The workloads that behave like real software (graphs, driverapi, dlopen, privatert,
// multiproc) and command runs: whatever a method sees, every layer it exists to observe is
// either scored or named as not observed with its reason, never a silent zero. The host-
// side cases run anywhere (CI: no GPU, root); the GPU cases skip without one.
#include <unistd.h>

#include <algorithm>

#include "harness_run.h"
#include "tracers/tracer.h"

using namespace correctness;
using nlohmann::json;

namespace {

// Methods of `wanted` that can run here.
std::string runnable(std::initializer_list<const char*> wanted) {
  std::string out;
  for (const char* m : wanted)
    if (cudatrace::availability(*cudatrace::find_method(m), host()).ok) out += (out.empty() ? "" : ",") + std::string(m);
  return out;
}

// The registry's methods that can run here, of the kinds given; with `host_side`, only those
// that need no GPU. From the registry alone, so that a new method is held to this too.
std::string runnable_from_registry(std::initializer_list<cudatrace::MethodKind> kinds, bool host_side) {
  std::string out;
  for (const auto& m : cudatrace::methods()) {
    if (std::find(kinds.begin(), kinds.end(), m.kind) == kinds.end() || (host_side && m.needs_gpu)) continue;
    if (cudatrace::availability(m, host()).ok) out += (out.empty() ? "" : ",") + m.name;
  }
  return out;
}

// Every layer the run's method exists to observe is scored or named, with a reason; and a
// layer scored short of the ledger carries its reason too (partly_observed).
void expect_every_layer_accounted_for(const json& run) {
  const cudatrace::Method& m = *cudatrace::find_method(run["method"].get<std::string>());
  for (const auto& l : m.layers) {
    bool scored = false, named = false;
    for (const auto& s : run["match"]) scored = scored || s["layer"] == l;
    for (const auto& u : run["unobserved"])
      if (u["layer"] == l) {
        named = true;
        EXPECT_FALSE(u["reason"].get<std::string>().empty()) << run.dump(1);
      }
    EXPECT_TRUE(scored != named) << m.name << " " << l << " must be scored or named, once: " << run["match"].dump()
                                 << run["unobserved"].dump();
  }
  for (const auto& s : run["match"]) {
    if (s["matched"].get<int64_t>() >= s["expected"].get<int64_t>()) continue;
    std::string reason;
    for (const auto& p : run["partly_observed"])
      if (p["layer"] == s["layer"]) reason = p["reason"].get<std::string>();
    EXPECT_FALSE(reason.empty()) << m.name << " saw " << s["matched"] << " of " << s["expected"] << " of its "
                                 << s["layer"] << " layer and gave no reason: " << run["partly_observed"].dump();
    EXPECT_EQ(reason.find("names no limit"), std::string::npos) << m.name << ": " << reason;
  }
}

const char* const kHostWorkloads = "graphs,dlopen,privatert,multiproc";

}  // namespace

TEST(RealPatterns, HostSidePathUnderEveryHostSideMethod) {
  const std::string methods =
      runnable_from_registry({cudatrace::MethodKind::kMethod, cudatrace::MethodKind::kReference}, true);
  HarnessRun r = run_harness(std::string("--workload ") + kHostWorkloads + " --method " + methods);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_GE(r.summary["combos"].size(), 7u * 2) << r.output;  // dlopen has one build
  for (const auto& c : r.summary["combos"]) {
    const std::string label = c["workload"].get<std::string>() + "." + c["linkage"].get<std::string>() + "." +
                              c["method"].get<std::string>();
    SCOPED_TRACE(label);
    const json run = r.run_json(label);
    ASSERT_TRUE(run.contains("ledger")) << r.output;
    EXPECT_TRUE(run["ledger"]["consistent"].get<bool>()) << run["ledger"]["problems"].dump();
    expect_every_layer_accounted_for(run);
    if (!host().gpu) EXPECT_TRUE(run["ledger"]["info"].contains("host_path_only")) << run["ledger"].dump();
    if (c["workload"] == "multiproc")
      EXPECT_EQ(run["ledger"]["processes"], 4) << "parent, two workers and the exec'd vecadd each write a ledger";
    if (c["method"] == "preload" && c["linkage"] == "static") {
      ASSERT_FALSE(run["unobserved"].empty());
      EXPECT_EQ(run["unobserved"][0]["layer"], "runtime");
      EXPECT_NE(run["unobserved"][0]["reason"].get<std::string>().find("statically"), std::string::npos);
    }
  }
  EXPECT_NE(r.output.find("NOT OBSERVED ("), std::string::npos) << "the console names unobserved layers";
  EXPECT_GT(r.summary["counts"]["layers_not_observed"].get<int>(), 0);
}

// driverapi links libcuda: on a machine without a driver it runs on the toolkit's stub,
// whose every function returns CUDA_ERROR_STUB_LIBRARY (34), as a JIT launcher would in CI.
TEST(RealPatterns, DriverApiOnTheStubLibcudaIsRecordedWithItsCode) {
  if (host().gpu) GTEST_SKIP() << "a driver is installed: the stub would shadow it";
  const std::filesystem::path stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no " << stub;
  const auto dir = testsupport::temp_dir("stub-libcuda");
  std::filesystem::create_symlink(stub, dir / "libcuda.so.1");
  const std::string methods = runnable({"none", "preload", "uprobe"});
  HarnessRun r = run_harness("--workload driverapi --method " + methods, "LD_LIBRARY_PATH=" + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& c : r.summary["combos"]) {
    const std::string label = "driverapi." + c["linkage"].get<std::string>() + "." + c["method"].get<std::string>();
    SCOPED_TRACE(label);
    const json run = r.run_json(label);
    EXPECT_EQ(run["ledger"]["counts"], json({{"cuInit", 1}})) << run["ledger"].dump();
    expect_every_layer_accounted_for(run);
    if (c["method"] == "none") continue;
    const json* drv = layer_of(run, "driver");
    ASSERT_NE(drv, nullptr) << run.dump(1);
    EXPECT_EQ((*drv)["expected"], 1);
    EXPECT_EQ((*drv)["matched"], 1) << (*drv)["examples"].dump();
    EXPECT_EQ((*drv)["ret_equal"], 1) << "cuInit's code (34, the stub) as the program got it";
  }
}

TEST(RealPatterns, CommandWithoutCudaGetsAVerdictNotACleanZero) {
  const std::string methods =
      runnable_from_registry({cudatrace::MethodKind::kMethod, cudatrace::MethodKind::kReference}, true);
  HarnessRun r = run_harness("--method " + methods + " -- /bin/true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(r.summary.contains("verdict")) << r.output;
  const json& v = r.summary["verdict"];
  // A row for every layer of every method that ran.
  size_t expected_rows = 0;
  for (const auto& c : r.summary["combos"]) expected_rows += cudatrace::find_method(c["method"])->layers.size();
  ASSERT_EQ(v["coverage"].size(), expected_rows) << v.dump(1);
  for (const auto& row : v["coverage"]) {
    SCOPED_TRACE(row.dump());
    if (row["layer"] == "driver") EXPECT_EQ(row["status"], "not observed") << "/bin/true never loads libcuda";
    if (row["status"] == "not observed") EXPECT_FALSE(row["reason"].get<std::string>().empty());
    if (row["layer"] == "syscall") EXPECT_EQ(row["status"], "complete");
    if (row["layer"] == "runtime" && row["status"] != "not observed") EXPECT_EQ(row["status"], "nothing to see");
  }
  // The console ends on one row per method, as summary.json's "methods" decided it, and says
  // where the rest is.
  for (const auto& c : r.summary["combos"]) {
    if (c["method"] == "none") continue;
    const json* m = nullptr;
    for (const auto& e : r.summary["methods"])
      if (e["method"] == c["method"]) m = &e;
    ASSERT_NE(m, nullptr) << c["method"] << ": " << r.summary["methods"].dump(1);
    EXPECT_TRUE((*m)["command"].is_object()) << m->dump();
    EXPECT_NE(r.output.find("\n  " + c["method"].get<std::string>() + " "), std::string::npos) << r.output;
  }
  EXPECT_NE(r.output.find("every program, layer and reason: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("NOT OBSERVED"), std::string::npos) << r.output;
}

// With a GPU: each workload's own result check passes under `none`, and the ledger holds
// what each pattern is about.
class RealPatternsGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(RealPatternsGpu, ResultsRightAndLedgerComplete) {
  if (!host().gpu) GTEST_SKIP() << "no GPU: " << host().gpu_reason;
  const std::string workload = GetParam();
  HarnessRun r = run_harness("--workload " + workload + " --method none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& c : r.summary["combos"]) {
    const json run = r.run_json(workload + "." + c["linkage"].get<std::string>() + ".none");
    SCOPED_TRACE(run["linkage"].dump());
    EXPECT_EQ(run["exit_code"], 0) << "the workload's own result check";
    const json& ledger = run["ledger"];
    EXPECT_TRUE(ledger["consistent"].get<bool>()) << ledger["problems"].dump();
    EXPECT_FALSE(ledger["info"].contains("host_path_only"));
    if (workload == "graphs") {
      EXPECT_EQ(ledger["executions"], 3) << "three execution records";
      EXPECT_EQ(ledger["counts"]["cudaGraphLaunch"], 30);
    } else if (workload == "driverapi") {
      EXPECT_EQ(ledger["injected_checked"], 3);
      EXPECT_EQ(ledger["counts"]["cuLaunchKernelEx"], 21);
    } else if (workload == "privatert") {
      EXPECT_EQ(ledger["counts"]["cudaLaunchKernel"], 20) << "10 by the program, 10 by the library";
    } else if (workload == "multiproc") {
      EXPECT_EQ(ledger["processes"], 4);
    } else if (workload == "dlopen") {
      EXPECT_EQ(ledger["counts"]["cudaLaunchKernel"], 20);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workloads, RealPatternsGpu,
                         ::testing::Values("graphs", "driverapi", "dlopen", "privatert", "multiproc"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// With a GPU, every method that can run here on every workload: each layer scored or named,
// and every layer seen in part with its reason.
TEST(RealPatternsGpuMatrix, EveryMethodLayerScoredOrNamed) {
  if (!host().gpu) GTEST_SKIP() << "no GPU: " << host().gpu_reason;
  const std::string methods = runnable_from_registry({cudatrace::MethodKind::kMethod}, false);
  HarnessRun r = run_harness("--workload all --method " + methods);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.output;
  for (const auto& c : r.summary["combos"]) {
    const std::string label = c["workload"].get<std::string>() + "." + c["linkage"].get<std::string>() + "." +
                              c["method"].get<std::string>();
    SCOPED_TRACE(label);
    const json run = r.run_json(label);
    if (run["ok"] == true) expect_every_layer_accounted_for(run);
  }
}
