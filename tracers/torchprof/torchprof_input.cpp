#include "tracers/torchprof/torchprof_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "common/outside_text.h"
#include "common/untrusted_file.h"
#include "tracers/torchprof/torchprof_scan.h"

namespace cudatrace {

namespace {
// Small enough that a slice, filtered, is still in the cache when the tokenizer reads it (at
// 1 MiB, a third of the tokenizer's time was waiting on memory).
constexpr size_t kSlice = size_t(64) << 10;
constexpr size_t kMaxBareToken = size_t(4) << 10;

// What ends a bare token: JSON's punctuation and white space.
struct ByteClasses {
  bool structural[256] = {};
  constexpr ByteClasses() {
    for (const char c : {'{', '}', '[', ']', ',', ':', ' ', '\t', '\n', '\r'}) structural[uint8_t(c)] = true;
  }
};
constexpr ByteClasses kClasses;

bool structural_or_space(char c) { return kClasses.structural[uint8_t(c)]; }
}  // namespace

UntrustedJsonInput::UntrustedJsonInput(const std::filesystem::path& file, uint64_t max_bytes, size_t max_string)
    : left_(max_bytes), max_string_(max_string) {
  uint64_t size = 0;
  const int fd = open_untrusted_fd(file, &why_, &size);
  if (fd < 0) return;
  fd_ = fd;
  size_ = size;
  raw_.resize(kSlice + 4);
}

UntrustedJsonInput::UntrustedJsonInput(RawByteSource& source, uint64_t max_bytes, size_t max_string)
    : source_(&source), left_(max_bytes), max_string_(max_string) {
  raw_.resize(kSlice + 4);
}

UntrustedJsonInput::~UntrustedJsonInput() {
  if (fd_ >= 0) close(fd_);
}

ssize_t UntrustedJsonInput::raw_read(char* into, size_t n) {
  if (source_) return source_->read(into, n);
  ssize_t got;
  do got = ::read(fd_, into, n);
  while (got < 0 && errno == EINTR);
  if (got < 0) read_error_ = std::string("read failed: ") + std::strerror(errno);
  return got;
}

// One character (a whole UTF-8 sequence, or an invalid byte's escape: `opaque`, which
// leaves the escape state as it was) on its way out, through the string and token bounds.
void UntrustedJsonInput::emit(const char* bytes, size_t n, std::string& out, bool opaque) {
  if (!stopped_.empty()) return;
  const char c = opaque ? 'x' : bytes[0];
  if (in_string_) {
    // Cut only between escapes (\n, \uXXXX): the string must stay one the parser accepts.
    // An escape's own bytes count against the bound too, and a cut may begin at its
    // backslash: a string of nothing but escapes would otherwise grow with the file.
    const bool within_escape = escaped_ || hex_left_ > 0;
    if (hex_left_ > 0) {
      --hex_left_;
    } else if (escaped_) {
      escaped_ = false;
      if (c == 'u') hex_left_ = 4;
    } else if (c == '"') {
      in_string_ = false;
      cutting_ = false;
      out.push_back(c);
      return;
    } else if (c == '\\') {
      escaped_ = true;
    }
    if (cutting_) return;
    if (!within_escape && run_ + n > max_string_) {
      cutting_ = true;
      ++strings_cut_;
      return;
    }
    run_ += n;
    out.append(bytes, n);
    return;
  }
  if (c == '"') {
    in_string_ = true;
    run_ = 0;
  } else if (structural_or_space(c)) {
    run_ = 0;
  } else if (++run_ > kMaxBareToken) {
    stopped_ = "a token of more than 4 KiB outside a string";
    return;
  }
  out.append(bytes, n);
}

bool UntrustedJsonInput::fill(std::string& out) {
  if (!is_open() || !stopped_.empty()) return false;
  size_t have = carry_;
  if (!eof_) {
    const size_t want = size_t(std::min<uint64_t>(kSlice, left_));
    ssize_t got = 0;
    if (want > 0) got = raw_read(raw_.data() + have, want);
    if (got < 0) {
      stopped_ = source_ ? source_->why() : read_error_;
      return false;
    }
    read_ += uint64_t(got);
    left_ -= uint64_t(got);
    have += size_t(got);
    if (got == 0 || left_ == 0) {
      eof_ = true;
      // One byte more says whether the file went on past the bound.
      char probe;
      if (left_ == 0 && raw_read(&probe, 1) == 1) bound_hit_ = true;
    }
  }
  if (have == 0) return false;
  carry_ = 0;
  filter(raw_.data(), have, out);
  return stopped_.empty() && !(eof_ && carry_ == 0);
}

// Bytes pass through in spans, appended only where the text must change (a string cut, an
// invalid byte's escape) or at the slice's end.
void UntrustedJsonInput::filter(const char* data, size_t have, std::string& out) {
  const std::string_view raw(data, have);
  size_t i = 0, from = 0;  // [from, i): passes as it is, not appended yet
  const auto flush = [&] {
    out.append(data + from, i - from);
    from = i;
  };
  while (i < have && stopped_.empty()) {
    if (in_string_ && !escaped_ && hex_left_ == 0) {
      const size_t j = scan::filter_string_run(data, i, have);
      if (cutting_) {
        flush();
        i = from = j;
      } else if (const size_t room = max_string_ > run_ ? max_string_ - run_ : 0; j - i > room) {
        i += room;
        run_ = max_string_;
        flush();
        cutting_ = true;
        ++strings_cut_;
        i = from = j;
      } else {
        run_ += j - i;
        i = j;
      }
      if (i == have) break;
      if (data[i] == '"') {
        in_string_ = cutting_ = false;
        ++i;
        continue;
      }
    } else if (!in_string_) {
      // Up to the next string: a bare token there can pass its bound only where the run is
      // longer than what the bound leaves, and only then is it looked at byte by byte.
      const size_t j = scan::filter_outside_run(data, i, have);
      if (run_ + (j - i) > kMaxBareToken) {
        for (; i < j; ++i) {
          if (kClasses.structural[uint8_t(data[i])]) {
            run_ = 0;
          } else if (++run_ > kMaxBareToken) {
            flush();
            stopped_ = "a token of more than 4 KiB outside a string";
            return;
          }
        }
      } else if (j > i) {
        size_t k = j;  // the token the run ends in goes on into what follows
        while (k > i && !kClasses.structural[uint8_t(data[k - 1])]) --k;
        run_ = k == i ? run_ + (j - i) : j - k;
        i = j;
      }
      if (i == have) break;
      if (data[i] == '"') {
        in_string_ = true;
        run_ = 0;
        ++i;
        continue;
      }
    }
    // One character the runs above do not pass: an escape's, or one past ASCII.
    flush();
    if (uint8_t(raw[i]) < 0x80) {
      emit(&raw[i], 1, out);
      from = ++i;
      continue;
    }
    if (const size_t n = utf8_sequence_length(raw, i); n > 0) {
      emit(&raw[i], n, out);
      from = i += n;
      continue;
    }
    // A sequence the slice cut in two: kept for the next slice, which completes or refutes it.
    if (!eof_ && have - i < 4 && uint8_t(raw[i]) >= 0xC2 && uint8_t(raw[i]) <= 0xF4) {
      carry_ = have - i;
      std::memmove(raw_.data(), raw_.data() + i, carry_);
      return;
    }
    static const char kHex[] = "0123456789ABCDEF";
    const char escaped[5] = {'\\', '\\', 'x', kHex[uint8_t(raw[i]) >> 4], kHex[uint8_t(raw[i]) & 0xF]};
    ++invalid_;
    emit(escaped, 5, out, true);
    from = ++i;
  }
  flush();
}

}  // namespace cudatrace
