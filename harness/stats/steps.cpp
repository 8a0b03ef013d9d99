#include "harness/stats/steps.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "common/bounded_lines.h"
#include "common/outside_text.h"
#include "harness/out/results_io.h"
#include "harness/run/runner.h"
#include "harness/stats/bench_stats.h"
#include "harness/stats/cost.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

uint64_t step_file_bound() { return std::max<uint64_t>(uint64_t(8) << 20, available_memory_bytes() / 64); }

StepMarks read_step_marks(const fs::path& file, int64_t start_ns, int64_t end_ns, uint64_t max_bytes) {
  StepMarks m;
  // A line's start is all that is read of it: a time is at most 20 digits.
  BoundedLines in(file, max_bytes, nullptr, 256);
  if (!in.is_open()) {
    m.why = in.why();
    return m;
  }
  const auto ignore = [&](const std::string& why) {
    if (m.ignored++ == 0) m.first_ignored = "line " + std::to_string(in.line_number()) + ": " + why;
  };
  std::string line;
  while (in.next(line)) {
    const size_t end = line.find_first_of(" \t\r");
    const std::optional<int64_t> ns = parse_int64(std::string_view(line).substr(0, end));
    if (!ns) {
      ignore("not a CLOCK_MONOTONIC time in ns (" + shown(line.substr(0, 40), 60) + ")");
    } else if (*ns < start_ns || *ns > end_ns) {
      ignore("outside the run's time (not CLOCK_MONOTONIC?)");
    } else if (!m.ends_ns.empty() && *ns <= m.ends_ns.back()) {
      ignore("not after the step before it");
    } else {
      m.ends_ns.push_back(*ns);
    }
  }
  m.unread_bytes = in.unread_bytes();
  return m;
}

json steps_of(const fs::path& target_dir, const ChildResult& child) {
  if (child.start_ns == 0 || child.status != ChildStatus::Exited)
    return {{"marks", 0}, {"why", "the program did not run to its end"}};
  const fs::path file = target_dir / kStepMarkFile;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec)))
    return {{"marks", 0}, {"why", std::string("the program wrote no step marks (") + kStepMarkEnv + ")"}};
  const StepMarks m = read_step_marks(file, child.start_ns, child.start_ns + child.wall_ns);
  if (!m.why.empty()) return {{"marks", 0}, {"why", "its step file was not read: " + m.why}};
  json j = {{"marks", m.ends_ns.size()}, {"ignored_lines", m.ignored}};
  if (m.ignored) j["first_ignored"] = m.first_ignored;
  if (m.unread_bytes) j["unread_bytes"] = m.unread_bytes;
  if (m.ends_ns.empty()) {
    j["why"] = "no line of its step file is a step end within the run";
    return j;
  }
  j["startup_ns"] = m.ends_ns.front() - child.start_ns;
  json d = json::array();
  for (size_t i = 1; i < m.ends_ns.size(); ++i) d.push_back(m.ends_ns[i] - m.ends_ns[i - 1]);
  j["durations_ns"] = std::move(d);
  return j;
}

size_t warmup_steps(size_t n) { return n == 0 ? 0 : std::max<size_t>(1, (n + 9) / 10); }

StepRun step_run_of(int round, const json& steps) {
  StepRun r;
  r.round = round;
  if (!steps.is_object()) return r;
  if (steps.contains("startup_ns") && steps["startup_ns"].is_number()) r.startup_ns = int64_t(steps["startup_ns"].get<double>());
  if (steps.contains("unread_bytes") && steps["unread_bytes"].is_number_integer() && steps["unread_bytes"].get<int64_t>() > 0)
    r.unread_bytes = steps["unread_bytes"].get<uint64_t>();
  if (!steps.contains("durations_ns") || !steps["durations_ns"].is_array()) return r;
  const json& d = steps["durations_ns"];
  for (size_t i = warmup_steps(d.size()); i < d.size(); ++i)
    if (d[i].is_number()) r.steady_ns.push_back(d[i].get<double>());
  return r;
}

