// The preload method on the errors workload (no GPU needed): with shared cudart every
// runtime call is seen with its arguments and error code; with static cudart the runtime
// layer is out of reach and is not scored.
#include "harness_run.h"

using namespace correctness;

TEST(PreloadErrors, SharedCudartEveryRuntimeCallWithItsCode) {
  HarnessRun r = run_harness("--workload errors --method preload --linkage shared");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json run = r.run_json("errors.shared.preload");
  ASSERT_TRUE(run["ok"].get<bool>()) << run["failures"].dump();
  EXPECT_TRUE(run["ledger"]["consistent"].get<bool>()) << "the shim must not change what the program sees";
  const nlohmann::json* rt = layer_of(run, "runtime");
  ASSERT_NE(rt, nullptr) << run["match"].dump();
  EXPECT_EQ((*rt)["expected"], 12);
  EXPECT_EQ((*rt)["matched"], 12) << (*rt)["examples"].dump();
  EXPECT_EQ((*rt)["phantom"], 0);
  EXPECT_EQ((*rt)["ret_equal"], (*rt)["ret_compared"]);
  EXPECT_GE((*rt)["ret_compared"].get<int>(), 11);
  EXPECT_EQ((*rt)["args_equal"], (*rt)["args_compared"]) << (*rt)["examples"].dump();
  EXPECT_EQ((*rt)["order_violations"], 0);
  for (const char* counter : {"dropped", "missing", "unterminated_files", "corrupt_records"})
    EXPECT_EQ(run["tracer"]["loss"][counter], 0) << counter;
  if (!host().gpu) {
    EXPECT_EQ(layer_of(run, "driver"), nullptr) << "no driver: nothing to score there";
    ASSERT_EQ(run["unobserved"].size(), 1u) << run["unobserved"].dump();
    EXPECT_EQ(run["unobserved"][0]["layer"], "driver");
    EXPECT_NE(run["unobserved"][0]["reason"].get<std::string>().find("never reached libcuda"), std::string::npos);
  }
}

TEST(PreloadErrors, StaticCudartHidesTheRuntimeLayer) {
  HarnessRun r = run_harness("--workload errors --method preload --linkage static");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json run = r.run_json("errors.static.preload");
  EXPECT_TRUE(run["ledger"]["consistent"].get<bool>());
  EXPECT_EQ(layer_of(run, "runtime"), nullptr) << "static cudart is inside the executable: no preload reaches it";
  EXPECT_EQ(run["tracer"]["notes"]["records"].get<int>() > 0, host().gpu)
      << "without a driver a static binary makes no call the shim can see";
}
