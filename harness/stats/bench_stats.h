#pragma once
// Statistics for per-call overhead: medians of repetitions, and the difference of two
// medians with a bootstrap 95% interval (timings are skewed; no normality assumed).
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

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

// What the harness derives from a benchmark's rows (bench_summary.json, each row with its
// per-process values_ns and, where the method paused, in_process_values_ns), decided here
// once and written into the summary; readers show it as written.

// Two back-to-back runs agree when at least kAgreementShare of the second run's deltas
// (every row's difference to `none` between processes and, where it has one, its
// in-process A/B) lie within the first run's 95% interval of the same delta, or within
// max(10%, 100 ns) of the first run's value. A noisy first run is not rewarded: its wide
// interval admits more, but only around where it read.
inline constexpr double kAgreementShare = 0.95, kAgreementRelative = 0.10, kAgreementAbsoluteNs = 100;
bool delta_agrees(double first, double first_lo, double first_hi, double second);
// -> {"against", "rule", "compared", "within", "fraction", "required", "pass",
//     "outside": [each delta outside, with how far the untraced call moved], "not_compared"}
nlohmann::json bench_agreement(const nlohmann::json& first_summary, const nlohmann::json& second_summary);

// Each method with cost bars (Method::cost_bars: cupti's are #52's) against the references
// they name, all as the difference of medians to `none` between processes in the same run
// (Nsight Systems cannot be paused in process, so this is the one estimator they share); the
// method's in-process A/B beside it, labelled. Per call: {method, call, linkage, call_kind,
// cost, references: {name: figure + ratio}, in_process, target: {bars, met, settled}}.
// A bar is settled only where the method's and the reference's differences to none each come
// from at least this many processes (rounds): below it their bootstrap intervals resample a
// handful of medians, and the main job's two rounds read #52's bars 2 and 1 of 10 on an H200
// where a four-round run of the same bundle read 10 of 10.
inline constexpr int kMinProcessesToSettle = 3;
nlohmann::json estimator_comparison(const nlohmann::json& rows);


// Where a per-call cost goes (#52): for each method whose registry entry says how to take its
// cost apart (Method::cost_split, tracers/tracer.h: preload, cupti), each part an estimate
// with its bootstrap 95% interval from the rows' per-process values, the mechanism's floor,
// and what the run could not measure (bench_summary.json's `cost_parts`, a table in the
// report). `whole` is the method's difference to `none` between processes; the parts are
// estimated apart, so they add up to it only within their intervals, and the table says so.
// On launches a method with kernel activity leaves part of that activity's cost in its
// paused halves (measured on an H200: cupti-inject's paused halves cost launches 0.37-1.26 us
// more than cupti-bare's, in each of four runs), so there only `whole` is the whole cost.
nlohmann::json cost_parts(const nlohmann::json& rows);

}  // namespace cudatrace
