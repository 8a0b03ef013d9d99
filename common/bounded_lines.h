#pragma once
// Text files the traced program could have written (strace's output, the preload shim's
// tables) read line by line with bounds, so that nothing it writes can exhaust the harness:
// never through a link and a regular file only (as common/untrusted_file.h), at most
// `max_file_bytes` of one file, at most what a shared ReadBudget has left across the files
// of one run, and at most `max_line` bytes kept of one line. What lies past a bound is
// counted, never read; the caller reports it as loss, with the file and the reason.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace cudatrace {

// Bytes that may still be read from a run's files of one kind (shared by the readers).
struct ReadBudget {
  explicit ReadBudget(uint64_t bytes) : total(bytes), left(bytes) {}
  uint64_t total;
  uint64_t left;
};

class BoundedLines {
 public:
  static constexpr size_t kDefaultMaxLine = size_t(64) << 10;

  BoundedLines(const std::filesystem::path& path, uint64_t max_file_bytes, ReadBudget* budget = nullptr,
               size_t max_line = kDefaultMaxLine);
  ~BoundedLines();
  BoundedLines(const BoundedLines&) = delete;
  BoundedLines& operator=(const BoundedLines&) = delete;

  // False when the file could not be opened; why() then says so.
  bool is_open() const { return fd_ >= 0; }
  const std::string& why() const { return why_; }

  // The next line, without its newline. False at the end of the file or at a bound.
  bool next(std::string& line);
  // 1-based number of the line next() returned last.
  int64_t line_number() const { return line_no_; }
  // Whether the line next() returned last was longer than max_line (only its start is kept).
  bool line_cut() const { return cut_; }
  int64_t lines_cut() const { return lines_cut_; }
  // After the last next(): how many bytes of the file were not read because of a bound
  // (0 when it was read to its end), and which bound ("per file" or "per run").
  uint64_t unread_bytes() const;
  const char* bound_hit() const { return bound_hit_; }
  uint64_t bytes_read() const { return consumed_; }

 private:
  bool fill();
  int fd_ = -1;
  std::string why_;
  uint64_t limit_ = 0;     // bytes this reader may consume
  uint64_t consumed_ = 0;  // bytes read from the file
  ReadBudget* budget_;
  size_t max_line_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  bool cut_ = false;
  int64_t line_no_ = 0, lines_cut_ = 0;
  const char* bound_hit_ = "";
};

// A whole number in `s` (decimal, or hex with base 16, an optional 0x allowed), every
// character used, within int64_t / uint64_t: otherwise nothing. Never throws.
std::optional<int64_t> parse_int64(std::string_view s, int base = 10);
std::optional<uint64_t> parse_uint64(std::string_view s, int base = 10);

}  // namespace cudatrace
