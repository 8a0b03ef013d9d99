#include "harness/bench_stats.h"

#include <algorithm>
#include <random>

namespace cudatrace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Difference median_difference(const std::vector<double>& a, const std::vector<double>& b, int rounds, uint64_t seed) {
  Difference d;
  d.delta = median_of(b) - median_of(a);
  if (a.empty() || b.empty()) return d;
  std::mt19937_64 rng(seed);
  std::vector<double> deltas;
  deltas.reserve(size_t(rounds));
  std::vector<double> ra(a.size()), rb(b.size());
  std::uniform_int_distribution<size_t> pick_a(0, a.size() - 1), pick_b(0, b.size() - 1);
  for (int r = 0; r < rounds; ++r) {
    for (auto& x : ra) x = a[pick_a(rng)];
    for (auto& x : rb) x = b[pick_b(rng)];
    deltas.push_back(median_of(rb) - median_of(ra));
  }
  std::sort(deltas.begin(), deltas.end());
  d.lo = deltas[size_t(0.025 * (rounds - 1))];
  d.hi = deltas[size_t(0.975 * (rounds - 1))];
  return d;
}

}  // namespace cudatrace
