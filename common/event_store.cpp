#include "common/event_store.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "common/msgpack.h"
#include "common/untrusted_file.h"
#include "common/zstd_file.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Index = the code a store gives the layer.
constexpr std::array<const char*, 7> kStoreLayers = {layer::kRuntime, layer::kDriver,  layer::kDevice,   layer::kGpuActivity,
                                                     layer::kSyscall, layer::kMeta,    layer::kExecution};
// The same, as strings: assigning one copies its bytes, with no strlen per event.
const std::array<std::string, kStoreLayers.size()>& store_layer_strings() {
  static const std::array<std::string, kStoreLayers.size()> s = [] {
    std::array<std::string, kStoreLayers.size()> a;
    for (size_t i = 0; i < a.size(); ++i) a[i] = kStoreLayers[i];
    return a;
  }();
  return s;
}
constexpr const char* kFormatName = "cudatrace-events";
constexpr int kStoreVersion = 1;
constexpr size_t kFields = 11;
constexpr uint32_t kZstdMagic = 0xFD2FB528;

using namespace msgpack;

void put_layer(PackBuf& out, const std::string& l) {
  const auto& layers = store_layer_strings();
  for (size_t i = 0; i < layers.size(); ++i)
    if (l == layers[i]) return put_int(out, int64_t(i));
  put_str(out, l);
}

}  // namespace

// ---- writer ----

namespace {
struct TapSlot {
  std::filesystem::path path;
  EventTap* tap = nullptr;
};
TapSlot& tap_slot() {
  static TapSlot slot;
  return slot;
}
}  // namespace

ScopedEventTap::ScopedEventTap(const fs::path& path, EventTap& tap) { tap_slot() = {path, &tap}; }
ScopedEventTap::~ScopedEventTap() { tap_slot() = {}; }

struct EventStoreWriter::Impl {
  std::string buf_bytes;  // encoded, not yet compressed (PackBuf)
  size_t buf_size = 0;
  int fd = -1;
  ZSTD_CCtx* cctx = nullptr;
  std::string out;  // compressed, not yet written
  ~Impl() {
    if (cctx) ZSTD_freeCCtx(cctx);
    if (fd >= 0) ::close(fd);
  }
};

EventStoreWriter::EventStoreWriter(const fs::path& path, int level, Durability durability)
    : EventStoreWriter(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644), path, level,
                       durability) {}

