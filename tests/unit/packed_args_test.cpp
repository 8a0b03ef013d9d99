// Packed args read in place (the scoring's path): the same values, the same comparison as
// the JSON the store's reader builds, and a damaged buffer is an error, never a read past
// its end.
#include <gtest/gtest.h>

#include "common/event_store.h"
#include "test_support.h"

using namespace cudatrace;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The matcher's rule on JSON, as it was before args were packed: hex strings without regard
// to case, anything else JSON's ==.
bool json_same(const json& a, const json& b) {
  if (a.is_string() && b.is_string()) {
    const auto &x = a.get_ref<const std::string&>(), &y = b.get_ref<const std::string&>();
    return std::equal(x.begin(), x.end(), y.begin(), y.end(),
                      [](char p, char q) { return std::tolower(uint8_t(p)) == std::tolower(uint8_t(q)); });
  }
  return a == b;
}

PackedValue value_of(const std::string& packed) { return *PackedArgsView(packed).find("v"); }

}  // namespace

TEST(PackedArgs, ViewFindsEveryEntryWithItsValue) {
  const json args = {{"grid", {1, 2, 3}}, {"kernel", "k\xff\x01"}, {"big", UINT64_MAX}, {"neg", -123456789012},
                     {"f", 0.5},          {"ok", true},            {"none", nullptr},   {"nested", {{"a", {{"b", 1}}}}},
                     {"long", std::string(300, 'x')}};
  const std::string packed = pack_json_args(args);
  const PackedArgsView view(packed);
  EXPECT_EQ(view.size(), args.size());
  size_t n = 0;
  view.each([&](std::string_view key, const PackedValue& v) {
    ++n;
    ASSERT_TRUE(args.contains(std::string(key))) << key;
    EXPECT_EQ(v.to_json(), args[std::string(key)]) << key;
  });
  EXPECT_EQ(n, args.size());
  EXPECT_EQ(view.find("neg")->kind, PackedValue::Kind::kInt);
  EXPECT_EQ(view.find("neg")->integer, -123456789012);
  EXPECT_EQ(view.find("kernel")->text, "k\xff\x01");
  EXPECT_EQ(view.find("big")->kind, PackedValue::Kind::kOther);  // past INT64_MAX: compared as bytes
  EXPECT_FALSE(view.find("absent"));
  EXPECT_EQ(PackedArgsView("").size(), 0u);
  EXPECT_EQ(unpack_args(packed), args);
  EXPECT_EQ(pack_json_args(json::object()), "");
}

// Every pair of values compares as the JSON rule did.
TEST(PackedArgs, SameValueAgreesWithTheJsonRule) {
  const std::vector<json> values = {0,    1,     -1,   128,  1.0,  0.5,         "0x7F00", "0x7f00", "0x7f01", "",
                                    true, false, nullptr, json::array({1, 2, 3}), json::array({1, 2, 4}),
                                    json::array({1.0, 2, 3}), json{{"a", 1}}, uint64_t(UINT64_MAX), int64_t(INT64_MIN)};
  for (const auto& a : values)
    for (const auto& b : values) {
      // JSON's == casts an unsigned past INT64_MAX to a signed integer (UINT64_MAX == -1):
      // the packed comparison keeps them apart, as the values are.
      const bool wrapped = (a.is_number_unsigned() && b.is_number_integer() && !b.is_number_unsigned()) ||
                           (b.is_number_unsigned() && a.is_number_integer() && !a.is_number_unsigned());
      const bool want = json_same(a, b) && !(wrapped && a.dump() != b.dump());
      EXPECT_EQ(same_value(value_of(pack_json_args({{"v", a}})), value_of(pack_json_args({{"v", b}}))), want)
          << a.dump() << " vs " << b.dump();
    }
}

TEST(PackedArgs, ADamagedBufferIsAnErrorNotAReadPastItsEnd) {
  const std::string packed = pack_json_args({{"kernel", std::string(100, 'k')}, {"grid", {1, 2, 3}}});
  for (size_t cut = 1; cut < packed.size(); ++cut) {
    const std::string part = packed.substr(0, cut);
    EXPECT_THROW(
        {
          const PackedArgsView v(part);
          v.each([](std::string_view, const PackedValue&) {});
        },
        EventFormatError)
        << "cut at " << cut;
  }
  EXPECT_THROW(PackedArgsView("\x91\x01"), EventFormatError);  // an array, not a map
}

