#include "harness/score/result_check.h"

#include "common/bounded_lines.h"
#include "common/outside_text.h"

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

namespace {

nlohmann::json as_json(const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
std::string as_text(const std::optional<std::string>& v) { return v ? "'" + shown(*v, 80) + "'" : std::string("nothing"); }

}  // namespace

ResultVerdict compare_result(const ProgramResult& got, const UntracedResults& untraced_runs, int rep) {
  ResultVerdict out;
  const ProgramResult* untraced = nullptr;
  for (const int r : {rep, 1, 0})
    if (auto it = untraced_runs.find(r); it != untraced_runs.end() && !untraced) untraced = &it->second;
  // A result read from a cut output is not the program's word: not compared, and said so
  // on the run's line (a bound reached is never a silent "same").
  const std::string cut = !got.cut.empty() ? "traced: " + got.cut
                          : untraced && !untraced->cut.empty() ? "untraced: " + untraced->cut : "";
  if (!untraced || !untraced->value || !cut.empty()) {
    out.check = {{"traced", as_json(got.value)},
                 {"untraced", untraced ? as_json(untraced->value) : nlohmann::json(nullptr)},
                 {"why", !untraced      ? "no untraced run to compare with"
                         : !cut.empty() ? "not compared: " + cut
                                        : "the untraced run printed no line --result matches: nothing to compare"}};
    if (!cut.empty()) out.unchecked = "not compared: " + cut;
    return out;
  }
  const bool same = untraced->value == got.value;
  out.check = {{"traced", as_json(got.value)}, {"untraced", as_json(untraced->value)}, {"same", same}};
  if (same) return out;
  for (const auto& [r, other] : untraced_runs)
    if (other.cut.empty() && other.value && other.value == got.value) {
      out.check["as_untraced_run"] = r;
      out.check["why"] = "the untraced runs computed different results themselves (" + as_text(untraced->value) +
                         " and " + as_text(other.value) + "): the program's result varies untraced, and this run's is untraced rep " +
                         std::to_string(r) + "'s";
      return out;
    }
  out.changed = "traced, the program computed otherwise than untraced: its result (--result) read " +
                as_text(got.value) + " where the untraced run's read " + as_text(untraced->value);
  return out;
}

}  // namespace cudatrace
