#include "common/zstd_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace cudatrace {

namespace {
[[noreturn]] void fail(const char* verb, const std::filesystem::path& path, const std::string& why) {
  throw std::runtime_error(std::string("cannot ") + verb + " " + path.string() + ": " + why);
}
}  // namespace

ZstdFileWriter::ZstdFileWriter(const std::filesystem::path& path, int level, int window_log) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) fail("write", path_, std::strerror(errno));
  cctx_ = ZSTD_createCCtx();
  if (!cctx_) fail("write", path_, "zstd has no memory");
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);  // a damaged file says so
  if (window_log) ZSTD_CCtx_setParameter(cctx_, ZSTD_c_windowLog, window_log);
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

ZstdInflater::ZstdInflater(Read read, int window_log_max) : read_(std::move(read)) {
  dctx_ = ZSTD_createDCtx();
  if (!dctx_) throw ZstdStreamError("zstd has no memory");
  if (window_log_max > 0) ZSTD_DCtx_setParameter(dctx_, ZSTD_d_windowLogMax, window_log_max);
}

ZstdInflater::~ZstdInflater() {
  if (dctx_) ZSTD_freeDCtx(dctx_);
}

bool ZstdInflater::more(std::string& plain) {
  for (;;) {
    if (raw_pos_ == raw_.size() && !eof_ && !pending_) {
      raw_.resize(ZSTD_DStreamInSize());
      raw_.resize(read_(raw_.data(), raw_.size()));
      raw_pos_ = 0;
      if (raw_.empty()) eof_ = true;
    }
    ZSTD_inBuffer in{raw_.data(), raw_.size(), raw_pos_};
    const size_t before = plain.size();
    plain.resize(before + ZSTD_DStreamOutSize());
    ZSTD_outBuffer o{plain.data() + before, ZSTD_DStreamOutSize(), 0};
    const size_t r = ZSTD_decompressStream(dctx_, &o, &in);
    const bool progress = in.pos > raw_pos_ || o.pos > 0;
    raw_pos_ = in.pos;
    plain.resize(before + o.pos);
    if (ZSTD_isError(r)) throw ZstdStreamError(std::string("damaged (") + ZSTD_getErrorName(r) + ")");
    if (progress) frame_left_ = r;  // past a whole frame, a call with nothing asks for the next one's header
    pending_ = o.pos == o.size;
    inflated_ += o.pos;
    if (o.pos > 0) return true;
    // The input has ended and zstd holds nothing more (it may hold input it read before and
    // give it out only when asked with no more: asked above).
    if (eof_ && raw_pos_ == raw_.size()) {
      if (frame_left_ != 0) throw ZstdStreamError("cut short (the compressed stream ends mid-frame)");
      return false;
    }
  }
}

namespace {
int open_to_read(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("read", path, std::strerror(errno));
  return fd;
}
}  // namespace

ZstdFileReader::ZstdFileReader(const std::filesystem::path& path) : ZstdFileReader(path, nullptr) {}

ZstdFileReader::ZstdFileReader(const std::filesystem::path& path, std::function<bool()> writer_done)
    : path_(path),
      fd_(open_to_read(path)),
      writer_done_(std::move(writer_done)),
      inflater_([this](char* into, size_t most) { return read_some(into, most); }) {}

size_t ZstdFileReader::read_some(char* into, size_t most) {
  for (;;) {
    // Asked before the read: a writer that closed the file after it wrote its last bytes
    // leaves them to this read.
    const bool done = !writer_done_ || writer_done_();
    ssize_t n;
    do n = ::read(fd_, into, most);
    while (n < 0 && errno == EINTR);
    if (n < 0) fail("read", path_, std::strerror(errno));
    if (n > 0 || done) return size_t(n);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

ZstdFileReader::~ZstdFileReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool ZstdFileReader::take(size_t n, std::string_view& out) {
  while (plain_.size() - pos_ < n) {
    if (pos_ > 0) plain_.erase(0, pos_), pos_ = 0;
    bool got;
    try {
      got = inflater_.more(plain_);
    } catch (const ZstdStreamError& e) {
      fail("read", path_, e.what());
    }
    if (!got) {
      if (pos_ == plain_.size()) return false;
      fail("read", path_, "cut short (" + std::to_string(plain_.size() - pos_) + " bytes of a record)");
    }
  }
  out = std::string_view(plain_.data() + pos_, n);
  pos_ += n;
  return true;
}

}  // namespace cudatrace