// The reader's packed mode gives the bytes whose JSON the plain mode gives, and meta records
// whole (a ledger's header is read as JSON).
TEST(PackedArgs, ReaderPackedModeMatchesItsJsonMode) {
  const fs::path dir = testsupport::temp_dir("packed-reader");
  for (const bool store : {true, false}) {
    const fs::path file = dir / (store ? "e.msgpack.zst" : "e.jsonl");
    std::vector<Event> written;
    for (int i = 0; i < 50; ++i) {
      Event e;
      e.layer = i == 0 ? layer::kMeta : layer::kRuntime;
      e.name = "call" + std::to_string(i % 3);
      e.pid = e.tid = 1;
      e.ts = 1000 + i;
      if (i % 2) e.args = {{"i", i}, {"ptr", "0xABC"}, {"grid", {i, 1, 1}}};
      written.push_back(e);
    }
    if (store) {
      EventStoreWriter w(file);
      for (const auto& e : written) w.write(e);
      w.close();
    } else {
      EventWriter w(file);
      for (const auto& e : written) w.write(e);
      w.close();
    }
    EventReader plain(file), packed(file);
    Event a, b;
    std::string bytes;
    size_t n = 0;
    while (plain.next(a)) {
      ASSERT_TRUE(packed.next(b, &bytes));
      EXPECT_EQ(b.name, a.name);
      if (a.is_meta()) {
        EXPECT_EQ(b.args, a.args);
      } else {
        EXPECT_TRUE(b.args.empty());
        EXPECT_EQ(unpack_args(bytes), a.args) << (store ? "store" : "jsonl") << " record " << n;
      }
      ++n;
    }
    EXPECT_FALSE(packed.next(b, &bytes));
    EXPECT_EQ(n, written.size());
  }
}

// A map key that is not a string is refused in the packed mode as in the JSON mode, at any
// depth: a store or ledger the program wrote cannot carry one past the reader into the
// scoring (where it would read as the harness's own failure).
TEST(PackedArgs, ReaderRefusesAMapKeyThatIsNotAString) {
  const fs::path dir = testsupport::temp_dir("packed-keys");
  {
    EventStoreWriter w(dir / "e.msgpack.zst");
    Event e;
    e.layer = layer::kRuntime;
    e.name = "cudaMalloc";
    e.pid = e.tid = 1;
    PackedArgs args;
    args.start(1);
    args.integer(5);  // the key
    args.integer(6);
    w.write(e, args);
    w.close();
  }
  for (const bool packed : {false, true}) {
    EventReader r(dir / "e.msgpack.zst");
    Event e;
    std::string bytes;
    try {
      packed ? r.next(e, &bytes) : r.next(e);
      ADD_FAILURE() << (packed ? "packed" : "JSON") << " mode read it";
    } catch (const EventFormatError& ex) {
      EXPECT_NE(std::string(ex.what()).find("a map key that is not a string"), std::string::npos) << ex.what();
    }
  }
}

// A converter that packs its args (PackedArgs) stores the bytes the JSON object would have
// stored: every kind of value, an unsigned past INT64_MAX included, in the JSON's key order.
TEST(PackedArgs, PackedAsTheJsonObjectWouldBe) {
  const json want = {{"a_nil", nullptr},
                     {"b_false", false},
                     {"c_true", true},
                     {"d_small", uint64_t(7)},
                     {"e_big", uint64_t(1) << 63},
                     {"f_negative", int64_t(-40000)},
                     {"g_grid", {uint32_t(65535), 1u, 4294967295u}},
                     {"h_text", "no slot"}};
  PackedArgs p;
  p.start(want.size());
  p.key("a_nil"), p.nil();
  p.key("b_false"), p.boolean(false);
  p.key("c_true"), p.boolean(true);
  p.key("d_small"), p.unsigned_integer(7);
  p.key("e_big"), p.unsigned_integer(uint64_t(1) << 63);
  p.key("f_negative"), p.integer(-40000);
  p.key("g_grid"), p.dim3(65535, 1, 4294967295u);
  p.key("h_text"), p.text("no slot");
  EXPECT_EQ(std::string(p.bytes()), pack_json_args(want));
  EXPECT_EQ(unpack_args(p.bytes()), want);
}
