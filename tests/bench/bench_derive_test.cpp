// What the harness derives from a benchmark's rows (harness/stats/bench_stats.h), on small fixture
// summaries (tests/bench/fixtures/): whether two runs agree, cupti against nsys and the empty
// subscriber, uprobe's entry and return probes. No GPU: the rows are written by hand.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/stats/bench.h"
#include "harness/stats/bench_stats.h"
#include "harness/cli.h"

using namespace cudatrace;
using json = nlohmann::json;

namespace {

const std::filesystem::path kFixtures = FIXTURES_DIR;

json fixture(const char* name) { return read_bench_summary(kFixtures / name); }

const json& by_call(const json& list, const std::string& call, const std::string& linkage = "shared") {
  for (const auto& e : list)
    if (e["call"] == call && e["linkage"] == linkage) return e;
  static const json none;
  ADD_FAILURE() << "no entry for " << call << " " << linkage << " in " << list.dump(1);
  return none;
}

// A summary of `n` deltas, each a row of its own: `first` true for the earlier run.
json deltas(int n, int outside, bool first) {
  json rows = json::array();
  for (int i = 0; i < n; ++i) {
    const double v = first ? 1000 : (i < outside ? 1500 : 1050);
    rows.push_back({{"call", "c" + std::to_string(i)}, {"linkage", "shared"}, {"method", "m"}, {"delta_ns", v},
                    {"delta_ci95_ns", {v - 10, v + 10}}});
  }
  return {{"run_id", first ? "first" : "second"}, {"rows", rows}};
}

}  // namespace

TEST(BenchAgreement, ADeltaAgreesWithinTheIntervalOrTenPercentOrAHundredNanoseconds) {
  EXPECT_TRUE(delta_agrees(400, 300, 700, 650)) << "inside the first run's interval";
  EXPECT_TRUE(delta_agrees(3000, 2950, 3050, 3300)) << "exactly 10%";
  EXPECT_FALSE(delta_agrees(3000, 2950, 3050, 3301));
  EXPECT_TRUE(delta_agrees(50, 45, 55, 150)) << "exactly 100 ns on a small cost";
  EXPECT_FALSE(delta_agrees(50, 45, 55, 151));
  EXPECT_TRUE(delta_agrees(-20, -100, 60, 70)) << "a negative first value: 100 ns either way";
  EXPECT_TRUE(delta_agrees(-2000, -2100, -1900, -2190)) << "10% of the value's size, whatever its sign";
}

TEST(BenchAgreement, TheRunsAgreeWhenNinetyFivePercentOfTheSharedDeltasDo) {
  json a = bench_agreement(deltas(20, 0, true), deltas(20, 1, false));
  EXPECT_EQ(a["compared"], 20);
  EXPECT_EQ(a["within"], 19);
  EXPECT_TRUE(a["pass"].get<bool>()) << "19 of 20 is 95%";
  a = bench_agreement(deltas(20, 0, true), deltas(20, 2, false));
  EXPECT_FALSE(a["pass"].get<bool>()) << "18 of 20 is not";
  ASSERT_EQ(a["outside"].size(), 2u);
  EXPECT_EQ(a["outside"][0]["difference_ns"], 500);
  a = bench_agreement(deltas(0, 0, true), deltas(0, 0, false));
  EXPECT_FALSE(a["pass"].get<bool>()) << "nothing compared is no agreement";
  EXPECT_TRUE(a.contains("why"));
}

TEST(BenchAgreement, OnTwoFixtureRuns) {
  const json a = bench_agreement(fixture("agree-first"), fixture("agree-second"));
  EXPECT_EQ(a["against"], "fixture-first");
  EXPECT_EQ(a["compared"], 10);
  EXPECT_EQ(a["within"], 8);
  EXPECT_DOUBLE_EQ(a["fraction"].get<double>(), 0.8);
  EXPECT_FALSE(a["pass"].get<bool>());
  EXPECT_EQ(a["not_compared"], 1) << "a delta of the second run only";
  ASSERT_EQ(a["outside"].size(), 2u) << a.dump(1);
  const json& nsys = by_call(a["outside"], "cudaGetDevice");
  EXPECT_EQ(nsys["method"], "nsys");
  EXPECT_EQ(nsys["kind"], "between");
  EXPECT_EQ(nsys["first_ci95_ns"], json({370, 390}));
  EXPECT_EQ(nsys["untraced_ns"], json({100, 160})) << "how far the untraced call moved, from none's rows";
  EXPECT_EQ(by_call(a["outside"], "cudaLaunchKernel")["method"], "cupti");
}

