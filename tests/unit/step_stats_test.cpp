// Slowdown per step (#52): the step file read as hostile input, the per-step figures on known
// samples, the rounds' interval rule and the anomaly flag, the randomised order with its
// warm-up round. No process runs (tests/correctness/cost_test.cpp drives the harness).
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <random>
#include <set>

#include "harness/run/runner.h"
#include "harness/stats/cost.h"
#include "harness/stats/cost_stats.h"
#include "harness/stats/steps.h"
#include "test_support.h"

using namespace cudatrace;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Steps of `mean_ms` with +-5% uniform noise, from a fixed seed.
std::vector<double> steps_ms(size_t n, double mean_ms, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(mean_ms * 1e6 * noise(rng));
  return v;
}

StepRun run_of(int round, std::vector<double> steady) {
  StepRun r;
  r.round = round;
  r.startup_ns = 1'000'000'000;
  r.steady_ns = std::move(steady);
  return r;
}

}  // namespace

TEST(StepMarks, KeepsTheEndsAndCountsWhatIsNotOne) {
  const fs::path dir = testsupport::temp_dir("steps-read");
  {
    std::ofstream f(dir / kStepMarkFile, std::ios::binary);
    f << "1100 step 1\n"
      << "garbage\n"
      << "\xff\xfe\x80 not utf-8\n"  // bytes that are not UTF-8: one more line that is not a time
      << "1200\n"
      << "1150 earlier than the last\n"
      << "99999999 past the run\n"
      << "-5\n"
      << "1300\tstep 3\n"
      << "1400";  // a last line without its newline still counts
  }
  const StepMarks m = read_step_marks(dir / kStepMarkFile, 1000, 2000);
  EXPECT_TRUE(m.why.empty()) << m.why;
  EXPECT_EQ(m.ends_ns, (std::vector<int64_t>{1100, 1200, 1300, 1400}));
  EXPECT_EQ(m.ignored, 5);
  EXPECT_NE(m.first_ignored.find("line 2: not a CLOCK_MONOTONIC time"), std::string::npos) << m.first_ignored;
  EXPECT_EQ(m.unread_bytes, 0u);
}

