// The cost mode's order, statistics and marking, on numbers and run.json objects made here:
// no process runs (tests/correctness/cost_test.cpp drives the harness itself).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "harness/stats/bench_stats.h"
#include "harness/cli.h"
#include "harness/stats/cost.h"
#include "harness/stats/cost_stats.h"
#include "test_support.h"

using namespace cudatrace;
using json = nlohmann::json;

namespace {

CostSample sample(int round, double wall_ms, std::optional<double> startup_ms = std::nullopt) {
  CostSample s;
  s.round = round;
  s.wall_ns = int64_t(wall_ms * 1e6);
  if (startup_ms) s.startup_ns = int64_t(*startup_ms * 1e6);
  return s;
}

std::vector<CostSample> rounds_of(std::vector<double> walls_ms) {
  std::vector<CostSample> v;
  for (size_t i = 0; i < walls_ms.size(); ++i) v.push_back(sample(int(i) + 1, walls_ms[i]));
  return v;
}

}  // namespace

TEST(CostOrder, EachRoundRotatesTheMethodsOfEveryProgram) {
  // Two programs of three methods each, none first in each (as run_matrix orders them).
  const std::vector<std::string> program_of{"a", "a", "a", "b", "b", "b"};
  const RunPlan plan = interleaved_plan(program_of, 4);
  ASSERT_EQ(plan.size(), 24u);
  for (int k = 0; k < 4; ++k) {
    // Round k: program a's three methods, then b's, a starting at method k mod 3.
    for (size_t j = 0; j < 3; ++j) {
      const PlannedRun& a = plan[size_t(k) * 6 + j];
      const PlannedRun& b = plan[size_t(k) * 6 + 3 + j];
      EXPECT_EQ(a.rep, k + 1);
      EXPECT_EQ(b.rep, k + 1);
      EXPECT_EQ(a.combo, (size_t(k) + j) % 3) << "round " << k << " place " << j;
      EXPECT_EQ(b.combo, 3 + (size_t(k) + j) % 3) << "round " << k << " place " << j;
    }
  }
  // none (combination 0 and 3) runs once in every round, and every method once per round.
  for (int round = 1; round <= 4; ++round) {
    std::multiset<size_t> ran;
    for (const auto& p : plan)
      if (p.rep == round) ran.insert(p.combo);
    EXPECT_EQ(ran, (std::multiset<size_t>{0, 1, 2, 3, 4, 5})) << "round " << round;
  }
  // Over M rounds each method has stood at each place once.
  std::map<size_t, std::set<size_t>> places;
  for (int k = 0; k < 3; ++k)
    for (size_t j = 0; j < 3; ++j) places[plan[size_t(k) * 6 + j].combo].insert(j);
  for (const auto& [combo, at] : places) EXPECT_EQ(at.size(), 3u) << "combination " << combo;
}

TEST(CostOrder, ProgramsOfDifferentSizesAndTheMatrixOrder) {
  const RunPlan plan = interleaved_plan({"x", "y", "y"}, 2);
  ASSERT_EQ(plan.size(), 6u);
  EXPECT_EQ(plan[0].combo, 0u);
  EXPECT_EQ(plan[1].combo, 1u);
  EXPECT_EQ(plan[2].combo, 2u);
  EXPECT_EQ(plan[3].combo, 0u);  // one method: always itself
  EXPECT_EQ(plan[4].combo, 2u);  // round 2 starts y at its second method
  EXPECT_EQ(plan[5].combo, 1u);
  const RunPlan matrix = sequential_plan(2, 3);
  ASSERT_EQ(matrix.size(), 6u);
  EXPECT_EQ(matrix[2].combo, 0u);
  EXPECT_EQ(matrix[2].rep, 3);
  EXPECT_EQ(matrix[3].combo, 1u);
  EXPECT_EQ(matrix[3].rep, 1);
}

TEST(CostOrder, TheTimeBudgetStopsBeforeARoundThatWouldEndPastIt) {
  EXPECT_TRUE(next_round_fits(1000, 0, 1)) << "the first round always runs";
  EXPECT_TRUE(next_round_fits(100, 2, 150));   // rounds of 50 s: the third ends at 150
  EXPECT_FALSE(next_round_fits(100, 2, 149));
  EXPECT_FALSE(next_round_fits(60, 1, 100));
}

