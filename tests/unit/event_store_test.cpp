// The event store: what is written comes back field for field, in order, read in a stream;
// a damaged, cut, bombed or hostile file is an error naming the record, never a crash.
#include <gtest/gtest.h>
#include <zstd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <random>

#include "common/event_read_ahead.h"
#include "common/event_store.h"
#include "test_support.h"
#include "tracers/call_args.h"

using namespace cudatrace;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

Event sample(int64_t i) {
  Event e;
  e.layer = i % 3 == 0 ? layer::kRuntime : i % 3 == 1 ? layer::kDriver : "custom-layer";
  e.name = i % 2 ? "cudaLaunchKernel" : "cuMemAlloc_v2";
  e.ts = 1'700'000'000'000 + i * 1000 - (i % 5) * 3000;  // not monotonic: deltas go negative
  if (i % 4) e.dur = 100 + i;
  e.pid = 4242;
  e.tid = 4242 + i % 3;
  if (i % 7) e.ret = i % 11 == 0 ? -1 : 0;
  if (i % 2)
    e.args = {{"grid", {1, 2, 3}}, {"kernel", "k\xff\x01"}, {"ptr", "0x7f00deadbeef"}, {"big", UINT64_MAX},
              {"neg", -123456789012}, {"f", 0.5}, {"ok", true}, {"none", nullptr}, {"nested", {{"a", {{"b", 1}}}}}};
  if (i % 6 == 0) e.corr = uint64_t(i) * 77;
  if (i % 5 == 0) e.device = i % 2;
  if (i % 10 == 0) e.device_id = "0000:18:00.0";
  return e;
}

void expect_same(const Event& a, const Event& b) {
  EXPECT_EQ(a.layer, b.layer);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.ts, b.ts);
  EXPECT_EQ(a.dur, b.dur);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.tid, b.tid);
  EXPECT_EQ(a.ret, b.ret);
  EXPECT_EQ(a.args, b.args) << a.args.dump() << " vs " << b.args.dump();
  EXPECT_EQ(a.corr, b.corr);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.device_id, b.device_id);
}

std::string compress(const std::string& plain) {
  std::string out(ZSTD_compressBound(plain.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), plain.data(), plain.size(), 1));
  return out;
}

// A store whose header is right and whose one record is `record` (MessagePack bytes).
fs::path store_with(const fs::path& dir, const std::string& record) {
  std::string plain = "\x83\xa6" "format\xb0" "cudatrace-events\xa1v\x01\xa6" "fields\x90";
  plain += record;
  const fs::path p = dir / "hostile.msgpack.zst";
  std::ofstream(p, std::ios::binary) << compress(plain);
  return p;
}

// Reads to the end (or to the error a test expects).
void read_all(EventReader& r) {
  Event e;
  while (r.next(e)) {
  }
}

}  // namespace

TEST(EventStore, WhatIsWrittenComesBackFieldForFieldInOrder) {
  const fs::path dir = testsupport::temp_dir("store");
  const fs::path p = dir / kEventsFile;
  EventStoreWriter w(p);
  for (int64_t i = 0; i < 20000; ++i) w.write(sample(i));
  w.close();
  EXPECT_TRUE(is_event_store(p));
  EventReader r(p);
  EXPECT_TRUE(r.is_store());
  Event e;
  int64_t i = 0;
  while (r.next(e)) {
    SCOPED_TRACE(i);
    expect_same(e, sample(i));
    if (HasFailure()) break;
    ++i;
  }
  EXPECT_EQ(i, 20000);
  EXPECT_EQ(read_events(p).events.size(), 20000u) << "read_events reads the store too";

  // A reader that only counts steps over the args of the layers it names; the rest is whole.
  EventReader counting(p);
  counting.skip_args([](const std::string& l) { return l == layer::kDriver; });
  for (i = 0; counting.next(e); ++i) {
    SCOPED_TRACE(i);
    Event want = sample(i);
    if (want.layer == layer::kDriver) want.args = json::object();
    expect_same(e, want);
    if (HasFailure()) break;
  }
  EXPECT_EQ(i, 20000);
}

