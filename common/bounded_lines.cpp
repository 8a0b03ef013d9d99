#include "common/bounded_lines.h"

#include "common/untrusted_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace cudatrace {

BoundedLines::BoundedLines(const std::filesystem::path& path, uint64_t max_file_bytes, ReadBudget* budget,
                           size_t max_line)
    : budget_(budget), max_line_(max_line) {
  // O_NONBLOCK: a FIFO planted under the name must not hang the open (it is refused below).
  fd_ = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  if (fd_ < 0) {
    why_ = std::strerror(errno);
    return;
  }
  if (fstat(fd_, &st) != 0 || !(why_ = why_not_readable_as_untrusted(st)).empty()) {
    if (why_.empty()) why_ = "cannot stat it";
    close(fd_);
    fd_ = -1;
    return;
  }
  limit_ = max_file_bytes;
  bound_hit_ = "";
}

BoundedLines::~BoundedLines() {
  if (fd_ >= 0) close(fd_);
}

// Reads the next chunk, within both bounds; false when nothing more may or can be read.
bool BoundedLines::fill() {
  if (eof_ || fd_ < 0) return false;
  uint64_t may = limit_ - consumed_;
  const char* which = "per file";
  if (budget_ && budget_->left < may) {
    may = budget_->left;
    which = "per run";
  }
  if (may == 0) {
    // At a bound: is there more? One byte's look tells a file read exactly to its end apart.
    char probe;
    ssize_t n;
    do n = pread(fd_, &probe, 1, off_t(consumed_));
    while (n < 0 && errno == EINTR);
    if (n > 0) bound_hit_ = which;
    eof_ = true;
    return false;
  }
  char chunk[65536];
  const size_t want = size_t(std::min<uint64_t>(may, sizeof chunk));
  ssize_t n;
  do n = read(fd_, chunk, want);
  while (n < 0 && errno == EINTR);
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  consumed_ += uint64_t(n);
  if (budget_) budget_->left -= uint64_t(n);
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(chunk, size_t(n));
  return true;
}

bool BoundedLines::next(std::string& line) {
  cut_ = false;
  line.clear();
  for (;;) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      const size_t len = nl - pos_;
      if (!cut_) line.assign(buf_, pos_, std::min(len, max_line_));
      cut_ = cut_ || len > max_line_;
      pos_ = nl + 1;
      break;
    }
    // No newline yet: keep at most max_line of this line, drop the rest as it comes.
    if (buf_.size() - pos_ > max_line_) {
      if (!cut_) line.assign(buf_, pos_, max_line_);
      cut_ = true;
      buf_.clear();
      pos_ = 0;
    }
    if (!fill()) {
      if (pos_ >= buf_.size() && !cut_) return false;  // nothing left
      if (!cut_) line.assign(buf_, pos_, std::min(buf_.size() - pos_, max_line_));
      cut_ = cut_ || buf_.size() - pos_ > max_line_;
      buf_.clear();
      pos_ = 0;
      break;
    }
  }
  ++line_no_;
  lines_cut_ += cut_;
  return true;
}

uint64_t BoundedLines::unread_bytes() const {
  if (fd_ < 0 || !*bound_hit_) return 0;
  struct stat st {};
  if (fstat(fd_, &st) != 0 || uint64_t(st.st_size) <= consumed_) return 1;  // more there, size unknown
  return uint64_t(st.st_size) - consumed_;
}

namespace {
template <typename T>
std::optional<T> parse(std::string_view s, int base) {
  if (base == 16 && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s[0] == '+') return std::nullopt;
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

std::optional<int64_t> parse_int64(std::string_view s, int base) { return parse<int64_t>(s, base); }
std::optional<uint64_t> parse_uint64(std::string_view s, int base) { return parse<uint64_t>(s, base); }

}  // namespace cudatrace
