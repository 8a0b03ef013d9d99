#include "harness/bench_stats.h"

#include <cmath>

#include <algorithm>
#include <random>

namespace cudatrace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

// A statistic of two samples, its value and a percentile-bootstrap 95% interval.
template <class Statistic>
Difference bootstrap(const std::vector<double>& a, const std::vector<double>& b, int rounds, uint64_t seed,
                     Statistic stat) {
  Difference d;
  d.delta = stat(median_of(a), median_of(b));
  if (a.empty() || b.empty()) return d;
  std::mt19937_64 rng(seed);
  std::vector<double> values;
  values.reserve(size_t(rounds));
  std::vector<double> ra(a.size()), rb(b.size());
  std::uniform_int_distribution<size_t> pick_a(0, a.size() - 1), pick_b(0, b.size() - 1);
  for (int r = 0; r < rounds; ++r) {
    for (auto& x : ra) x = a[pick_a(rng)];
    for (auto& x : rb) x = b[pick_b(rng)];
    values.push_back(stat(median_of(ra), median_of(rb)));
  }
  std::sort(values.begin(), values.end());
  d.lo = values[size_t(0.025 * (rounds - 1))];
  d.hi = values[size_t(0.975 * (rounds - 1))];
  return d;
}

}  // namespace

Difference median_difference(const std::vector<double>& a, const std::vector<double>& b, int rounds, uint64_t seed) {
  return bootstrap(a, b, rounds, seed, [](double ma, double mb) { return mb - ma; });
}

Difference median_interval(const std::vector<double>& v, int rounds, uint64_t seed) {
  return bootstrap({0.0}, v, rounds, seed, [](double, double mv) { return mv; });
}

Difference median_ratio(const std::vector<double>& a, const std::vector<double>& b, int rounds, uint64_t seed) {
  return bootstrap(a, b, rounds, seed, [](double ma, double mb) { return ma > 0 ? mb / ma : 0.0; });
}

bool between_processes_no_measurable_cost(const Difference& d) { return d.delta < 0 || d.lo <= 0; }

bool in_process_no_measurable_cost(const Difference& paired, double control_delta) {
  return between_processes_no_measurable_cost(paired) || paired.delta <= std::abs(control_delta);
}

std::map<std::pair<std::string, std::string>, Spread> untraced_spread(const PerProcess& live, const PerProcess& paused) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> pooled;
  for (const auto& [key, v] : live)
    if (std::get<2>(key) == "none") pooled[{std::get<0>(key), std::get<1>(key)}] = v;
  for (const auto& [key, v] : paused) {
    auto& into = pooled[{std::get<0>(key), std::get<1>(key)}];
    into.insert(into.end(), v.begin(), v.end());
  }
  std::map<std::pair<std::string, std::string>, Spread> out;
  for (const auto& [call_linkage, v] : pooled) {
    if (v.size() < 2) continue;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    out[call_linkage] = Spread{v.size(), *lo, median_of(v), *hi};
  }
  return out;
}

}  // namespace cudatrace
