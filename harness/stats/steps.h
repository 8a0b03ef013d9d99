#pragma once
// Slowdown per step (#52). A whole-program ratio of a framework program mostly measures its
// imports (PyTorch spends seconds there, its steps milliseconds); a program that marks its
// steps gives hundreds of samples per run of what a user of it pays in steady state.
//
// Protocol (schema/README.md, "Step marks"): the harness names a fresh file in the run's
// target/ folder by $CUDATRACE_STEP_MARK; the program appends one line per step end, its
// CLOCK_MONOTONIC time in ns first ("<ns>" or "<ns> <anything>"). The program times its own
// steps so that the harness need not poll; the file is read once, after the run, as every
// file the program wrote: never through a link, a regular file with one link only, bounded
// in bytes, any bytes tolerated (a line that is not a time is counted and ignored).
//
// From a run's step ends: start-up = the first end - the program's start; the durations are
// the gaps between consecutive ends; the first 10% of them (at least 1) are dropped as
// warm-up (JIT compilation, caches, allocator growth), the rest are the run's steady steps.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/stats/cost_stats.h"

namespace cudatrace {

struct ChildResult;

inline constexpr const char* kStepMarkEnv = "CUDATRACE_STEP_MARK";
inline constexpr const char* kStepMarkFile = "step-marks.txt";  // in the run's target/
// What one run's step file may hold: a 64th of the memory available (a mark of about 20
// bytes is held as 8, and kept in run.json as a duration), at least 8 MiB (some 400,000
// marks): a long job's millions of steps fit on a host with the memory for them. Past it,
// the rest is unread, counted in run.json (unread_bytes) and named in the step figures.
uint64_t step_file_bound();

// The step ends one run's file gave, with what was ignored and why.
struct StepMarks {
  std::vector<int64_t> ends_ns;  // increasing, within the run's time
  int64_t ignored = 0;           // lines that are not a time, outside the run, or not after the last
  std::string first_ignored;     // why the first of them was ignored
  uint64_t unread_bytes = 0;     // past the bound
  std::string why;               // the file could not be read (missing, a link, ...); empty: it was
};
// Reads `file`, at most `max_bytes` of it, keeping the ends within [start_ns, end_ns].
StepMarks read_step_marks(const std::filesystem::path& file, int64_t start_ns, int64_t end_ns,
                          uint64_t max_bytes = step_file_bound());

// run.json's "steps" for a command's run: {"marks", "startup_ns", "durations_ns", ...} or
// {"marks": 0, "why"}.
nlohmann::json steps_of(const std::filesystem::path& target_dir, const ChildResult& child);

// The warm-up rule: how many of a run's `n` step durations are dropped.
size_t warmup_steps(size_t n);
inline constexpr const char* kStepWarmupRule = "the first 10% of each run's steps (at least 1) are warm-up, dropped";

// One run's steps as the figures use them.
struct StepRun {
  int round = 0;
  std::optional<int64_t> startup_ns;  // to the first step mark
  std::vector<double> steady_ns;      // step durations after the warm-up
  uint64_t unread_bytes = 0;          // of its step file, past the bound: its later steps are not here
};

// The steady-state slowdown per step of a method against none, from the rounds in which
// both have steps: the median of the method's steady steps over the median of none's, all
// paired rounds pooled. Its interval (from kMinStepsForInterval steady steps on each side):
// a percentile bootstrap that resamples each run's steps apart (rounds kept, so that a run
// with more steps weighs no more than it did) in blocks of consecutive steps (so that drift
// and neighbouring steps' correlation stay in the resample); from kMinPairsForInterval
// paired rounds the order-statistics interval of the per-round ratios (run-to-run
// variation, which the bootstrap over steps does not see) widens it where it is wider.
struct StepRatio {
  double value = 0;
  std::optional<std::pair<double, double>> ci95;
  std::string why_no_interval;
  size_t rounds = 0, steps = 0, steps_none = 0;
  size_t block = 0;                     // the bootstrap's block length (of the shortest run)
  std::vector<double> per_round;        // each paired round's ratio of medians
  std::optional<Ratio> across_rounds;   // over per_round, where there are enough rounds
  bool widened_by_rounds = false;
  bool anomaly() const { return ci95 && ci95->second < 1.0; }
};
inline constexpr size_t kMinStepsForInterval = 20;
inline constexpr int kStepBootstrapResamples = 1000;
inline constexpr const char* kStepIntervalMethod =
    "percentile bootstrap (1,000 resamples, seeded) of the ratio of pooled medians, each run's steady steps resampled "
    "apart in blocks of consecutive steps; widened to the order-statistics interval of the per-round ratios from 6 "
    "paired rounds";
// `pairs`: (none's run, the method's run) of each round. `seed`: the bootstrap's.
std::optional<StepRatio> step_ratio(const std::vector<std::pair<const StepRun*, const StepRun*>>& pairs,
                                    uint64_t seed = 52);

// summary.json's "step_ratio" (null when there is none).
nlohmann::json step_ratio_json(const std::optional<StepRatio>& r);

// The figures of one method's step runs for summary.json (median step, start-up to the first
// step and its ratio to none, the per-step ratio); null when no run of it marked steps.
// `used`, `none_used`: the rounds whose runs entered the method's and none's figures.
nlohmann::json step_figures(const std::vector<StepRun>& runs, const std::vector<StepRun>& none,
                            const std::vector<int>& used, const std::vector<int>& none_used, bool is_baseline);

// A run.json "steps" read back for the figures (empty steady_ns when it has none).
StepRun step_run_of(int round, const nlohmann::json& steps);

}  // namespace cudatrace