TEST(StepMarks, AHugeFileIsReadToItsBoundOnly) {
  // The bound scales with the memory available, never under 8 MiB; here it is given.
  const uint64_t kMaxStepFileBytes = uint64_t(8) << 20;
  EXPECT_GE(step_file_bound(), kMaxStepFileBytes);
  const fs::path dir = testsupport::temp_dir("steps-huge");
  {
    std::ofstream f(dir / kStepMarkFile, std::ios::binary);
    const std::string filler(1 << 20, 'x');  // one line of 1 MiB: only its start is kept
    f << "10\n" << filler << "\n";
    for (int64_t t = 11; f.tellp() < std::streamoff(kMaxStepFileBytes + (1 << 20)); ++t) f << t << "\n";
  }
  const StepMarks m = read_step_marks(dir / kStepMarkFile, 0, INT64_MAX, kMaxStepFileBytes);
  EXPECT_GT(m.unread_bytes, 0u) << "past 8 MiB, nothing is read";
  EXPECT_GT(m.ends_ns.size(), 100'000u);
  EXPECT_LT(m.ends_ns.size(), size_t(kMaxStepFileBytes / 4));
  EXPECT_GE(m.ignored, 1) << "the long line";
  EXPECT_LE(m.ignored, 2) << "and perhaps the line cut at the bound";
}

TEST(StepMarks, ALinkOrASecondHardLinkIsNotRead) {
  const fs::path dir = testsupport::temp_dir("steps-links");
  const fs::path secret = dir / "secret";
  std::ofstream(secret) << "1500\n1600\n";
  fs::create_symlink(secret, dir / kStepMarkFile);
  StepMarks m = read_step_marks(dir / kStepMarkFile, 1000, 2000);
  EXPECT_FALSE(m.why.empty());
  EXPECT_TRUE(m.ends_ns.empty());
  fs::remove(dir / kStepMarkFile);
  fs::create_hard_link(secret, dir / kStepMarkFile);
  m = read_step_marks(dir / kStepMarkFile, 1000, 2000);
  EXPECT_NE(m.why.find("hard links"), std::string::npos) << m.why;
  EXPECT_TRUE(m.ends_ns.empty());
  // As run.json says it.
  ChildResult child;
  child.status = ChildStatus::Exited;
  child.start_ns = 1000;
  child.wall_ns = 1000;
  const json j = steps_of(dir, child);
  EXPECT_EQ(j["marks"], 0);
  EXPECT_NE(j["why"].get<std::string>().find("its step file was not read"), std::string::npos) << j.dump();
}

TEST(StepMarks, RunJsonGivesStartUpAndDurations) {
  const fs::path dir = testsupport::temp_dir("steps-json");
  ChildResult child;
  child.status = ChildStatus::Exited;
  child.start_ns = 1'000;
  child.wall_ns = 10'000;
  EXPECT_NE(steps_of(dir, child)["why"].get<std::string>().find(kStepMarkEnv), std::string::npos);
  std::ofstream(dir / kStepMarkFile) << "3000 first\n3500\n4500\n";
  const json j = steps_of(dir, child);
  EXPECT_EQ(j["marks"], 3);
  EXPECT_EQ(j["startup_ns"], 2000);
  EXPECT_EQ(j["durations_ns"], json({500, 1000}));
  child.status = ChildStatus::Signaled;
  EXPECT_EQ(steps_of(dir, child)["marks"], 0);
}

TEST(StepStats, TheFirstTenthIsWarmUp) {
  EXPECT_EQ(warmup_steps(0), 0u);
  EXPECT_EQ(warmup_steps(1), 1u);
  EXPECT_EQ(warmup_steps(10), 1u);
  EXPECT_EQ(warmup_steps(11), 2u);
  EXPECT_EQ(warmup_steps(200), 20u);
  json steps = {{"startup_ns", 7}, {"durations_ns", json::array()}};
  for (int i = 0; i < 20; ++i) steps["durations_ns"].push_back(i < 2 ? 1e9 : 1e6);
  const StepRun r = step_run_of(3, steps);
  EXPECT_EQ(r.round, 3);
  EXPECT_EQ(*r.startup_ns, 7);
  EXPECT_EQ(r.steady_ns, std::vector<double>(18, 1e6)) << "the two slow first steps are dropped";
}

TEST(StepStats, KnownStepsGiveTheirRatioAndAnIntervalAroundIt) {
  // Three rounds of 200 steady steps; traced steps are 1.2 times untraced ones.
  std::vector<StepRun> none, traced;
  for (int k = 1; k <= 3; ++k) {
    none.push_back(run_of(k, steps_ms(200, 2.0, 10 + k)));
    traced.push_back(run_of(k, steps_ms(200, 2.4, 20 + k)));
  }
  std::vector<std::pair<const StepRun*, const StepRun*>> pairs;
  for (int k = 0; k < 3; ++k) pairs.emplace_back(&none[k], &traced[k]);
  const std::optional<StepRatio> r = step_ratio(pairs);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->value, 1.2, 0.02);
  ASSERT_TRUE(r->ci95) << r->why_no_interval;
  EXPECT_LE(r->ci95->first, 1.2);
  EXPECT_GE(r->ci95->second, 1.2);
  EXPECT_LT(r->ci95->second - r->ci95->first, 0.06) << "600 steps a side pin the median down";
  EXPECT_EQ(r->rounds, 3u);
  EXPECT_EQ(r->steps, 600u);
  EXPECT_FALSE(r->across_rounds) << "3 rounds: no interval across rounds";
  EXPECT_FALSE(r->anomaly());
  const json j = step_ratio_json(r);
  EXPECT_TRUE(j["ci95"].is_array());
  EXPECT_EQ(j["interval"]["method"], kStepIntervalMethod);
  EXPECT_FALSE(j.contains("anomaly"));
  ASSERT_TRUE(j["interval"].contains("scope")) << "3 rounds: the interval knows these runs only, and says so";
  EXPECT_NE(j["interval"]["scope"].get<std::string>().find("within 3 run(s) only"), std::string::npos);
  EXPECT_EQ(step_ratio(pairs)->ci95, r->ci95) << "the bootstrap is seeded: the same figures twice";
}

TEST(StepStats, RunToRunVariationWidensTheIntervalFromSixRounds) {
  // Each round's traced run is slower by its own factor (1.1 .. 1.35): the bootstrap over
  // steps sees none of that spread; the interval over rounds does.
  std::vector<StepRun> none, traced;
  for (int k = 1; k <= 6; ++k) {
    none.push_back(run_of(k, steps_ms(200, 2.0, 30 + k)));
    traced.push_back(run_of(k, steps_ms(200, 2.0 * (1.05 + 0.05 * k), 40 + k)));
  }
  std::vector<std::pair<const StepRun*, const StepRun*>> pairs;
  for (int k = 0; k < 6; ++k) pairs.emplace_back(&none[k], &traced[k]);
  const std::optional<StepRatio> r = step_ratio(pairs);
  ASSERT_TRUE(r && r->ci95 && r->across_rounds);
  EXPECT_EQ(r->per_round.size(), 6u);
  EXPECT_TRUE(r->widened_by_rounds);
  EXPECT_LE(r->ci95->first, 1.11);
  EXPECT_GE(r->ci95->second, 1.34);
  EXPECT_FALSE(step_ratio_json(r)["interval"].contains("scope")) << "six rounds: run-to-run variation is in it";
}

