// The errors workload under `none`, on both linkages: runs with or without a GPU. Without
// one, every call fails with the same driver error and is still recorded; with one, each
// injected failure returns its own code and the program carries on.
#include "ledger/ledger.h"
#include "harness_run.h"

using namespace correctness;

class ErrorsWorkload : public ::testing::TestWithParam<std::string> {};

TEST_P(ErrorsWorkload, EveryCallRecordedWithItsCode) {
  const std::string linkage = GetParam();
  HarnessRun r = run_harness("--workload errors --method none --linkage " + linkage);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.summary["combos"].size(), 1u) << r.output;
  EXPECT_EQ(r.summary["combos"][0]["ok"], 1);

  nlohmann::json run = r.run_json("errors." + linkage + ".none");
  ASSERT_TRUE(run.contains("ledger")) << run.dump(2);
  const auto& ledger = run["ledger"];
  EXPECT_TRUE(ledger["consistent"].get<bool>()) << ledger["problems"].dump();
  EXPECT_EQ(ledger["injected_checked"], 10);
  EXPECT_EQ(ledger["records"], 12);

  // Read the ledger itself: the codes, call by call.
  cudatrace::EventStream s = cudatrace::read_events(r.root / "runs" / ("errors." + linkage + ".none.r1") / "target" / ::ledger::kFileName);
  std::map<std::string, std::vector<int64_t>> rets;
  for (const auto& e : s.events) rets[e.name].push_back(e.ret.value_or(-1));
  ASSERT_EQ(rets["cudaMalloc"].size(), 3u);
  if (!host().gpu) {
    for (const auto& [name, codes] : rets) {
      if (name == "cudaRuntimeGetVersion" || name == "cudaLaunchKernel") continue;
      for (auto c : codes) EXPECT_EQ(c, 35) << name << ": without a driver every call fails with 35";
    }
  } else {
    EXPECT_EQ(rets["cudaMalloc"][0], 2) << "OOM: cudaErrorMemoryAllocation";
    EXPECT_EQ(rets["cudaMalloc"][1], 1) << "invalid value";
    EXPECT_EQ(rets["cudaMalloc"][2], 0);
    // CUDA 13.0 (measured on the H100): cudaErrorInvalidValue; older: ...InvalidConfiguration.
    EXPECT_TRUE(rets["cudaGetLastError"][0] == 1 || rets["cudaGetLastError"][0] == 9) << rets["cudaGetLastError"][0];
    EXPECT_EQ(rets["cudaMemcpy"][0], 1) << "copy from a bad device pointer: cudaErrorInvalidValue";
    EXPECT_EQ(rets["cudaFree"][1], 1) << "double free: cudaErrorInvalidValue";
    EXPECT_EQ(rets["cudaSetDevice"][0], 101) << "cudaErrorInvalidDevice";
    EXPECT_EQ(rets["cudaDeviceSynchronize"][0], 0) << "no injected error may be sticky";
  }
}

INSTANTIATE_TEST_SUITE_P(Linkage, ErrorsWorkload, ::testing::Values("static", "shared"));

TEST(HarnessMatrix, CrashIsRecordedAndTheRestRuns) {
  HarnessRun r = run_harness("--method none --reps 2 -- /bin/sh -c 'kill -SEGV $$'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  ASSERT_EQ(r.summary["combos"].size(), 1u) << r.output;
  EXPECT_EQ(r.summary["combos"][0]["failed"], 2);  // the second repetition still ran
  EXPECT_EQ(r.summary["combos"][0]["statuses"], nlohmann::json({"crashed", "crashed"}));
  EXPECT_NE(r.output.find("killed by signal 11"), std::string::npos) << r.output;
}

TEST(HarnessMatrix, HangIsKilledAtTheTimeout) {
  HarnessRun r = run_harness("--method none --timeout 0.3 -- /bin/sleep 30");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.summary["combos"][0]["statuses"], nlohmann::json({"timeout"}));
  EXPECT_LT(r.summary["combos"][0]["wall_ns"]["median"].get<int64_t>(), 5'000'000'000);
}

TEST(HarnessMatrix, UnavailableMethodsAreSkippedWithTheirReason) {
  // With nothing on PATH, strace cannot be found: the harness must say so and run the rest.
  HarnessRun r = run_harness("--workload errors --linkage static --method none,strace", "PATH=/nonexistent");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.summary["skipped"].size(), 1u) << r.summary.dump(2);
  EXPECT_EQ(r.summary["skipped"][0]["method"], "strace");
  EXPECT_EQ(r.summary["skipped"][0]["reason"], "method strace: strace not found on PATH (apt-get install strace)");
  EXPECT_EQ(r.summary["combos"][0]["method"], "none");
  EXPECT_EQ(r.summary["combos"][0]["ok"], 1);
}

TEST(HarnessMatrix, NothingRunnableExits3) {
  if (host().gpu) GTEST_SKIP() << "a GPU is present: vecadd can run";
  HarnessRun r = run_harness("--workload vecadd --method none");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("needs a GPU"), std::string::npos) << r.output;
}