TEST(EventStore, ACheapCallCostsFewBytes) {
  const fs::path dir = testsupport::temp_dir("store-size");
  const fs::path p = dir / kEventsFile;
  EventStoreWriter w(p);
  std::mt19937 rng(1);
  int64_t ts = 1'700'000'000'000;
  for (int i = 0; i < 200000; ++i) {
    Event e;
    e.layer = layer::kRuntime;
    e.name = "cudaGetDevice";
    ts += 40 + int64_t(rng() % 30);
    e.ts = ts;
    e.dur = 20 + int64_t(rng() % 15);
    e.pid = 1234;
    e.tid = 1234 + i % 8;
    e.ret = 0;
    e.device = 0;
    w.write(e);
  }
  w.close();
  EXPECT_LT(double(fs::file_size(p)) / 200000, 8.0) << "bytes per event";
}

TEST(EventStore, JsonLinesAreReadThroughTheSameReader) {
  const fs::path dir = testsupport::temp_dir("store-jsonl");
  const fs::path p = dir / "events.jsonl";
  std::ofstream(p) << R"({"v":1,"layer":"runtime","name":"cudaMalloc","ts":5,"pid":1,"tid":2,"args":{}})" "\n";
  EventReader r(p);
  EXPECT_FALSE(r.is_store());
  Event e;
  ASSERT_TRUE(r.next(e));
  EXPECT_EQ(e.name, "cudaMalloc");
  EXPECT_FALSE(r.next(e));
  EXPECT_EQ(events_file_of(dir), p) << "an older run's events.jsonl is still found";
}

TEST(EventStore, ACutFileIsAnErrorNotASilentEnd) {
  const fs::path dir = testsupport::temp_dir("store-cut");
  const fs::path p = dir / kEventsFile;
  EventStoreWriter w(p);
  for (int64_t i = 0; i < 50000; ++i) w.write(sample(i));
  w.close();
  fs::resize_file(p, fs::file_size(p) / 2);
  EventReader r(p);
  EXPECT_THROW(read_all(r), EventFormatError);
}

TEST(EventStore, HostileRecordsAreRefusedWithTheirRecordNumber) {
  const fs::path dir = testsupport::temp_dir("store-hostile");
  const auto reject = [&](const std::string& record, const std::string& why) {
    EventReader r(store_with(dir, record));
    try {
      read_all(r);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const EventFormatError& ex) {
      EXPECT_NE(std::string(ex.what()).find("record 1"), std::string::npos) << ex.what();
    }
    fs::remove(dir / "hostile.msgpack.zst");
  };
  // args nested 100000 deep: refused at the depth bound, never recursed into, whether the
  // args are read or stepped over.
  std::string deep = "\x9b\x00\xa1k\x00\xc0\x01\x01\xc0";
  for (int i = 0; i < 100000; ++i) deep += "\x81\xa1x";
  deep += "\xc0";
  reject(deep, "deep nesting");
  {
    EventReader r(store_with(dir, deep));
    r.skip_args([](const std::string&) { return true; });
    EXPECT_THROW(read_all(r), EventFormatError) << "stepped over, still bounded";
    fs::remove(dir / "hostile.msgpack.zst");
    EventReader big(store_with(dir, std::string("\x9b\x00\xa1k\x00\xc0\x01\x01\xc0\xdf\xff\xff\xff\xff", 14)));
    big.skip_args([](const std::string&) { return true; });
    EXPECT_THROW(read_all(big), EventFormatError) << "a huge map, stepped over";
    fs::remove(dir / "hostile.msgpack.zst");
  }
  // A string that claims 4 GiB.
  reject(std::string("\x9b\x00\xdb\xff\xff\xff\xff", 7), "a 4 GiB string");
  // A map that claims 2^32-1 entries.
  reject(std::string("\x9b\x00\xa1k\x00\xc0\x01\x01\xc0\xdf\xff\xff\xff\xff", 14), "a huge map");
  // Not an event array.
  reject("\x01", "a bare integer");
  // ext types have no place in an event.
  reject(std::string("\x9b\x00\xa1k\xd4\x01\x00", 7), "an ext value");
}