TEST(StepStats, TooFewStepsGiveNoIntervalAndSaySo) {
  const StepRun none = run_of(1, steps_ms(10, 2.0, 1)), traced = run_of(1, steps_ms(10, 2.2, 2));
  const std::optional<StepRatio> r = step_ratio({{&none, &traced}});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->ci95);
  EXPECT_NEAR(r->value, 1.1, 0.06);
  const json j = step_ratio_json(r);
  EXPECT_TRUE(j["ci95"].is_null());
  EXPECT_NE(j["why_no_interval"].get<std::string>().find("too few steps for an interval"), std::string::npos);
  const StepRun empty = run_of(1, {});
  EXPECT_FALSE(step_ratio({{&empty, &traced}})) << "no steady steps of none: no ratio at all";
}

TEST(StepStats, FasterTracedStepsBeyondTheIntervalAreAnAnomaly) {
  const StepRun none = run_of(1, steps_ms(300, 2.0, 5)), traced = run_of(1, steps_ms(300, 1.6, 6));
  const json j = step_ratio_json(step_ratio({{&none, &traced}}));
  ASSERT_TRUE(j["ci95"].is_array());
  EXPECT_LT(j["ci95"][1].get<double>(), 1.0);
  ASSERT_TRUE(j.contains("anomaly"));
  EXPECT_NE(j["anomaly"].get<std::string>().find("warm-up"), std::string::npos);
}

TEST(RoundsInterval, ThreeRoundsAreTooFewAndSixAreEnough) {
  const std::vector<std::pair<double, double>> three{{100, 110}, {100, 112}, {100, 108}};
  const json j = ratio_json(paired_median_ratio(three));
  EXPECT_TRUE(j["ci95"].is_null());
  EXPECT_NE(j["why_no_interval"].get<std::string>().find("too few rounds for an interval"), std::string::npos);
  std::vector<std::pair<double, double>> six = three;
  for (double x : {109.0, 111.0, 110.0}) six.emplace_back(100, x);
  EXPECT_TRUE(ratio_json(paired_median_ratio(six))["ci95"].is_array());
  // Under 1, the whole interval: flagged with its likely causes.
  std::vector<std::pair<double, double>> faster;
  for (double x : {90.0, 91.0, 89.0, 92.0, 90.0, 88.0}) faster.emplace_back(100, x);
  const json a = ratio_json(paired_median_ratio(faster));
  ASSERT_TRUE(a.contains("anomaly"));
  EXPECT_NE(a["anomaly"].get<std::string>().find("cold first run"), std::string::npos);
  faster.back().second = 105;  // one round above 1: the interval reaches past 1, no flag
  EXPECT_FALSE(ratio_json(paired_median_ratio(faster)).contains("anomaly"));
}

TEST(CostOrder, AWarmUpRoundThenAnOrderDrawnFromTheSeed) {
  const std::vector<CostSubject> subjects{{"a", "none", "", ""}, {"a", "shim", "", ""}, {"a", "probe", "", ""},
                                          {"b", "none", "", ""}, {"b", "shim", "", ""}};
  const RunPlan plan = cost_plan(subjects, 30, 7);
  ASSERT_EQ(plan.size(), 2u + 30 * 5);
  EXPECT_EQ(plan[0].combo, 0u);
  EXPECT_EQ(plan[0].rep, 0);
  EXPECT_EQ(plan[1].combo, 3u);
  EXPECT_EQ(plan[1].rep, 0) << "round 0: each program once, untraced";
  std::map<size_t, std::set<size_t>> places;  // combination -> places it took within its program
  for (int round = 1; round <= 30; ++round) {
    std::vector<size_t> ran;
    for (const auto& p : plan)
      if (p.rep == round) ran.push_back(p.combo);
    ASSERT_EQ(ran.size(), 5u);
    EXPECT_EQ(std::multiset<size_t>(ran.begin(), ran.begin() + 3), (std::multiset<size_t>{0, 1, 2})) << "a first";
    EXPECT_EQ(std::multiset<size_t>(ran.begin() + 3, ran.end()), (std::multiset<size_t>{3, 4}));
    for (size_t j = 0; j < 3; ++j) places[ran[j]].insert(j);
  }
  for (size_t c : {0u, 1u, 2u}) EXPECT_EQ(places[c].size(), 3u) << "combination " << c << " stood at every place";
  const auto same = [](const RunPlan& x, const RunPlan& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].combo != y[i].combo || x[i].rep != y[i].rep) return false;
    return true;
  };
  EXPECT_TRUE(same(plan, cost_plan(subjects, 30, 7))) << "the recorded seed gives the same order";
  EXPECT_FALSE(same(plan, cost_plan(subjects, 30, 8)));
}

