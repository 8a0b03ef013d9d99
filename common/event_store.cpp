#include "common/event_store.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/untrusted_file.h"

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

// ---- MessagePack, the part of it the store uses ----

// An append-only byte buffer whose writes are a bounds check and a store (std::string's
// push_back, once per byte of every record, cost a tenth of the harness's time at volume).
struct PackBuf {
  std::string& bytes;  // its capacity: `size` of them are used (storage owned by the caller)
  size_t& size;
  __attribute__((always_inline)) char* room(size_t n) {
    if (__builtin_expect(size + n > bytes.size(), 0)) grow(n);
    char* p = bytes.data() + size;
    size += n;
    return p;
  }
  __attribute__((noinline)) void grow(size_t n) { bytes.resize(std::max(bytes.size() * 2, size + n + 4096)); }
  __attribute__((always_inline)) void push_back(char c) { *room(1) = c; }
  void append(std::string_view s) {
    if (!s.empty()) std::memcpy(room(s.size()), s.data(), s.size());
  }
  void clear() { size = 0; }
};

void put_be(PackBuf& out, uint64_t v, int bytes) {
  char* b = out.room(size_t(bytes));
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) b[i] = char(v & 0xff);
}

void put_nil(PackBuf& out) { out.push_back(char(0xc0)); }

void put_int(PackBuf& out, int64_t v) {
  if (v >= 0) {
    const uint64_t u = uint64_t(v);
    if (u < 128) out.push_back(char(u));
    else if (u <= 0xff) out.push_back(char(0xcc)), put_be(out, u, 1);
    else if (u <= 0xffff) out.push_back(char(0xcd)), put_be(out, u, 2);
    else if (u <= 0xffffffffull) out.push_back(char(0xce)), put_be(out, u, 4);
    else out.push_back(char(0xcf)), put_be(out, u, 8);
  } else if (v >= -32) {
    out.push_back(char(int8_t(v)));
  } else if (v >= INT8_MIN) {
    out.push_back(char(0xd0)), put_be(out, uint64_t(v), 1);
  } else if (v >= INT16_MIN) {
    out.push_back(char(0xd1)), put_be(out, uint64_t(v), 2);
  } else if (v >= INT32_MIN) {
    out.push_back(char(0xd2)), put_be(out, uint64_t(v), 4);
  } else {
    out.push_back(char(0xd3)), put_be(out, uint64_t(v), 8);
  }
}

void put_uint(PackBuf& out, uint64_t u) {
  if (u <= uint64_t(INT64_MAX)) return put_int(out, int64_t(u));
  out.push_back(char(0xcf)), put_be(out, u, 8);
}

void put_str(PackBuf& out, std::string_view s) {
  const size_t n = s.size();
  if (n < 32) out.push_back(char(0xa0 | n));
  else if (n <= 0xff) out.push_back(char(0xd9)), put_be(out, n, 1);
  else if (n <= 0xffff) out.push_back(char(0xda)), put_be(out, n, 2);
  else out.push_back(char(0xdb)), put_be(out, n, 4);
  out.append(s);
}

void put_container(PackBuf& out, size_t n, uint8_t fix, uint8_t c16) {
  if (n < 16) out.push_back(char(fix | n));
  else if (n <= 0xffff) out.push_back(char(c16)), put_be(out, n, 2);
  else out.push_back(char(c16 + 1)), put_be(out, n, 4);
}

void put_json(PackBuf& out, const json& j) {
  switch (j.type()) {
    case json::value_t::null: return put_nil(out);
    case json::value_t::boolean: out.push_back(char(j.get<bool>() ? 0xc3 : 0xc2)); return;
    case json::value_t::number_integer: return put_int(out, j.get<int64_t>());
    case json::value_t::number_unsigned: return put_uint(out, j.get<uint64_t>());
    case json::value_t::number_float: {
      const double d = j.get<double>();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      out.push_back(char(0xcb)), put_be(out, bits, 8);
      return;
    }
    case json::value_t::string: return put_str(out, j.get_ref<const std::string&>());
    case json::value_t::array:
      put_container(out, j.size(), 0x90, 0xdc);
      for (const auto& x : j) put_json(out, x);
      return;
    case json::value_t::object:
      put_container(out, j.size(), 0x80, 0xde);
      for (auto it = j.begin(); it != j.end(); ++it) put_str(out, it.key()), put_json(out, it.value());
      return;
    default: return put_nil(out);  // binary and discarded values: no event carries them
  }
}

