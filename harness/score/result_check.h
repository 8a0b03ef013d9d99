#pragma once
// --result REGEX: what the program computed, as its own output says it (a loss, a checksum,
// an accuracy), read from a run's stdout. A tracer that changes it changed the program: the
// run says so beside the untraced run's value, and --strict-result fails it.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>

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

}  // namespace cudatrace