TEST(BenchAgreement, InProcessDeltasAreComparedToo) {
  const json first = {{"rows", {{{"call", "c"}, {"linkage", "static"}, {"method", "uprobe"}, {"delta_ns", 3000},
                                 {"delta_ci95_ns", {2000, 4000}}, {"in_process_delta_ns", 2000},
                                 {"in_process_delta_ci95_ns", {1990, 2010}}}}}};
  json second = first;
  second["rows"][0]["in_process_delta_ns"] = 2500;
  const json a = bench_agreement(first, second);
  EXPECT_EQ(a["compared"], 2);
  ASSERT_EQ(a["outside"].size(), 1u);
  EXPECT_EQ(a["outside"][0]["kind"], "in-process");
}

const json& bar_of(const json& entry, const std::string& against) {
  for (const auto& b : entry["target"]["bars"])
    if (b["against"] == against) return b;
  static const json none;
  ADD_FAILURE() << "no bar against " << against << " in " << entry.dump(1);
  return none;
}

TEST(BenchEstimators, CuptiAtMostNsysOnEveryCallAndTheEmptySubscriberPlus100NsOffLaunchesAndCopies) {
  const json est = estimator_comparison(fixture("derive")["rows"]);
  const json& launch = by_call(est["calls"], "cudaLaunchKernel");
  EXPECT_EQ(launch["call_kind"], "launch");
  EXPECT_EQ(launch["cost"]["delta_ns"], 1000);
  EXPECT_EQ(launch["references"]["nsys"]["delta_ns"], 1500);
  EXPECT_EQ(launch["references"]["cupti-bare"]["delta_ns"], 300);
  EXPECT_NEAR(launch["references"]["nsys"]["ratio"].get<double>(), 1000.0 / 1500, 1e-9);
  EXPECT_NEAR(launch["references"]["cupti-bare"]["ratio"].get<double>(), 1000.0 / 300, 1e-9);
  ASSERT_EQ(launch["target"]["bars"].size(), 1u) << "a launch is held to nsys only";
  EXPECT_EQ(bar_of(launch, "nsys")["at_most_ns"], 1500);
  EXPECT_EQ(launch["target"]["met"], true) << "1000 <= 1500";
  EXPECT_EQ(launch["in_process"]["delta_ns"], 600) << "the in-process A/B beside it";

  const json& copy = by_call(est["calls"], "cudaMemcpyAsync_4B_HtoD");
  EXPECT_EQ(copy["target"]["met"], true) << "900 <= nsys's 1000 (0.9x: under the old 0.7x bar this missed)";
  EXPECT_FALSE(copy["references"].contains("cupti-bare"));

  const json& get_device = by_call(est["calls"], "cudaGetDevice");
  ASSERT_EQ(get_device["target"]["bars"].size(), 2u);
  EXPECT_EQ(bar_of(get_device, "cupti-bare")["met"], true) << "420 <= 400 + 100";
  EXPECT_EQ(bar_of(get_device, "nsys")["met"], false) << "420 > 380: nsys counts on every call";
  EXPECT_EQ(get_device["target"]["met"], false);

  const json& sync = by_call(est["calls"], "cudaStreamSynchronize_idle");
  EXPECT_EQ(bar_of(sync, "cupti-bare")["met"], false) << "700 > 500 + 100";
  EXPECT_EQ(sync["target"]["met"], false) << "a missed bar decides, though nsys's is not judged";
  EXPECT_TRUE(bar_of(sync, "nsys")["met"].is_null());

  const json& event = by_call(est["calls"], "cudaEventRecord");
  EXPECT_EQ(event["references"]["cupti-bare"]["no_measurable_cost"], true);
  EXPECT_EQ(bar_of(event, "cupti-bare")["at_most_ns"], 100) << "a subscriber below zero counts as zero";
  EXPECT_EQ(bar_of(event, "cupti-bare")["met"], false) << "600 > 0 + 100";
  EXPECT_TRUE(event["references"]["cupti-bare"]["ratio"].is_null());

  const json& driver = by_call(est["calls"], "cuLaunchKernel");
  EXPECT_TRUE(driver["target"]["met"].is_null());
  EXPECT_NE(driver["target"]["why_not_judged"].get<std::string>().find("nsys has no difference"), std::string::npos);

  EXPECT_EQ(est["met"], 2);
  EXPECT_EQ(est["missed"], 3);
  EXPECT_EQ(est["not_judged"], 1);
}

