// A tracer must not change how the program ends: every traced run of a command is checked
// against the same command run untraced (the harness adds that run unless told not to),
// and one that ends otherwise is a failed run naming both endings. No GPU needed: the
// preload method sets LD_PRELOAD, and the command exits 1 when it sees it.
#include "harness_run.h"

using namespace correctness;

namespace {
const char* kNoticesPreload = "-- /bin/sh -c 'test -z \"$LD_PRELOAD\"'";
}

TEST(UntracedCheck, ATracedRunThatEndsOtherwiseFailsNamingBoth) {
  HarnessRun r = run_harness(std::string("--method preload ") + kNoticesPreload);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("runs untraced first"), std::string::npos) << r.output;
  const nlohmann::json untraced = r.run_json("cmd.none");
  ASSERT_TRUE(untraced.contains("ok")) << r.output;
  EXPECT_TRUE(untraced["ok"].get<bool>());
  const nlohmann::json traced = r.run_json("cmd.preload");
  EXPECT_FALSE(traced["ok"].get<bool>());
  EXPECT_EQ(traced["untraced_check"]["same"], false);
  EXPECT_EQ(traced["untraced_check"]["untraced"], "exit 0");
  EXPECT_EQ(traced["untraced_check"]["traced"], "exit 1");
  EXPECT_NE(traced["failures"][0].get<std::string>().find("ended otherwise than untraced: exit 1 where the untraced "
                                                          "run ended with exit 0"),
            std::string::npos)
      << traced["failures"].dump();
}