// A JSON line (a ledger, an older events.jsonl) nested 200,000 deep, planted by the
// program: an error naming the line, never a crash of the root harness (a parse, a copy or
// a destruction that recursed once per level overflowed the stack).
TEST(EventStore, DeepJsonLinesAreRefusedNotRecursedInto) {
  const fs::path dir = testsupport::temp_dir("store-deep-jsonl");
  for (const char* open_close : {"[]", "{}"}) {
    const fs::path p = dir / (std::string("deep") + open_close[0] + ".jsonl");
    std::string line = R"({"v":1,"layer":"runtime","name":"k","ts":1,"pid":1,"tid":1,"args":{"x":)";
    for (int i = 0; i < 200000; ++i) line += open_close[0] == '[' ? "[" : "{\"a\":";
    line += "1";
    for (int i = 0; i < 200000; ++i) line += open_close[1];
    line += "}}\n";
    std::ofstream(p) << line;
    EventReader r(p);
    try {
      read_all(r);
      ADD_FAILURE() << "accepted 200,000 levels";
    } catch (const EventFormatError& ex) {
      EXPECT_NE(std::string(ex.what()).find(":1:"), std::string::npos) << ex.what();
      EXPECT_NE(std::string(ex.what()).find("deeper than"), std::string::npos) << ex.what();
    }
  }
}

TEST(EventStore, AZstdBombStopsAtTheInflatedBound) {
  const fs::path dir = testsupport::temp_dir("store-bomb");
  const fs::path p = dir / kEventsFile;
  EventStoreWriter w(p);
  for (int64_t i = 0; i < 100000; ++i) w.write(sample(i));
  w.close();
  StoreLimits limits;
  limits.max_inflated_bytes = 1 << 20;
  EventReader r(p, limits);
  EXPECT_THROW(read_all(r), EventFormatError);
}

TEST(EventStore, TheWriterNeverFollowsALinkNorOverwrites) {
  const fs::path dir = testsupport::temp_dir("store-link");
  std::ofstream(dir / "victim") << "keep";
  fs::create_symlink(dir / "victim", dir / kEventsFile);
  EXPECT_THROW(EventStoreWriter w(dir / kEventsFile), std::runtime_error);
  std::ifstream f(dir / "victim");
  std::string s;
  f >> s;
  EXPECT_EQ(s, "keep");
}

// A converter's packed args (pack_args, no JSON) read back as the JSON ones (decode_args)
// for every call hooks.def lays out, kernel names, pointers, dim3 and memcpy kinds alike.
TEST(EventStore, PackedArgsReadBackAsTheirJson) {
  const fs::path dir = testsupport::temp_dir("store-packed");
  const KernelNames kernels = {{0x4242, "vecAdd(float*, float const*, int)"}, {0x77, std::string(300, 'k')}};
  std::mt19937_64 rng(7);
  std::vector<json> want;
  {
    EventStoreWriter w(dir / kEventsFile);
    PackedArgs packed;
    for (const auto& call : call_table())
      for (int round = 0; round < 4; ++round) {
        uint64_t slots[kMaxArgSlots];
        for (auto& v : slots) v = round == 0 ? 0x4242 : round == 1 ? 0x77 : round == 2 ? rng() : rng() % 6;
        Event e;
        e.layer = call.layer;
        e.name = call.name;
        e.pid = e.tid = 1;
        pack_args(call, slots, kernels, packed);
        w.write(e, packed);
        want.push_back(decode_args(call, slots, kernels));
      }
    w.close();
  }
  EventReader r(dir / kEventsFile);
  Event e;
  size_t i = 0;
  for (; r.next(e); ++i) {
    ASSERT_LT(i, want.size());
    EXPECT_EQ(e.args, want[i]) << e.name << ": " << e.args.dump() << " vs " << want[i].dump();
  }
  EXPECT_EQ(i, want.size());
}

