// The jaxprof method on a GPU, end to end: the harness runs tests/real_programs/jax_jit_loop.py
// under jaxprof and cupti (the reference a command is scored against), and each layer gets
// its verdict: kernels seen with no loss, the few driver calls XLA keeps, the runtime layer
// named not observed with why. Skipped with the reason where there is no GPU or no jax; cupti
// skipped (needs root) leaves jaxprof's own checks.
#include <gtest/gtest.h>

#include "harness_run.h"
#include "tracers/tracer.h"

using namespace correctness;
using nlohmann::json;

TEST(GpuJaxprof, JitLoopKernelsSeenAndEveryLayerJudged) {
  if (!host().gpu) GTEST_SKIP() << "no GPU: " << host().gpu_reason;
  const cudatrace::Availability a = cudatrace::availability(*cudatrace::find_method("jaxprof"), host());
  if (!a.ok) GTEST_SKIP() << "jaxprof cannot run here: " << a.reason;
  const std::string program = std::string(CUDATRACE_SOURCE_DIR) + "/tests/real_programs/jax_jit_loop.py";
  HarnessRun r = run_harness("--method jaxprof,cupti -- python3 " + program + " 20");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json run = r.run_json("cmd.jaxprof");
  ASSERT_TRUE(run.is_object()) << r.output;
  const json& tracer = run["tracer"];
  for (const auto& [counter, n] : tracer["loss"].items()) EXPECT_EQ(n, 0) << counter << ": " << tracer["notes"].dump();
  EXPECT_GE(tracer["notes"]["processes_profiled"].get<int>(), 1) << tracer["notes"].dump();
  EXPECT_GT(tracer["notes"]["kernels"].get<int>(), 20) << tracer["notes"].dump();  // 20 steps, several kernels each
  EXPECT_GT(tracer["notes"]["launches_named_by_kernel"].get<int>(), 0);
  size_t rows = 0;
  for (const auto& row : r.summary["verdict"]["coverage"]) {
    if (row["method"] != "jaxprof") continue;
    SCOPED_TRACE(row.dump());
    ++rows;
    if (row["layer"] == "runtime") {
      EXPECT_EQ(row["status"], "not observed");
      EXPECT_NE(row["reason"].get<std::string>().find("no runtime call"), std::string::npos);
    } else {
      EXPECT_NE(row["status"], "not observed");  // driver (a few calls) and gpu-activity
    }
  }
  EXPECT_EQ(rows, 3u) << r.summary["verdict"].dump(1);
}