EventStoreWriter::EventStoreWriter(int fd, const fs::path& path, int level, Durability durability)
    : impl_(std::make_unique<Impl>()), path_(path), durable_(durability == Durability::kSynced) {
  if (fd < 0) throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  impl_->fd = fd;
  impl_->cctx = ZSTD_createCCtx();
  if (!impl_->cctx) throw std::runtime_error("cannot write " + path.string() + ": zstd has no memory");
  ZSTD_CCtx_setParameter(impl_->cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(impl_->cctx, ZSTD_c_checksumFlag, 1);  // a damaged file says so
  if (tap_slot().tap && tap_slot().path == path) tap_ = tap_slot().tap;
  PackBuf buf_{impl_->buf_bytes, impl_->buf_size};
  buf_.bytes.resize(size_t(1) << 18);
  put_container(buf_, 3, 0x80, 0xde);
  put_str(buf_, "format"), put_str(buf_, kFormatName);
  put_str(buf_, "v"), put_int(buf_, kStoreVersion);
  put_str(buf_, "fields");
  put_container(buf_, kFields, 0x90, 0xdc);
  for (const char* f : {"layer", "name", "ts_delta", "dur", "pid", "tid", "ret", "args", "corr", "device", "device_id"})
    put_str(buf_, f);
}

EventStoreWriter::~EventStoreWriter() = default;

void EventStoreWriter::write(const Event& e) {
  const size_t args_at = put_fields(e, nullptr);
  if (tap_ && tap_->wants_packed()) tap_->on_packed(e, stored_args(args_at), true);
  else if (tap_) tap_->on_event(e);
  flush_if_full();
}

void EventStoreWriter::write(const Event& e, const PackedArgs& args) {
  const std::string_view packed = args.bytes();
  put_fields(e, &packed);
  if (tap_ && tap_->wants_packed()) {
    tap_->on_packed(e, packed, false);
  } else if (tap_ && !tap_->wants_args(e)) {
    tap_->on_event(e);
  } else if (tap_) {
    Event with_args = e;
    with_args.args = unpack_args(packed);
    tap_->on_event(with_args);
  }
  flush_if_full();
}

// The args the last put_fields() wrote, as the store holds them: valid until the buffer is flushed.
std::string_view EventStoreWriter::stored_args(size_t args_at) const {
  return std::string_view(impl_->buf_bytes.data() + args_at, args_end_ - args_at);
}

void EventStoreWriter::flush_if_full() {
  if (frame_records_ && ++in_frame_ >= frame_records_) {
    flush(true);  // the frame ends after this event; the next write begins another
    in_frame_ = 0;
  } else if (impl_->buf_size >= (size_t(1) << 18)) {
    flush(false);
  }
}

// Returns where the event's args begin in the buffer (they end at args_end_).
size_t EventStoreWriter::put_fields(const Event& e, const std::string_view* packed_args) {
  if (!impl_ || impl_->fd < 0) throw std::runtime_error("cannot write " + path_.string() + ": already closed");
  PackBuf buf_{impl_->buf_bytes, impl_->buf_size};
  buf_.push_back(char(0x90 | kFields));
  put_layer(buf_, e.layer);
  put_str(buf_, e.name);
  put_int(buf_, int64_t(uint64_t(e.ts) - uint64_t(last_ts_)));  // wraps alike on both sides
  last_ts_ = e.ts;
  put_optional(buf_, e.dur);
  put_int(buf_, e.pid);
  put_int(buf_, e.tid);
  put_optional(buf_, e.ret);
  const size_t args_at = buf_.size;
  if (packed_args && !packed_args->empty()) std::memcpy(buf_.room(packed_args->size()), packed_args->data(), packed_args->size());
  else if (!packed_args && e.args.is_object() && !e.args.empty()) put_json(buf_, e.args);
  else buf_.push_back(char(0x80));
  args_end_ = buf_.size;
  put_optional(buf_, e.corr);
  put_optional(buf_, e.device);
  put_str(buf_, e.device_id);
  ++written_;
  return args_at;
}

void EventStoreWriter::flush(bool end) {
  PackBuf buf_{impl_->buf_bytes, impl_->buf_size};
  ZSTD_inBuffer in{buf_.bytes.data(), buf_.size, 0};
  std::string& out = impl_->out;
  for (;;) {
    out.resize(ZSTD_CStreamOutSize());
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    const size_t left = ZSTD_compressStream2(impl_->cctx, &o, &in, end ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(left)) throw std::runtime_error("cannot write " + path_.string() + ": " + ZSTD_getErrorName(left));
    for (size_t off = 0; off < o.pos;) {
      const ssize_t n = ::write(impl_->fd, out.data() + off, o.pos - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(n < 0 ? errno : EIO);
      off += size_t(n);
    }
    bytes_out_ += o.pos;
    if (end ? left == 0 : in.pos == in.size) break;
  }
  buf_.clear();
}

void EventStoreWriter::fail(int err) {
  ::close(impl_->fd);
  impl_->fd = -1;
  ::unlink(path_.c_str());
  throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(err) + " (partial file removed)");
}

void EventStoreWriter::close() {
  if (!impl_ || impl_->fd < 0) return;
  flush(true);
  if (durable_ && ::fsync(impl_->fd) != 0 && errno != EINVAL) fail(errno);
  if (::close(impl_->fd) != 0) {
    impl_->fd = -1;
    ::unlink(path_.c_str());
    throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(errno) + " (partial file removed)");
  }
  impl_->fd = -1;
  if (tap_) tap_->on_closed(written_);
}

// ---- reader ----

namespace {

// Steps over one value that is no container: false (nothing read) for a container or a
// type Decoder::skip is left to judge. NeedMore where the bytes end.
bool skip_scalar(const uint8_t*& p, const uint8_t* end) {
  if (p >= end) throw NeedMore{};
  const uint8_t b = *p;
  size_t n;
  if (b < 0x80 || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) n = 1;
  else if ((b & 0xe0) == 0xa0) n = 1 + (b & 0x1f);
  else if (b >= 0xcc && b <= 0xcf) n = 1 + (size_t(1) << (b - 0xcc));
  else if (b >= 0xd0 && b <= 0xd3) n = 1 + (size_t(1) << (b - 0xd0));
  else if (b == 0xcb) n = 9;
  else if (b == 0xd9) {
    if (end - p < 2) throw NeedMore{};
    n = 2 + p[1];
  } else {
    return false;
  }
  if (size_t(end - p) < n) throw NeedMore{};
  p += n;
  return true;
}

// The args of nearly every record, checked in one pass: a map of up to 15 entries, text
// keys, values that are numbers, short strings or small arrays of them. True where it
// stepped over them (what Decoder::skip(true) would accept, within the same bounds); false,
// nothing read, for anything else, which that generic loop then checks (it was 5% of the
// scoring).
bool skip_small_args(Decoder& d) {
  const StoreLimits& l = d.limits;
  if (l.max_depth < 2 || l.max_string < 255 || l.max_items < 15) return false;
  const uint8_t* p = d.p;
  if (p >= d.end) throw NeedMore{};
  if ((*p & 0xf0) != 0x80) return false;
  const unsigned entries = *p++ & 0x0f;
  for (unsigned i = 0; i < entries; ++i) {
    if (p >= d.end) throw NeedMore{};
    if ((*p & 0xe0) != 0xa0 && *p != 0xd9) return false;  // a key that is text
    if (!skip_scalar(p, d.end)) return false;
    if (p >= d.end) throw NeedMore{};
    if ((*p & 0xf0) == 0x90) {
      const unsigned items = *p++ & 0x0f;
      for (unsigned j = 0; j < items; ++j)
        if (!skip_scalar(p, d.end)) return false;
    } else if (!skip_scalar(p, d.end)) {
      return false;
    }
  }
  d.p = p;
  return true;
}

}  // namespace