// How a file is written and read ahead: its frames (0: one for the whole file) and the
// reader's batches, ring and decoders (several: the frames decoded side by side).
struct AheadCase {
  uint64_t frame_records;
  size_t batch, depth, decoders;
};
std::string describe(const AheadCase& c) {
  return "frames of " + std::to_string(c.frame_records) + ", batch " + std::to_string(c.batch) + ", depth " +
         std::to_string(c.depth) + ", decoders " + std::to_string(c.decoders);
}
const AheadCase kAheadCases[] = {
    {0, 7, 2, 1},      // one reading thread, as before frames
    {100, 7, 2, 3},    // frames larger than a decoder holds (kHeld batches of 7): handed out as decoded
    {5, 7, 2, 3},      // frames smaller than a batch, many of them
    {0, 64, 4, 3},     // one frame: one decoder reads it, the others find nothing
    {1000, 64, 4, 4},  // a decoder's share decoded whole before its turn
};

// The records a reader gives before its error, failing the test if none comes.
int64_t records_before_the_error(EventReadAhead& ahead) {
  std::string_view packed;
  int64_t n = 0;
  EXPECT_THROW(
      {
        while (ahead.next(packed)) ++n;
      },
      EventFormatError);
  return n;
}

void write_samples(const fs::path& p, int64_t n, uint64_t frame_records) {
  EventStoreWriter w(p);
  w.end_frame_every(frame_records);
  for (int64_t i = 0; i < n; ++i) w.write(sample(i));
  w.close();
}

// Reading ahead changes nothing of what comes back: every record, in order, with its args
// as the store holds them and its timestamp whole (a frame's deltas follow the frame before),
// across batch boundaries, frames and a ring that fills; on_read sees them in that order.
TEST(EventReadAhead, GivesWhatTheReaderGivesInOrder) {
  for (const AheadCase& c : kAheadCases) {
    SCOPED_TRACE(describe(c));
    const fs::path dir = testsupport::temp_dir("store-ahead");
    const fs::path p = dir / kEventsFile;
    write_samples(p, 5000, c.frame_records);
    EventReader direct(p);
    std::vector<int64_t> read_beside;
    EventReadAhead ahead(p, StoreLimits{}, [&](const Event& e, std::string_view) { read_beside.push_back(e.ts); },
                         c.batch, c.depth, c.decoders);
    Event a;
    std::string pa;
    std::string_view pb;
    std::vector<int64_t> want;
    while (direct.next(a, &pa)) {
      SCOPED_TRACE(want.size());
      const Event* b = ahead.next(pb);
      ASSERT_NE(b, nullptr);
      expect_same(a, *b);
      ASSERT_EQ(pa, pb);
      want.push_back(a.ts);
    }
    EXPECT_EQ(want.size(), 5000u);
    EXPECT_EQ(ahead.next(pb), nullptr) << "the end comes once the file's records have";
    EXPECT_EQ(read_beside, want) << "on_read saw each record, in file order, and all of them by the end";
    EXPECT_EQ(ahead.next(pb), nullptr);
  }
}

