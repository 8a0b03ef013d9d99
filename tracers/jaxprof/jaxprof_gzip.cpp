#include "tracers/jaxprof/jaxprof_gzip.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/untrusted_file.h"

namespace cudatrace {

namespace {
constexpr size_t kSlice = size_t(64) << 10;
}  // namespace

TraceFileBytes::TraceFileBytes(const std::filesystem::path& file, uint64_t max_file_bytes) : left_(max_file_bytes) {
  uint64_t size = 0;
  const int fd = open_untrusted_fd(file, &unreadable_, &size);
  if (fd < 0) return;
  fd_ = fd;
  size_ = size;
}

TraceFileBytes::~TraceFileBytes() {
  if (z_started_) inflateEnd(&z_);
  if (fd_ >= 0) close(fd_);
}

ssize_t TraceFileBytes::read_file(char* into, size_t n) {
  const size_t want = size_t(std::min<uint64_t>(n, left_));
  if (want == 0) {
    // One byte more says whether the file went on past the bound.
    char probe;
    if (n > 0 && !bound_hit_ && ::read(fd_, &probe, 1) == 1) bound_hit_ = true;
    return 0;
  }
  ssize_t got;
  do got = ::read(fd_, into, want);
  while (got < 0 && errno == EINTR);
  if (got < 0) {
    why_ = std::string("read failed: ") + std::strerror(errno);
    return -1;
  }
  read_ += uint64_t(got);
  left_ -= uint64_t(got);
  return got;
}

// The first two bytes decide: gzip's magic, or text as it is. A short read is read on, so
// that a pipe-like slowness cannot make a gzip'd file look plain.
bool TraceFileBytes::peek_magic() {
  started_ = true;
  head_.resize(2);
  size_t have = 0;
  while (have < 2) {
    const ssize_t got = read_file(head_.data() + have, 2 - have);
    if (got < 0) return false;
    if (got == 0) break;
    have += size_t(got);
  }
  head_.resize(have);
  gzip_ = have == 2 && uint8_t(head_[0]) == 0x1f && uint8_t(head_[1]) == 0x8b;
  if (!gzip_) return true;
  // 16 + MAX_WBITS: a gzip header and trailer (its CRC and length checked by zlib), no other.
  if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) {
    why_ = "zlib would not start";
    return false;
  }
  z_started_ = true;
  in_.resize(kSlice);
  std::memcpy(in_.data(), head_.data(), 2);
  z_.next_in = in_.data();
  z_.avail_in = 2;
  head_.clear();
  return true;
}

ssize_t TraceFileBytes::read(char* into, size_t n) {
  if (fd_ < 0) return -1;
  if (!started_ && !peek_magic()) return -1;
  if (gzip_) return inflate_some(into, n);
  if (head_at_ < head_.size()) {
    const size_t k = std::min(n, head_.size() - head_at_);
    std::memcpy(into, head_.data() + head_at_, k);
    head_at_ += k;
    return ssize_t(k);
  }
  return read_file(into, n);
}

// Inflates until something comes out (or the stream ends): never more than `n` bytes, so
// what a bomb inflates to is bounded by the calls the caller makes.
ssize_t TraceFileBytes::inflate_some(char* into, size_t n) {
  n = std::min<size_t>(n, UINT32_MAX);
  z_.next_out = reinterpret_cast<Bytef*>(into);
  z_.avail_out = uInt(n);
  while (z_.avail_out == n && !ended_) {
    if (z_.avail_in == 0) {
      const ssize_t got = read_file(reinterpret_cast<char*>(in_.data()), in_.size());
      if (got < 0) return -1;
      if (got == 0) {
        if (member_ended_) {
          ended_ = true;
          break;
        }
        why_ = bound_hit_ ? "the file goes on past its bound of " + std::to_string(read_) + " bytes"
                          : "the gzip stream ends before its end (the file is cut), after " +
                                std::to_string(read_) + " bytes";
        return -1;
      }
      z_.next_in = in_.data();
      z_.avail_in = uInt(got);
    }
    if (member_ended_) {  // another member follows: gzip's concatenation
      inflateReset(&z_);
      member_ended_ = false;
    }
    const int rc = ::inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      member_ended_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      why_ = std::string("the gzip stream is corrupt (") + (z_.msg ? std::string(z_.msg) : "zlib error " + std::to_string(rc)) +
             "), after " + std::to_string(read_ - z_.avail_in) + " of its bytes";
      return -1;
    }
  }
  return ssize_t(n - z_.avail_out);
}

}  // namespace cudatrace