void put_layer(PackBuf& out, const std::string& l) {
  const auto& layers = store_layer_strings();
  for (size_t i = 0; i < layers.size(); ++i)
    if (l == layers[i]) return put_int(out, int64_t(i));
  put_str(out, l);
}

template <class T>
void put_optional(PackBuf& out, const std::optional<T>& v) {
  if (!v) return put_nil(out);
  if constexpr (std::is_unsigned_v<T>) put_uint(out, *v);
  else put_int(out, *v);
}

// A value that cannot be whole in the bytes at hand: the caller inflates more and retries.
struct NeedMore {};

// Reads MessagePack from [p, end) with the reader's limits; NeedMore at the end of the
// bytes, EventFormatError for what no writer of the store makes.
struct Decoder {
  const uint8_t* p;
  const uint8_t* end;
  const StoreLimits& limits;

  uint8_t byte() {
    if (p >= end) throw NeedMore{};
    return *p++;
  }
  uint64_t be(int n) {
    if (end - p < n) throw NeedMore{};
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | *p++;
    return v;
  }
  std::string bytes(uint64_t n) {
    if (n > limits.max_string) throw EventFormatError("a string of " + std::to_string(n) + " bytes, over the bound");
    if (uint64_t(end - p) < n) throw NeedMore{};
    std::string s(reinterpret_cast<const char*>(p), size_t(n));
    p += n;
    return s;
  }
  uint64_t count(uint64_t n) {
    if (n > limits.max_items) throw EventFormatError("a container of " + std::to_string(n) + " entries, over the bound");
    return n;
  }

  // Any value, as JSON. Depth is counted, never recursed past the bound.
  json value(uint32_t depth) {
    if (depth > limits.max_depth) throw EventFormatError("nested deeper than " + std::to_string(limits.max_depth));
    const uint8_t b = byte();
    if (b < 0x80) return json(uint64_t(b));
    if (b >= 0xe0) return json(int64_t(int8_t(b)));
    if ((b & 0xe0) == 0xa0) return json(bytes(b & 0x1f));
    if ((b & 0xf0) == 0x90) return array(count(b & 0x0f), depth);
    if ((b & 0xf0) == 0x80) return map(count(b & 0x0f), depth);
    switch (b) {
      case 0xc0: return json(nullptr);
      case 0xc2: return json(false);
      case 0xc3: return json(true);
      case 0xcc: return json(be(1));
      case 0xcd: return json(be(2));
      case 0xce: return json(be(4));
      case 0xcf: return json(be(8));
      case 0xd0: return json(int64_t(int8_t(be(1))));
      case 0xd1: return json(int64_t(int16_t(be(2))));
      case 0xd2: return json(int64_t(int32_t(be(4))));
      case 0xd3: return json(int64_t(be(8)));
      case 0xcb: {
        const uint64_t bits = be(8);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return json(d);
      }
      case 0xd9: return json(bytes(be(1)));
      case 0xda: return json(bytes(be(2)));
      case 0xdb: return json(bytes(be(4)));
      case 0xdc: return array(count(be(2)), depth);
      case 0xdd: return array(count(be(4)), depth);
      case 0xde: return map(count(be(2)), depth);
      case 0xdf: return map(count(be(4)), depth);
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", b);
    throw EventFormatError(std::string("MessagePack type ") + hex + " has no place in an event");
  }
  json array(uint64_t n, uint32_t depth) {
    json a = json::array();
    for (uint64_t i = 0; i < n; ++i) a.push_back(value(depth + 1));
    return a;
  }
  json map(uint64_t n, uint32_t depth) {
    json m = json::object();
    for (uint64_t i = 0; i < n; ++i) {
      json k = value(depth + 1);
      if (!k.is_string()) throw EventFormatError("a map key that is not a string");
      m[k.get<std::string>()] = value(depth + 1);
    }
    return m;
  }

  // Steps over any value without building it, with the same bounds as value(); an explicit
  // count of what is left to step over, never recursion.
  void skip() {
    uint64_t left = 1;
    uint32_t depth = 0;
    thread_local std::vector<uint64_t> outer;  // what the enclosing containers still hold
    outer.clear();
    while (left > 0 || !outer.empty()) {
      if (left == 0) {
        left = outer.back();
        outer.pop_back();
        --depth;
        continue;
      }
      --left;
      const uint8_t b = byte();
      uint64_t items = 0;  // entries of a container that begins here
      if (b < 0x80 || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) continue;
      if ((b & 0xe0) == 0xa0) { bytes_skip(b & 0x1f); continue; }
      if ((b & 0xf0) == 0x90) items = count(b & 0x0f);
      else if ((b & 0xf0) == 0x80) items = 2 * count(b & 0x0f);
      else if (b >= 0xcc && b <= 0xcf) { be(1 << (b - 0xcc)); continue; }
      else if (b >= 0xd0 && b <= 0xd3) { be(1 << (b - 0xd0)); continue; }
      else if (b == 0xcb) { be(8); continue; }
      else if (b == 0xd9) { bytes_skip(be(1)); continue; }
      else if (b == 0xda) { bytes_skip(be(2)); continue; }
      else if (b == 0xdb) { bytes_skip(be(4)); continue; }
      else if (b == 0xdc) items = count(be(2));
      else if (b == 0xdd) items = count(be(4));
      else if (b == 0xde) items = 2 * count(be(2));
      else if (b == 0xdf) items = 2 * count(be(4));
      else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", b);
        throw EventFormatError(std::string("MessagePack type ") + hex + " has no place in an event");
      }
      if (++depth > limits.max_depth) throw EventFormatError("nested deeper than " + std::to_string(limits.max_depth));
      outer.push_back(left);
      left = items;
    }
  }
  void bytes_skip(uint64_t n) {
    if (n > limits.max_string) throw EventFormatError("a string of " + std::to_string(n) + " bytes, over the bound");
    if (uint64_t(end - p) < n) throw NeedMore{};
    p += n;
  }