TEST(BenchEstimators, AnNsysWithNoMeasurableCostHoldsCuptiToZeroAndAMissingKindJudgesNoBar) {
  json rows = json::array({{{"call", "c"}, {"linkage", "shared"}, {"method", "cupti"}, {"call_kind", "launch"},
                            {"delta_ns", 500}},
                           {{"call", "c"}, {"linkage", "shared"}, {"method", "nsys"}, {"call_kind", "launch"},
                            {"delta_ns", -5}}});
  const json est = estimator_comparison(rows);
  const json& c = by_call(est["calls"], "c");
  EXPECT_EQ(c["target"]["met"], false) << "nsys costs nothing measurable here, cupti 500 ns: " << c.dump(1);
  EXPECT_EQ(bar_of(c, "nsys")["at_most_ns"], 0);

  for (auto& r : rows) r.erase("call_kind");
  const json unlabelled = estimator_comparison(rows);
  const json& u = by_call(unlabelled["calls"], "c");
  EXPECT_TRUE(u["target"]["met"].is_null());
  EXPECT_TRUE(u["target"]["bars"].empty()) << "no bar judged where the call's kind, and so its bars, is unknown";
}

TEST(BenchEstimators, WithoutCuptiOrWithoutKindsItSaysSo) {
  EXPECT_TRUE(estimator_comparison(json::array()).contains("why"));
  json rows = fixture("derive")["rows"];
  for (auto& r : rows) r.erase("call_kind");
  const json est = estimator_comparison(rows);
  EXPECT_EQ(est["not_judged"], est["calls"].size()) << "a summary from before percall labelled its calls";
}

