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
  // Each round's order is drawn from the seed, which the summary keeps: every round has
  // none and preload once each, at places 0 and 1.
  ASSERT_TRUE(cost["seed"].is_number_unsigned()) << cost.dump();
  for (size_t k = 0; k < 3; ++k)
    EXPECT_EQ(none["runs"][k]["position"].get<int>() + preload["runs"][k]["position"].get<int>(), 1) << "round " << k + 1;
  // One untimed warm-up run, untraced, before the rounds: in no figure and no combination.
  ASSERT_EQ(cost["warm_up"].size(), 1u) << cost.dump();
  EXPECT_EQ(cost["warm_up"][0]["run"], "cmd.none.r0");
  EXPECT_TRUE(preload["ratio"]["value"].get<double>() > 0);
  // Three rounds give no 95% interval (6 do), and the summary and the console say why.
  EXPECT_TRUE(preload["ratio"]["ci95"].is_null());
  EXPECT_NE(preload["ratio"].value("why_no_interval", "").find("too few rounds for an interval"), std::string::npos)
      << preload["ratio"].dump();
  EXPECT_NE(r.details().find("too few for an interval"), std::string::npos) << r.details();
  // /bin/true never reaches libcuda: preload's driver layer is not observed in any run, so
  // its figures come from marked runs, and say so.
  EXPECT_EQ(preload["basis"], "marked runs (no clean run)");
  ASSERT_EQ(preload["marks"].size(), 1u);
  EXPECT_EQ(preload["marks"][0]["mark"], "layer not observed");
  EXPECT_EQ(none["basis"], "clean runs");
  EXPECT_NE(r.details().find("[figures from marked runs]"), std::string::npos) << r.details();
  // Every run is a matrix run: its own folder, checked against the untraced ending.
  EXPECT_EQ(r.run_json("cmd.preload", 2)["untraced_check"]["same"], true);
  EXPECT_NE(p["startup_why"].get<std::string>().find("CUDATRACE_STARTUP_MARK"), std::string::npos);
  EXPECT_NE(r.output.find("round 3/3, done"), std::string::npos) << r.output;
  EXPECT_NE(r.details().find("vs none [95%]"), std::string::npos) << "the cost table, in details.txt:\n" << r.details();
  EXPECT_NE(r.output.find("details.txt"), std::string::npos) << "the end of the run names it\n" << r.output;
  // The matrix's own summary of the same runs: three repetitions of each combination.
  for (const auto& c : r.summary["combos"]) EXPECT_EQ(c["reps"], 3);
}

TEST(Cost, AFailedMethodIsMarkedAndGivesNoRatio) {
  // A seed whose first round runs preload before none: its ending is still compared with
  // an untraced run's (the warm-up's), never left as a bare "exit 1".
  HarnessRun r = run_harness(
      "--cost --reps 3 --seed 13446087328344485946 --method preload -- /bin/sh -c 'test -z \"$LD_PRELOAD\"'");
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
  EXPECT_NE(r.details().find("failed x3"), std::string::npos) << r.details();
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

// A command that marks its steps (#52): 200 steps of about 2 ms, each end's CLOCK_MONOTONIC
// time appended to $CUDATRACE_STEP_MARK.
TEST(Cost, StepMarksGiveASlowdownPerStepWithAnInterval) {
  const char* steps =
      "python3 -c 'import os, time; f = open(os.environ[\"CUDATRACE_STEP_MARK\"], \"a\"); "
      "[(time.sleep(0.002), print(time.clock_gettime_ns(time.CLOCK_MONOTONIC), \"step\", i, file=f, flush=True)) "
      "for i in range(200)]'";
  HarnessRun r = run_harness(std::string("--cost --reps 3 --seed 52 --method preload -- ") + steps);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json& cost = r.summary["cost"];
  EXPECT_EQ(cost["seed"], 52);
  EXPECT_EQ(cost["steps"]["env"], "CUDATRACE_STEP_MARK");
  const json& p = cost["programs"][0];
  const json& none = method_of(p, "none");
  const json& preload = method_of(p, "preload");
  ASSERT_TRUE(none["steps"].is_object()) << p.dump();
  EXPECT_EQ(none["steps"]["runs_with_marks"], 3);
  EXPECT_EQ(none["steps"]["steady_steps"], 3 * (199 - 20)) << "199 gaps a run, the first 20 warm-up";
  EXPECT_GE(none["steps"]["median_step_ns"].get<double>(), 2e6);
  const json& ratio = preload["steps"]["ratio"];
  ASSERT_TRUE(ratio.is_object()) << preload.dump();
  ASSERT_TRUE(ratio["ci95"].is_array()) << "hundreds of steps give an interval where 3 rounds give none: " << ratio.dump();
  EXPECT_LE(ratio["ci95"][0].get<double>(), ratio["value"].get<double>());
  EXPECT_GE(ratio["ci95"][1].get<double>(), ratio["value"].get<double>());
  EXPECT_GT(ratio["value"].get<double>(), 0.5);
  EXPECT_LT(ratio["value"].get<double>(), 2.0);
  EXPECT_TRUE(preload["ratio"]["ci95"].is_null()) << "the whole-program ratio stays beside it, 3 rounds: no interval";
  EXPECT_TRUE(preload["steps"]["startup_ratio"].is_object());
  const json run = r.run_json("cmd.preload", 2);
  EXPECT_EQ(run["steps"]["marks"], 200);
  EXPECT_EQ(run["steps"]["durations_ns"].size(), 199u);
}

// The step file is the program's: a link there is not followed, and the run says why.
TEST(Cost, AStepFileThatIsALinkIsNotRead) {
  HarnessRun r = run_harness("--cost --reps 1 --method preload -- /bin/sh -c 'ln -s /etc/passwd \"$CUDATRACE_STEP_MARK\"'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json run = r.run_json("cmd.none", 1);
  EXPECT_EQ(run["steps"]["marks"], 0);
  EXPECT_NE(run["steps"]["why"].get<std::string>().find("its step file was not read"), std::string::npos) << run.dump();
  EXPECT_TRUE(method_of(r.summary["cost"]["programs"][0], "none")["steps"].is_null());
}

TEST(Cost, UsageErrors) {
  EXPECT_EQ(run_harness("--cost --bench").exit_code, 2);
  EXPECT_EQ(run_harness("--time-budget 10 --workload errors --method none").exit_code, 2);
  EXPECT_EQ(run_harness("--cost --no-baseline --method preload -- /bin/true").exit_code, 2);
  EXPECT_EQ(run_harness("--seed 3 --method preload -- /bin/true").exit_code, 2) << "--seed without --cost";
  EXPECT_EQ(run_harness("--cost --seed x --method preload -- /bin/true").exit_code, 2);
  const HarnessRun r = run_harness("--cost --method none -- /bin/true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("name at least one other"), std::string::npos) << r.output;
}
