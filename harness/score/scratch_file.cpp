#include "harness/score/scratch_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cudatrace {

namespace {
constexpr size_t kFlushAt = size_t(1) << 20;
constexpr uint32_t kMaxRecord = uint32_t(1) << 30;  // what no record of ours reaches

[[noreturn]] void fail(const char* verb, const std::filesystem::path& path, const std::string& why) {
  throw std::runtime_error(std::string("cannot ") + verb + " " + path.string() + ": " + why);
}
}  // namespace

ScratchWriter::ScratchWriter(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) fail("write", path_, std::strerror(errno));
  cctx_ = ZSTD_createCCtx();
  if (!cctx_) fail("write", path_, "zstd has no memory");
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 1);
}

ScratchWriter::~ScratchWriter() {
  if (cctx_) ZSTD_freeCCtx(cctx_);
  if (fd_ >= 0) ::close(fd_);
}

void ScratchWriter::put(std::string_view record) {
  const uint32_t n = uint32_t(record.size());
  pending_.append(reinterpret_cast<const char*>(&n), sizeof n);
  pending_.append(record);
  if (pending_.size() >= kFlushAt) flush(false);
}

void ScratchWriter::flush(bool end) {
  ZSTD_inBuffer in{pending_.data(), pending_.size(), 0};
  for (;;) {
    out_.resize(ZSTD_CStreamOutSize());
    ZSTD_outBuffer o{out_.data(), out_.size(), 0};
    const size_t left = ZSTD_compressStream2(cctx_, &o, &in, end ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(left)) fail("write", path_, ZSTD_getErrorName(left));
    for (size_t off = 0; off < o.pos;) {
      const ssize_t w = ::write(fd_, out_.data() + off, o.pos - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("write", path_, std::strerror(w < 0 ? errno : ENOSPC));
      off += size_t(w);
    }
    if (end ? left == 0 : in.pos == in.size) break;
  }
  pending_.clear();
}

void ScratchWriter::close() {
  if (fd_ < 0) return;
  flush(true);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("write", path_, std::strerror(errno));
}

ScratchReader::ScratchReader(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) fail("read", path_, std::strerror(errno));
  dctx_ = ZSTD_createDCtx();
  if (!dctx_) fail("read", path_, "zstd has no memory");
}

ScratchReader::~ScratchReader() {
  if (dctx_) ZSTD_freeDCtx(dctx_);
  if (fd_ >= 0) ::close(fd_);
}

// More bytes at the end of plain_ (what is before pos_ is dropped); false at the end.
bool ScratchReader::more() {
  if (pos_ > 0) plain_.erase(0, pos_), pos_ = 0;
  for (;;) {
    if (raw_pos_ == raw_.size()) {
      if (eof_) return false;
      raw_.resize(ZSTD_DStreamInSize());
      ssize_t n;
      do n = ::read(fd_, raw_.data(), raw_.size());
      while (n < 0 && errno == EINTR);
      if (n < 0) fail("read", path_, std::strerror(errno));
      raw_.resize(size_t(n));
      raw_pos_ = 0;
      if (n == 0) {
        eof_ = true;
        return false;
      }
    }
    ZSTD_inBuffer in{raw_.data(), raw_.size(), raw_pos_};
    const size_t before = plain_.size();
    plain_.resize(before + ZSTD_DStreamOutSize());
    ZSTD_outBuffer o{plain_.data() + before, ZSTD_DStreamOutSize(), 0};
    const size_t r = ZSTD_decompressStream(dctx_, &o, &in);
    raw_pos_ = in.pos;
    plain_.resize(before + o.pos);
    if (ZSTD_isError(r)) fail("read", path_, ZSTD_getErrorName(r));
    if (o.pos > 0) return true;
  }
}

bool ScratchReader::next(std::string_view& record) {
  for (;;) {
    const size_t have = plain_.size() - pos_;
    if (have >= sizeof(uint32_t)) {
      uint32_t n;
      std::memcpy(&n, plain_.data() + pos_, sizeof n);
      if (n > kMaxRecord) fail("read", path_, "damaged (a record of " + std::to_string(n) + " bytes)");
      if (have >= sizeof n + n) {
        record = std::string_view(plain_.data() + pos_ + sizeof n, n);
        pos_ += sizeof n + n;
        return true;
      }
    }
    if (!more()) {
      if (pos_ != plain_.size()) fail("read", path_, "cut short");
      return false;
    }
  }
}

}  // namespace cudatrace
