#pragma once
// JSON read a token at a time from a trace's filtered text (torchprof_input.h), for a reader
// that knows the shape it wants: it asks for a key, a string, a number, or to pass over a
// value, and nothing it passes over is built. nlohmann's SAX parser made a std::string and
// a json node of every value, 90% of them in events the reader never converts; this one
// keeps the token in its buffer, and a value passed over costs a scan.
//
// The grammar is JSON's (RFC 8259) as nlohmann reads it: control characters in a string,
// lone surrogates, a number like 01 or 1. are errors. Bounds: a token is whole in the
// buffer before it is read (the filter bounds strings and bare tokens, so the buffer stays
// one slice and a tail); nesting deeper than kMaxJsonDepth is an error, so a file of
// brackets holds one byte per level, 1 MiB at most.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tracers/torchprof/torchprof_input.h"

namespace cudatrace {

inline constexpr size_t kMaxJsonDepth = size_t(1) << 20;

struct JsonNumber {
  // JSON's integers as nlohmann types them: a negative one or one up to INT64_MAX is kInt,
  // one up to UINT64_MAX kUint, anything else (a fraction, an exponent, more digits) kFloat.
  enum class Kind { kInt, kUint, kFloat } kind = Kind::kInt;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  std::string_view text;  // valid until the next call on the cursor
  double real() const;    // kFloat's value
  // The value as an int64_t where it is an integer that fits; what integer_at() takes.
  bool fits_int64() const { return kind == Kind::kInt; }
};

// What a value passed over held, for an event's bounds.
struct JsonTally {
  size_t values = 0;
  size_t bytes = 0;  // of strings and keys, as decoded
};

// A time in microseconds ("ts", "dur" of a Chrome trace) in ns, read from the number's text
// to the nanosecond where it has three decimals or fewer (a double holds 15 to 16 digits,
// a unix time in us with three decimals has 19); nothing where it would overflow.
std::optional<int64_t> microseconds_to_ns(const JsonNumber& n);

class JsonCursor {
 public:
  explicit JsonCursor(UntrustedJsonInput& in) : in_(in) {}

  // The next byte that is not white space, not consumed; -1 at the end of the input.
  int peek() {
    if (pos_ < buf_.size()) {
      if (const uint8_t c = uint8_t(buf_[pos_]); c > ' ') return c;
    }
    return peek_past_space();
  }
  // Consumes `c` where it comes next (after white space).
  bool eat(char c) {
    if (peek() != static_cast<unsigned char>(c)) return false;
    ++pos_;
    return true;
  }
  // A string (the cursor on its '"'), decoded into `out` where given; its decoded length
  // in `length`.
  bool string(std::string* out, size_t* length = nullptr);
  // A key and its ':'.
  bool key(std::string& out, size_t* length = nullptr);
  // The same, `k` valid until the next call on the cursor (a view of its buffer where the key
  // has no escapes: no copy for the keys an event is made of).
  bool key(std::string_view& k);
  // A string (the cursor on its '"'), `v` valid until the next call on the cursor.
  bool view(std::string_view& v);
  bool number(JsonNumber& n);
  static bool starts_number(int c) { return c == '-' || (c >= '0' && c <= '9'); }
  // A value as an integer that fits int64_t, or nothing: what is not a number is passed
  // over, and either way the value is counted into `tally` (the readers' event bounds).
  bool integer_or_skip(std::optional<int64_t>& out, JsonTally& tally);
  // A time in microseconds ("ts", "dur") in ns (microseconds_to_ns), or nothing, counted
  // as integer_or_skip() counts.
  bool time_or_skip(std::optional<int64_t>& out, JsonTally& tally);
  // Any value, passed over; counted into `tally` where given (each value, nested ones
  // included, and the bytes of its strings and keys).
  bool skip(JsonTally* tally = nullptr);
  // After a member or element: ',' (true, `more` set) or `close` (true, `more` clear).
  bool next(char close, bool& more) {
    const int c = peek();
    if (c != ',' && c != static_cast<unsigned char>(close)) return unexpected(c, close);
    ++pos_;
    more = c == ',';
    return true;
  }

  bool fail(const char* what);
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  int peek_past_space();
  bool unexpected(int c, char close);
  bool refill();
  bool need(size_t n);  // n bytes from pos_ in the buffer, refilling where short
  bool escape(size_t& at, std::string* out, size_t& length);
  bool literal();

  UntrustedJsonInput& in_;
  std::string buf_;
  size_t pos_ = 0;
  uint64_t base_ = 0;  // bytes of filtered text before buf_[0]
  bool done_ = false;
  std::string error_;
  std::string stack_;  // skip()'s containers, one byte each
  std::string scratch_;  // a view's text where it could not be a view of buf_
};

}  // namespace cudatrace
