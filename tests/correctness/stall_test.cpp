// A run that can make no progress (a method that deadlocks the program, #44) ends in
// bounded time with its reason when --stall-timeout is given, and the matrix carries on;
// without the option nothing changes for a program that sleeps. No GPU needed: /bin/sleep
// waits as a deadlocked rank does, on no CPU and writing nothing.
#include <chrono>

#include "harness_run.h"

using namespace correctness;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TEST(Stall, ARunThatWaitsForeverEndsAsStalledAndTheMatrixCarriesOn) {
  const auto t0 = std::chrono::steady_clock::now();
  HarnessRun r = run_harness("--method none --reps 2 --stall-timeout 2 --timeout 300 --no-report -- /bin/sleep 1000");
  const double took = seconds_since(t0);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(took, 40) << "two runs of 2 s without progress each, not the 300 s timeout";
  ASSERT_TRUE(r.summary.contains("counts")) << r.output;
  EXPECT_EQ(r.summary["counts"]["runs"], 2) << "the second repetition ran after the first stalled";
  EXPECT_EQ(r.summary["counts"]["failed"], 2);
  for (int rep : {1, 2}) {
    const nlohmann::json run = r.run_json("cmd.none", rep);
    ASSERT_TRUE(run.contains("status")) << r.output;
    EXPECT_EQ(run["status"], "stalled");
    EXPECT_EQ(run["ok"], false);
    const std::string why = run["failures"][0].get<std::string>();
    EXPECT_EQ(why.rfind("stalled: no CPU time and no output for 2 s; pid ", 0), 0u) << why;
    EXPECT_NE(why.find(" sleep: 1 thread sleeping"), std::string::npos) << why;
    EXPECT_LT(run["wall_ns"].get<int64_t>(), 10'000'000'000);
    EXPECT_EQ(run["stall"]["stalled"], true) << run.dump();
    EXPECT_EQ(run["stall"]["processes"][0]["name"], "sleep") << run["stall"].dump();
  }
  EXPECT_NE(r.output.find("(stalled: no CPU time and no output for 2 s; pid "), std::string::npos) << r.output;
}

TEST(Stall, WithoutTheOptionASleepingProgramIsUnaffected) {
  // Longer than the stall above, and it exits 0 as it would untraced.
  HarnessRun r = run_harness("--method none --no-report -- /bin/sleep 3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json run = r.run_json("cmd.none");
  EXPECT_EQ(run["status"], "exited") << r.output;
  EXPECT_EQ(run["exit_code"], 0);
  EXPECT_EQ(run["ok"], true);
  EXPECT_FALSE(run.contains("stall")) << "the watch only speaks when a run is stopped";
  // With the option, a program that ends on its own ends as before.
  HarnessRun on = run_harness("--method none --stall-timeout 30 --no-report -- /bin/sleep 1");
  EXPECT_EQ(on.exit_code, 0) << on.output;
  EXPECT_EQ(on.run_json("cmd.none")["status"], "exited");
}

TEST(Stall, BadValueIsAUsageError) {
  HarnessRun r = run_harness("--stall-timeout soon -- /bin/true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--stall-timeout wants a positive number, got 'soon'"), std::string::npos) << r.output;
}