TEST(CostRecorder, TheWarmUpCountsNowhereAndStepsReachTheSummary) {
  const std::vector<CostSubject> subjects{{"command", "none", "", ""}, {"command", "shim", "", ""}};
  const RunPlan plan = cost_plan(subjects, 2, 11);
  CostRecorder rec(subjects, plan, 2, std::nullopt, {"python3", "train.py"}, 11);
  for (size_t i = 0; i < plan.size(); ++i) {
    ASSERT_TRUE(rec.should_run(i));
    const bool traced = plan[i].combo == 1;
    json durations = json::array();
    for (double d : steps_ms(100, traced ? 3.0 : 2.0, i)) durations.push_back(int64_t(d));
    const json run = {{"ok", true}, {"status", "exited"}, {"exit_code", 0},
                      {"wall_ns", plan[i].rep == 0 ? 9e9 : 1e9},
                      {"tracer", {{"loss", json::object()}, {"notes", json::object()}}},
                      {"unobserved", json::array()}, {"partly_observed", json::array()},
                      {"startup", {{"ns", nullptr}, {"why", "no mark"}}},
                      {"steps", {{"marks", 101}, {"startup_ns", traced ? 600e6 : 500e6}, {"durations_ns", durations}}}};
    rec.add(i, run, "/nonexistent/command." + std::to_string(i));
    if (plan[i].rep == 0) {
      EXPECT_NE(rec.progress(i).find("warm-up"), std::string::npos);
    }
  }
  const json s = rec.summary(json::array());
  EXPECT_EQ(s["seed"], 11);
  ASSERT_EQ(s["warm_up"].size(), 1u);
  EXPECT_EQ(s["warm_up"][0]["program"], "command");
  EXPECT_EQ(s["rounds"]["done"], 2);
  const json& none = s["programs"][0]["methods"][0];
  const json& shim = s["programs"][0]["methods"][1];
  EXPECT_EQ(none["counts"]["runs"], 2) << "the warm-up run is in no figure";
  EXPECT_EQ(none["median_wall_ns"], 1e9);
  EXPECT_EQ(none["steps"]["steady_steps"], 180);
  EXPECT_FALSE(none["steps"].contains("ratio"));
  ASSERT_TRUE(shim["steps"]["ratio"].is_object()) << shim.dump();
  EXPECT_NEAR(shim["steps"]["ratio"]["value"].get<double>(), 1.5, 0.03);
  ASSERT_TRUE(shim["steps"]["ratio"]["ci95"].is_array());
  EXPECT_NEAR(shim["steps"]["startup_ratio"]["value"].get<double>(), 1.2, 1e-9);
  EXPECT_NE(rec.table(s).find("per step (steady state"), std::string::npos) << rec.table(s);
}

// A step file past its bound gave its first steps only: the figures say so, never silently.
TEST(StepStats, AStepFileCutAtItsBoundIsNamedInTheFigures) {
  json cut = {{"startup_ns", 1000}, {"durations_ns", json::array({10, 10, 10, 10})}, {"unread_bytes", 4096}};
  json whole = {{"startup_ns", 1000}, {"durations_ns", json::array({10, 10, 10, 10})}};
  const std::vector<StepRun> traced = {step_run_of(1, cut)}, none = {step_run_of(1, whole)};
  EXPECT_EQ(traced[0].unread_bytes, 4096u);
  const json f = step_figures(traced, none, {1}, {1}, false);
  ASSERT_TRUE(f.contains("steps_cut")) << f.dump();
  EXPECT_NE(f["steps_cut"].get<std::string>().find("1 run(s)"), std::string::npos) << f.dump();
  EXPECT_FALSE(step_figures(none, none, {1}, {1}, false).contains("steps_cut")) << "a whole file is not cut";
}
