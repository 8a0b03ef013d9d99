#include "common/store_frames.h"

#include <zstd.h>

#include <algorithm>

#include "common/untrusted_file.h"

namespace cudatrace {

StoreFrames::StoreFrames(std::filesystem::path path, const StoreLimits& limits, size_t max_frame_bytes)
    : path_(std::move(path)), limits_(limits), max_frame_bytes_(std::max<size_t>(max_frame_bytes, 1)) {}

// As EventReader opens a file: never through a link, its size within the bound.
void StoreFrames::open() {
  opened_ = true;
  std::string why;
  uint64_t size = 0;
  in_ = open_untrusted(path_, &why, &size);
  if (!in_) throw EventFormatError(path_.string() + ": cannot open (" + why + ")");
  if (size > limits_.max_file_bytes)
    throw EventFormatError(path_.string() + ": " + std::to_string(size) + " bytes, over the " +
                           std::to_string(limits_.max_file_bytes) + " this file may have: not read");
  file_left_ = limits_.max_file_bytes;
  fill(4);
  const auto* m = reinterpret_cast<const unsigned char*>(buf_.data());
  store_ = buf_.size() >= 4 && (uint32_t(m[0]) | uint32_t(m[1]) << 8 | uint32_t(m[2]) << 16 | uint32_t(m[3]) << 24) ==
                                   0xFD2FB528u;  // zstd's magic number, as is_event_store() reads it
}

// Up to `more` bytes onto the buffer, within the file's bound; eof_ where none came.
void StoreFrames::fill(size_t more) {
  if (pos_ > 0 && pos_ >= buf_.size() / 2) buf_.erase(0, pos_), pos_ = 0;
  const size_t want = size_t(std::min<uint64_t>(more, file_left_));
  const size_t had = buf_.size();
  buf_.resize(had + want);
  in_.read(buf_.data() + had, std::streamsize(want));
  const size_t got = size_t(in_.gcount());
  buf_.resize(had + got);
  file_left_ -= got;
  if (got == 0) eof_ = true;
}

StoreFrames::Got StoreFrames::next(Part& p) {
  if (ended_) return Got::kNothing;
  p = Part{};
  p.index = index_;
  try {
    if (!opened_) open();
    if (!store_) {  // JSON lines, or bytes no zstd reader takes: EventReader says which
      ended_ = p.plain = p.rest = p.last = true;
      ++index_;
      return Got::kPart;
    }
    for (size_t chunk = std::min(size_t(1) << 20, max_frame_bytes_);;) {
      const size_t avail = buf_.size() - pos_;
      if (avail == 0 && eof_) {
        ended_ = true;
        return Got::kEnd;
      }
      const size_t size = avail ? ZSTD_findFrameCompressedSize(buf_.data() + pos_, avail) : 0;
      if (avail && !ZSTD_isError(size)) {
        p.bytes.assign(buf_, pos_, size);
        pos_ += size;
        ++index_;
        return Got::kPart;
      }
      // Cut short, damaged or too large to hold: read on as one stream, whose inflater
      // names what is wrong where it is.
      if (eof_ || avail >= max_frame_bytes_) {
        p.bytes.assign(buf_, pos_);
        pos_ = buf_.size();
        ended_ = p.rest = p.last = true;
        ++index_;
        return Got::kPart;
      }
      fill(chunk);
      chunk = std::min(chunk * 2, max_frame_bytes_);
    }
  } catch (...) {
    p.error = std::current_exception();
    ended_ = p.last = true;
    ++index_;
    return Got::kPart;
  }
}

size_t StoreFrames::read_rest(char* into, size_t most) {
  const size_t want = size_t(std::min<uint64_t>(most, file_left_));
  in_.read(into, std::streamsize(want));
  const size_t got = size_t(in_.gcount());
  file_left_ -= got;
  return got;
}

}  // namespace cudatrace
