#pragma once
// The cost mode (`harness --cost`): every program runs N times under each method in
// interleaved rounds (cost_stats.h says why), each run made and checked by the matrix
// itself (its ending against untraced, loss, layers not observed), and the result per
// method is the median wall time, the slowdown against none with its 95% interval, the
// start-up apart from the rest where it can be told apart, and every run that failed, lost
// events or left a layer unobserved, counted and named.
//
// Start-up, where a run can tell: from the program's start (the runner's gate) to the
// return of its first kernel launch in the workload's ledger, so the lazy module loading,
// patching or rewriting a method does at that launch falls inside it; for a command, to
// the line it wrote to the file named by CUDATRACE_STARTUP_MARK. Untraced, nothing else
// sees a command's first launch: there start-up and the rest are not told apart. What a
// method times of its own work (tracer.h: notes.setup_ms) is shown beside it.
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/event.h"
#include "harness/stats/cost_stats.h"
#include "harness/stats/steps.h"
#include "harness/run/runner.h"

namespace cudatrace {

// A command may append "<CLOCK_MONOTONIC ns> <what>" to the file this variable names, once
// its start-up is over (tests/real_programs/ do): the first such line splits its run.
inline constexpr const char* kStartupMarkEnv = "CUDATRACE_STARTUP_MARK";
inline constexpr const char* kStartupMarkFile = "startup-mark.txt";  // in the run's target/

// The exit status by which a command says it cannot run here (a framework it needs is not
// installed, no GPU), as automake and ctest read it. Untraced, it skips the program in
// the cost mode, with the last line the program wrote to stderr as the reason.
inline constexpr int kCannotRunHere = 77;

// run.json's "startup": {"ns": time from the start to the end of the start-up, "source":
// what ended it} or {"ns": null, "why": ...}.
// The ledger's first kernel launch (the end of the start-up), found as the ledger streams past.
struct FirstLaunch {
  bool any_record = false;     // the ledger held a call
  std::optional<Event> launch;  // its earliest kernel launch, if any
  void add(const Event& e);
};
nlohmann::json startup_of(const FirstLaunch& ledger, const std::filesystem::path& target_dir, const ChildResult& child);
nlohmann::json startup_of(const std::vector<Event>& ledger, const std::filesystem::path& target_dir,
                          const ChildResult& child);

// What marks a run, read from its run.json.
RunMarks marks_of(const nlohmann::json& run);

// Why a ratio under 1 with its whole interval under 1 is flagged: tracing adds work, so such
// a figure says the runs were not alike. The harness removes what it can of the causes (an
// untimed warm-up run per program, the methods' order drawn anew each round).
inline constexpr const char* kAnomalyCause =
    "faster traced than untraced, with the whole interval under 1: not what tracing does; likely warm-up (caches, the "
    "GPU's clocks, the page cache), the order of the runs, or a cold first run, which the untimed warm-up run and the "
    "randomised order did not remove (another tenant, the GPU's clocks changing between runs)";
// summary.json's ratio object: value, pairs, ci95 with its method, or why there is none; an anomaly flagged.
nlohmann::json ratio_json(const std::optional<Ratio>& r);

// One combination as the cost mode sees it: a program under a method.
struct CostSubject {
  std::string program;  // "vecadd.shared", or "command"
  std::string method;
  std::string workload, linkage;  // empty for a command
};

// The cost mode's plan: round 0 runs each program once untraced (none), untimed, so that the
// first timed run meets the same warm page cache, loaded libraries and GPU state as the
// others; then `rounds` rounds, each program's methods in an order drawn from `seed`
// (randomised_plan in cost_stats.h).
RunPlan cost_plan(const std::vector<CostSubject>& subjects, int rounds, uint64_t seed);

class CostRecorder {
 public:
  // `subjects[i]` describes combination i of `plan`; `budget_s`: --time-budget.
  // `seed`: the one cost_plan drew the order from (none: the rotating interleaved_plan).
  CostRecorder(std::vector<CostSubject> subjects, RunPlan plan, int rounds, std::optional<double> budget_s,
               std::vector<std::string> command, std::optional<uint64_t> seed = std::nullopt);
  // Whether plan[index] is to run: not when its program said it cannot run here, nor once
  // the time budget has ended the rounds (then stopped() says why).
  bool should_run(size_t index);
  const std::string& stopped() const { return stopped_; }
  // plan[index] ran: its run.json and folder.
  void add(size_t index, const nlohmann::json& run, const std::filesystem::path& run_dir);
  // "round 2/5, about 3 min left": for the progress line of plan[index], just run.
  std::string progress(size_t index) const;
  // Programs that said they cannot run here: program -> reason.
  const std::map<std::string, std::string>& skipped_programs() const { return skipped_; }
  // summary.json's "cost"; `skipped`: the matrix's skipped combinations (named per program);
  // `left_out`: [{method, reason}] not run on any program (taken out by --method).
  nlohmann::json summary(const nlohmann::json& skipped, const nlohmann::json& left_out = nlohmann::json::array()) const;
  // The screen printed at the end.
  std::string table(const nlohmann::json& summary) const;

 private:
  struct Sample {
    CostSample sample;
    size_t position = 0;  // place in its program's round, from 0
    std::string run_name;
    nlohmann::json startup;
    std::optional<double> setup_ms;
    std::string setup_what;
    StepRun steps;       // the program's step marks (steps.h), where it wrote them
    nlohmann::json steps_why;  // why it has none
  };
  struct WarmUp {
    std::string program, run_name, ended;
    int64_t wall_ns = 0;
  };
  double elapsed_s() const;
  int rounds_done() const;
  nlohmann::json summary_head(int started) const;

  std::vector<CostSubject> subjects_;
  RunPlan plan_;
  std::vector<size_t> position_;  // per plan step
  int rounds_;
  std::optional<double> budget_s_;
  std::vector<std::string> command_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::vector<double> round_end_s_;  // time into the timed rounds when each ended
  double warmup_s_ = 0;              // what the warm-up round took (not a round: the budget's pace leaves it out)
  std::optional<uint64_t> seed_;
  std::vector<WarmUp> warmups_;
  std::string stopped_;
  std::map<std::string, std::string> skipped_;
  std::map<size_t, std::vector<Sample>> samples_;  // combination -> its runs
};

}  // namespace cudatrace