struct EventReader::Impl {
  StoreLimits limits;
  std::ifstream in;
  uint64_t file_left = 0;  // compressed bytes it may still read
  // store
  std::unique_ptr<ZstdInflater> inflater;
  std::string plain;  // inflated bytes not yet decoded (from `pos`)
  size_t pos = 0;
  bool header_read = false;
  int64_t last_ts = 0;
  std::function<bool(const std::string&)> skip_args;
  // JSON lines
  uint64_t line_no = 0;

  // More inflated bytes at the end of `plain`; false at the end of the stream.
  bool inflate_more(const fs::path& path) {
    if (pos > 0) plain.erase(0, pos), pos = 0;
    bool got;
    try {
      got = inflater->more(plain);
    } catch (const ZstdStreamError& e) {
      throw EventFormatError(path.string() + ": " + e.what());
    }
    if (inflater->inflated() > limits.max_inflated_bytes)
      throw EventFormatError(path.string() + ": inflates past the " + std::to_string(limits.max_inflated_bytes) +
                             " bytes it may have: not read further");
    return got;
  }
};

bool is_event_store(const fs::path& path) {
  std::ifstream in = open_untrusted(path);
  uint8_t m[4] = {};
  if (!in || !in.read(reinterpret_cast<char*>(m), 4)) return false;
  return (uint32_t(m[0]) | uint32_t(m[1]) << 8 | uint32_t(m[2]) << 16 | uint32_t(m[3]) << 24) == kZstdMagic;
}

fs::path events_file_of(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::exists(run_dir / kEventsFile, ec) && fs::exists(run_dir / "events.jsonl", ec)) return run_dir / "events.jsonl";
  return run_dir / kEventsFile;
}

EventReader::EventReader(const fs::path& path, const StoreLimits& limits) : impl_(std::make_unique<Impl>()), path_(path) {
  impl_->limits = limits;
  std::string why;
  uint64_t size = 0;
  impl_->in = open_untrusted(path, &why, &size);
  if (!impl_->in) throw EventFormatError(path.string() + ": cannot open (" + why + ")");
  if (size > limits.max_file_bytes)
    throw EventFormatError(path.string() + ": " + std::to_string(size) + " bytes, over the " +
                           std::to_string(limits.max_file_bytes) + " this file may have: not read");
  impl_->file_left = limits.max_file_bytes;
  uint8_t m[4] = {};
  impl_->in.read(reinterpret_cast<char*>(m), 4);
  const size_t got = size_t(impl_->in.gcount());
  store_ = got == 4 && (uint32_t(m[0]) | uint32_t(m[1]) << 8 | uint32_t(m[2]) << 16 | uint32_t(m[3]) << 24) == kZstdMagic;
  impl_->in.clear();
  impl_->in.seekg(0);
  if (store_) {
    Impl& s = *impl_;
    // The file is read up to its bound (a file that grew since its size was checked).
    const auto read = [&s](char* into, size_t most) {
      const size_t want = size_t(std::min<uint64_t>(most, s.file_left));
      s.in.read(into, std::streamsize(want));
      const size_t got = size_t(s.in.gcount());
      s.file_left -= got;
      return got;
    };
    try {
      impl_->inflater = std::make_unique<ZstdInflater>(read, 27);  // the writer's levels use far less
    } catch (const ZstdStreamError& e) {
      throw EventFormatError(path.string() + ": " + e.what());
    }
  }
}

EventReader::EventReader(Read read, const fs::path& named, const StoreLimits& limits, bool with_header,
                         uint64_t records_before, int window_log_max)
    : impl_(std::make_unique<Impl>()), path_(named), store_(true), records_(records_before) {
  impl_->limits = limits;
  impl_->header_read = !with_header;
  try {
    impl_->inflater = std::make_unique<ZstdInflater>(std::move(read), window_log_max);
  } catch (const ZstdStreamError& e) {
    throw EventFormatError(named.string() + ": " + e.what());
  }
}