  // The event fields, read without building JSON for them.
  std::optional<int64_t> opt_int(const char* what) {
    if (p >= end) throw NeedMore{};
    const uint8_t b = *p;
    if (b == 0xc0) return ++p, std::nullopt;
    if (b < 0x80) return ++p, int64_t(b);
    if (b >= 0xe0) return ++p, int64_t(int8_t(b));
    if (b >= 0xcc && b <= 0xce) {
      ++p;
      return int64_t(be(1 << (b - 0xcc)));
    }
    if (b >= 0xd0 && b <= 0xd3) {
      ++p;
      const int n = 1 << (b - 0xd0);
      const uint64_t u = be(n);
      return n == 1 ? int64_t(int8_t(u)) : n == 2 ? int64_t(int16_t(u)) : n == 4 ? int64_t(int32_t(u)) : int64_t(u);
    }
    const json v = value(0);
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > uint64_t(INT64_MAX)) throw EventFormatError(std::string(what) + " out of range");
      return int64_t(v.get<uint64_t>());
    }
    if (!v.is_number_integer()) throw EventFormatError(std::string(what) + " is not an integer");
    return v.get<int64_t>();
  }
  int64_t int_field(const char* what) {
    auto v = opt_int(what);
    if (!v) throw EventFormatError(std::string(what) + " is missing");
    return *v;
  }
  std::string str_field(const char* what) {
    if (p >= end) throw NeedMore{};
    if ((*p & 0xe0) == 0xa0) {
      const uint8_t n = *p & 0x1f;
      ++p;
      return bytes(n);
    }
    json v = value(0);
    if (!v.is_string()) throw EventFormatError(std::string(what) + " is not a string");
    return std::move(v.get_ref<std::string&>());
  }
};

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

// The writer's own encodings (put_*), so that a packed event reads back as a JSON one does.
void PackedArgs::start(size_t entries) {
  size_ = 0;
  PackBuf b{bytes_, size_};
  put_container(b, entries, 0x80, 0xde);
}

void PackedArgs::integer(int64_t v) {
  PackBuf b{bytes_, size_};
  put_int(b, v);
}

void PackedArgs::text(std::string_view v) {
  PackBuf b{bytes_, size_};
  put_str(b, v);
}

void PackedArgs::dim3(uint32_t x, uint32_t y, uint32_t z) {
  PackBuf b{bytes_, size_};
  put_container(b, 3, 0x90, 0xdc);
  put_int(b, x), put_int(b, y), put_int(b, z);
}

json unpack_args(std::string_view packed) {
  static const StoreLimits limits;
  Decoder d{reinterpret_cast<const uint8_t*>(packed.data()), reinterpret_cast<const uint8_t*>(packed.data()) + packed.size(),
            limits};
  try {
    return d.value(0);
  } catch (const NeedMore&) {
    throw EventFormatError("packed args cut short");
  }
}

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
  put_fields(e, nullptr);
  if (tap_) tap_->on_event(e);
}

void EventStoreWriter::write(const Event& e, const PackedArgs& args) {
  const std::string_view packed = args.bytes();
  put_fields(e, &packed);
  if (!tap_) return;
  if (!tap_->wants_args()) return tap_->on_event(e);
  Event with_args = e;
  with_args.args = unpack_args(packed);
  tap_->on_event(with_args);
}

