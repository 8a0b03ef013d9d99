#include <gtest/gtest.h>

#include "harness/stats/bench_stats.h"
#include "harness/cli.h"

using namespace cudatrace;

TEST(BenchStats, Median) {
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({}), 0);
}

TEST(BenchStats, DifferenceOfMediansWithItsInterval) {
  std::vector<double> none{100, 101, 99, 100, 102}, traced{150, 149, 151, 150, 152};
  Difference d = median_difference(none, traced);
  EXPECT_DOUBLE_EQ(d.delta, 50);
  EXPECT_LE(d.lo, 50);
  EXPECT_GE(d.hi, 50);
  EXPECT_GT(d.lo, 40) << "well-separated samples give a tight interval";
  EXPECT_LT(d.hi, 60);
  // Same data, same interval: the bootstrap is seeded.
  Difference again = median_difference(none, traced);
  EXPECT_DOUBLE_EQ(d.lo, again.lo);
  EXPECT_DOUBLE_EQ(d.hi, again.hi);
  // Identical constant samples: no difference, zero width.
  Difference zero = median_difference({5, 5, 5}, {5, 5, 5});
  EXPECT_DOUBLE_EQ(zero.lo, 0);
  EXPECT_DOUBLE_EQ(zero.hi, 0);
}

TEST(BenchStats, NoisyOverlappingSamplesGiveAnIntervalAcrossZero) {
  Difference d = median_difference({100, 140, 90, 130, 95, 120}, {105, 135, 92, 125, 99, 118});
  EXPECT_LT(d.lo, 0);
  EXPECT_GT(d.hi, 0);
}

TEST(Cli, BenchTakesNoWorkloadAndDefaultsItsRepetitions) {
  Options o = parse_cli({"--bench", "--method", "none"}, {"vecadd"}, {"none", "preload"});
  EXPECT_TRUE(o.bench);
  EXPECT_FALSE(o.reps_given);
  EXPECT_THROW(parse_cli({"--bench", "--workload", "vecadd"}, {"vecadd"}, {"none"}), UsageError);
  EXPECT_TRUE(parse_cli({"--bench", "--reps", "9"}, {"vecadd"}, {"none"}).reps_given);
}

TEST(BenchStats, RatioOfMediansWithAnInterval) {
  const std::vector<double> none = {100, 102, 98, 101, 99}, traced = {150, 149, 152, 151, 148};
  const Difference r = median_ratio(none, traced);
  EXPECT_DOUBLE_EQ(r.delta, 1.5);
  EXPECT_LE(r.lo, r.delta);
  EXPECT_GE(r.hi, r.delta);
  EXPECT_GT(r.lo, 1.4);
  EXPECT_LT(r.hi, 1.6);
  // The same data gives the same interval (fixed seed).
  const Difference again = median_ratio(none, traced);
  EXPECT_EQ(again.lo, r.lo);
  EXPECT_EQ(again.hi, r.hi);
}

TEST(BenchStats, OneSampleMedianWithAnInterval) {
  const std::vector<double> deltas = {210, 205, 220, 214, 199, 230, 208};
  const Difference d = median_interval(deltas);
  EXPECT_DOUBLE_EQ(d.delta, 210);
  EXPECT_LE(d.lo, 210);
  EXPECT_GE(d.hi, 210);
  EXPECT_GE(d.lo, 199);
  EXPECT_LE(d.hi, 230);
}

// A speed-up is never reported: negative differences, intervals reaching zero and paired
// differences within their control are "no measurable cost"; a clear cost is not.
TEST(BenchStats, NoMeasurableCostIsNoiseNeverASpeedUp) {
  EXPECT_TRUE(between_processes_no_measurable_cost({-610, -900, -300}));
  EXPECT_TRUE(between_processes_no_measurable_cost({72, -200, 300}));
  EXPECT_FALSE(between_processes_no_measurable_cost({3229, 2900, 3500}));
  EXPECT_TRUE(in_process_no_measurable_cost({-4, -6, -1}, 2));
  EXPECT_TRUE(in_process_no_measurable_cost({59, 50, 66}, 70));   // preload cuLaunchKernel within its control
  EXPECT_TRUE(in_process_no_measurable_cost({59, 50, 66}, -70));  // a control reads noise either way
  // Above its control, but its interval reaches zero (preload, vecadd + sync, H100 host).
  EXPECT_TRUE(in_process_no_measurable_cost({188.5, -32, 249}, -172.5));
  EXPECT_TRUE(in_process_no_measurable_cost({40, 0, 80}, 5));
  EXPECT_FALSE(in_process_no_measurable_cost({135, 120, 150}, 49));
  EXPECT_FALSE(in_process_no_measurable_cost({91, 80, 100}, 0));
}

// The untraced call per process: none's live times pooled with every pausing method's
// paused halves; a traced method's live times never count, nor a call seen once.
TEST(BenchStats, UntracedSpreadPoolsNoneWithPausedHalves) {
  const PerProcess live{{{"cudaGetDevice", "shared", "none"}, {40, 70}},
                        {{"cudaGetDevice", "shared", "preload"}, {500, 900}},
                        {{"cudaMalloc", "static", "none"}, {2000}}};
  const PerProcess paused{{{"cudaGetDevice", "shared", "preload"}, {45}},
                          {{"cudaGetDevice", "shared", "cupti"}, {60, 80}}};
  const auto spread = untraced_spread(live, paused);
  ASSERT_EQ(spread.size(), 1u) << "cudaMalloc: one process, no spread";
  const Spread& s = spread.at({"cudaGetDevice", "shared"});
  EXPECT_EQ(s.processes, 5u);
  EXPECT_DOUBLE_EQ(s.min, 40);
  EXPECT_DOUBLE_EQ(s.median, 60);
  EXPECT_DOUBLE_EQ(s.max, 80) << "preload's live 900 is a traced time, not the machine";
}
