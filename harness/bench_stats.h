#pragma once
// Statistics for per-call overhead: medians of repetitions, and the difference of two
// medians with a bootstrap 95% interval (timings are skewed; no normality assumed).
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace cudatrace {

double median_of(std::vector<double> v);

struct Difference {
  double delta = 0;  // median(b) - median(a)
  double lo = 0, hi = 0;  // 95% interval of delta
};

// Resamples both sets `rounds` times with a fixed seed: the same data, the same interval.
Difference median_difference(const std::vector<double>& a, const std::vector<double>& b, int rounds = 2000,
                             uint64_t seed = 42);

// One sample's median with its bootstrap interval (paired differences, already deltas).
Difference median_interval(const std::vector<double>& v, int rounds = 2000, uint64_t seed = 42);

// The same for median(b) / median(a) (whole-workload slowdown): delta holds the ratio.
Difference median_ratio(const std::vector<double>& a, const std::vector<double>& b, int rounds = 2000,
                        uint64_t seed = 42);

// What the tables call "no measurable cost": tracing never makes a call faster, so a
// difference between processes that is negative or whose interval reaches zero is noise;
// so is an in-process (paired) difference that is negative, whose interval reaches zero,
// or no larger than its pairing control (both halves paused: what the pairing reads when
// nothing differs). The same test for both kinds: an in-process difference whose interval
// reached zero once read as a cost beside a near-zero one from the next run.
bool between_processes_no_measurable_cost(const Difference& d);
bool in_process_no_measurable_cost(const Difference& paired, double control_delta);

// One value per process, by (call, linkage, method).
using PerProcess = std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>>;
struct Spread {
  size_t processes = 0;
  double min = 0, median = 0, max = 0;
};
// How far each call moved between the processes of a run with nothing recording, by (call,
// linkage): `none`'s per-process times (from `live`) pooled with every pausing method's
// paused halves (`paused`). A call seen in fewer than two processes has no spread.
std::map<std::pair<std::string, std::string>, Spread> untraced_spread(const PerProcess& live, const PerProcess& paused);

}  // namespace cudatrace
