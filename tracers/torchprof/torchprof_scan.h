#pragma once
// Runs of bytes that need no look, found eight at a time: the strings of a trace are most of
// its bytes, and a table lookup per byte was the filter's and the tokenizer's main cost.
// Each returns the index of the first byte at or after `i` (up to `end`) that stops a run.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cudatrace::scan {

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighs = 0x8080808080808080ull;

// Flags (the high bit of) each byte of `x` equal to `c`; the lowest flag is exact.
constexpr uint64_t equal(uint64_t x, uint8_t c) {
  const uint64_t t = x ^ (kOnes * c);
  return (t - kOnes) & ~t & kHighs;
}
// Flags each byte below `n` (n <= 128); the lowest flag is exact.
constexpr uint64_t below(uint64_t x, uint8_t n) { return (x - kOnes * n) & ~x & kHighs; }

template <class Stops, class Byte>
size_t run(const char* p, size_t i, size_t end, Stops stops, Byte stop) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; i + 8 <= end; i += 8) {
    uint64_t x;
    std::memcpy(&x, p + i, 8);
    if (const uint64_t m = stops(x)) return i + size_t(__builtin_ctzll(m) >> 3);
  }
#endif
  while (i < end && !stop(uint8_t(p[i]))) ++i;
  return i;
}

// Inside a string, as the filter sees it: up to '"', '\\' or a byte past ASCII.
inline size_t filter_string_run(const char* p, size_t i, size_t end) {
  return run(
      p, i, end, [](uint64_t x) { return equal(x, '"') | equal(x, '\\') | (x & kHighs); },
      [](uint8_t c) { return c == '"' || c == '\\' || c >= 0x80; });
}

// Outside a string, as the filter sees it: up to '"' or a byte past ASCII.
inline size_t filter_outside_run(const char* p, size_t i, size_t end) {
  return run(
      p, i, end, [](uint64_t x) { return equal(x, '"') | (x & kHighs); },
      [](uint8_t c) { return c == '"' || c >= 0x80; });
}

// Inside a string, as the tokenizer sees it: up to '"', '\\' or a control character.
inline size_t json_string_run(const char* p, size_t i, size_t end) {
  return run(
      p, i, end, [](uint64_t x) { return equal(x, '"') | equal(x, '\\') | below(x, 0x20); },
      [](uint8_t c) { return c == '"' || c == '\\' || c < 0x20; });
}

}  // namespace cudatrace::scan
