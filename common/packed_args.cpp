#include "common/packed_args.h"

#include <cctype>
#include <cstring>

#include "common/event_store.h"
#include "common/msgpack.h"

namespace cudatrace {

using namespace msgpack;

namespace {

// What the scoring reads was written by the store's writer or checked by its reader
// already: these bounds only keep a damaged buffer from being read past its end.
const StoreLimits& read_back() {
  static const StoreLimits l = [] {
    StoreLimits x;
    x.max_depth = 1024;
    x.max_string = UINT32_MAX;
    x.max_items = UINT32_MAX;
    return x;
  }();
  return l;
}

Decoder decoder_of(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  return Decoder{p, p + bytes.size(), read_back()};
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

void PackedArgs::unsigned_integer(uint64_t v) {
  PackBuf b{bytes_, size_};
  put_uint(b, v);
}

void PackedArgs::boolean(bool v) {
  PackBuf b{bytes_, size_};
  b.push_back(char(v ? 0xc3 : 0xc2));
}

void PackedArgs::nil() {
  PackBuf b{bytes_, size_};
  put_nil(b);
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
  if (packed.empty()) return json::object();
  static const StoreLimits limits;  // a reader's defaults: these may come from outside
  const auto* p = reinterpret_cast<const uint8_t*>(packed.data());
  Decoder d{p, p + packed.size(), limits};
  try {
    return d.value(0);
  } catch (const NeedMore&) {
    throw EventFormatError("packed args cut short");
  }
}

std::string pack_json_args(const json& args) {
  if (!args.is_object() || args.empty()) return "";
  std::string bytes;
  size_t size = 0;
  PackBuf b{bytes, size};
  put_json(b, args);
  bytes.resize(size);
  return bytes;
}

json PackedValue::to_json() const {
  switch (kind) {
    case Kind::kInt: return integer;
    case Kind::kFloat: return real;
    case Kind::kText: return std::string(text);
    case Kind::kOther: break;
  }
  Decoder d = decoder_of(raw);
  try {
    return d.value(0);
  } catch (const NeedMore&) {
    throw EventFormatError("packed value cut short");
  }
}

bool same_value(const PackedValue& a, const PackedValue& b) {
  using K = PackedValue::Kind;
  if (a.kind == K::kText && b.kind == K::kText)
    return a.text == b.text ||  // nearly always, and a compare of bytes, not a tolower per byte
           std::equal(a.text.begin(), a.text.end(), b.text.begin(), b.text.end(),
                      [](char p, char q) { return std::tolower(uint8_t(p)) == std::tolower(uint8_t(q)); });
  if (a.kind == K::kInt && b.kind == K::kInt) return a.integer == b.integer;
  const bool an = a.kind == K::kInt || a.kind == K::kFloat, bn = b.kind == K::kInt || b.kind == K::kFloat;
  if (an && bn) {  // JSON's == on an integer and a float compares their values
    const double x = a.kind == K::kInt ? double(a.integer) : a.real, y = b.kind == K::kInt ? double(b.integer) : b.real;
    return x == y;
  }
  if (a.kind != K::kOther || b.kind != K::kOther) return false;
  // Containers: equal bytes are equal values (the fast path, every match); otherwise JSON's ==
  // decides, which takes [1, 1.0] for [1, 1].
  return a.raw == b.raw || a.to_json() == b.to_json();
}

PackedArgsView::PackedArgsView(std::string_view packed) : bytes_(packed) {
  if (packed.empty()) return;
  Decoder d = decoder_of(packed);
  try {
    entries_ = size_t(d.map_header());
  } catch (const NeedMore&) {
    throw EventFormatError("packed args cut short");
  }
  body_ = size_t(d.p - reinterpret_cast<const uint8_t*>(packed.data()));
}

PackedArgsView::Cursor PackedArgsView::begin() const {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes_.data());
  return {p + body_, p + bytes_.size(), entries_};
}

bool PackedArgsView::Cursor::next(std::string_view& key, PackedValue& v) {
  if (left == 0) return false;
  --left;
  Decoder d{p, end, read_back()};
  try {
    key = d.text_view();
    const uint8_t* at = d.p;
    v = PackedValue{};
    const uint8_t b = d.byte();
    if (b < 0x80 || b >= 0xe0 || (b >= 0xd0 && b <= 0xd3) || (b >= 0xcc && b <= 0xce) ||
        (b == 0xcf && (d.end - d.p < 1 || d.p[0] < 0x80))) {
      d.p = at;
      v.kind = PackedValue::Kind::kInt;
      d.int_or_nil(v.integer, "an argument");  // no std::optional: its flag byte stalled the load
    } else if (b == 0xcb) {
      const uint64_t bits = d.be(8);
      v.kind = PackedValue::Kind::kFloat;
      std::memcpy(&v.real, &bits, sizeof v.real);
    } else if ((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)) {
      d.p = at;
      v.kind = PackedValue::Kind::kText;
      v.text = d.text_view();
    } else {
      d.p = at;
      d.skip();
    }
    v.raw = std::string_view(reinterpret_cast<const char*>(at), size_t(d.p - at));
  } catch (const NeedMore&) {
    throw EventFormatError("packed args cut short");
  }
  p = d.p;
  return true;
}

std::optional<PackedValue> PackedArgsView::find(std::string_view key) const {
  Cursor c = begin();
  std::string_view k;
  PackedValue v;
  while (c.next(k, v))
    if (k == key) return v;
  return std::nullopt;
}

}  // namespace cudatrace