namespace {

// One resample of a run's steps: circular blocks of `block` consecutive steps from random
// starts, as many steps as the run had.
void resample_into(const std::vector<double>& steps, size_t block, std::mt19937_64& rng, std::vector<double>& out) {
  const size_t n = steps.size();
  for (size_t taken = 0; taken < n;) {
    const size_t start = size_t(rng() % n);
    for (size_t j = 0; j < block && taken < n; ++j, ++taken) out.push_back(steps[(start + j) % n]);
  }
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * double(v.size() - 1);
  const size_t lo = size_t(std::floor(at));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

}  // namespace

std::optional<StepRatio> step_ratio(const std::vector<std::pair<const StepRun*, const StepRun*>>& pairs, uint64_t seed) {
  StepRatio r;
  std::vector<const std::vector<double>*> none, method;
  std::vector<double> pooled_none, pooled_method;
  for (const auto& [n, m] : pairs) {
    if (n->steady_ns.empty() || m->steady_ns.empty()) continue;
    none.push_back(&n->steady_ns);
    method.push_back(&m->steady_ns);
    pooled_none.insert(pooled_none.end(), n->steady_ns.begin(), n->steady_ns.end());
    pooled_method.insert(pooled_method.end(), m->steady_ns.begin(), m->steady_ns.end());
    const double mn = median_of(n->steady_ns);
    if (mn > 0) r.per_round.push_back(median_of(m->steady_ns) / mn);
  }
  const double median_none = median_of(pooled_none);
  if (none.empty() || median_none <= 0) return std::nullopt;
  r.rounds = none.size();
  r.steps = pooled_method.size();
  r.steps_none = pooled_none.size();
  r.value = median_of(pooled_method) / median_none;
  if (r.steps < kMinStepsForInterval || r.steps_none < kMinStepsForInterval) {
    r.why_no_interval = "too few steps for an interval: " + std::to_string(std::min(r.steps, r.steps_none)) +
                        " steady step(s) on one side, " + std::to_string(kMinStepsForInterval) + " needed";
    return r;
  }
  // Block length: the cube root of the shortest run's steps, a usual rule for a block bootstrap.
  size_t shortest = SIZE_MAX;
  for (size_t i = 0; i < none.size(); ++i) shortest = std::min({shortest, none[i]->size(), method[i]->size()});
  r.block = std::max<size_t>(1, size_t(std::lround(std::cbrt(double(shortest)))));
  std::mt19937_64 rng(seed);
  std::vector<double> ratios, a, b;
  ratios.reserve(kStepBootstrapResamples);
  for (int i = 0; i < kStepBootstrapResamples; ++i) {
    a.clear();
    b.clear();
    for (size_t k = 0; k < none.size(); ++k) {
      resample_into(*none[k], r.block, rng, a);
      resample_into(*method[k], r.block, rng, b);
    }
    const double mn = median_of(a);
    if (mn > 0) ratios.push_back(median_of(b) / mn);
  }
  r.ci95 = std::make_pair(percentile(ratios, 0.025), percentile(ratios, 0.975));
  if (r.per_round.size() >= kMinPairsForInterval) {
    std::vector<std::pair<double, double>> unit;
    for (double x : r.per_round) unit.emplace_back(1.0, x);
    r.across_rounds = paired_median_ratio(unit);
    if (r.across_rounds->ci95) {
      const auto [lo, hi] = *r.across_rounds->ci95;
      r.widened_by_rounds = lo < r.ci95->first || hi > r.ci95->second;
      r.ci95 = std::make_pair(std::min(lo, r.ci95->first), std::max(hi, r.ci95->second));
    }
  }
  return r;
}

json step_ratio_json(const std::optional<StepRatio>& r) {
  if (!r) return nullptr;
  json j = {{"value", r->value},   {"ci95", nullptr},         {"rounds", r->rounds},
            {"steps", r->steps},   {"steps_none", r->steps_none}, {"per_round", r->per_round}};
  if (r->ci95) {
    j["ci95"] = {r->ci95->first, r->ci95->second};
    j["interval"] = {{"method", kStepIntervalMethod}, {"block", r->block}, {"widened_by_rounds", r->widened_by_rounds}};
    // Below the rounds that widen it, the interval knows the steps of these runs only: on an
    // H200 two main-job runs of jax_jit_loop read preload x1.02 [1.01, 1.04] and x0.86 [0.85,
    // 0.88] per step, one round each. Said, so that nobody reads it as the next run's.
    if (r->per_round.size() < kMinPairsForInterval)
      j["interval"]["scope"] = "within " + std::to_string(r->rounds) + " run(s) only: how the next run differs is not "
                               "in it (" + std::to_string(kMinPairsForInterval) + " paired rounds widen it with that)";
    if (r->across_rounds) j["across_rounds"] = ratio_json(r->across_rounds);
    if (r->anomaly()) j["anomaly"] = kAnomalyCause;
  } else {
    j["why_no_interval"] = r->why_no_interval;
  }
  return j;
}

json step_figures(const std::vector<StepRun>& runs, const std::vector<StepRun>& none, const std::vector<int>& used,
                  const std::vector<int>& none_used, bool is_baseline) {
  const auto by_round = [](const std::vector<StepRun>& v, const std::vector<int>& rounds) {
    std::map<int, const StepRun*> out;
    for (const auto& r : v)
      if (std::find(rounds.begin(), rounds.end(), r.round) != rounds.end()) out[r.round] = &r;
    return out;
  };
  const std::map<int, const StepRun*> mine = by_round(runs, used), theirs = by_round(none, none_used);
  std::vector<double> steady, startups;
  size_t marked = 0, cut = 0;
  for (const auto& [round, r] : mine) {
    marked += r->startup_ns.has_value();
    cut += r->unread_bytes > 0;
    steady.insert(steady.end(), r->steady_ns.begin(), r->steady_ns.end());
    if (r->startup_ns) startups.push_back(double(*r->startup_ns));
  }
  if (marked == 0) return nullptr;
  json j = {{"runs_with_marks", marked},
            {"steady_steps", steady.size()},
            {"median_step_ns", steady.empty() ? json(nullptr) : json(median_of(steady))},
            {"median_startup_ns", median_of(startups)},
            {"startup_ratio", nullptr},
            {"ratio", nullptr}};
  // A step file past its bound gave only its first steps: figures from a prefix, said so.
  if (cut)
    j["steps_cut"] = std::to_string(cut) + " run(s)' step files were longer than the bound (" +
                     std::to_string(step_file_bound() >> 20) + " MiB, a 64th of the memory available): their later "
                     "steps were not read (run.json steps.unread_bytes)";
  if (is_baseline) {
    j.erase("startup_ratio");
    j.erase("ratio");
    return j;
  }
  std::vector<std::pair<const StepRun*, const StepRun*>> pairs;
  std::vector<std::pair<double, double>> startup_pairs;
  for (const auto& [round, r] : mine) {
    auto n = theirs.find(round);
    if (n == theirs.end()) continue;
    pairs.emplace_back(n->second, r);
    if (n->second->startup_ns && r->startup_ns && *n->second->startup_ns > 0)
      startup_pairs.emplace_back(double(*n->second->startup_ns), double(*r->startup_ns));
  }
  if (!startup_pairs.empty()) j["startup_ratio"] = ratio_json(paired_median_ratio(startup_pairs));
  j["ratio"] = step_ratio_json(step_ratio(pairs));
  if (j["ratio"].is_null()) j["why_no_ratio"] = "no round in which both it and none marked steady steps";
  return j;
}

}  // namespace cudatrace