TEST(UntracedCheck, TheSameEndingPasses) {
  HarnessRun r = run_harness("--method preload -- /bin/true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.run_json("cmd.preload")["untraced_check"]["same"], true);
}

TEST(UntracedCheck, WithoutABaselineTheRunSaysItWasNotChecked) {
  HarnessRun r = run_harness(std::string("--no-baseline --method preload ") + kNoticesPreload);
  const nlohmann::json traced = r.run_json("cmd.preload");
  ASSERT_TRUE(traced.contains("untraced_check")) << r.output;
  EXPECT_TRUE(traced["untraced_check"]["untraced"].is_null());
  EXPECT_NE(traced["untraced_check"]["why"].get<std::string>().find("--no-baseline"), std::string::npos);
  EXPECT_FALSE(r.run_json("cmd.none").contains("ok")) << "no untraced run was made";
}

// --result: what the program computed. This one prints 2 when it sees LD_PRELOAD (preload
// sets it) and 1 otherwise, and exits 0 either way: only its result tells the runs apart.
namespace {
const char* kComputesOtherwise =
    "-- /bin/sh -c 'echo warming up; if test -n \"$LD_PRELOAD\"; then echo \"final loss 2.5\"; else echo \"final loss "
    "1.25\"; fi'";
}

TEST(UntracedCheck, AResultThatTracingChangedIsNamed) {
  HarnessRun r = run_harness(std::string("--method preload --result 'final loss ([0-9.]+)' ") + kComputesOtherwise);
  EXPECT_EQ(r.exit_code, 0) << "named, not failed, without --strict-result: " << r.output;
  EXPECT_EQ(r.run_json("cmd.none")["result"], "1.25");
  const nlohmann::json traced = r.run_json("cmd.preload");
  EXPECT_TRUE(traced["ok"].get<bool>());
  EXPECT_EQ(traced["result_check"]["same"], false);
  EXPECT_EQ(traced["result_check"]["traced"], "2.5");
  EXPECT_EQ(traced["result_check"]["untraced"], "1.25");
  EXPECT_NE(r.output.find("RESULT CHANGED (traced, the program computed otherwise than untraced: its result (--result) "
                          "read '2.5' where the untraced run's read '1.25')"),
            std::string::npos)
      << r.output;
  // And in the summary (the report reads it there) and the last line.
  EXPECT_EQ(r.summary["counts"]["results_changed"], 1) << r.summary.dump();
  bool named = false;
  for (const auto& c : r.summary["combos"])
    if (c["method"] == "preload") {
      EXPECT_EQ(c["results_changed"]["runs"], 1);
      ASSERT_EQ(c["results_changed"]["examples"].size(), 1u);
      EXPECT_NE(c["results_changed"]["examples"][0].get<std::string>().find("'2.5'"), std::string::npos);
      named = true;
    }
  EXPECT_TRUE(named) << r.summary.dump();
  EXPECT_NE(r.output.find("1 run(s) whose result tracing CHANGED"), std::string::npos) << r.output;
}

// A result read where a bound cut the output (here its matching line, 70,000 bytes, past the
// 1 KiB a result line is matched on) is not the program's word: not compared, and the run's
// line says so, where a silent "same" would have passed. (Matched whole, that line crashed
// the harness: std::regex recurses per character.)
TEST(UntracedCheck, AResultFromACutOutputIsNamedNotCompared) {
  HarnessRun r = run_harness("--method preload --strict-result --result 'final loss ([0-9x]+)' -- /bin/sh -c "
                             "'printf \"final loss 1\"; head -c 70000 /dev/zero | tr \"\\\\0\" x; echo'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.run_json("cmd.none")["result_cut"].get<std::string>().find("its end was cut"), std::string::npos)
      << r.run_json("cmd.none").dump();
  const nlohmann::json traced = r.run_json("cmd.preload");
  EXPECT_FALSE(traced["result_check"].contains("same")) << traced["result_check"].dump();
  EXPECT_NE(traced.value("result_unchecked", "").find("not compared"), std::string::npos) << traced.dump();
  EXPECT_NE(r.output.find("RESULT not compared: traced: the matching line is longer than"), std::string::npos)
      << r.output;
}

TEST(UntracedCheck, StrictResultFailsTheRunThatComputedOtherwise) {
  HarnessRun r = run_harness(std::string("--method preload --strict-result --result 'final loss ([0-9.]+)' ") +
                             kComputesOtherwise);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const nlohmann::json traced = r.run_json("cmd.preload");
  EXPECT_FALSE(traced["ok"].get<bool>());
  EXPECT_NE(traced["failures"][0].get<std::string>().find("computed otherwise than untraced"), std::string::npos);
  // The same result passes, and a pattern that does not compile is a usage error.
  HarnessRun same = run_harness("--method preload --strict-result --result 'up' " + std::string(kComputesOtherwise));
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_EQ(same.run_json("cmd.preload")["result_check"]["same"], true);
  HarnessRun bad = run_harness("--method preload --result '([' -- /bin/true");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("is not a regular expression"), std::string::npos) << bad.output;
}

// A program whose result varies untraced (XLA's autotuner picks kernels by timing them: on an
// H100, one untraced jax_step in five summed otherwise, and its traced runs matched the other
// four). Here the second run of the program, untraced rep 2, prints 9 and every other run
// 1.25: preload's rep 2 differs from its own untraced run but equals untraced rep 1's, which
// is not tracing's doing. Named as varying untraced, never counted as a changed result.
TEST(UntracedCheck, AResultThatVariesUntracedIsNotBlamedOnTracing) {
  const auto dir = testsupport::temp_dir("varies");
  std::filesystem::permissions(dir, std::filesystem::perms::all);  // the program may run as another user
  const std::string count = (dir / "count").string();
  const std::string program = "-- /bin/sh -c 'n=$(cat " + count + " 2>/dev/null || echo 0); n=$((n+1)); echo $n > " +
                              count + "; if [ $n = 2 ]; then echo \"final loss 9\"; else echo \"final loss 1.25\"; fi'";
  HarnessRun r = run_harness("--method preload --reps 2 --strict-result --result 'final loss ([0-9.]+)' " + program);
  EXPECT_EQ(r.exit_code, 0) << "a result that varies untraced fails no run, even with --strict-result: " << r.output;
  ASSERT_EQ(r.run_json("cmd.none", 2)["result"], "9") << "the runs' order changed: the test no longer sets its scene";
  const nlohmann::json traced = r.run_json("cmd.preload", 2);
  EXPECT_EQ(traced["result_check"]["same"], false) << traced["result_check"].dump();
  EXPECT_EQ(traced["result_check"]["as_untraced_run"], 1) << traced["result_check"].dump();
  EXPECT_FALSE(traced.contains("result_changed")) << traced.dump();
  EXPECT_EQ(r.summary["counts"]["results_changed"], 0) << r.summary.dump();
  EXPECT_EQ(r.summary["counts"]["results_vary_untraced"], 1) << r.summary.dump();
  EXPECT_EQ(r.output.find("RESULT CHANGED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("RESULT as untraced rep 1's: the untraced runs differ among themselves"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the result varies untraced, not by tracing"), std::string::npos) << r.output;
}
