#pragma once
// --result REGEX: what the program computed, as its own output says it (a loss, a checksum,
// an accuracy), read from a run's stdout. A tracer that changes it changed the program: the
// run says so beside the untraced run's value, and --strict-result fails it.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

namespace cudatrace {

// The pattern, compiled; throws std::regex_error for one that does not compile.
std::regex result_pattern(const std::string& text);

// What a run's stdout says it computed: the last line of `stdout_file` that `pattern`
// matches, its first group where it has one, else the whole match; nullopt when no line
// does. `max_bytes` is what the runner kept of the output (its cap): the file holds no more.
struct ProgramResult {
  std::optional<std::string> value;
  // Why the value may not be the program's last word, or empty: the output was cut at the
  // runner's cap (the last lines are gone), or the matching line past 1 KiB (its end is).
  std::string cut;
};
ProgramResult program_result(const std::filesystem::path& stdout_file, const std::regex& pattern, uint64_t max_bytes);

// One program's untraced results by repetition (0: the cost mode's warm-up run).
using UntracedResults = std::map<int, ProgramResult>;

// A traced run's result against the untraced runs'. `check` is run.json's result_check;
// `changed` (the run's "result_changed") is set only where tracing changed the result;
// `unchecked` where it could not be compared (an output cut at its bound).
struct ResultVerdict {
  nlohmann::json check;
  std::string changed, unchecked;
};
// Compared with the same repetition's untraced run, else the first's, else the warm-up's.
// Where that one differs but another untraced run computed exactly the traced value, the
// program's result varies untraced (XLA's autotuner picks kernels by timing them: on an
// H100 one untraced jax_step in five summed otherwise, and all its traced runs matched the
// other four): that is not tracing's doing, and is named as such, not as a change.
ResultVerdict compare_result(const ProgramResult& traced, const UntracedResults& untraced, int rep);

}  // namespace cudatrace
