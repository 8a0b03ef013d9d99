#include "common/outside_text.h"

namespace cudatrace {

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;       // overlong
    else if (b0 == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;       // overlong
    else if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string escape_invalid_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      const uint8_t b = uint8_t(s[i++]);
      out += {'\\', 'x', hex[b >> 4], hex[b & 15]};
    }
  }
  return out;
}

nlohmann::json utf8_safe(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::string:
      return escape_invalid_utf8(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& v : j) out.push_back(utf8_safe(v));
      return out;
    }
    case nlohmann::json::value_t::object: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [k, v] : j.items()) out[escape_invalid_utf8(k)] = utf8_safe(v);
      return out;
    }
    default:
      return j;
  }
}

std::string dump_safe(const nlohmann::json& j, int indent) {
  try {
    return j.dump(indent);
  } catch (const nlohmann::json::type_error&) {  // 316: a string that is not UTF-8
    return utf8_safe(j).dump(indent);
  }
}

std::string shown(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return escape_invalid_utf8(s);
  size_t cut = max_bytes;
  // Not inside a UTF-8 sequence: back up to the start of one.
  while (cut > 0 && (uint8_t(s[cut]) & 0xC0) == 0x80) --cut;
  return escape_invalid_utf8(s.substr(0, cut)) + "... [" + std::to_string(s.size() - cut) + " more bytes]";
}

}  // namespace cudatrace
