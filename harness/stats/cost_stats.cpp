#include "harness/stats/cost_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "harness/stats/bench_stats.h"

namespace cudatrace {

RunPlan sequential_plan(size_t combos, int reps) {
  RunPlan plan;
  for (size_t c = 0; c < combos; ++c)
    for (int rep = 1; rep <= reps; ++rep) plan.push_back({c, rep});
  return plan;
}

namespace {

// The programs in the order they first appear, and each one's combinations (its methods).
struct ByProgram {
  std::vector<std::string> programs;
  std::map<std::string, std::vector<size_t>> methods_of;
};
ByProgram by_program(const std::vector<std::string>& program_of) {
  ByProgram b;
  for (size_t i = 0; i < program_of.size(); ++i) {
    auto& m = b.methods_of[program_of[i]];
    if (m.empty()) b.programs.push_back(program_of[i]);
    m.push_back(i);
  }
  return b;
}

}  // namespace

RunPlan interleaved_plan(const std::vector<std::string>& program_of, int rounds) {
  auto [programs, methods_of] = by_program(program_of);
  RunPlan plan;
  for (int k = 0; k < rounds; ++k)
    for (const auto& p : programs) {
      const auto& m = methods_of[p];
      for (size_t j = 0; j < m.size(); ++j) plan.push_back({m[(size_t(k) + j) % m.size()], k + 1});
    }
  return plan;
}

RunPlan randomised_plan(const std::vector<std::string>& program_of, const std::vector<size_t>& warm_up, int rounds,
                        uint64_t seed) {
  auto [programs, methods_of] = by_program(program_of);
  RunPlan plan;
  for (size_t c : warm_up) plan.push_back({c, 0});
  std::mt19937_64 rng(seed);
  for (int k = 0; k < rounds; ++k)
    for (const auto& p : programs) {
      std::vector<size_t> order = methods_of[p];
      for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[size_t(rng() % i)]);
      for (size_t c : order) plan.push_back({c, k + 1});
    }
  return plan;
}

uint64_t drawn_seed() { return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}(); }

bool next_round_fits(double elapsed_s, int rounds_done, double budget_s) {
  if (rounds_done <= 0) return true;
  return elapsed_s + elapsed_s / rounds_done <= budget_s;
}

std::string RunMarks::worst() const {
  if (failed) return "failed";
  if (!lost.empty()) return "lost events";
  if (!unobserved.empty()) return "layer not observed";
  if (!partly_observed.empty()) return "layer partly observed";
  return "clean";
}

const char* basis_name(Basis b) {
  switch (b) {
    case Basis::kClean: return "clean runs";
    case Basis::kMarked: return "marked runs (no clean run)";
    case Basis::kNothing: return "nothing (every run failed)";
  }
  return "?";
}

Ratio paired_median_ratio(const std::vector<std::pair<double, double>>& pairs) {
  Ratio r;
  std::vector<double> ratios;
  for (const auto& [none, method] : pairs)
    if (none > 0) ratios.push_back(method / none);
  r.pairs = ratios.size();
  if (ratios.empty()) return r;
  r.value = median_of(ratios);
  const size_t n = ratios.size();
  if (n < kMinPairsForInterval) return r;
  std::sort(ratios.begin(), ratios.end());
  // P(Binomial(n, 1/2) <= j), summed term by term; each term from logarithms, so that a
  // long series of rounds does not underflow 0.5^n to 0.
  const auto term = [n](size_t j) {
    return std::exp(std::lgamma(double(n) + 1) - std::lgamma(double(j) + 1) - std::lgamma(double(n - j) + 1) +
                    double(n) * std::log(0.5));
  };
  double below = 0;
  size_t k = 0;
  double coverage = 0;
  for (size_t j = 0; j < n / 2; ++j) {
    below += term(j);                // P(X <= j)
    const double c = 1 - 2 * below;  // coverage of [x(j+1), x(n-j)]
    if (c < 0.95) break;
    k = j + 1;
    coverage = c;
  }
  if (k == 0) return r;
  r.rank = k;
  r.coverage = coverage;
  r.ci95 = std::make_pair(ratios[k - 1], ratios[n - k]);
  return r;
}

namespace {

// The runs whose figures count, by round, and the basis they make.
std::map<int, const CostSample*> used_runs(const std::vector<CostSample>& runs, Basis& basis) {
  std::map<int, const CostSample*> clean, usable;
  for (const auto& s : runs) {
    if (s.marks.clean()) clean[s.round] = &s;
    if (!s.marks.failed) usable[s.round] = &s;
  }
  basis = !clean.empty() ? Basis::kClean : !usable.empty() ? Basis::kMarked : Basis::kNothing;
  return !clean.empty() ? clean : usable;
}

std::optional<Ratio> ratio_over(const std::map<int, const CostSample*>& none, const std::map<int, const CostSample*>& used,
                                double (*part)(const CostSample&)) {
  std::vector<std::pair<double, double>> pairs;
  for (const auto& [round, s] : used) {
    auto n = none.find(round);
    if (n == none.end()) continue;
    const double a = part(*n->second), b = part(*s);
    if (a > 0 && b >= 0) pairs.emplace_back(a, b);
  }
  if (pairs.empty()) return std::nullopt;
  return paired_median_ratio(pairs);
}

// Start-up and the rest, or -1 where the run has no start-up.
double wall_of(const CostSample& s) { return double(s.wall_ns); }
double startup_of(const CostSample& s) { return s.startup_ns ? double(*s.startup_ns) : -1; }
double rest_of(const CostSample& s) { return s.startup_ns ? double(s.wall_ns - *s.startup_ns) : -1; }

}  // namespace

MethodCost method_cost(const std::vector<CostSample>& runs, const std::vector<CostSample>& baseline, bool is_baseline) {
  MethodCost c;
  c.runs = runs.size();
  for (const auto& s : runs) {
    c.clean += s.marks.clean();
    c.failed += s.marks.failed;
    c.lost += !s.marks.lost.empty();
    c.unobserved += !s.marks.unobserved.empty();
    c.partly_observed += !s.marks.partly_observed.empty();
  }
  const std::map<int, const CostSample*> used = used_runs(runs, c.basis);
  for (const auto& s : runs)
    (used.count(s.round) && used.at(s.round) == &s ? c.rounds_used : c.rounds_left_out).push_back(s.round);
  std::vector<double> walls, startups, rests;
  for (const auto& [round, s] : used) {
    walls.push_back(double(s->wall_ns));
    if (s->startup_ns) {
      startups.push_back(double(*s->startup_ns));
      rests.push_back(double(s->wall_ns - *s->startup_ns));
    }
  }
  c.median_wall_ns = median_of(walls);
  if (!startups.empty()) {
    c.median_startup_ns = median_of(startups);
    c.median_rest_ns = median_of(rests);
  }
  if (is_baseline) return c;

  Basis none_basis;
  const std::map<int, const CostSample*> none = used_runs(baseline, none_basis);
  if (used.empty()) {
    c.why_no_ratio = runs.empty() ? "it did not run" : "every run failed";
    return c;
  }
  if (none.empty()) {
    c.why_no_ratio = baseline.empty() ? "none did not run" : "every untraced run (none) failed";
    return c;
  }
  c.wall = ratio_over(none, used, wall_of);
  if (!c.wall) {
    c.why_no_ratio = "no round in which both it and none ran usably";
    return c;
  }
  c.startup = ratio_over(none, used, startup_of);
  c.rest = ratio_over(none, used, rest_of);
  return c;
}

}  // namespace cudatrace
