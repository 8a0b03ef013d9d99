#pragma once
// The cost mode's arithmetic, apart from running anything (so that it is tested on its own):
// the order of the runs, what marks a run, and a method's slowdown against none from the
// rounds in which both ran.
//
// Why paired rounds: a machine drifts (clocks, caches, other tenants) over the minutes a
// cost run takes. Every round runs every method of a program back to back, so a method's
// run and none's run of the same round saw the same machine; their ratio cancels the
// drift that separate blocks of repetitions would fold into the difference.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cudatrace {

// One run to make: a combination (an index into the caller's list) and its repetition,
// which in the cost mode is its round (from 1).
struct PlannedRun {
  size_t combo = 0;
  int rep = 1;
};
using RunPlan = std::vector<PlannedRun>;

// The matrix's order: each combination's repetitions one after another.
RunPlan sequential_plan(size_t combos, int reps);

// The cost mode's order. `program_of[i]` names the program of combination i; the
// combinations of one program are its methods, in the caller's order (none first). Every
// round runs each program under each of its methods; round k (from 0) starts a program at
// its method k mod M and goes round from there, so no method always runs first (on a cold
// cache) or right after the same neighbour. Programs keep their order within a round.
RunPlan interleaved_plan(const std::vector<std::string>& program_of, int rounds);

// The cost mode's order since #52: round 0 (rep 0) runs each combination in `warm_up` once,
// untimed; then each round runs every program under each of its methods, in an order drawn
// for that program and round from `seed` (a Fisher-Yates shuffle on mt19937_64, both fixed by
// the C++ standard, so that a recorded seed gives the same order anywhere). Drawn rather than
// rotated: a rotation keeps every method right after the same neighbour, whose after-effects
// (a cache it filled, clocks it raised) it then always meets; a drawn order makes the rounds
// exchangeable, as the interval over them assumes. Programs keep their order within a round.
RunPlan randomised_plan(const std::vector<std::string>& program_of, const std::vector<size_t>& warm_up, int rounds,
                        uint64_t seed);
// A seed for it when none was given (--seed): std::random_device's.
uint64_t drawn_seed();

// The time budget: whether another round fits, judged from the rounds done (their mean
// length). The first round is not judged (there is nothing to judge it from): it runs
// until the budget is spent (CostRecorder).
bool next_round_fits(double elapsed_s, int rounds_done, double budget_s);

// What marks a cost run. A marked run is never averaged in silently: it is counted and
// named, and one that is not clean() is left out of the figures unless no clean run exists
// (then the figures say so).
struct RunMarks {
  bool failed = false;                                  // crashed, ended otherwise than untraced, tracer error...
  std::string failure;                                  // the first reason
  std::map<std::string, int64_t> lost;                  // loss counters above zero
  std::map<std::string, std::string> unobserved;        // layer -> why
  std::map<std::string, std::string> partly_observed;   // layer -> why
  // A run whose figures stand for the method: it ran as untraced, lost nothing and observed
  // every layer it exists to observe. Seeing a layer only in part is a method's limit (a
  // cudart inside a library, strace's calls without a syscall), not a fault of the run: it
  // marks the run, and the run still counts.
  bool clean() const { return !failed && lost.empty() && unobserved.empty(); }
  // "failed", "lost events", "layer not observed", "layer partly observed" or "clean".
  std::string worst() const;
};

// One run of one method on one program.
struct CostSample {
  int round = 0;
  int64_t wall_ns = 0;
  std::optional<int64_t> startup_ns;  // from the start to the end of the start-up, where known
  RunMarks marks;
};

// A method's slowdown: the median over rounds of its run's wall time over none's run's in
// the same round, and an interval for that median that holds at least 95% whatever the
// ratios' distribution: the k-th smallest and k-th largest of the n paired ratios, with the
// largest k for which 1 - 2 P(Binomial(n, 1/2) < k) >= 0.95 (the order statistics of a
// sample bracket its population's median so; rounds are taken as exchangeable, which the
// cost mode's rotating order is there for). It needs 6 rounds; below, there is none, and
// "too few rounds for an interval" says so.
struct Ratio {
  double value = 0;
  std::optional<std::pair<double, double>> ci95;  // from kMinPairsForInterval rounds on
  double coverage = 0;  // what the interval holds at least (0.969 at 6 rounds), where there is one
  size_t rank = 0;      // k: the interval is the k-th smallest and k-th largest ratio
  size_t pairs = 0;
  // Faster traced than untraced, and the interval says it is no accident: never tracing's
  // doing; warm-up, the order of the runs or a cold first run, which the report names.
  bool anomaly() const { return ci95 && ci95->second < 1.0; }
};
inline constexpr size_t kMinPairsForInterval = 6;
inline constexpr const char* kIntervalMethod =
    "order statistics of the paired ratios (distribution-free interval for their median, at least 95%)";
// `pairs`: (none, method) of each round.
Ratio paired_median_ratio(const std::vector<std::pair<double, double>>& pairs);

// Which runs a method's figures come from.
enum class Basis {
  kClean,    // its clean runs; marked runs left out (and counted)
  kMarked,   // no clean run: its runs that did not fail, each mark named beside the figures
  kNothing,  // every run failed
};
const char* basis_name(Basis b);

struct MethodCost {
  size_t runs = 0, clean = 0, failed = 0, lost = 0, unobserved = 0, partly_observed = 0;
  Basis basis = Basis::kNothing;
  std::vector<int> rounds_used;      // whose run entered the figures
  std::vector<int> rounds_left_out;  // whose run did not (failed, or marked beside clean ones)
  double median_wall_ns = 0;         // over rounds_used
  std::optional<double> median_startup_ns, median_rest_ns;  // over rounds_used with a start-up
  std::optional<Ratio> wall, startup, rest;                 // against none; absent for none itself
  std::string why_no_ratio;  // when `wall` is absent (and this is not none)
};

// `baseline`: none's runs of the same program. With `is_baseline` (none itself) no ratio.
// none's runs that failed pair with nothing; a method's run pairs only where none's run
// of its round entered none's figures.
MethodCost method_cost(const std::vector<CostSample>& runs, const std::vector<CostSample>& baseline,
                       bool is_baseline = false);

}  // namespace cudatrace
