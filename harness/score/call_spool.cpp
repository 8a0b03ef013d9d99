#include "harness/score/call_spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <zstd.h>

namespace cudatrace {

namespace fs = std::filesystem;

namespace {

enum : uint8_t { kHasDur = 1, kHasRet = 2, kHasDevice = 4 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void put_signed(std::string& out, int64_t v) { put_varint(out, (uint64_t(v) << 1) ^ uint64_t(v >> 63)); }

// The spool reads only what it wrote itself: a short or damaged frame is its own bug or a
// damaged disk, said so.
uint64_t get_varint(std::string_view& in) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) throw std::runtime_error("call spool: a record cut short");
    const uint8_t b = uint8_t(in.front());
    in.remove_prefix(1);
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("call spool: a damaged record");
}
int64_t get_signed(std::string_view& in) {
  const uint64_t v = get_varint(in);
  return int64_t(v >> 1) ^ -int64_t(v & 1);
}

}  // namespace

CallSpool::CallSpool(fs::path dir, std::string tag) : dir_(std::move(dir)), tag_(std::move(tag)) {}

CallSpool::~CallSpool() {
  if (fd_ >= 0) {
    ::close(fd_);
    std::error_code ec;
    fs::remove(file_, ec);
  }
}

std::optional<uint32_t> CallSpool::string_id(std::string_view s) {
  if (const auto it = string_ids_.find(std::string(s)); it != string_ids_.end()) return it->second;
  if (strings_.size() >= kMaxStrings) return std::nullopt;
  strings_.emplace_back(s);
  return string_ids_.emplace(strings_.back(), uint32_t(strings_.size() - 1)).first->second;
}

bool CallSpool::add(const SpooledCall& c, std::string_view name, std::string_view device_id) {
  if (c.args.size() > kFrameBytes) return false;  // a frame holds a record whole
  auto it = threads_.find(c.tid);
  if (it == threads_.end()) {
    if (threads_.size() >= kMaxThreads) return false;
    it = threads_.emplace(c.tid, Thread{}).first;
    order_.push_back(c.tid);
  }
  // The last call's strings are the next one's, mostly: compared before they are hashed.
  const std::optional<uint32_t> n = !strings_.empty() && strings_[last_name_] == name ? last_name_ : string_id(name);
  if (n) last_name_ = *n;
  const std::optional<uint32_t> d =
      !strings_.empty() && strings_[last_device_id_] == device_id ? last_device_id_ : string_id(device_id);
  if (d) last_device_id_ = *d;
  if (!n || !d) return false;
  Thread& t = it->second;
  std::string& out = t.held;
  out.push_back(char((c.dur ? kHasDur : 0) | (c.ret ? kHasRet : 0) | (c.device ? kHasDevice : 0)));
  put_signed(out, int64_t(uint64_t(c.ts) - uint64_t(t.last_ts)));  // wraps alike on both sides
  put_varint(out, c.seq - t.last_seq);
  put_signed(out, c.pid);
  if (c.dur) put_signed(out, *c.dur);
  if (c.ret) put_signed(out, *c.ret);
  if (c.device) put_signed(out, *c.device);
  put_varint(out, c.family);
  put_varint(out, *n);
  put_varint(out, *d);
  put_varint(out, c.args.size());
  out.append(c.args);
  t.last_ts = c.ts, t.last_seq = c.seq;
  if (out.size() >= kFrameBytes) flush(t);
  return true;
}

void CallSpool::flush(Thread& t) {
  if (fd_ < 0) {
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
      throw std::runtime_error("cannot make " + dir_.string() + " for scoring: " + std::strerror(errno));
    file_ = dir_ / (tag_ + ".spool.zst");
    fd_ = ::open(file_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error("cannot write " + file_.string() + ": " + std::strerror(errno));
  }
  compressed_.resize(ZSTD_compressBound(t.held.size()));
  const size_t n = ZSTD_compress(compressed_.data(), compressed_.size(), t.held.data(), t.held.size(), 1);
  if (ZSTD_isError(n)) throw std::runtime_error("cannot write " + file_.string() + ": " + ZSTD_getErrorName(n));
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::pwrite(fd_, compressed_.data() + done, n - done, off_t(file_size_ + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error("cannot write " + file_.string() + ": " + std::strerror(errno));
    done += size_t(w);
  }
  t.frames.push_back({file_size_, uint32_t(n), uint32_t(t.held.size())});
  file_size_ += n;
  t.held.clear();
}

std::vector<int64_t> CallSpool::threads() const { return order_; }

CallSpool::Reader::Reader(const CallSpool& spool, int64_t tid) : spool_(&spool), tid_(tid) {}

// The next frame of the thread's, or the buffer it still holds; false past both.
bool CallSpool::Reader::load() {
  const auto it = spool_->threads_.find(tid_);
  if (it == spool_->threads_.end()) return false;
  const Thread& t = it->second;
  if (frame_ < t.frames.size()) {
    const auto [at, size, written] = t.frames[frame_++];
    std::string compressed(size, '\0');
    for (size_t done = 0; done < size;) {
      const ssize_t r = ::pread(spool_->fd_, compressed.data() + done, size - done, off_t(at + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw std::runtime_error("cannot read " + spool_->file_.string() + ": " + std::strerror(errno));
      done += size_t(r);
    }
    const unsigned long long plain = ZSTD_getFrameContentSize(compressed.data(), size);
    if (plain != written)
      throw std::runtime_error("cannot read " + spool_->file_.string() + ": a damaged frame");
    plain_.resize(plain);
    const size_t n = ZSTD_decompress(plain_.data(), plain_.size(), compressed.data(), size);
    if (ZSTD_isError(n) || n != plain) throw std::runtime_error("cannot read " + spool_->file_.string() + ": a damaged frame");
    left_ = plain_;
    return true;
  }
  if (tail_read_) return false;
  tail_read_ = true;
  left_ = t.held;  // held until the spool goes: the spool takes no more calls while read
  return !left_.empty();
}

bool CallSpool::Reader::next(SpooledCall& c) {
  while (left_.empty())
    if (!load()) return false;
  const uint8_t flags = uint8_t(left_.front());
  left_.remove_prefix(1);
  c.tid = tid_;
  c.ts = last_ts_ = int64_t(uint64_t(last_ts_) + uint64_t(get_signed(left_)));
  c.seq = last_seq_ += get_varint(left_);
  c.pid = get_signed(left_);
  c.dur = flags & kHasDur ? std::optional<int64_t>(get_signed(left_)) : std::nullopt;
  c.ret = flags & kHasRet ? std::optional<int64_t>(get_signed(left_)) : std::nullopt;
  c.device = flags & kHasDevice ? std::optional<int64_t>(get_signed(left_)) : std::nullopt;
  c.family = uint32_t(get_varint(left_));
  c.name = uint32_t(get_varint(left_));
  c.device_id = uint32_t(get_varint(left_));
  const uint64_t n = get_varint(left_);
  if (n > left_.size()) throw std::runtime_error("call spool: a record cut short");
  c.args = left_.substr(0, n);
  left_.remove_prefix(n);
  return true;
}

}  // namespace cudatrace
