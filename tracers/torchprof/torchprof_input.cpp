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

namespace cudatrace {

namespace {
constexpr size_t kSlice = size_t(1) << 20;
constexpr size_t kMaxBareToken = size_t(4) << 10;

bool structural_or_space(char c) {
  switch (c) {
    case '{': case '}': case '[': case ']': case ',': case ':':
    case ' ': case '\t': case '\n': case '\r':
      return true;
    default:
      return false;
  }
}
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

UntrustedJsonInput::~UntrustedJsonInput() {
  if (fd_ >= 0) close(fd_);
}

UntrustedJsonInput::int_type UntrustedJsonInput::underflow() {
  while (gptr() == egptr()) {
    if (!refill()) return traits_type::eof();
  }
  return traits_type::to_int_type(*gptr());
}

// One character (a whole UTF-8 sequence, or an invalid byte's escape: `opaque`, which
// leaves the escape state as it was) on its way out, through the string and token bounds.
void UntrustedJsonInput::emit(const char* bytes, size_t n, bool opaque) {
  if (!stopped_.empty()) return;
  const char c = opaque ? 'x' : bytes[0];
  if (in_string_) {
    // Cut only between escapes (\n, \uXXXX): the string must stay one the parser accepts.
    const bool part_of_escape = escaped_ || hex_left_ > 0 || c == '\\';
    if (hex_left_ > 0) {
      --hex_left_;
    } else if (escaped_) {
      escaped_ = false;
      if (c == 'u') hex_left_ = 4;
    } else if (c == '"') {
      in_string_ = false;
      cutting_ = false;
      out_.push_back(c);
      return;
    } else if (c == '\\') {
      escaped_ = true;
    }
    if (cutting_) return;
    if (!part_of_escape && run_ + n > max_string_) {
      cutting_ = true;
      ++strings_cut_;
      return;
    }
    run_ += n;
    out_.append(bytes, n);
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
  out_.append(bytes, n);
}

bool UntrustedJsonInput::refill() {
  if (fd_ < 0 || !stopped_.empty()) return false;
  out_.clear();
  size_t have = carry_;
  if (!eof_) {
    const size_t want = size_t(std::min<uint64_t>(kSlice, left_));
    ssize_t got = 0;
    if (want > 0) {
      do got = read(fd_, raw_.data() + have, want);
      while (got < 0 && errno == EINTR);
    }
    if (got < 0) {
      stopped_ = std::string("read failed: ") + std::strerror(errno);
      return false;
    }
    read_ += uint64_t(got);
    left_ -= uint64_t(got);
    have += size_t(got);
    if (got == 0 || left_ == 0) {
      eof_ = true;
      // One byte more says whether the file went on past the bound.
      char probe;
      if (left_ == 0 && ::read(fd_, &probe, 1) == 1) bound_hit_ = true;
    }
  }
  if (have == 0) return false;
  const std::string_view raw(raw_.data(), have);
  size_t i = 0;
  carry_ = 0;
  while (i < have) {
    if (uint8_t(raw[i]) < 0x80) {
      emit(&raw[i], 1);
      ++i;
      continue;
    }
    if (const size_t n = utf8_sequence_length(raw, i); n > 0) {
      emit(&raw[i], n);
      i += n;
      continue;
    }
    // A sequence the slice cut in two: kept for the next slice, which completes or refutes it.
    if (!eof_ && have - i < 4 && uint8_t(raw[i]) >= 0xC2 && uint8_t(raw[i]) <= 0xF4) {
      carry_ = have - i;
      std::memmove(raw_.data(), raw_.data() + i, carry_);
      break;
    }
    static const char kHex[] = "0123456789ABCDEF";
    const char escaped[5] = {'\\', '\\', 'x', kHex[uint8_t(raw[i]) >> 4], kHex[uint8_t(raw[i]) & 0xF]};
    ++invalid_;
    emit(escaped, 5, true);
    ++i;
  }
  // Nothing to give yet (a slice that was all one cut string): the next slice may have some.
  if (out_.empty()) return stopped_.empty() && !eof_;
  setg(out_.data(), out_.data(), out_.data() + out_.size());
  return true;
}

}  // namespace cudatrace
