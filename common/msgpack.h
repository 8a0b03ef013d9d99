#pragma once
// MessagePack, the part of it the event store uses: the writer's encodings (put_*) and a
// decoder that takes nothing on trust (bounded strings, containers and nesting, never
// recursion past the bound). Shared by the store (event_store.cpp) and packed args
// (packed_args.cpp), which must encode and read values the same way.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/event_io.h"
#include "common/event_store.h"

namespace cudatrace::msgpack {

using json = nlohmann::json;

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

inline void put_be(PackBuf& out, uint64_t v, int bytes) {
  char* b = out.room(size_t(bytes));
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) b[i] = char(v & 0xff);
}

inline void put_nil(PackBuf& out) { out.push_back(char(0xc0)); }

inline void put_int(PackBuf& out, int64_t v) {
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

inline void put_uint(PackBuf& out, uint64_t u) {
  if (u <= uint64_t(INT64_MAX)) return put_int(out, int64_t(u));
  out.push_back(char(0xcf)), put_be(out, u, 8);
}

inline void put_str(PackBuf& out, std::string_view s) {
  const size_t n = s.size();
  if (n < 32) out.push_back(char(0xa0 | n));
  else if (n <= 0xff) out.push_back(char(0xd9)), put_be(out, n, 1);
  else if (n <= 0xffff) out.push_back(char(0xda)), put_be(out, n, 2);
  else out.push_back(char(0xdb)), put_be(out, n, 4);
  out.append(s);
}

inline void put_container(PackBuf& out, size_t n, uint8_t fix, uint8_t c16) {
  if (n < 16) out.push_back(char(fix | n));
  else if (n <= 0xffff) out.push_back(char(c16)), put_be(out, n, 2);
  else out.push_back(char(c16 + 1)), put_be(out, n, 4);
}

inline void put_json(PackBuf& out, const json& j) {
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


template <class T>
inline void put_optional(PackBuf& out, const std::optional<T>& v) {
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
  // count of what is left to step over, never recursion. `keys_are_text`: every map key, at
  // every depth, must be a string, as value() requires.
  void skip(bool keys_are_text = false) {
    uint64_t left = 1;
    bool in_map = false;
    uint32_t depth = 0;
    thread_local std::vector<std::pair<uint64_t, bool>> outer;  // what the enclosing containers still hold
    outer.clear();
    while (left > 0 || !outer.empty()) {
      if (left == 0) {
        left = outer.back().first;
        in_map = outer.back().second;
        outer.pop_back();
        --depth;
        continue;
      }
      const bool key = in_map && left % 2 == 0;  // a map's 2n entries count down: keys at even
      --left;
      const uint8_t b = byte();
      if (key && keys_are_text && !((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)))
        throw EventFormatError("a map key that is not a string");
      uint64_t items = 0;  // entries of a container that begins here
      bool map = false;
      if (b < 0x80 || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) continue;
      if ((b & 0xe0) == 0xa0) { bytes_skip(b & 0x1f); continue; }
      if ((b & 0xf0) == 0x90) items = count(b & 0x0f);
      else if ((b & 0xf0) == 0x80) items = 2 * count(b & 0x0f), map = true;
      else if (b >= 0xcc && b <= 0xcf) { be(1 << (b - 0xcc)); continue; }
      else if (b >= 0xd0 && b <= 0xd3) { be(1 << (b - 0xd0)); continue; }
      else if (b == 0xcb) { be(8); continue; }
      else if (b == 0xd9) { bytes_skip(be(1)); continue; }
      else if (b == 0xda) { bytes_skip(be(2)); continue; }
      else if (b == 0xdb) { bytes_skip(be(4)); continue; }
      else if (b == 0xdc) items = count(be(2));
      else if (b == 0xdd) items = count(be(4));
      else if (b == 0xde) items = 2 * count(be(2)), map = true;
      else if (b == 0xdf) items = 2 * count(be(4)), map = true;
      else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", b);
        throw EventFormatError(std::string("MessagePack type ") + hex + " has no place in an event");
      }
      if (++depth > limits.max_depth) throw EventFormatError("nested deeper than " + std::to_string(limits.max_depth));
      outer.push_back({left, in_map});
      left = items;
      in_map = map;
    }
  }
  void bytes_skip(uint64_t n) {
    if (n > limits.max_string) throw EventFormatError("a string of " + std::to_string(n) + " bytes, over the bound");
    if (uint64_t(end - p) < n) throw NeedMore{};
    p += n;
  }

  // A string's bytes, in place (valid while the decoded bytes are); EventFormatError for another type.
  std::string_view text_view() {
    const uint8_t b = byte();
    uint64_t n;
    if ((b & 0xe0) == 0xa0) n = b & 0x1f;
    else if (b == 0xd9) n = be(1);
    else if (b == 0xda) n = be(2);
    else if (b == 0xdb) n = be(4);
    else throw EventFormatError("a map key that is not a string");
    if (n > limits.max_string) throw EventFormatError("a string of " + std::to_string(n) + " bytes, over the bound");
    if (uint64_t(end - p) < n) throw NeedMore{};
    const std::string_view v(reinterpret_cast<const char*>(p), size_t(n));
    p += n;
    return v;
  }
  // A map's entry count, from its header; EventFormatError for another type.
  uint64_t map_header() {
    const uint8_t b = byte();
    if ((b & 0xf0) == 0x80) return count(b & 0x0f);
    if (b == 0xde) return count(be(2));
    if (b == 0xdf) return count(be(4));
    throw EventFormatError("args is not a map");
  }

  // The event fields, read without building JSON for them. An integer or nil: false for
  // nil. Not a std::optional returned: its flag byte, stored alone and then read back with
  // the value as one word, stalled every field (store forwarding; 7% of the scoring).
  bool int_or_nil(int64_t& v, const char* what) {
    if (p >= end) throw NeedMore{};
    const uint8_t b = *p;
    if (b < 0x80) return ++p, v = int64_t(b), true;
    if (b >= 0xe0) return ++p, v = int64_t(int8_t(b)), true;
    if (b == 0xc0) return ++p, false;
    if (b >= 0xcc && b <= 0xce) {
      ++p;
      return v = int64_t(be(1 << (b - 0xcc))), true;
    }
    if (b >= 0xd0 && b <= 0xd3) {
      ++p;
      const int n = 1 << (b - 0xd0);
      const uint64_t u = be(n);
      v = n == 1 ? int64_t(int8_t(u)) : n == 2 ? int64_t(int16_t(u)) : n == 4 ? int64_t(int32_t(u)) : int64_t(u);
      return true;
    }
    const json j = value(0);
    if (j.is_number_unsigned()) {
      if (j.get<uint64_t>() > uint64_t(INT64_MAX)) throw EventFormatError(std::string(what) + " out of range");
      return v = int64_t(j.get<uint64_t>()), true;
    }
    if (!j.is_number_integer()) throw EventFormatError(std::string(what) + " is not an integer");
    return v = j.get<int64_t>(), true;
  }
  void opt_int_into(std::optional<int64_t>& out, const char* what) {
    int64_t v = 0;
    if (int_or_nil(v, what)) out = v;
    else out.reset();
  }
  std::optional<int64_t> opt_int(const char* what) {
    std::optional<int64_t> v;
    opt_int_into(v, what);
    return v;
  }
  int64_t int_field(const char* what) {
    int64_t v = 0;
    if (!int_or_nil(v, what)) throw EventFormatError(std::string(what) + " is missing");
    return v;
  }
  std::string str_field(const char* what) {
    std::string s;
    str_into(s, what);
    return s;
  }
  // Into `out`'s own buffer: no allocation per record once it has grown.
  void str_into(std::string& out, const char* what) {
    if (p >= end) throw NeedMore{};
    if ((*p & 0xe0) == 0xa0) {
      const uint8_t n = *p & 0x1f;
      if (n > limits.max_string) throw EventFormatError("a string of " + std::to_string(n) + " bytes, over the bound");
      if (uint64_t(end - p) < uint64_t(n) + 1) throw NeedMore{};
      out.assign(reinterpret_cast<const char*>(p + 1), n);
      p += n + 1;
      return;
    }
    json v = value(0);
    if (!v.is_string()) throw EventFormatError(std::string(what) + " is not a string");
    out = std::move(v.get_ref<std::string&>());
  }
};

}  // namespace cudatrace::msgpack
