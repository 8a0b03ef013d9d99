#include "harness/score/result_check.h"

#include "common/bounded_lines.h"

namespace cudatrace {

std::regex result_pattern(const std::string& text) { return std::regex(text, std::regex::ECMAScript); }

std::optional<std::string> program_result(const std::filesystem::path& stdout_file, const std::regex& pattern) {
  constexpr uint64_t kMaxBytes = uint64_t(64) << 20;
  constexpr size_t kMaxLine = size_t(64) << 10;
  BoundedLines in(stdout_file, kMaxBytes, nullptr, kMaxLine);
  std::optional<std::string> found;
  std::string line;
  std::smatch m;
  while (in.next(line)) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (std::regex_search(line, m, pattern)) found = m.size() > 1 && m[1].matched ? m[1].str() : m[0].str();
  }
  return found;
}

}  // namespace cudatrace