TEST(CostStats, PairedRatioOfMediansWithItsInterval) {
  // The method takes 20% longer than none in every round.
  std::vector<std::pair<double, double>> pairs;
  for (double none : {100.0, 104.0, 98.0, 101.0, 99.0, 102.0}) pairs.emplace_back(none, none * 1.2);
  const Ratio r = paired_median_ratio(pairs);
  EXPECT_EQ(r.pairs, 6u);
  EXPECT_NEAR(r.value, 1.2, 1e-12);
  ASSERT_TRUE(r.ci95);
  EXPECT_LE(r.ci95->first, r.value);
  EXPECT_GE(r.ci95->second, r.value);
  EXPECT_GT(r.ci95->first, 1.1);
  EXPECT_LT(r.ci95->second, 1.3);
  const Ratio again = paired_median_ratio(pairs);
  EXPECT_EQ(again.ci95, r.ci95) << "the same rounds give the same interval";
}

// 3 rounds give 10 distinct resamples: no 95% interval can come from them. The order
// statistics of n ratios bracket their median with 1 - 2 P(Bin(n, 1/2) < k): 6 rounds are
// the fewest for 95% (the smallest and largest: 96.9%), 9 rounds allow the second (96.1%).
TEST(CostStats, AnIntervalOnlyWhereTheRoundsCanHold95Percent) {
  const Ratio two = paired_median_ratio({{100, 150}, {110, 160}});
  EXPECT_EQ(two.pairs, 2u);
  EXPECT_FALSE(two.ci95);
  EXPECT_NEAR(two.value, (1.5 + 160.0 / 110.0) / 2, 1e-12) << "the median of the rounds' ratios";
  EXPECT_EQ(paired_median_ratio({}).pairs, 0u);
  std::vector<std::pair<double, double>> pairs;
  for (int i = 1; i <= 5; ++i) pairs.emplace_back(100, 100 + i);
  EXPECT_FALSE(paired_median_ratio(pairs).ci95) << "5 rounds: the widest interval holds 93.75%";
  pairs.emplace_back(100, 106);
  Ratio six = paired_median_ratio(pairs);
  ASSERT_TRUE(six.ci95);
  EXPECT_EQ(six.rank, 1u);
  EXPECT_NEAR(six.coverage, 1 - 2.0 / 64, 1e-12);
  EXPECT_NEAR(six.ci95->first, 1.01, 1e-12);
  EXPECT_NEAR(six.ci95->second, 1.06, 1e-12);
  for (int i = 7; i <= 9; ++i) pairs.emplace_back(100, 100 + i);
  Ratio nine = paired_median_ratio(pairs);
  ASSERT_TRUE(nine.ci95);
  EXPECT_EQ(nine.rank, 2u);
  EXPECT_NEAR(nine.coverage, 1 - 2 * 10.0 / 512, 1e-12);
  EXPECT_NEAR(nine.ci95->first, 1.02, 1e-12);
  EXPECT_NEAR(nine.ci95->second, 1.08, 1e-12);
  // A long series (0.5^2000 underflows a double): k near n/2 - 0.98 sqrt(n), as the normal
  // approximation has it, and still at least 95%.
  std::vector<std::pair<double, double>> many;
  for (int i = 0; i < 2000; ++i) many.emplace_back(100, 100 + i % 97);
  const Ratio long_series = paired_median_ratio(many);
  ASSERT_TRUE(long_series.ci95);
  EXPECT_GT(long_series.rank, 950u);
  EXPECT_LT(long_series.rank, 960u);
  EXPECT_GE(long_series.coverage, 0.95);
  EXPECT_LT(long_series.coverage, 0.96);
}

// Faster traced than untraced with an interval under 1: flagged, never read as a gain.
TEST(CostStats, ARatioBelowOneOutsideItsIntervalIsAnAnomaly) {
  std::vector<std::pair<double, double>> pairs;
  for (int i = 0; i < 6; ++i) pairs.emplace_back(100, 90 + i);
  EXPECT_TRUE(paired_median_ratio(pairs).anomaly());
  pairs.emplace_back(100, 120);
  pairs.emplace_back(100, 130);
  EXPECT_FALSE(paired_median_ratio(pairs).anomaly());
}

