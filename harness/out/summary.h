#pragma once
// The matrix's words: one console line per run as it ends, and one summary.json row per
// combination over its repetitions.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli.h"
#include "harness/combo.h"
#include "harness/out/otlp_http.h"
#include "harness/stats/cost.h"

namespace cudatrace {

// summary.json's row for a combination; `all` holds the baseline (method none) it is
// compared with.
nlohmann::json combo_json(const ComboOutcome& o, const std::vector<ComboOutcome>& all);

// "[  3/40] vecadd shared          preload        rep 1/3  ok       0.41 s  ledger ...": what a
// run saw, lost, left running and failed on, on stderr.
void print_progress(size_t index, size_t total, const Combo& c, int rep, int reps, const nlohmann::json& run,
                    const std::string& cost_progress);

// One line per reason a combination was skipped, with how many and which.
void print_skips(const nlohmann::json& skipped);

int64_t median(std::vector<int64_t> v);

// What the end of the matrix knows besides the combinations' outcomes.
struct SummaryInputs {
  const Options& opts;
  std::string run_id;
  nlohmann::json started;
  std::string write_error;  // results could not be written: the matrix stopped
  OtlpRunSender* otlp;      // --otlp-endpoint, or null
  const nlohmann::json& skipped;
  CostRecorder* cost;  // --cost, or null
  bool interrupted;
  const std::vector<std::string>& command_line;
  bool added_baseline;  // the untraced run was the harness's, not asked for
};

// summary.json: every combination's row, the skips, and for a command its verdict per
// method; printed too where a person reads it (the verdict, the cost table).
nlohmann::json build_summary(const SummaryInputs& in, const std::vector<ComboOutcome>& outcomes);

// The end-of-run table: one row per method, what it observed on the workloads and on the
// command (the worst program or layer, as the scoring wrote it), its slowdown per program
// with its interval (--cost), and the events it lost; the report's first screen in plain
// text, read from the same summary.json fields. Empty where no method but none ran.
std::string method_table(const nlohmann::json& summary);

// The last line, and the exit: 130 interrupted, 1 a run failed or results could not be
// written, 3 nothing requested could run here, else 0.
int final_status(const SummaryInputs& in, const nlohmann::json& summary, const std::vector<ComboOutcome>& outcomes,
                 const std::filesystem::path& root);

}  // namespace cudatrace
