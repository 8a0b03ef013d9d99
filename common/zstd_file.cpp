#include "common/zstd_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cudatrace {

namespace {
[[noreturn]] void fail(const char* verb, const std::filesystem::path& path, const std::string& why) {
  throw std::runtime_error(std::string("cannot ") + verb + " " + path.string() + ": " + why);
}
}  // namespace

ZstdFileWriter::ZstdFileWriter(const std::filesystem::path& path, int level) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) fail("write", path_, std::strerror(errno));
  cctx_ = ZSTD_createCCtx();
  if (!cctx_) fail("write", path_, "zstd has no memory");
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);  // a damaged file says so
  pending_.reserve(kBatch);
}

ZstdFileWriter::~ZstdFileWriter() {
  if (cctx_) ZSTD_freeCCtx(cctx_);
  if (fd_ >= 0) ::close(fd_);
}

void ZstdFileWriter::write(const void* bytes, size_t n) {
  if (fd_ < 0) fail("write", path_, "written after it was closed or failed");
  pending_.append(static_cast<const char*>(bytes), n);
  if (pending_.size() >= kBatch) flush(false);
}

void ZstdFileWriter::flush(bool end) {
  ZSTD_inBuffer in{pending_.data(), pending_.size(), 0};
  for (;;) {
    out_.resize(ZSTD_CStreamOutSize());
    ZSTD_outBuffer o{out_.data(), out_.size(), 0};
    const size_t left = ZSTD_compressStream2(cctx_, &o, &in, end ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(left)) fail("write", path_, ZSTD_getErrorName(left));
    for (size_t off = 0; off < o.pos;) {
      const ssize_t w = ::write(fd_, out_.data() + off, o.pos - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int err = w < 0 ? errno : ENOSPC;
        ::close(fd_);
        fd_ = -1;  // the stream is broken: nothing more goes in
        fail("write", path_, std::strerror(err));
      }
      off += size_t(w);
    }
    bytes_out_ += o.pos;
    if (end ? left == 0 : in.pos == in.size) break;
  }
  pending_.clear();
}

void ZstdFileWriter::close() {
  if (fd_ < 0) return;
  flush(true);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("write", path_, std::strerror(errno));
}

ZstdFileReader::ZstdFileReader(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) fail("read", path_, std::strerror(errno));
  dctx_ = ZSTD_createDCtx();
  if (!dctx_) fail("read", path_, "zstd has no memory");
}

ZstdFileReader::~ZstdFileReader() {
  if (dctx_) ZSTD_freeDCtx(dctx_);
  if (fd_ >= 0) ::close(fd_);
}

// More bytes at the end of plain_ (what is before pos_ is dropped); false at the end.
bool ZstdFileReader::more() {
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
        if (frame_left_ != 0) fail("read", path_, "cut short (the stream ends mid-frame)");
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
    if (ZSTD_isError(r)) fail("read", path_, std::string("damaged (") + ZSTD_getErrorName(r) + ")");
    frame_left_ = r;
    if (o.pos > 0) return true;
  }
}

bool ZstdFileReader::take(size_t n, std::string_view& out) {
  while (plain_.size() - pos_ < n) {
    if (!more()) {
      if (pos_ == plain_.size()) return false;
      fail("read", path_, "cut short (" + std::to_string(plain_.size() - pos_) + " bytes of a record)");
    }
  }
  out = std::string_view(plain_.data() + pos_, n);
  pos_ += n;
  return true;
}

}  // namespace cudatrace