TEST(CostStats, PairingRoundsCancelsTheMachinesDrift) {
  // The machine slows down round after round; the method costs 10% throughout. Kept in
  // pairs the rounds give a tight interval; taken as two loose samples they do not.
  std::vector<std::pair<double, double>> pairs;
  std::vector<double> none, method;
  for (int k = 0; k < 8; ++k) {
    const double base = 100.0 * (1 + 0.15 * k);
    pairs.emplace_back(base, base * 1.1);
    none.push_back(base);
    method.push_back(base * 1.1);
  }
  const Ratio paired = paired_median_ratio(pairs);
  const Difference loose = median_ratio(none, method);
  ASSERT_TRUE(paired.ci95);
  EXPECT_LT(paired.ci95->second - paired.ci95->first, 0.05);
  EXPECT_GT(loose.hi - loose.lo, 4 * (paired.ci95->second - paired.ci95->first));
}

TEST(CostStats, MarkedRunsAreLeftOutAndCountedWhileCleanOnesExist) {
  const auto none = rounds_of({100, 100, 100, 100, 100});
  auto runs = rounds_of({120, 120, 500, 120, 120});
  runs[2].marks.lost["ring_full"] = 7;  // round 3 lost events: its 500 ms must not count
  runs[4].marks.failed = true;          // round 5 failed
  runs[4].marks.failure = "exit 1";
  const MethodCost c = method_cost(runs, none);
  EXPECT_EQ(c.runs, 5u);
  EXPECT_EQ(c.clean, 3u);
  EXPECT_EQ(c.lost, 1u);
  EXPECT_EQ(c.failed, 1u);
  EXPECT_EQ(c.basis, Basis::kClean);
  EXPECT_EQ(c.rounds_used, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(c.rounds_left_out, (std::vector<int>{3, 5}));
  ASSERT_TRUE(c.wall);
  EXPECT_NEAR(c.wall->value, 1.2, 1e-12);
  EXPECT_EQ(c.wall->pairs, 3u);
  EXPECT_NEAR(c.median_wall_ns, 120e6, 1);
}

TEST(CostStats, ARunThatSawALayerInPartIsMarkedAndStillCounts) {
  auto runs = rounds_of({150, 150, 150, 150, 150, 150});
  runs[1].marks.partly_observed["syscall"] = "calls that make no syscall";
  const MethodCost c = method_cost(runs, rounds_of({100, 100, 100, 100, 100, 100}));
  EXPECT_EQ(c.partly_observed, 1u);
  EXPECT_EQ(c.basis, Basis::kClean);
  EXPECT_EQ(c.rounds_used, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(c.wall && c.wall->ci95);
  EXPECT_NEAR(c.wall->value, 1.5, 1e-12);
}

TEST(CostStats, TheIntervalHoldsTheMedianOfTheRoundsRatios) {
  const Ratio r = paired_median_ratio({{100, 90}, {100, 130}, {100, 110}, {100, 100}, {100, 120}, {100, 105}});
  EXPECT_NEAR(r.value, 1.075, 1e-12);
  ASSERT_TRUE(r.ci95);
  EXPECT_GE(r.ci95->first, 0.9 - 1e-12);
  EXPECT_LE(r.ci95->second, 1.3 + 1e-12);
  EXPECT_LE(r.ci95->first, r.value);
  EXPECT_GE(r.ci95->second, r.value);
}

TEST(CostStats, WithoutAnyCleanRunTheFiguresComeFromMarkedRunsAndSaySo) {
  const auto none = rounds_of({100, 100, 100});
  auto runs = rounds_of({130, 130, 130});
  for (auto& r : runs) r.marks.unobserved["runtime"] = "cudart is linked statically";
  runs[0].marks.failed = true;
  const MethodCost c = method_cost(runs, none);
  EXPECT_EQ(c.basis, Basis::kMarked);
  EXPECT_EQ(c.unobserved, 3u);
  EXPECT_EQ(c.rounds_used, (std::vector<int>{2, 3})) << "a failed run never enters, marked basis or not";
  ASSERT_TRUE(c.wall);
  EXPECT_NEAR(c.wall->value, 1.3, 1e-12);
  EXPECT_FALSE(c.wall->ci95) << "two rounds";
}

TEST(CostStats, EveryRunFailedGivesNoRatioAndSaysWhy) {
  auto runs = rounds_of({100, 100});
  for (auto& r : runs) r.marks.failed = true;
  const MethodCost c = method_cost(runs, rounds_of({90, 90}));
  EXPECT_EQ(c.basis, Basis::kNothing);
  EXPECT_FALSE(c.wall);
  EXPECT_EQ(c.why_no_ratio, "every run failed");
  EXPECT_EQ(c.rounds_left_out.size(), 2u);
}

TEST(CostStats, ARoundWhoseUntracedRunFailedPairsWithNothing) {
  auto none = rounds_of({100, 100, 100, 100});
  none[1].marks.failed = true;
  const MethodCost c = method_cost(rounds_of({110, 999, 110, 110}), none);
  ASSERT_TRUE(c.wall);
  EXPECT_EQ(c.wall->pairs, 3u);
  EXPECT_NEAR(c.wall->value, 1.1, 1e-12);
  auto all_failed = none;
  for (auto& r : all_failed) r.marks.failed = true;
  EXPECT_EQ(method_cost(rounds_of({110}), all_failed).why_no_ratio, "every untraced run (none) failed");
  EXPECT_FALSE(method_cost(rounds_of({110}), all_failed).wall);
}

TEST(CostStats, StartUpApartFromTheRest) {
  std::vector<CostSample> none, runs;
  for (int k = 1; k <= 4; ++k) {
    none.push_back(sample(k, 1000, 400));  // 400 ms to the first launch, 600 after
    runs.push_back(sample(k, 1400, 700));  // start-up 1.75x, the rest 1.17x
  }
  const MethodCost c = method_cost(runs, none);
  ASSERT_TRUE(c.startup && c.rest);
  EXPECT_NEAR(c.startup->value, 1.75, 1e-12);
  EXPECT_NEAR(c.rest->value, 700.0 / 600.0, 1e-12);
  EXPECT_NEAR(*c.median_startup_ns, 700e6, 1);
  EXPECT_NEAR(*c.median_rest_ns, 700e6, 1);
  // Where none has no start-up (a command without a mark), no start-up ratio.
  const MethodCost unknown = method_cost(runs, rounds_of({1000, 1000, 1000, 1000}));
  EXPECT_FALSE(unknown.startup);
  EXPECT_TRUE(unknown.wall);
  const MethodCost base = method_cost(none, none, true);
  EXPECT_FALSE(base.wall) << "none has no ratio to itself";
  EXPECT_TRUE(base.why_no_ratio.empty());
}

TEST(CostMarks, ReadFromRunJson) {
  const json run = {{"ok", false},
                    {"failures", {"traced, the program ended otherwise than untraced", "exit 1"}},
                    {"tracer", {{"loss", {{"ring_full", 3}, {"dropped", 0}, {"note", "x"}}}}},
                    {"unobserved", {{{"layer", "runtime"}, {"reason", "static cudart"}}}},
                    {"partly_observed", {{{"layer", "driver"}, {"reason", "a private cudart"}}}}};
  const RunMarks m = marks_of(run);
  EXPECT_TRUE(m.failed);
  EXPECT_EQ(m.failure, "traced, the program ended otherwise than untraced");
  EXPECT_EQ(m.lost, (std::map<std::string, int64_t>{{"ring_full", 3}})) << "zero counters are no loss";
  EXPECT_EQ(m.unobserved.at("runtime"), "static cudart");
  EXPECT_EQ(m.partly_observed.at("driver"), "a private cudart");
  EXPECT_EQ(m.worst(), "failed");
  RunMarks clean;
  EXPECT_TRUE(clean.clean());
  EXPECT_EQ(clean.worst(), "clean");
  clean.partly_observed["device"] = "why";
  EXPECT_EQ(clean.worst(), "layer partly observed");
  EXPECT_TRUE(clean.clean()) << "a layer seen in part marks the run; the run still counts";
  clean.unobserved["runtime"] = "why";
  EXPECT_FALSE(clean.clean());
}

namespace {

json run_json(int64_t wall_ms, bool ok = true, std::optional<int64_t> startup_ms = std::nullopt) {
  json run = {{"ok", ok},           {"failures", ok ? json::array() : json{"exit 1"}},
              {"status", "exited"}, {"exit_code", ok ? 0 : 1},
              {"wall_ns", wall_ms * 1000000}, {"tracer", {{"loss", json::object()}, {"notes", json::object()}}},
              {"unobserved", json::array()},   {"partly_observed", json::array()}};
  run["startup"] = startup_ms ? json{{"ns", *startup_ms * 1000000}, {"source", "the ledger"}}
                              : json{{"ns", nullptr}, {"why", "no ledger"}};
  return run;
}

}  // namespace

TEST(CostRecorder, SummaryNamesEveryMethodWithItsFiguresAndMarks) {
  const std::vector<CostSubject> subjects{{"vecadd.shared", "none", "vecadd", "shared"},
                                          {"vecadd.shared", "preload", "vecadd", "shared"},
                                          {"vecadd.shared", "sanitizer", "vecadd", "shared"}};
  const RunPlan plan = interleaved_plan({"vecadd.shared", "vecadd.shared", "vecadd.shared"}, 3);
  CostRecorder rec(subjects, plan, 3, std::nullopt, {});
  for (size_t i = 0; i < plan.size(); ++i) {
    ASSERT_TRUE(rec.should_run(i));
    const size_t combo = plan[i].combo;
    json run = run_json(combo == 0 ? 200 : 240, true, 100);
    if (combo == 2) {
      run["tracer"]["notes"] = {{"setup_ms", 1.5}, {"setup_what", "patching 3 module(s) at load"}};
      if (plan[i].rep == 2) run["tracer"]["loss"] = {{"launch_records_over_bound", 2}};
    }
    rec.add(i, run, "/nonexistent/run");
    EXPECT_NE(rec.progress(i).find("round " + std::to_string(plan[i].rep) + "/3"), std::string::npos);
  }
  const json skipped = json::array({{{"workload", "vecadd"}, {"linkage", "shared"}, {"method", "cupti"},
                                     {"reason", "method cupti: needs root"}}});
  const json left_out = json::array({{{"method", "strace"}, {"reason", "taken out by --method compared,-strace"}}});
  const json s = rec.summary(skipped, left_out);
  EXPECT_EQ(s["rounds"]["planned"], 3);
  EXPECT_EQ(s["rounds"]["done"], 3);
  EXPECT_TRUE(s["stopped"].is_null());
  ASSERT_EQ(s["programs"].size(), 1u);
  const json& p = s["programs"][0];
  EXPECT_EQ(p["program"], "vecadd.shared");
  EXPECT_EQ(p["startup_source"], "the ledger");
  ASSERT_EQ(p["not_run"].size(), 2u);
  EXPECT_EQ(p["not_run"][0]["method"], "cupti");
  EXPECT_EQ(p["not_run"][1]["method"], "strace");
  EXPECT_EQ(p["not_run"][1]["reason"], "taken out by --method compared,-strace");
  ASSERT_EQ(p["methods"].size(), 3u);
  const json& none = p["methods"][0];
  EXPECT_EQ(none["method"], "none");
  EXPECT_TRUE(none["ratio"].is_null());
  EXPECT_FALSE(none.contains("why_no_ratio"));
  const json& preload = p["methods"][1];
  EXPECT_NEAR(preload["ratio"]["value"].get<double>(), 1.2, 1e-12);
  // 3 rounds: no 95% interval, and the summary says why.
  EXPECT_TRUE(preload["ratio"]["ci95"].is_null());
  EXPECT_NE(preload["ratio"]["why_no_interval"].get<std::string>().find("too few rounds for an interval"),
            std::string::npos);
  EXPECT_NEAR(preload["startup_ratio"]["value"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(preload["rest_ratio"]["value"].get<double>(), 1.4, 1e-12);
  // Its place in each round: 1, 0, 2 (round k starts at method k mod 3).
  std::vector<int> places;
  for (const auto& r : preload["runs"]) places.push_back(r["position"]);
  EXPECT_EQ(places, (std::vector<int>{1, 0, 2}));
  const json& san = p["methods"][2];
  EXPECT_EQ(san["counts"]["lost_events"], 1);
  EXPECT_EQ(san["rounds_left_out"], json({2}));
  EXPECT_EQ(san["ratio"]["pairs"], 2);
  EXPECT_TRUE(san["ratio"]["ci95"].is_null());
  ASSERT_EQ(san["marks"].size(), 1u);
  EXPECT_EQ(san["marks"][0]["mark"], "lost events");
  EXPECT_EQ(san["marks"][0]["detail"], "launch_records_over_bound 2");
  EXPECT_EQ(san["setup_reported"]["median_ms"], 1.5);
  EXPECT_EQ(san["runs"][1]["mark"], "lost events");
  const std::string screen = rec.table(s);
  EXPECT_NE(screen.find("1.20 (3 rounds: too few for an interval)"), std::string::npos) << screen;
  EXPECT_NE(screen.find("lost events x1"), std::string::npos) << screen;
  EXPECT_NE(screen.find("cupti: not run: method cupti: needs root"), std::string::npos) << screen;
}

TEST(CostRecorder, AProgramThatCannotRunHereIsSkippedWithItsReason) {
  const auto dir = testsupport::temp_dir("cost-skip");
  std::ofstream(dir / "stderr.txt") << "Traceback...\ntorch_train_step: cannot import torch: No module named 'torch'\n";
  const std::vector<CostSubject> subjects{{"command", "none", "", ""}, {"command", "preload", "", ""}};
  const RunPlan plan = interleaved_plan({"command", "command"}, 3);
  CostRecorder rec(subjects, plan, 3, std::nullopt, {"python3", "t.py"});
  ASSERT_TRUE(rec.should_run(0));
  json run = run_json(50, false);
  run["exit_code"] = kCannotRunHere;
  rec.add(0, run, dir);
  ASSERT_EQ(rec.skipped_programs().size(), 1u);
  EXPECT_EQ(rec.skipped_programs().at("command"),
            "the program says it cannot run here (exit 77): torch_train_step: cannot import torch: No module named 'torch'");
  for (size_t i = 1; i < plan.size(); ++i) EXPECT_FALSE(rec.should_run(i));
  EXPECT_TRUE(rec.stopped().empty()) << "skipped, not stopped";
  const json s = rec.summary(json::array());
  EXPECT_EQ(s["programs"][0]["skipped"], rec.skipped_programs().at("command"));
  EXPECT_EQ(s["programs"][0]["command"], json({"python3", "t.py"}));
  EXPECT_NE(rec.table(s).find("skipped: the program says"), std::string::npos);
}

TEST(CostRecorder, TheBudgetEndsTheRoundsAndSaysWhere) {
  const std::vector<CostSubject> subjects{{"p", "none", "p", "s"}, {"p", "preload", "p", "s"}};
  const RunPlan plan = interleaved_plan({"p", "p"}, 4);
  // Runs of 0.3 s under a budget of 1 s: round 1 ends near 0.6 s, and a second would end
  // near 1.2 s, past the budget.
  CostRecorder rec(subjects, plan, 4, 1.0, {});
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(rec.should_run(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    rec.add(i, run_json(300), "/nonexistent/r");
  }
  EXPECT_FALSE(rec.should_run(2));
  EXPECT_NE(rec.stopped().find("ended it after round 1 of 4"), std::string::npos) << rec.stopped();
  EXPECT_FALSE(rec.should_run(3));
  EXPECT_EQ(rec.summary(json::array())["rounds"]["done"], 1);
  EXPECT_EQ(rec.summary(json::array())["stopped"], rec.stopped());
}

TEST(CostRecorder, AFirstRoundLongerThanTheBudgetIsCutWhereItRunsOut) {
  const std::vector<CostSubject> subjects{{"p", "none", "p", "s"}, {"p", "preload", "p", "s"}};
  const RunPlan plan = interleaved_plan({"p", "p"}, 3);
  CostRecorder rec(subjects, plan, 3, 1e-9, {});
  ASSERT_TRUE(rec.should_run(0)) << "the first run always runs";
  rec.add(0, run_json(10), "/nonexistent/r");
  EXPECT_FALSE(rec.should_run(1));
  EXPECT_NE(rec.stopped().find("ran out during round 1 of 3"), std::string::npos) << rec.stopped();
  const json s = rec.summary(json::array());
  const json& preload = s["programs"][0]["methods"][1];
  EXPECT_EQ(preload["counts"]["runs"], 0);
  EXPECT_EQ(preload["why_no_ratio"], "it did not run");
}

TEST(CostStartup, FromTheLedgersFirstLaunchOrTheProgramsMark) {
  ChildResult child;
  child.status = ChildStatus::Exited;
  child.start_ns = 1'000'000'000;
  child.wall_ns = 500'000'000;
  Event malloc_call{"runtime", "cudaMalloc", 1'050'000'000, 1000};
  Event launch{"runtime", "__cudaLaunchKernel", 1'100'000'000, 2'000'000};
  Event later{"runtime", "cudaLaunchKernel", 1'200'000'000, 1000};
  const auto dir = testsupport::temp_dir("cost-startup");
  json j = startup_of({malloc_call, later, launch}, dir, child);
  EXPECT_EQ(j["ns"], 102'000'000) << "to the return of the earliest launch: " << j.dump();
  EXPECT_NE(j["source"].get<std::string>().find("__cudaLaunchKernel"), std::string::npos);
  EXPECT_EQ(startup_of({malloc_call}, dir, child)["why"], "the workload launched no kernel");
  // A command: no ledger, its mark.
  EXPECT_TRUE(startup_of(std::vector<Event>{}, dir, child)["ns"].is_null());
  EXPECT_NE(startup_of(std::vector<Event>{}, dir, child)["why"].get<std::string>().find(kStartupMarkEnv), std::string::npos);
  std::ofstream(dir / kStartupMarkFile) << "1300000000 model built, loop starts\n1400000000 later\n";
  j = startup_of(std::vector<Event>{}, dir, child);
  EXPECT_EQ(j["ns"], 300'000'000);
  EXPECT_EQ(j["source"], "the program's start-up mark: model built, loop starts");
  std::ofstream(dir / kStartupMarkFile) << "5 wrong clock\n";
  EXPECT_TRUE(startup_of(std::vector<Event>{}, dir, child)["ns"].is_null());
  child.status = ChildStatus::Signaled;
  EXPECT_TRUE(startup_of({launch}, dir, child)["ns"].is_null());
}

TEST(Cli, CostModeAddsNoneAndTakesRoundsAndABudget) {
  // Made-up names: the registry's own are not copied into tests (Docs.NoScriptListsTheMethods).
  const std::vector<std::string> methods{"none", "shim", "probe", "capture"};
  const std::map<std::string, std::vector<std::string>> groups{{"compared", {"none", "shim", "capture"}}};
  Options o = parse_cli({"--cost", "--method", "shim"}, {"vecadd"}, methods, groups);
  EXPECT_TRUE(o.cost);
  EXPECT_EQ(o.reps, 6) << "default rounds: the fewest that give a 95% interval";
  EXPECT_EQ(o.methods, (std::vector<std::string>{"none", "shim"}));
  o = parse_cli({"--cost", "--reps", "3", "--time-budget", "120", "--method", "compared,-capture"}, {"vecadd"}, methods, groups);
  EXPECT_EQ(o.reps, 3);
  EXPECT_EQ(*o.time_budget_s, 120);
  EXPECT_EQ(o.methods, (std::vector<std::string>{"none", "shim"}));
  EXPECT_EQ(parse_cli({"--method", "-capture,all"}, {"vecadd"}, methods, groups).methods,
            (std::vector<std::string>{"none", "shim", "probe"}))
      << "a name taken out stays out wherever it stands";
  EXPECT_THROW(parse_cli({"--method", "compared,-compared"}, {"vecadd"}, methods, groups), UsageError);
  EXPECT_THROW(parse_cli({"--method", "compared,-bogus"}, {"vecadd"}, methods, groups), UsageError);
  EXPECT_THROW(parse_cli({"--time-budget", "60"}, {"vecadd"}, methods, groups), UsageError);
  EXPECT_THROW(parse_cli({"--cost", "--bench"}, {"vecadd"}, methods, groups), UsageError);
  EXPECT_THROW(parse_cli({"--cost", "--no-baseline", "--", "/bin/true"}, {"vecadd"}, methods, groups), UsageError);
  EXPECT_THROW(parse_cli({"--cost", "--method", "none"}, {"vecadd"}, methods, groups), UsageError);
  EXPECT_THROW(parse_cli({"--cost", "--time-budget", "0"}, {"vecadd"}, methods, groups), UsageError);
}
