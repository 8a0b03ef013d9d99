#include "tracers/torchprof/torchprof_json.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "tracers/torchprof/torchprof_scan.h"

namespace cudatrace {

namespace {

struct Classes {
  bool space[256] = {};
  bool in_number[256] = {};        // may be part of a number's token
  constexpr Classes() {
    for (const char c : {' ', '\t', '\n', '\r'}) space[uint8_t(c)] = true;
    for (const char c : {'-', '+', '.', 'e', 'E'}) in_number[uint8_t(c)] = true;
    for (int c = '0'; c <= '9'; ++c) in_number[c] = true;
  }
};
constexpr Classes kClasses;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The four hex digits of a \u escape at `p`; -1 where they are not.
int32_t hex4(const char* p) {
  int32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    const int h = hex_value(p[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

void append_utf8(std::string* out, uint32_t cp, size_t& length) {
  char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = char(cp), n = 1;
  } else if (cp < 0x800) {
    b[0] = char(0xC0 | (cp >> 6)), b[1] = char(0x80 | (cp & 0x3F)), n = 2;
  } else if (cp < 0x10000) {
    b[0] = char(0xE0 | (cp >> 12)), b[1] = char(0x80 | ((cp >> 6) & 0x3F)), b[2] = char(0x80 | (cp & 0x3F)), n = 3;
  } else {
    b[0] = char(0xF0 | (cp >> 18)), b[1] = char(0x80 | ((cp >> 12) & 0x3F));
    b[2] = char(0x80 | ((cp >> 6) & 0x3F)), b[3] = char(0x80 | (cp & 0x3F)), n = 4;
  }
  if (out) out->append(b, n);
  length += n;
}

// "123456.789" microseconds -> 123456789 ns, from the text: a double holds 15 to 16 digits,
// and a unix time in us with three decimals has 19. Nothing for text of another shape.
std::optional<int64_t> us_text_to_ns(std::string_view s) {
  bool negative = false;
  if (!s.empty() && s.front() == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  if (s.empty() || s.find_first_of("eE") != std::string_view::npos) return std::nullopt;
  const size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  int64_t ns = 0;
  for (char c : whole) {
    if (c < '0' || c > '9' || ns > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
    ns = ns * 10 + (c - '0');
  }
  // Room for the fraction's 999 ns too: a time the file makes up must not overflow.
  if (ns > (std::numeric_limits<int64_t>::max() - 999) / 1000) return std::nullopt;
  ns *= 1000;
  int64_t scale = 100;
  for (char c : frac) {
    if (c < '0' || c > '9') return std::nullopt;
    ns += (c - '0') * scale;  // digits past the third (below 1 ns) are dropped
    scale /= 10;
  }
  return negative ? -ns : ns;
}

}  // namespace

double JsonNumber::real() const {
  if (kind == Kind::kInt) return double(integer);
  if (kind == Kind::kUint) return double(unsigned_integer);
  return std::strtod(std::string(text).c_str(), nullptr);  // rare: a fraction no time had
}

bool JsonCursor::fail(const char* what) {
  if (error_.empty())
    error_ = "not JSON near byte " + std::to_string(base_ + pos_) + " of what was read: " + what;
  return false;
}

bool JsonCursor::refill() {
  if (done_ || failed()) return false;
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    base_ += pos_;
    pos_ = 0;
  }
  const size_t before = buf_.size();
  while (buf_.size() == before) {
    if (!in_.fill(buf_)) {
      done_ = true;
      return buf_.size() > before;
    }
  }
  return true;
}

bool JsonCursor::need(size_t n) {
  while (buf_.size() - pos_ < n)
    if (!refill()) return false;
  return true;
}

int JsonCursor::peek_past_space() {
  for (;;) {
    while (pos_ < buf_.size()) {
      const uint8_t c = uint8_t(buf_[pos_]);
      if (!kClasses.space[c]) return c;
      ++pos_;
    }
    if (!refill()) return -1;
  }
}

bool JsonCursor::string(std::string* out, size_t* length_out) {
  if (out) out->clear();
  size_t at = 1, length = 0;  // from pos_, which a refill moves
  for (;;) {
    const char* p = buf_.data() + pos_;
    const size_t end = buf_.size() - pos_;
    const size_t from = at;
    at = scan::json_string_run(p, at, end);
    if (out) out->append(p + from, at - from);
    length += at - from;
    if (at == end) {
      if (!refill()) return fail("a string without its end");
      continue;
    }
    if (p[at] == '"') {
      pos_ += at + 1;
      if (length_out) *length_out = length;
      return true;
    }
    if (p[at] != '\\') {
      pos_ += at;
      return fail("a control character in a string");
    }
    if (!escape(at, out, length)) return false;
  }
}

// The escape at pos_ + at, decoded; `at` moved past it.
bool JsonCursor::escape(size_t& at, std::string* out, size_t& length) {
  if (!need(at + 2)) return fail("a string without its end");
  const char e = buf_[pos_ + at + 1];
  char plain = 0;
  switch (e) {
    case '"': case '\\': case '/': plain = e; break;
    case 'b': plain = '\b'; break;
    case 'f': plain = '\f'; break;
    case 'n': plain = '\n'; break;
    case 'r': plain = '\r'; break;
    case 't': plain = '\t'; break;
    case 'u': break;
    default:
      pos_ += at;
      return fail("an invalid escape in a string");
  }
  if (plain) {
    if (out) out->push_back(plain);
    ++length;
    at += 2;
    return true;
  }
  if (!need(at + 6)) return fail("a string without its end");
  int32_t cp = hex4(buf_.data() + pos_ + at + 2);
  if (cp < 0) return fail("a \\u escape without four hex digits");
  if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("a lone low surrogate in a string");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (!need(at + 12)) return fail("a high surrogate without its low one");
    const char* low = buf_.data() + pos_ + at + 6;
    const int32_t lo = low[0] == '\\' && low[1] == 'u' ? hex4(low + 2) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return fail("a high surrogate without its low one");
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    at += 6;
  }
  append_utf8(out, uint32_t(cp), length);
  at += 6;
  return true;
}

bool JsonCursor::key(std::string& out, size_t* length) {
  if (peek() != '"') return fail("a key was expected");
  if (!string(&out, length)) return false;
  return eat(':') || fail("':' was expected after a key");
}

// One pass over the token: its grammar, and its value where it is an integer. A token the
// buffer's end cuts is read again once the buffer holds it whole (tokens are short: the
// filter bounds them).
bool JsonCursor::view(std::string_view& v) {
  for (size_t at = 1;;) {
    const char* p = buf_.data() + pos_;
    const size_t end = buf_.size() - pos_;
    at = scan::json_string_run(p, at, end);
    if (at == end) {
      if (!refill()) return fail("a string without its end");
      continue;
    }
    if (p[at] != '"') break;  // an escape, or a control character: string() says which
    v = std::string_view(p + 1, at - 1);
    pos_ += at + 1;
    return true;
  }
  if (!string(&scratch_)) return false;
  v = scratch_;
  return true;
}

bool JsonCursor::key(std::string_view& k) {
  if (peek() != '"') return fail("a key was expected");
  if (!view(k)) return false;
  if (pos_ < buf_.size() && buf_[pos_] == ':') {
    ++pos_;
    return true;
  }
  // White space before the ':', which may need a refill that would move the view's bytes.
  if (k.data() != scratch_.data()) {
    scratch_.assign(k);
    k = scratch_;
  }
  return eat(':') || fail("':' was expected after a key");
}

bool JsonCursor::number(JsonNumber& n) {
  for (;;) {
    const char* p = buf_.data() + pos_;
    const size_t end = buf_.size() - pos_;
    size_t i = 0;
    const bool negative = end > 0 && p[0] == '-';
    i += negative;
    uint64_t v = 0;
    bool wide = false, integral = true, valid = true;
    const auto digits = [&](bool accumulate) {
      const size_t from = i;
      for (; i < end && p[i] >= '0' && p[i] <= '9'; ++i) {
        if (!accumulate) continue;
        const uint64_t d = uint64_t(p[i] - '0');
        if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) wide = true;
        v = v * 10 + d;
      }
      return i > from;
    };
    if (i < end && p[i] == '0') ++i;
    else valid = digits(true);
    if (valid && i < end && p[i] == '.') {
      ++i, integral = false;
      valid = digits(false);
    }
    if (valid && i < end && (p[i] == 'e' || p[i] == 'E')) {
      ++i, integral = false;
      if (i < end && (p[i] == '+' || p[i] == '-')) ++i;
      valid = digits(false);
    }
    if (i == end && refill()) continue;  // the buffer ended inside the token
    // What JSON's grammar stops at must not go on as a number would (01, 1.e5, 1-2).
    if (!valid || (i < end && kClasses.in_number[uint8_t(p[i])])) return fail("not a number");
    pos_ += i;
    n.text = std::string_view(p, i);
    n.kind = JsonNumber::Kind::kFloat;
    if (!integral || wide) return true;
    if (negative) {
      if (v > uint64_t(std::numeric_limits<int64_t>::max()) + 1) return true;
      n.kind = JsonNumber::Kind::kInt;
      n.integer = v == uint64_t(std::numeric_limits<int64_t>::max()) + 1 ? std::numeric_limits<int64_t>::min()
                                                                            : -int64_t(v);
    } else if (v <= uint64_t(std::numeric_limits<int64_t>::max())) {
      n.kind = JsonNumber::Kind::kInt;
      n.integer = int64_t(v);
    } else {
      n.kind = JsonNumber::Kind::kUint;
      n.unsigned_integer = v;
    }
    return true;
  }
}

bool JsonCursor::literal() {
  const char c = buf_[pos_];
  const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
  if (!need(word.size()) || std::string_view(buf_.data() + pos_, word.size()) != word)
    return fail("an unexpected character");
  pos_ += word.size();
  return true;
}

bool JsonCursor::unexpected(int c, char close) {
  return fail(c < 0 ? "the input ends inside a value" : close == '}' ? "',' or '}' was expected" : "',' or ']' was expected");
}

bool JsonCursor::integer_or_skip(std::optional<int64_t>& out, JsonTally& tally) {
  out.reset();
  if (!starts_number(peek())) return skip(&tally);
  JsonNumber n;
  if (!number(n)) return false;
  ++tally.values;
  if (n.kind == JsonNumber::Kind::kInt) out = n.integer;
  return true;
}

bool JsonCursor::time_or_skip(std::optional<int64_t>& out, JsonTally& tally) {
  out.reset();
  if (!starts_number(peek())) return skip(&tally);
  JsonNumber n;
  if (!number(n)) return false;
  ++tally.values;
  out = microseconds_to_ns(n);
  return true;
}

bool JsonCursor::skip(JsonTally* tally) {
  stack_.clear();
  for (;;) {
    // A value starts here.
    const int c = peek();
    if (tally) ++tally->values;
    if (c == '{' || c == '[') {
      if (stack_.size() >= kMaxJsonDepth) return fail("nesting deeper than 2^20");
      ++pos_;
      const char close = c == '{' ? '}' : ']';
      if (peek() == static_cast<unsigned char>(close)) {
        ++pos_;
      } else {
        stack_.push_back(close);
        if (close == '}') {
          size_t n = 0;
          if (peek() != '"' || !string(nullptr, &n)) return fail("a key was expected");
          if (!eat(':')) return fail("':' was expected after a key");
          if (tally) tally->bytes += n;
        }
        continue;
      }
    } else if (c == '"') {
      size_t n = 0;
      if (!string(nullptr, &n)) return false;
      if (tally) tally->bytes += n;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      JsonNumber num;
      if (!number(num)) return false;
    } else if (c == 't' || c == 'f' || c == 'n') {
      if (!literal()) return false;
    } else {
      return fail(c < 0 ? "the input ends where a value was expected" : "an unexpected character");
    }
    // The value is over: close what it ends, up to the next member or element.
    for (;;) {
      if (stack_.empty()) return true;
      bool more = false;
      if (!next(stack_.back(), more)) return false;
      if (!more) {
        stack_.pop_back();
        continue;
      }
      if (stack_.back() == '}') {
        size_t n = 0;
        if (peek() != '"' || !string(nullptr, &n)) return fail("a key was expected");
        if (!eat(':')) return fail("':' was expected after a key");
        if (tally) tally->bytes += n;
      }
      break;
    }
  }
}

std::optional<int64_t> microseconds_to_ns(const JsonNumber& n) {
  constexpr int64_t kMaxUs = std::numeric_limits<int64_t>::max() / 1000;
  if (n.kind == JsonNumber::Kind::kInt) {
    if (n.integer <= kMaxUs && n.integer >= -kMaxUs) return n.integer * 1000;
    return std::nullopt;
  }
  if (n.kind == JsonNumber::Kind::kUint) {
    if (n.unsigned_integer <= uint64_t(kMaxUs)) return int64_t(n.unsigned_integer) * 1000;
    return std::nullopt;
  }
  if (auto ns = us_text_to_ns(n.text)) return ns;
  const double v = n.real();
  if (std::isfinite(v) && std::fabs(v) < 9e15) return int64_t(std::llround(v * 1000));
  return std::nullopt;
}

}  // namespace cudatrace
