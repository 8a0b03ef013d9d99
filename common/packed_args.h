#pragma once
// An event's args as the store holds them: a MessagePack map (schema/README.md,
// "events.msgpack.zst"). Built by a converter's hot path without JSON (PackedArgs), and
// read by the scoring's hot path without JSON (PackedArgsView): at 10^8 events, a JSON
// object per event, its map node and its destruction were a third of the conversion and
// most of the scoring.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cudatrace {

// Entries: key(), then one value.
class PackedArgs {
 public:
  void start(size_t entries);  // clears, then opens a map of `entries` keys
  void key(std::string_view k) { text(k); }
  void integer(int64_t v);
  void unsigned_integer(uint64_t v);  // as JSON's unsigned numbers are written
  void boolean(bool v);
  void nil();
  void text(std::string_view v);
  void dim3(uint32_t x, uint32_t y, uint32_t z);
  std::string_view bytes() const { return std::string_view(bytes_.data(), size_); }

 private:
  std::string bytes_;
  size_t size_ = 0;
};

// The JSON object of packed args (what a reader of the store makes of them).
nlohmann::json unpack_args(std::string_view packed);
// JSON args packed as the store writes them ("" for an empty object: the store's 0x80).
std::string pack_json_args(const nlohmann::json& args);

// One value of packed args, as the scoring compares it.
struct PackedValue {
  enum class Kind { kInt, kFloat, kText, kOther };
  Kind kind = Kind::kOther;
  int64_t integer = 0;     // kInt (an unsigned past INT64_MAX is kOther)
  double real = 0;         // kFloat
  std::string_view text;   // kText: its bytes
  std::string_view raw;    // the value as encoded (containers, booleans, nil: compared as bytes)
  nlohmann::json to_json() const;
};

// The comparison the matcher makes of a ledger's argument and a method's: hex pointers are
// strings, compared without regard to case; numbers by value; anything else as JSON's ==
// (the store's encodings are canonical, so equal values are equal bytes).
bool same_value(const PackedValue& a, const PackedValue& b);

// Packed args read in place. The bytes must outlive the view; a map that is not whole, or
// is no map, throws EventFormatError (the store's reader has checked them already).
class PackedArgsView {
 public:
  explicit PackedArgsView(std::string_view packed);
  // Calls f(key, value) for each entry, in the map's order.
  template <class F>
  void each(F&& f) const {
    Cursor c = begin();
    std::string_view k;
    PackedValue v;
    while (c.next(k, v)) f(k, v);
  }
  std::optional<PackedValue> find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key).has_value(); }
  size_t size() const { return entries_; }

 private:
  struct Cursor {
    const uint8_t* p;
    const uint8_t* end;
    uint64_t left;
    bool next(std::string_view& key, PackedValue& v);
  };
  Cursor begin() const;
  std::string_view bytes_;
  size_t entries_ = 0;
  size_t body_ = 0;  // where the first key begins
};

}  // namespace cudatrace
