#include "harness/score/result_check.h"

#include "common/bounded_lines.h"

namespace cudatrace {

std::regex result_pattern(const std::string& text) { return std::regex(text, std::regex::ECMAScript); }

ProgramResult program_result(const std::filesystem::path& stdout_file, const std::regex& pattern, uint64_t max_bytes) {
  // std::regex matches by recursion, a frame or more per character: a 64 KiB line crashed
  // the harness (SIGSEGV). A result is a few words; a line is matched on its first 1 KiB.
  constexpr size_t kMaxResultLine = 1024;
  BoundedLines in(stdout_file, max_bytes, nullptr, kMaxResultLine);
  ProgramResult r;
  std::string line;
  std::smatch m;
  bool found_cut = false;
  while (in.next(line)) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (std::regex_search(line, m, pattern)) {
      r.value = m.size() > 1 && m[1].matched ? m[1].str() : m[0].str();
      found_cut = in.line_cut();
    }
  }
  if (in.unread_bytes() > 0)
    r.cut = "stdout past the " + std::to_string(max_bytes) + " bytes kept of it was not read";
  else if (found_cut)
    r.cut = "the matching line is longer than " + std::to_string(kMaxResultLine) + " bytes: its end was cut";
  return r;
}

}  // namespace cudatrace
