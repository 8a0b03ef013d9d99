#include "common/outside_text.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

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

namespace {
void hex_byte(std::string& out, uint8_t b) {
  static const char* hex = "0123456789ABCDEF";
  out += {'\\', 'x', hex[b >> 4], hex[b & 15]};
}

// How many bytes at the end of `s` begin a UTF-8 sequence that the next write may complete.
size_t incomplete_tail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const uint8_t b = uint8_t(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t want = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return want > back ? back : 0;
  }
  return 0;
}

struct TerminalCookie {
  int fd;
  std::string carry;  // the start of a UTF-8 sequence cut by the buffer
};

ssize_t terminal_write(void* cookie, const char* buf, size_t size) {
  auto* c = static_cast<TerminalCookie*>(cookie);
  std::string text = c->carry + std::string(buf, size);
  const size_t keep = incomplete_tail(text);
  c->carry = text.substr(text.size() - keep);
  text.resize(text.size() - keep);
  const std::string out = escape_for_terminal(text);
  for (size_t off = 0; off < out.size();) {
    const ssize_t n = ::write(c->fd, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    off += size_t(n);
  }
  return ssize_t(size);
}

int terminal_close(void* cookie) {
  auto* c = static_cast<TerminalCookie*>(cookie);
  if (!c->carry.empty()) {
    const std::string out = escape_for_terminal(c->carry);
    (void)!::write(c->fd, out.data(), out.size());
  }
  delete c;
  return 0;
}
}  // namespace

std::string escape_for_terminal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    if (b < 0x80) {
      if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7F) hex_byte(out, b);
      else out += char(b);
      ++i;
      continue;
    }
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      hex_byte(out, b);
      ++i;
    } else if (n == 2 && b == 0xC2 && uint8_t(s[i + 1]) <= 0x9F) {  // U+0080-U+009F: C1 controls
      hex_byte(out, b);
      hex_byte(out, uint8_t(s[i + 1]));
      i += 2;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

void make_stderr_terminal_safe() {
  cookie_io_functions_t io{};
  io.write = terminal_write;
  io.close = terminal_close;
  auto* cookie = new TerminalCookie{STDERR_FILENO, {}};
  FILE* f = fopencookie(cookie, "w", io);
  if (!f) {
    delete cookie;
    return;  // stderr stays as it was: no console is better than none
  }
  setvbuf(f, nullptr, _IOLBF, 1 << 16);
  stderr = f;
}

}  // namespace cudatrace
