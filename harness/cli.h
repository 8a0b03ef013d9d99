#pragma once
// Command-line options of the harness. Parsing is separate from running so it can be
// tested on its own: parse_cli throws UsageError with the one line to print.
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cudatrace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The run's folder under --out (create_run_folder); an --out that cannot be made is the
// user's to fix, a UsageError (exit 2), not a failure of the run.
std::string create_out_folder(const std::filesystem::path& out, const std::string& suffix, std::filesystem::path& root,
                              std::vector<std::filesystem::path>* created);

struct Options {
  std::vector<std::string> workloads;  // resolved: never "all"
  std::vector<std::string> methods;
  // What --method named and then took out ("compared,-strace": strace), and the argument
  // as given: the cost table names those methods as not run, and why.
  std::vector<std::string> methods_taken_out;
  std::string method_arg;
  std::vector<std::string> linkages;
  int reps = 1;
  bool reps_given = false;
  bool bench = false;  // run the per-call benchmark instead of the workloads
  std::filesystem::path agree_with;  // --bench --agree-with: an earlier bench run this one is checked against
  // --cost: each program N (--reps) times per method in rounds that rotate the methods'
  // order, none in every round; the slowdown against none per method (harness/stats/cost.h).
  bool cost = false;
  std::optional<double> time_budget_s;  // --time-budget: no cost round starts that would end past it
  std::optional<uint64_t> seed;         // --seed: the cost mode's order (drawn when not given)
  // --result REGEX: the program's result, from its stdout, compared traced against untraced;
  // --strict-result: a difference fails the traced run.
  std::optional<std::string> result;
  bool strict_result = false;
  bool baseline = true;  // a command runs untraced too, and every traced run's exit is checked against it
  std::filesystem::path export_trace;  // a run folder to write as trace.json, then stop
  std::filesystem::path export_otlp;   // a results or run folder to write as OTLP JSON lines, then stop
  std::filesystem::path export_jsonl;  // a run folder whose events to write as JSON lines (-o FILE), then stop
  std::filesystem::path otlp_file;     // -o: where --export-otlp writes (default: inside the folder)
  std::string otlp_endpoint;           // OTLP/HTTP collector each run (or the export) is sent to
  std::filesystem::path out = "results";
  double timeout_s = 600;
  // --max-trace-bytes: how much of what a method's in-process half writes (preload's record
  // files) one run reads; unset: half the free space under --out when the run starts.
  std::optional<uint64_t> max_trace_bytes;
  // --stall-timeout: a run whose processes made no progress (no CPU time, no output) for
  // this long ends early as a failed run, "stalled" (harness/run/stall_watch.h). Unset: off.
  std::optional<double> stall_timeout_s;
  bool list = false;
  bool json = false;
  bool no_report = false;  // --no-report: the caller draws one report over several runs  // --list --json: the same, as one JSON object (for scripts and tests)
  std::filesystem::path run_id_file;  // --run-id-file: where to write the run folder's path
  bool help = false;
  std::vector<std::string> command;  // after "--": trace this program instead of the workloads
  // --set WORKLOAD.FLAG=VALUE -> extra "--FLAG=VALUE" for that workload
  std::map<std::string, std::vector<std::string>> workload_args;
  // --set METHOD.KEY=VALUE -> that method's settings (checked by the method when it is made)
  std::map<std::string, std::map<std::string, std::string>> method_options;
};

// `workload_names`, `method_names`: what "all" expands to and what is valid.
// `method_groups`: other names --method takes for several methods (method_groups() in
// tracers/tracer.h); "all" there overrides method_names as its meaning.
Options parse_cli(const std::vector<std::string>& args, const std::vector<std::string>& workload_names,
                  const std::vector<std::string>& method_names,
                  const std::map<std::string, std::vector<std::string>>& method_groups = {});

std::string help_text();

}  // namespace cudatrace
