#pragma once
// The bytes of a trace the traced program wrote, as the JSON parser gets them. The file is
// the program's: it may be a link, a second hard link to a file root may read, larger than
// any bound, not UTF-8, or built to make a parser hold a whole gigabyte string. So the file
// is opened never through a link and only when it is a regular file with one link
// (common/untrusted_file.h), read through one descriptor in slices up to `max_bytes`, and
// on its way to the parser:
//   - each byte that is not part of a valid UTF-8 sequence becomes the five characters
//     \\xHH, which a JSON string reads as the text \xHH: the project's one representation
//     of such a byte (common/outside_text.h); outside a string it stays a syntax error;
//   - a string longer than `max_string` bytes is cut there (its end still closes it);
//   - a run of more than 4 KiB of anything else that is neither white space nor JSON's
//     punctuation (a number of a million digits) ends the input: the parser then fails
//     there, and the file counts as cut.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cudatrace {

// Raw bytes from somewhere other than a file the input opens itself: a gzip'd trace being
// inflated (tracers/jaxprof/jaxprof_gzip.h), whose inflated text needs the same filter as a
// plain file's. read() gives up to n bytes, 0 at the end, -1 when it cannot go on (why()
// says why: a read error, a cut or corrupt stream).
class RawByteSource {
 public:
  virtual ~RawByteSource() = default;
  virtual ssize_t read(char* into, size_t n) = 0;
  virtual const std::string& why() const = 0;
};

// Filtered a slice at a time (64 KiB), not a byte at a time: runs of plain ASCII, the most
// of any trace, are looked at by a table and copied whole (a per-byte virtual call and
// std::string::push_back were 15% of a conversion).
class UntrustedJsonInput {
 public:
  // Opens `file`; is_open() false (and why()) when it may not be read.
  UntrustedJsonInput(const std::filesystem::path& file, uint64_t max_bytes, size_t max_string = size_t(64) << 10);
  // Takes its bytes from `source` (which must outlive it), `max_bytes` of them at most;
  // file_size() is then unknown (0).
  UntrustedJsonInput(RawByteSource& source, uint64_t max_bytes, size_t max_string = size_t(64) << 10);
  ~UntrustedJsonInput();
  UntrustedJsonInput(const UntrustedJsonInput&) = delete;
  UntrustedJsonInput& operator=(const UntrustedJsonInput&) = delete;

  bool is_open() const { return fd_ >= 0 || source_; }
  const std::string& why() const { return why_; }
  uint64_t file_size() const { return size_; }
  uint64_t bytes_read() const { return read_; }
  // The file went on past max_bytes (what was not read: file_size() - bytes_read()).
  bool bound_hit() const { return bound_hit_; }
  // Why the input ended early, other than the bound: a read error, a token too long.
  const std::string& stopped() const { return stopped_; }
  int64_t invalid_utf8_bytes() const { return invalid_; }
  int64_t strings_cut() const { return strings_cut_; }

  // Appends the next slice's filtered text to `out` (possibly nothing: a slice inside a
  // string being cut). False once nothing more will come: the end, the bound, a stop.
  bool fill(std::string& out);

 private:
  void filter(const char* raw, size_t have, std::string& out);
  void emit(const char* bytes, size_t n, std::string& out, bool opaque = false);
  ssize_t raw_read(char* into, size_t n);

  int fd_ = -1;
  RawByteSource* source_ = nullptr;
  std::string why_, stopped_, read_error_;
  uint64_t size_ = 0, left_ = 0, read_ = 0;
  size_t max_string_;
  bool bound_hit_ = false, eof_ = false;
  std::vector<char> raw_;
  size_t carry_ = 0;  // bytes of an incomplete UTF-8 sequence kept from the last slice
  // Where the filter is in the JSON text: in a string (after a backslash), how long the
  // string or the bare token is so far.
  bool in_string_ = false, escaped_ = false, cutting_ = false;
  int hex_left_ = 0;  // of a \uXXXX escape
  size_t run_ = 0;
  int64_t invalid_ = 0, strings_cut_ = 0;
};

}  // namespace cudatrace
