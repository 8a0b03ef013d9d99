#pragma once
// --result REGEX: what the program computed, as its own output says it (a loss, a checksum,
// an accuracy), read from a run's stdout. A tracer that changes it changed the program: the
// run says so beside the untraced run's value, and --strict-result fails it.
#include <filesystem>
#include <optional>
#include <regex>
#include <string>

namespace cudatrace {

// The pattern, compiled; throws std::regex_error for one that does not compile.
std::regex result_pattern(const std::string& text);

// The last line of `stdout_file` (the run's kept stdout) that `pattern` matches: its first
// group where it has one, else the whole match; nullopt when no line does. Reads at most
// 64 MiB, lines of at most 64 KiB (a longer one is cut before matching).
std::optional<std::string> program_result(const std::filesystem::path& stdout_file, const std::regex& pattern);

}  // namespace cudatrace