TEST(BenchSummary, AVersionThisHarnessDoesNotReadIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("cudatrace-bench-version-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "bench_summary.json") << R"({"schema_version": 3, "run_id": "x", "rows": []})";
  }
  try {
    read_bench_summary(dir);
    ADD_FAILURE() << "version 3 read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("schema_version 3"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
  EXPECT_THROW(read_bench_summary(dir), std::runtime_error) << "a folder without a summary";
}

TEST(BenchSummary, AgreeWithGoesWithBench) {
  const Options o = parse_cli({"--bench", "--agree-with", "results/earlier"}, {"vecadd"}, {"none"});
  EXPECT_EQ(o.agree_with, "results/earlier");
  EXPECT_THROW(parse_cli({"--agree-with", "results/earlier"}, {"vecadd"}, {"none"}), UsageError);
  EXPECT_THROW(parse_cli({"--bench", "--agree-with="}, {"vecadd"}, {"none"}), UsageError);
}

namespace {

json row(const char* method, std::vector<double> values, std::vector<double> ab = {}, std::vector<double> paused = {}) {
  json r = {{"call", "cudaGetDevice"}, {"linkage", "shared"}, {"method", method}, {"call_kind", "other"},
            {"values_ns", values}};
  if (!ab.empty()) r["in_process_values_ns"] = ab;
  if (!paused.empty()) r["in_process_paused_values_ns"] = paused;
  return r;
}

const json& parts_of(const json& parts, const std::string& method) {
  for (const auto& e : parts["calls"])
    if (e["method"] == method) return e;
  static const json none;
  ADD_FAILURE() << "no cost parts for " << method << " in " << parts.dump(1);
  return none;
}

double part_ns(const json& entry, const std::string& name) {
  for (const auto& p : entry["parts"])
    if (p["part"] == name) return p["ns"].get<double>();
  ADD_FAILURE() << "no part " << name << " in " << entry.dump(1);
  return 0;
}

}  // namespace

TEST(BenchCostParts, PreloadSplitsIntoInterpositionAndRecordingAndCuptiIntoItsFloorAndItsWork) {
  json rows = json::array({row("none", {100, 101, 99}),
                           row("preload", {190, 191, 189}, {60, 61, 59}, {130, 131, 129}),
                           row("cupti", {700, 701, 699}, {500, 501, 499}, {150, 151, 149}),
                           row("cupti-bare", {400, 401, 399}, {280, 281, 279}, {120, 121, 119})});
  for (auto& r : rows)
    if (r["method"] != "none") r["delta_ns"] = r["values_ns"][0].get<double>() - 100;
  const json parts = cost_parts(rows);

  const json& preload = parts_of(parts, "preload");
  EXPECT_EQ(preload["whole"]["delta_ns"], 90);
  EXPECT_DOUBLE_EQ(part_ns(preload, "interposition"), 30) << "paused halves (130) against none (100)";
  EXPECT_DOUBLE_EQ(part_ns(preload, "recording"), 60) << "live against paused in process";
  EXPECT_DOUBLE_EQ(preload["floor"]["ns"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(preload["above_floor_ns"].get<double>(), 60);

  const json& cupti = parts_of(parts, "cupti");
  EXPECT_DOUBLE_EQ(part_ns(cupti, "paused"), 50);
  EXPECT_DOUBLE_EQ(part_ns(cupti, "CUPTI's dispatch"), 280) << "cupti-bare's own A/B";
  EXPECT_DOUBLE_EQ(part_ns(cupti, "kernel activity + recording"), 220)
      << "cupti's A/B (500) less cupti-bare's (280): cupti-inject did not run, so its part joins the next";
  EXPECT_DOUBLE_EQ(cupti["floor"]["ns"].get<double>(), 300) << "the empty subscriber's difference to none";
  EXPECT_DOUBLE_EQ(cupti["above_floor_ns"].get<double>(), 300);
  EXPECT_FALSE(cupti.contains("not_measured"));
  EXPECT_FALSE(cupti.contains("caveats"));
  for (const auto& p : cupti["parts"]) {
    EXPECT_LE(p["ci95_ns"][0].get<double>(), p["ns"].get<double>()) << p.dump();
    EXPECT_GE(p["ci95_ns"][1].get<double>(), p["ns"].get<double>()) << p.dump();
  }

  rows.push_back(row("cupti-inject", {650, 651, 649}, {420, 421, 419}, {150, 151, 149}));
  rows.back()["delta_ns"] = 550;
  const json with_inject = parts_of(cost_parts(rows), "cupti");
  EXPECT_DOUBLE_EQ(part_ns(with_inject, "kernel activity"), 140) << "cupti-inject's A/B less cupti-bare's";
  EXPECT_DOUBLE_EQ(part_ns(with_inject, "recording"), 80) << "cupti's A/B less cupti-inject's";

  // A reference measured while it lost events taints the parts: said, as uprobe's split says it.
  json lossy = rows;
  lossy[3]["loss_during_runs"] = {{"ring_full", 3}};
  const json lossy_parts = cost_parts(lossy);
  const json& cupti_lossy = parts_of(lossy_parts, "cupti");
  ASSERT_EQ(cupti_lossy["caveats"].size(), 1u) << cupti_lossy.dump(1);
  EXPECT_EQ(cupti_lossy["caveats"][0], "cupti-bare measured under loss");

  // cupti-bare with no A/B: what it isolates joins the next part, measured whole.
  json no_bare_ab = rows;
  no_bare_ab[3].erase("in_process_values_ns");
  const json no_bare = cost_parts(no_bare_ab);
  const json& cupti_no_bare = parts_of(no_bare, "cupti");
  EXPECT_DOUBLE_EQ(part_ns(cupti_no_bare, "CUPTI's dispatch + kernel activity"), 420) << "cupti-inject's A/B whole";
  EXPECT_DOUBLE_EQ(part_ns(cupti_no_bare, "recording"), 80);
  EXPECT_FALSE(cupti_no_bare.contains("not_measured")) << cupti_no_bare.dump(1);

  // cupti without its own A/B: the kernel activity is still measured, the recording named.
  rows[2].erase("in_process_values_ns");
  const json no_ab = cost_parts(rows);
  const json& cupti_no_ab = parts_of(no_ab, "cupti");
  EXPECT_DOUBLE_EQ(part_ns(cupti_no_ab, "kernel activity"), 140);
  ASSERT_EQ(cupti_no_ab["not_measured"].size(), 1u) << cupti_no_ab.dump(1);
  EXPECT_EQ(cupti_no_ab["not_measured"][0].get<std::string>().rfind("recording", 0), 0u) << cupti_no_ab.dump(1);
}

// The split comes from the registry: uprobe's entry names uprobe-enter as nested and
// uprobe-empty as its floor, and nothing here names them.
TEST(BenchCostParts, UprobeIsTakenApartAsItsRegistryEntrySays) {
  json rows = json::array({row("none", {100, 101, 99}), row("uprobe", {3400, 3401, 3399}, {3280, 3281, 3279}, {110}),
                           row("uprobe-enter", {2300, 2301, 2299}, {2150, 2151, 2149}, {105}),
                           row("uprobe-empty", {2900, 2901, 2899})});
  for (auto& r : rows)
    if (r["method"] != "none") r["delta_ns"] = r["values_ns"][0].get<double>() - 100;
  const json parts = cost_parts(rows);
  const json& uprobe = parts_of(parts, "uprobe");
  EXPECT_DOUBLE_EQ(part_ns(uprobe, "entry probes"), 2150) << "uprobe-enter's A/B";
  EXPECT_DOUBLE_EQ(part_ns(uprobe, "return probes"), 1130) << "uprobe's A/B less uprobe-enter's";
  EXPECT_DOUBLE_EQ(uprobe["floor"]["ns"].get<double>(), 2800) << "uprobe-empty's difference to none";
  EXPECT_EQ(parts["calls"].size(), 1u) << "the references are not taken apart themselves: " << parts.dump(1);
}

TEST(BenchCostParts, WhatCouldNotBeMeasuredIsNamedNotZero) {
  const json rows = json::array({row("none", {100, 101, 99}), row("cupti", {700, 701, 699})});
  json r = rows;
  r[1]["delta_ns"] = 600;
  const json parts = cost_parts(r);
  const json& cupti = parts_of(parts, "cupti");
  EXPECT_TRUE(cupti["parts"].empty());
  ASSERT_EQ(cupti["not_measured"].size(), 2u) << cupti.dump(1);
  EXPECT_EQ(cupti["not_measured"][0].get<std::string>().rfind("paused", 0), 0u) << cupti.dump(1);
  EXPECT_EQ(cupti["not_measured"][1].get<std::string>().rfind("CUPTI's dispatch + kernel activity + recording", 0), 0u)
      << "every in-process part named, none a clean zero: " << cupti.dump(1);
  EXPECT_FALSE(cupti.contains("floor"));
  EXPECT_TRUE(cost_parts(json::array()).contains("why"));
}

// #52's bar for preload is per record: the recording over the records the shim counted per
// call, judged against the registry's 50 ns; a method without a bar gets the figure alone,
// and a call whose records were not counted gets neither.
TEST(BenchCostParts, PreloadIsJudgedPerRecordItCountedAndTallied) {
  json rows = json::array({row("none", {100, 101, 99}), row("preload", {190, 191, 189}, {86, 87, 85}, {101, 102, 100}),
                           row("cupti", {700, 701, 699}, {500, 501, 499}, {150, 151, 149})});
  for (auto& r : rows)
    if (r["method"] != "none") r["delta_ns"] = r["values_ns"][0].get<double>() - 100;
  rows[1]["records_per_call"] = 2;
  rows[2]["records_per_call"] = 2;
  const json parts = cost_parts(rows);
  const json& preload = parts_of(parts, "preload")["per_record"];
  EXPECT_EQ(preload["part"], "recording");
  EXPECT_DOUBLE_EQ(preload["ns"].get<double>(), 43) << "the recording's 86 ns over 2 records";
  EXPECT_DOUBLE_EQ(preload["whole_ns"].get<double>(), 45);
  EXPECT_LE(preload["ci95_ns"][0].get<double>(), 43);
  EXPECT_EQ(preload["bar"]["at_most_ns"], 50);
  EXPECT_EQ(preload["bar"]["met"], true);
  EXPECT_EQ(preload["bar"]["settled"], true) << "three processes, the interval wholly under 50 ns";
  const json& cupti = parts_of(parts, "cupti")["per_record"];
  EXPECT_DOUBLE_EQ(cupti["ns"].get<double>(), 250);
  EXPECT_FALSE(cupti.contains("bar")) << "the registry sets no per-record bar for cupti";
  ASSERT_EQ(parts["per_record_bars"].size(), 1u) << parts.dump(1);
  EXPECT_EQ(parts["per_record_bars"][0]["met"], 1);
  EXPECT_EQ(parts["per_record_bars"][0]["unsettled"], 0);

  // One record a call: the same recording is over the bar.
  rows[1]["records_per_call"] = 1;
  const json one = cost_parts(rows);
  EXPECT_EQ(parts_of(one, "preload")["per_record"]["bar"]["met"], false);
  EXPECT_EQ(one["per_record_bars"][0]["missed"], 1);

  // No record counted, or no A/B: not judged, and why.
  rows[1]["records_per_call"] = 0;
  const json zero = parts_of(cost_parts(rows), "preload")["per_record"];
  EXPECT_TRUE(zero["bar"]["met"].is_null());
  EXPECT_TRUE(zero["bar"].contains("why_not_judged"));
  rows[1]["records_per_call"] = 2;
  rows[1].erase("in_process_values_ns");
  const json no_ab = parts_of(cost_parts(rows), "preload")["per_record"];
  EXPECT_TRUE(no_ab["bar"]["met"].is_null()) << no_ab.dump(1);
  rows[1].erase("records_per_call");
  EXPECT_FALSE(parts_of(cost_parts(rows), "preload").contains("per_record"));
}

// Nsight Systems by default skips some CUDA APIs that cupti records (cudaGetDevice among
// them): where nsys-all (every API) ran, the first bar is held against it, like for like,
// and nsys's default stays beside it as a figure.
TEST(BenchEstimators, WhereNsysRecordedEveryApiCuptiIsHeldAgainstThat) {
  json rows = fixture("derive")["rows"];
  const json without = estimator_comparison(rows);
  EXPECT_EQ(bar_of(by_call(without["calls"], "cudaGetDevice"), "nsys")["met"], false) << "420 > 380";
  rows.push_back({{"call", "cudaGetDevice"}, {"linkage", "shared"}, {"method", "nsys-all"}, {"call_kind", "other"},
                  {"delta_ns", 430}, {"delta_ci95_ns", {420, 440}}});
  const json est = estimator_comparison(rows);
  const json& get_device = by_call(est["calls"], "cudaGetDevice");
  ASSERT_EQ(get_device["target"]["bars"].size(), 2u) << get_device.dump(1);
  EXPECT_EQ(bar_of(get_device, "nsys-all")["met"], true) << "420 <= 430";
  EXPECT_EQ(get_device["target"]["met"], true);
  EXPECT_EQ(get_device["references"]["nsys"]["delta_ns"], 380) << "the default's figure stays beside it";
  EXPECT_NEAR(get_device["references"]["nsys-all"]["ratio"].get<double>(), 420.0 / 430, 1e-9);
  const json& launch = by_call(est["calls"], "cudaLaunchKernel");
  EXPECT_EQ(bar_of(launch, "nsys")["at_most_ns"], 1500) << "a call nsys-all did not run for keeps nsys's bar";
}

// A verdict the run's intervals do not settle is said to be so: cupti's 95% interval must lie
// wholly on one side of the limit's for a bar to be settled.
TEST(BenchEstimators, ABarIsSettledOnlyWhenTheIntervalsDoNotOverlapTheLimit) {
  auto row = [](const char* method, double delta, double lo, double hi) {
    return json{{"call", "c"}, {"linkage", "shared"}, {"method", method}, {"call_kind", "launch"},
                {"delta_ns", delta}, {"delta_ci95_ns", {lo, hi}}, {"reps", 4}};
  };
  const json close = estimator_comparison(json::array({row("cupti", 500, 400, 600), row("nsys-all", 450, 440, 460)}));
  const json& c = by_call(close["calls"], "c");
  EXPECT_EQ(c["target"]["met"], false);
  EXPECT_EQ(bar_of(c, "nsys-all")["settled"], false) << "cupti's [400, 600] reaches below the limit's [440, 460]";
  EXPECT_EQ(c["target"]["settled"], false);
  EXPECT_EQ(close["unsettled"], 1);

  const json far = estimator_comparison(json::array({row("cupti", 500, 490, 510), row("nsys-all", 300, 290, 310)}));
  EXPECT_EQ(by_call(far["calls"], "c")["target"]["settled"], true) << "490 > 310: the run settles the miss";
  EXPECT_EQ(far["unsettled"], 0);

  const json met = estimator_comparison(json::array({row("cupti", 200, 190, 210), row("nsys-all", 300, 290, 310)}));
  const json& m = by_call(met["calls"], "c");
  EXPECT_EQ(m["target"]["met"], true);
  EXPECT_EQ(m["target"]["settled"], true) << "210 <= 290";

  json two = json::array({row("cupti", 200, 190, 210), row("nsys-all", 300, 290, 310)});
  two[1]["reps"] = 2;
  EXPECT_EQ(by_call(estimator_comparison(two)["calls"], "c")["target"]["settled"], false)
      << "two processes of the reference: too few for its interval to settle anything";
}
