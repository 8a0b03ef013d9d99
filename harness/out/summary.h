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

// summary.json: every combination's row, the skips, for a command its verdict per method,
// the cost mode's figures, and "methods" (below).
nlohmann::json build_summary(const SummaryInputs& in, const std::vector<ComboOutcome>& outcomes);

// summary.json's "methods" (schema/summary.v1.schema.json): one object per method, the
// untraced baseline left out, with what it observed on each workload program (status and
// reasons) and on the command (the worst layer), the events it lost and its slowdown per
// program (--cost). Decided here once: the console's table and the report's first screen
// read it, neither judges a program again.
nlohmann::json methods_json(const nlohmann::json& summary);

// The end-of-run table, one row per method read from summary["methods"] (computed from the
// rest of `summary` where an older file lacks it). Empty where no method but none ran.
std::string method_table(const nlohmann::json& summary);

// What the console shows after the last run's line: the table, a line of reason per method
// not complete somewhere (as many as fit), the counts, and where every detail is; at most
// `max_lines` lines, however many methods and workloads ran, while the methods' rows fit.
inline constexpr size_t kEndOfRunLines = 26;  // 30, less the lines the report and OTLP may add
std::string end_of_run_text(const nlohmann::json& summary, const std::filesystem::path& root, size_t max_lines);

// details.txt beside summary.json: the command's verdict per layer (verdict_text) and the
// cost table (CostRecorder::table), in plain text: too long for the console's end of run,
// and what a person in a terminal reads before the report. Nothing to write: no file.
// Throws WriteError as write_json does.
inline constexpr char kDetailsFile[] = "details.txt";
void write_details(const std::filesystem::path& root, const nlohmann::json& summary, const CostRecorder* cost);

// The last line, and the exit: 130 interrupted, 1 a run failed or results could not be
// written, 3 nothing requested could run here, else 0.
int final_status(const SummaryInputs& in, const nlohmann::json& summary, const std::vector<ComboOutcome>& outcomes,
                 const std::filesystem::path& root);

}  // namespace cudatrace
