// Per-process verdicts after a fork: a parent that launches 50 kernels before it forks a
// child that starts CUDA anew and launches 17 (tests/support/fork_after_cuda). Each method's
// processes must be paired with the reference's parent and child as they are, never the
// child with the parent (it read "17 of 50" on the parent). GPU only: skips without one.
#include "harness_run.h"

using namespace correctness;
using nlohmann::json;

TEST(ForkPairing, AParentThatUsedCudaBeforeItsChildIsPairedWithItself) {
  if (!host().gpu) GTEST_SKIP() << "no GPU: " << host().gpu_reason;
  HarnessRun r = run_harness("--method preload,cupti,devhook,sanitizer -- " + std::string(FORK_AFTER_CUDA));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The verdict per process as summary.json holds it (the console's end shows the table of
  // methods, not these lines).
  const json& per_device = r.summary["verdict"]["per_device"];
  EXPECT_EQ(per_device["processes"].size(), 2u) << per_device.dump(1);
  EXPECT_TRUE(per_device.value("short", json::object()).empty()) << per_device.dump(1);
  EXPECT_EQ(r.output.find("SHORT"), std::string::npos) << r.output;
  for (const auto& [method, layer] : {std::pair{"preload", "driver"}, {"cupti", "driver"}, {"cupti", "gpu-activity"},
                                      {"devhook", "device"}, {"sanitizer", "device"}}) {
    size_t rows = 0;
    for (const auto& row : per_device["rows"]) rows += row["method"] == method && row["layer"] == layer;
    EXPECT_GE(rows, 2u) << method << " " << layer << ": a row per process: " << per_device.dump(1);
  }
  // 67 launches of 256 blocks, the parent's and the child's, each counted once.
  for (const auto& row : r.summary["verdict"]["coverage"])
    if (row["layer"] == "device") {
      EXPECT_EQ(row["blocks"]["seen"], 17152) << row.dump();
      EXPECT_EQ(row["blocks"]["reference"], 17152) << row.dump();
    }
}