void EventStoreWriter::put_fields(const Event& e, const std::string_view* packed_args) {
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
  if (packed_args && !packed_args->empty()) std::memcpy(buf_.room(packed_args->size()), packed_args->data(), packed_args->size());
  else if (!packed_args && e.args.is_object() && !e.args.empty()) put_json(buf_, e.args);
  else buf_.push_back(char(0x80));
  put_optional(buf_, e.corr);
  put_optional(buf_, e.device);
  put_str(buf_, e.device_id);
  ++written_;
  if (buf_.size >= (size_t(1) << 18)) flush(false);
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

struct EventReader::Impl {
  StoreLimits limits;
  std::ifstream in;
  uint64_t file_left = 0;  // compressed bytes it may still read
  // store
  ZSTD_DCtx* dctx = nullptr;
  std::string raw, plain;  // compressed input; inflated bytes not yet decoded (from `pos`)
  size_t raw_pos = 0, pos = 0;
  uint64_t inflated = 0;
  bool raw_eof = false, header_read = false;
  bool pending = false;      // the last call filled its output: zstd may hold more
  size_t frame_left = 0;     // zstd's last hint: 0 when every frame so far ended whole
  int64_t last_ts = 0;
  std::function<bool(const std::string&)> skip_args;
  // JSON lines
  uint64_t line_no = 0;
  ~Impl() {
    if (dctx) ZSTD_freeDCtx(dctx);
  }

  // More inflated bytes at the end of `plain`; false at the end of the stream.
  bool inflate_more(const fs::path& path) {
    if (pos > 0) plain.erase(0, pos), pos = 0;
    for (;;) {
      if (raw_pos == raw.size() && !raw_eof && !pending) {
        raw.resize(ZSTD_DStreamInSize());
        const size_t want = size_t(std::min<uint64_t>(raw.size(), file_left));
        in.read(raw.data(), std::streamsize(want));
        raw.resize(size_t(in.gcount()));
        file_left -= raw.size();
        raw_pos = 0;
        if (raw.empty()) raw_eof = true;
      }
      if (raw_eof && raw_pos == raw.size() && !pending) {
        if (frame_left != 0) throw EventFormatError(path.string() + ": cut short (the compressed stream ends mid-frame)");
        return false;
      }
      ZSTD_inBuffer i{raw.data(), raw.size(), raw_pos};
      const size_t before = plain.size();
      plain.resize(before + ZSTD_DStreamOutSize());
      ZSTD_outBuffer o{plain.data() + before, ZSTD_DStreamOutSize(), 0};
      const size_t r = ZSTD_decompressStream(dctx, &o, &i);
      raw_pos = i.pos;
      plain.resize(before + o.pos);
      if (ZSTD_isError(r)) throw EventFormatError(path.string() + ": damaged (" + ZSTD_getErrorName(r) + ")");
      frame_left = r;
      pending = o.pos == o.size;
      inflated += o.pos;
      if (inflated > limits.max_inflated_bytes)
        throw EventFormatError(path.string() + ": inflates past the " + std::to_string(limits.max_inflated_bytes) +
                               " bytes it may have: not read further");
      if (o.pos > 0) return true;
    }
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
    impl_->dctx = ZSTD_createDCtx();
    if (!impl_->dctx) throw EventFormatError(path.string() + ": zstd has no memory");
    ZSTD_DCtx_setParameter(impl_->dctx, ZSTD_d_windowLogMax, 27);  // the writer's levels use far less
  }
}

EventReader::~EventReader() = default;

void EventReader::skip_args(std::function<bool(const std::string& layer)> of_layer) {
  impl_->skip_args = std::move(of_layer);
}

bool EventReader::next(Event& e) {
  Impl& s = *impl_;
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
      else out.layer = d.str_field("layer");
      out.name = d.str_field("name");
      const int64_t delta = d.int_field("ts");
      out.ts = int64_t(uint64_t(s.last_ts) + uint64_t(delta));
      out.dur = d.opt_int("dur");
      out.pid = d.int_field("pid");
      out.tid = d.int_field("tid");
      out.ret = d.opt_int("ret");
      if (d.p < d.end && *d.p == 0x80) {
        ++d.p;
      } else if (s.skip_args && s.skip_args(out.layer)) {
        d.skip();
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
      out.device = d.opt_int("device");
      out.device_id = d.str_field("device_id");
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