// The frames cost some compression, not the records: the same events either way.
TEST(EventReadAhead, AFileInFramesIsOneStreamToAPlainReader) {
  const fs::path dir = testsupport::temp_dir("store-frames");
  write_samples(dir / "one.msgpack.zst", 3000, 0);
  write_samples(dir / "framed.msgpack.zst", 3000, 64);
  EventReader one(dir / "one.msgpack.zst"), framed(dir / "framed.msgpack.zst");
  Event a, b;
  int64_t n = 0;
  while (one.next(a)) {
    ASSERT_TRUE(framed.next(b));
    expect_same(a, b);
    ++n;
  }
  EXPECT_FALSE(framed.next(b));
  EXPECT_EQ(n, 3000);
  EXPECT_GT(fs::file_size(dir / "framed.msgpack.zst"), fs::file_size(dir / "one.msgpack.zst"));
}

// A damaged file's error reaches the caller after the records read before it, as from the
// reader, whether the cut falls in the one frame or in one of many; a reader dropped
// half-way stops its threads (the test would hang otherwise).
TEST(EventReadAhead, AnErrorComesAfterTheRecordsBeforeIt) {
  for (const AheadCase& c : kAheadCases) {
    SCOPED_TRACE(describe(c));
    const fs::path dir = testsupport::temp_dir("store-ahead-cut");
    const fs::path p = dir / kEventsFile;
    write_samples(p, 50000, c.frame_records);
    fs::resize_file(p, fs::file_size(p) / 2);
    int64_t direct_read = 0;
    {
      EventReader r(p);
      Event e;
      try {
        while (r.next(e)) ++direct_read;
      } catch (const EventFormatError&) {
      }
    }
    ASSERT_GT(direct_read, 0);
    EventReadAhead ahead(p, StoreLimits{}, nullptr, c.batch, c.depth, c.decoders);
    std::string_view packed;
    const int64_t n = records_before_the_error(ahead);
    EXPECT_EQ(n, direct_read) << "every record before the damage, and not one more";
    EXPECT_EQ(ahead.next(packed), nullptr) << "after its error the reader is at its end";

    EventReadAhead dropped(p, StoreLimits{}, nullptr, c.batch, c.depth, c.decoders);
    ASSERT_NE(dropped.next(packed), nullptr);
  }
}

// Bytes damaged inside a later frame: the frames before it come whole, then the error.
TEST(EventReadAhead, ADamagedFrameEndsTheReadingAfterTheFramesBeforeIt) {
  const fs::path dir = testsupport::temp_dir("store-ahead-damaged");
  const fs::path p = dir / kEventsFile;
  write_samples(p, 20000, 1000);
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = std::streamoff(fs::file_size(p) * 3 / 4);
    f.seekg(at);
    char c = 0;
    f.read(&c, 1);
    f.seekp(at);
    c = char(c ^ 0x5a);
    f.write(&c, 1);
  }
  EventReadAhead ahead(p, StoreLimits{}, nullptr, 64, 4, 3);
  const int64_t n = records_before_the_error(ahead);
  EXPECT_GE(n, 10000) << "the frames before the damage";
  EXPECT_LT(n, 20000);
}

// A file that is not a store (JSON lines) is read whole by one decoder, as EventReader reads it.
TEST(EventReadAhead, JsonLinesComeThroughSeveralDecodersAlike) {
  const fs::path dir = testsupport::temp_dir("store-ahead-jsonl");
  const fs::path p = dir / "events.jsonl";
  {
    EventWriter w(p);
    for (int64_t i = 0; i < 300; ++i) w.write(sample(i));
  }
  EventReader direct(p);
  EventReadAhead ahead(p, StoreLimits{}, nullptr, 16, 2, 3);
  Event a;
  std::string pa;
  std::string_view pb;
  int64_t n = 0;
  while (direct.next(a, &pa)) {
    const Event* b = ahead.next(pb);
    ASSERT_NE(b, nullptr);
    expect_same(a, *b);
    EXPECT_EQ(pa, pb);
    ++n;
  }
  EXPECT_EQ(n, 300);
  EXPECT_EQ(ahead.next(pb), nullptr);
}

