// The uprobe method on the errors workload (no GPU needed, root needed): with shared cudart
// the probes sit in libcudart.so, with static cudart on the cudart functions found in the
// executable's own symbol table; either way every runtime call is seen with its arguments
// and error code. (That the probes come off again is checked in privileged_test.cpp.)
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
