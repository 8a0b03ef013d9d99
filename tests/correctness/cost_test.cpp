// The cost mode end to end, without a GPU: commands and the errors workload under none and
// preload (which needs nothing but LD_PRELOAD), every run made and checked by the matrix.
#include "harness_run.h"

using namespace correctness;
using json = nlohmann::json;

namespace {

const json& method_of(const json& program, const std::string& name) {
  for (const auto& m : program["methods"])
    if (m["method"] == name) return m;
  static const json missing;
  return missing;
}

}  // namespace

TEST(Cost, RoundsRotateAndEveryMethodGetsItsRatio) {
  HarnessRun r = run_harness("--cost --reps 3 --method preload -- /bin/true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(r.summary.contains("cost")) << r.output;
  const json& cost = r.summary["cost"];
  EXPECT_EQ(cost["rounds"]["planned"], 3);
  EXPECT_EQ(cost["rounds"]["done"], 3);
  ASSERT_EQ(cost["programs"].size(), 1u);
  const json& p = cost["programs"][0];
  EXPECT_EQ(p["program"], "command");
  const json& none = method_of(p, "none");
  const json& preload = method_of(p, "preload");
  ASSERT_FALSE(none.is_null()) << "none is added and runs in every round";
  ASSERT_EQ(none["runs"].size(), 3u);
  ASSERT_EQ(preload["runs"].size(), 3u);
  // Round 1 starts with none, round 2 with preload, round 3 with none again.
  std::vector<int> places;
  for (const auto& run : none["runs"]) places.push_back(run["position"]);
  EXPECT_EQ(places, (std::vector<int>{0, 1, 0}));
  EXPECT_TRUE(preload["ratio"]["value"].get<double>() > 0);
  // Three rounds give no 95% interval (6 do), and the summary and the console say why.
  EXPECT_TRUE(preload["ratio"]["ci95"].is_null());
  EXPECT_NE(preload["ratio"].value("why_no_interval", "").find("too few rounds for an interval"), std::string::npos)
      << preload["ratio"].dump();
  EXPECT_NE(r.output.find("too few for an interval"), std::string::npos) << r.output;
  // /bin/true never reaches libcuda: preload's driver layer is not observed in any run, so
  // its figures come from marked runs, and say so.
  EXPECT_EQ(preload["basis"], "marked runs (no clean run)");
  ASSERT_EQ(preload["marks"].size(), 1u);
  EXPECT_EQ(preload["marks"][0]["mark"], "layer not observed");
  EXPECT_EQ(none["basis"], "clean runs");
  EXPECT_NE(r.output.find("[figures from marked runs]"), std::string::npos) << r.output;
  // Every run is a matrix run: its own folder, checked against the untraced ending.
  EXPECT_EQ(r.run_json("cmd.preload", 2)["untraced_check"]["same"], true);
  EXPECT_NE(p["startup_why"].get<std::string>().find("CUDATRACE_STARTUP_MARK"), std::string::npos);
  EXPECT_NE(r.output.find("round 3/3, done"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("vs none [95%]"), std::string::npos) << "the screen of results at the end:\n" << r.output;
  // The matrix's own summary of the same runs: three repetitions of each combination.
  for (const auto& c : r.summary["combos"]) EXPECT_EQ(c["reps"], 3);
}

TEST(Cost, AFailedMethodIsMarkedAndGivesNoRatio) {
  HarnessRun r = run_harness("--cost --reps 3 --method preload -- /bin/sh -c 'test -z \"$LD_PRELOAD\"'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const json& preload = method_of(r.summary["cost"]["programs"][0], "preload");
  EXPECT_EQ(preload["counts"]["failed"], 3);
  EXPECT_EQ(preload["basis"], "nothing (every run failed)");
  EXPECT_TRUE(preload["ratio"].is_null());
  EXPECT_EQ(preload["why_no_ratio"], "every run failed");
  const json* failed = nullptr;
  for (const auto& m : preload["marks"])
    if (m["mark"] == "failed") failed = &m;
  ASSERT_TRUE(failed) << preload.dump();
  EXPECT_EQ((*failed)["rounds"], json({1, 2, 3}));
  EXPECT_NE((*failed)["detail"].get<std::string>().find("ended otherwise than untraced"), std::string::npos);
  EXPECT_NE(r.output.find("failed x3"), std::string::npos) << r.output;
}

TEST(Cost, AProgramThatCannotRunHereIsSkippedWithItsReason) {
  HarnessRun r = run_harness(
      "--cost --reps 3 --method preload -- /bin/sh -c 'echo starting; echo \"needs torch: No module named torch\" >&2; "
      "exit 77'");
  EXPECT_EQ(r.exit_code, 3) << "nothing could run here\n" << r.output;
  const json& p = r.summary["cost"]["programs"][0];
  EXPECT_EQ(p["skipped"], "the program says it cannot run here (exit 77): needs torch: No module named torch");
  EXPECT_EQ(r.summary["counts"]["failed"], 0) << "skipped, not failed";
  EXPECT_EQ(r.summary["counts"]["runs"], 0);
  ASSERT_EQ(r.summary["skipped"].size(), 2u);
  for (const auto& s : r.summary["skipped"]) EXPECT_EQ(s["reason"], p["skipped"]);
  EXPECT_FALSE(r.run_json("cmd.preload").contains("ok")) << "nothing traced ran";
  EXPECT_NE(r.output.find("skipped: the program says it cannot run here"), std::string::npos) << r.output;
}

TEST(Cost, ACommandsStartUpMarkSplitsItsRuns) {
  const char* marks =
      "python3 -c 'import os, time; time.sleep(0.05); "
      "open(os.environ[\"CUDATRACE_STARTUP_MARK\"], \"a\").write(f\"{time.clock_gettime_ns(time.CLOCK_MONOTONIC)} set up\\n\"); "
      "time.sleep(0.05)'";
  HarnessRun r = run_harness(std::string("--cost --reps 3 --method preload -- ") + marks);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json& p = r.summary["cost"]["programs"][0];
  EXPECT_EQ(p["startup_source"], "the program's start-up mark: set up");
  for (const char* name : {"none", "preload"}) {
    const json& m = method_of(p, name);
    ASSERT_TRUE(m["median_startup_ns"].is_number()) << name;
    EXPECT_GE(m["median_startup_ns"].get<double>(), 50e6) << name;
    EXPECT_GE(m["median_rest_ns"].get<double>(), 50e6) << name;
  }
  EXPECT_TRUE(method_of(p, "preload")["startup_ratio"].is_object());
  EXPECT_TRUE(r.run_json("cmd.none")["startup"]["ns"].is_number());
}

TEST(Cost, TheErrorsWorkloadOnBothLinkages) {
  HarnessRun r = run_harness("--cost --reps 3 --workload errors --method preload --time-budget 600");
  ASSERT_TRUE(r.summary.contains("cost")) << r.output;
  const json& cost = r.summary["cost"];
  EXPECT_EQ(cost["time_budget_s"], 600);
  ASSERT_EQ(cost["programs"].size(), 2u) << cost.dump();
  for (const auto& p : cost["programs"]) {
    const json& preload = method_of(p, "preload");
    ASSERT_EQ(preload["counts"]["runs"], 3) << p["program"];
    // Whatever preload observed there, a run it marked is counted and its basis said.
    const int marked = preload["counts"]["runs"].get<int>() - preload["counts"]["clean"].get<int>();
    EXPECT_EQ(preload["basis"] == "marked runs (no clean run)", preload["counts"]["clean"] == 0 && marked > 0)
        << preload.dump();
    EXPECT_EQ(preload["marks"].empty(), marked == 0) << preload.dump();
  }
}

TEST(Cost, UsageErrors) {
  EXPECT_EQ(run_harness("--cost --bench").exit_code, 2);
  EXPECT_EQ(run_harness("--time-budget 10 --workload errors --method none").exit_code, 2);
  EXPECT_EQ(run_harness("--cost --no-baseline --method preload -- /bin/true").exit_code, 2);
  const HarnessRun r = run_harness("--cost --method none -- /bin/true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("name at least one other"), std::string::npos) << r.output;
}