EventReader::~EventReader() = default;

uint64_t EventReader::inflated() const { return impl_->inflater ? impl_->inflater->inflated() : 0; }

void EventReader::skip_args(std::function<bool(const std::string& layer)> of_layer) {
  impl_->skip_args = std::move(of_layer);
}

bool EventReader::next(Event& e) { return next(e, nullptr); }

bool EventReader::next(Event& e, std::string* packed_args) {
  Impl& s = *impl_;
  if (packed_args) packed_args->clear();
  if (!store_) {
    std::string line;
    while (std::getline(s.in, line)) {
      ++s.line_no;
      if (line.size() + 1 > s.file_left)
        throw EventFormatError(path_.string() + ":" + std::to_string(s.line_no) + ": past the " +
                               std::to_string(s.limits.max_file_bytes) + " bytes this file may have: not read further");
      s.file_left -= line.size() + 1;
      if (line.empty()) continue;
      try {
        e = event_from_json(parse_outside_json(line, int(s.limits.max_depth) + 2));  // + the event and its args
        if (packed_args && !e.is_meta()) *packed_args = pack_json_args(std::exchange(e.args, json::object()));
      } catch (const json::parse_error& ex) {
        throw EventFormatError(path_.string() + ":" + std::to_string(s.line_no) + ": not JSON (" + ex.what() + ")");
      } catch (const EventFormatError& ex) {
        throw EventFormatError(path_.string() + ":" + std::to_string(s.line_no) + ": " + ex.what());
      }
      ++records_;
      return true;
    }
    return false;
  }
  for (;;) {
    const uint8_t* start = reinterpret_cast<const uint8_t*>(s.plain.data()) + s.pos;
    Decoder d{start, reinterpret_cast<const uint8_t*>(s.plain.data()) + s.plain.size(), s.limits};
    try {
      if (d.p == d.end) throw NeedMore{};
      if (!s.header_read) {
        const json h = d.value(0);
        if (!h.is_object() || h.value("format", "") != kFormatName)
          throw EventFormatError("not a cudatrace event store (no header)");
        if (h.value("v", 0) != kStoreVersion)
          throw EventFormatError("store version " + h.value("v", json()).dump() + " (this build reads " +
                                 std::to_string(kStoreVersion) + ")");
        s.header_read = true;
        s.pos += size_t(d.p - start);
        continue;
      }
      const uint8_t b = d.byte();
      if (b != (0x90 | kFields)) throw EventFormatError("not an event record");
      Event& out = e;
      if (!out.args.is_object() || !out.args.empty()) out.args = json::object();
      out.corr.reset();
      if (d.p < d.end && *d.p < kStoreLayers.size()) out.layer = store_layer_strings()[*d.p++];
      else d.str_into(out.layer, "layer");
      d.str_into(out.name, "name");
      const int64_t delta = d.int_field("ts");
      out.ts = int64_t(uint64_t(s.last_ts) + uint64_t(delta));
      d.opt_int_into(out.dur, "dur");
      out.pid = d.int_field("pid");
      out.tid = d.int_field("tid");
      d.opt_int_into(out.ret, "ret");
      if (d.p < d.end && *d.p == 0x80) {
        ++d.p;
      } else if (s.skip_args && s.skip_args(out.layer)) {
        d.skip();
      } else if (packed_args && !out.is_meta()) {
        const uint8_t* at = d.p;
        if (!skip_small_args(d)) {
          Decoder header = d;
          (void)header.map_header();
          d.skip(true);  // what value() would refuse, this refuses too
        }
        packed_args->assign(reinterpret_cast<const char*>(at), size_t(d.p - at));
      } else {
        out.args = d.value(0);
        if (!out.args.is_object()) throw EventFormatError("args is not a map");
      }
      if (d.p < d.end && *d.p == 0xc0) {
        ++d.p;
      } else {
        const json c = d.value(0);
        if (!c.is_number_unsigned()) throw EventFormatError("corr is not an unsigned integer");
        out.corr = c.get<uint64_t>();
      }
      d.opt_int_into(out.device, "device");
      d.str_into(out.device_id, "device_id");
      s.last_ts = out.ts;
      s.pos += size_t(d.p - start);
      ++records_;
      return true;
    } catch (const NeedMore&) {
      if (!s.inflate_more(path_)) {
        if (s.pos < s.plain.size())
          throw EventFormatError(path_.string() + ": record " + std::to_string(records_ + 1) + ": cut short");
        if (!s.header_read) throw EventFormatError(path_.string() + ": empty store (no header)");
        return false;
      }
    } catch (const EventFormatError& ex) {
      throw EventFormatError(path_.string() + ": record " + std::to_string(records_ + 1) + ": " + ex.what());
    }
  }
}

}  // namespace cudatrace