// on_read sees every record next() hands out, those before a reader's error included (the
// decoders once skipped the whole batch that carried the error).
TEST(EventReadAhead, OnReadSeesEveryRecordBeforeAnError) {
  const fs::path dir = testsupport::temp_dir("store-ahead-onread");
  const fs::path p = dir / kEventsFile;
  {
    EventStoreWriter w(p);
    w.end_frame_every(1000);
    for (int64_t i = 0; i < 3000; ++i) {
      Event e = sample(i);
      if (i == 1700) e.name = std::string(300, 'x');  // past the reader's bound below
      w.write(e);
    }
    w.close();
  }
  StoreLimits limits;
  limits.max_string = 256;
  for (size_t decoders : {size_t(1), size_t(3)}) {
    int64_t handed = 0, shown = 0;
    EventReadAhead ahead(p, limits, [&](const Event&, std::string_view) { ++shown; }, 64, 4, decoders);
    handed = records_before_the_error(ahead);
    EXPECT_EQ(handed, 1700) << decoders << " decoder(s)";
    EXPECT_EQ(shown, handed) << decoders << " decoder(s)";
  }
}

// The bound on what a file inflates to holds for the decoders together: each decoder once
// had the whole of what was left, so four read a file that one refused.
TEST(EventReadAhead, SeveralDecodersKeepTheInflationBound) {
  const fs::path dir = testsupport::temp_dir("store-ahead-inflate");
  const fs::path p = dir / kEventsFile;
  write_samples(p, 8000, 2000);
  uint64_t total = 0;
  {
    EventReader r(p);
    Event e;
    while (r.next(e)) {
    }
    total = r.inflated();
  }
  StoreLimits limits;
  limits.max_inflated_bytes = total / 4 + total / 100;  // a frame and a little more
  for (size_t decoders : {size_t(1), size_t(4)}) {
    EventReadAhead ahead(p, limits, nullptr, 256, 4, decoders);
    std::string_view packed;
    int64_t n = 0;
    try {
      while (ahead.next(packed)) ++n;
      ADD_FAILURE() << decoders << " decoder(s) read all " << n << " records, past the bound";
    } catch (const EventFormatError& e) {
      EXPECT_NE(std::string(e.what()).find("inflates past the " + std::to_string(limits.max_inflated_bytes)),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(n, 8000 / 4 * 2) << decoders << " decoder(s)";
  }
}

// A reader dropped early stops its decoders at the frames they hold: they once went through
// the whole rest of the file before the destructor returned.
TEST(EventReadAhead, ADroppedReaderDecodesNoMoreFrames) {
  const fs::path dir = testsupport::temp_dir("store-ahead-drop");
  const fs::path p = dir / kEventsFile;
  write_samples(p, 400000, 1000);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  {
    EventReadAhead whole(p, StoreLimits{}, nullptr, 256, 4, 2);
    std::string_view packed;
    while (whole.next(packed)) {
    }
  }
  const double full = std::chrono::duration<double>(clock::now() - t0).count();
  auto dropped = std::make_unique<EventReadAhead>(p, StoreLimits{}, nullptr, 256, 4, 2);
  std::string_view packed;
  for (int i = 0; i < 10; ++i) ASSERT_NE(dropped->next(packed), nullptr);
  const auto t1 = clock::now();
  dropped.reset();
  const double stopping = std::chrono::duration<double>(clock::now() - t1).count();
  EXPECT_LT(stopping, full / 4) << "stopping took " << stopping << " s, reading the whole file " << full << " s";
}

TEST(EventReadAhead, AFileThatCannotBeOpenedIsAnErrorOfNext) {
  const fs::path dir = testsupport::temp_dir("store-ahead-none");
  for (size_t decoders : {size_t(1), size_t(3)}) {
    EventReadAhead ahead(dir / "absent.msgpack.zst", StoreLimits{}, nullptr, 2048, 4, decoders);
    std::string_view packed;
    EXPECT_THROW(ahead.next(packed), std::exception) << decoders << " decoder(s)";
  }
}
