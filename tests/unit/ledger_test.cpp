#include <fstream>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <type_traits>

#include "common/event_read_ahead.h"
#include "common/event_store.h"
#include "common/packed_args.h"
#include "harness/score/ledger_check.h"
#include "ledger/ledger.h"
#include "test_support.h"

using namespace cudatrace;

// The ledger is a process-wide singleton (it starts once per workload): one test drives
// it, the checks on the file it wrote are separate tests on synthetic ledgers.
TEST(Ledger, RecordsEveryThreadInProgramOrderAndChecksOut) {
  auto dir = testsupport::temp_dir("ledger");
  const auto path = dir / "ledger.jsonl";
  setenv(ledger::kEnvVar, path.c_str(), 1);
  char arg0[] = "unit";
  char* argv[] = {arg0, nullptr};
  ledger::start("unit", "static", 1, argv);
  ASSERT_TRUE(ledger::enabled());

  // The two threads' calls interleave in time (given times, so that they do whatever the
  // scheduler does): a's begin at base, base + 20, ...; b's at base + 10, base + 30, ...
  const int64_t base = ledger::now();
  auto work = [base](int n, int64_t offset) {
    for (int i = 0; i < n; ++i) {
      const int64_t t = base + i * 20 + offset;
      ledger::record("cudaGetDevice", t, t + 5, 0, {ledger::Arg::Int("device", i)});
    }
  };
  std::thread a(work, 100, 0), b(work, 50, 10);
  a.join();
  b.join();  // the threads are gone before finish(): their records must survive them
  // The main thread moves to device 1, whose bus id the workload learnt: its launch says so.
  ledger::device_identity(1, "0000:1A:00.0");
  ledger::set_current_device(1);
  int64_t t = ledger::now();
  ledger::record("cudaLaunchKernel", t, ledger::now(), ledger::kNoRet,
                 {ledger::Arg::Str("kernel", "k"), ledger::Arg::Dim3("grid", 2, 3, 4), ledger::Arg::Ptr("stream", nullptr)});
  ledger::record("cudaGetDeviceCount", t, ledger::now(), 0, {ledger::Arg::Int("count", 2)});
  ledger::intend("cudaGetDevice", 150);
  ledger::intend("cudaLaunchKernel", 1);
  ledger::intend("cudaGetDeviceCount", 1);
  ASSERT_TRUE(ledger::finish());

  EventStream s = read_events(path);
  ASSERT_EQ(s.events.size(), 152u);
  for (const auto& e : s.events) {
    if (e.name == "cudaGetDevice") {  // other threads: CUDA's default device, 0, of no known bus id
      EXPECT_EQ(e.device, 0);
      EXPECT_TRUE(e.device_id.empty());
    } else if (e.name == "cudaLaunchKernel") {
      EXPECT_EQ(e.device, 1);
      EXPECT_EQ(e.device_id, "0000:1a:00.0") << "in the one spelling";
    } else {
      EXPECT_FALSE(e.device.has_value()) << e.name << " concerns no device";
    }
  }
  EXPECT_EQ(s.meta.at(0).args["device_ids"]["1"], "0000:1a:00.0");
  LedgerCheck c = check_ledger(s);
  EXPECT_TRUE(c.consistent) << (c.problems.empty() ? "" : c.problems[0]);
  EXPECT_EQ(c.threads, 3);
  // Per thread, the device argument counts up: program order was kept.
  std::map<int64_t, int64_t> last;
  for (const auto& e : s.events) {
    if (e.name != "cudaGetDevice") continue;
    int64_t d = e.args["device"];
    if (last.count(e.tid)) EXPECT_EQ(d, last[e.tid] + 1);
    last[e.tid] = d;
  }
  // The threads' calls come in the order they began, not one thread after another: the
  // harness pairs each thread's calls on a worker of its own, all of them at once.
  for (size_t i = 1; i < s.events.size(); ++i) EXPECT_LE(s.events[i - 1].ts, s.events[i].ts) << "record " << i;
  EXPECT_NE(s.events[0].tid, s.events[1].tid) << "the two threads' first calls come first";
  const Event& launch = s.events[s.events.size() - 2];
  ASSERT_EQ(launch.name, "cudaLaunchKernel");
  EXPECT_FALSE(launch.ret.has_value());
  EXPECT_EQ(launch.args["grid"], nlohmann::json({2, 3, 4}));
  EXPECT_EQ(launch.args["stream"], "0x0");
}

namespace {

EventStream ledger_with(nlohmann::json header_args, std::vector<std::pair<std::string, int>> calls) {
  EventStream s;
  Event h;
  h.layer = layer::kMeta;
  h.name = "ledger";
  h.pid = 1;
  h.args = std::move(header_args);
  s.meta.push_back(h);
  int64_t ts = 100;
  for (auto& [name, ret] : calls) {
    Event e;
    e.layer = layer::kRuntime;
    e.name = name;
    e.pid = 1;
    e.tid = 1;
    e.ts = ts += 10;
    e.dur = 5;
    e.ret = ret;
    s.events.push_back(e);
  }
  return s;
}

}  // namespace

TEST(LedgerCheck, CountsMustMatchWhatWasIntended) {
  auto good = ledger_with({{"records", 2}, {"intended", {{"cudaMalloc", 2}}}}, {{"cudaMalloc", 0}, {"cudaMalloc", 0}});
  EXPECT_TRUE(check_ledger(good).consistent);

  auto short_one = ledger_with({{"records", 1}, {"intended", {{"cudaMalloc", 2}}}}, {{"cudaMalloc", 0}});
  auto c = check_ledger(short_one);
  EXPECT_FALSE(c.consistent);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_EQ(c.problems[0], "cudaMalloc: intended 2, recorded 1");

  auto extra = ledger_with({{"records", 2}, {"intended", {{"cudaMalloc", 1}}}}, {{"cudaMalloc", 0}, {"cudaFree", 0}});
  EXPECT_FALSE(check_ledger(extra).consistent);

  auto truncated = ledger_with({{"records", 3}, {"intended", {{"cudaMalloc", 2}}}}, {{"cudaMalloc", 0}, {"cudaMalloc", 0}});
  EXPECT_FALSE(check_ledger(truncated).consistent);

  EXPECT_FALSE(check_ledger(EventStream{}).consistent);  // no header at all
}

TEST(LedgerCheck, InjectedFailuresMustReturnTheirCodes) {
  nlohmann::json header = {{"records", 2},
                           {"intended", {{"cudaMalloc", 1}, {"cudaSetDevice", 1}}},
                           {"injected", {{{"step", "oom"}, {"name", "cudaMalloc"}, {"codes", {2}}},
                                         {{"step", "invalid-device"}, {"name", "cudaSetDevice"}, {"codes", {101}}}}}};
  auto right = ledger_with(header, {{"cudaMalloc", 2}, {"cudaSetDevice", 101}});
  auto c = check_ledger(right);
  EXPECT_TRUE(c.consistent);
  EXPECT_EQ(c.injected_checked, 2);

  auto wrong = ledger_with(header, {{"cudaMalloc", 2}, {"cudaSetDevice", 0}});
  c = check_ledger(wrong);
  EXPECT_FALSE(c.consistent);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems[0].find("invalid-device"), std::string::npos) << c.problems[0];
}

TEST(LedgerCheck, TaggedInjectedCallsAreFoundAmongSuccessfulOnesOfTheSameName) {
  nlohmann::json header = {{"records", 3},
                           {"intended", {{"cuMemAlloc", 3}}},
                           {"injected", {{{"step", "impossible"}, {"name", "cuMemAlloc"}, {"codes", {2}}}}}};
  auto s = ledger_with(header, {{"cuMemAlloc", 0}, {"cuMemAlloc", 2}, {"cuMemAlloc", 0}});
  s.events[1].args["step"] = "impossible";
  auto c = check_ledger(s);
  EXPECT_TRUE(c.consistent) << nlohmann::json(c.problems).dump();
  EXPECT_EQ(c.injected_checked, 1);
  s.events[1].ret = 0;
  EXPECT_FALSE(check_ledger(s).consistent);
}

namespace {

// One process's ledger file as a workload writes it (its header, then its records, all of
// pid `pid`), in the store's format or as the JSON lines of older runs.
template <class Writer>
void write_ledger(const std::filesystem::path& file, int64_t pid, EventStream s, uint64_t frame_records = 0) {
  Writer out(file);
  if constexpr (std::is_same_v<Writer, EventStoreWriter>) out.end_frame_every(frame_records);
  s.meta[0].pid = pid;
  out.write(s.meta[0]);
  for (auto& e : s.events) {
    e.pid = pid;
    out.write(e);
  }
  out.close();
}

// Every ledger of `dir`, checked, its records kept in `merged`.
LedgerCheck read_all(const std::filesystem::path& dir, EventStream& merged) {
  merged = {};
  return read_ledgers(dir, uint64_t(1) << 30, [&](const Event& e) { (e.is_meta() ? merged.meta : merged.events).push_back(e); });
}

}  // namespace

// multiproc: one ledger per process, each checked on its own, their calls merged.
TEST(LedgerCheck, EveryProcessLedgerIsReadAndCheckedOnItsOwn) {
  auto dir = testsupport::temp_dir("ledgers");
  auto write = [&](const std::string& file, int64_t pid, EventStream s) { write_ledger<EventWriter>(dir / file, pid, s); };
  const nlohmann::json header = {{"records", 1}, {"intended", {{"cudaMalloc", 1}}}};
  write("ledger.jsonl", 10, ledger_with(header, {{"cudaMalloc", 0}}));
  write("ledger.jsonl.11", 11, ledger_with(header, {{"cudaMalloc", 0}}));
  EventStream merged;
  LedgerCheck c = read_all(dir, merged);
  EXPECT_TRUE(c.consistent) << nlohmann::json(c.problems).dump();
  EXPECT_EQ(c.processes, 2);
  EXPECT_EQ(c.records, 2);
  EXPECT_EQ(merged.events.size(), 2u);
  // One process short of its intent makes the whole run inconsistent, and says which.
  write("ledger.jsonl.12", 12, ledger_with({{"records", 0}, {"intended", {{"cudaMalloc", 1}}}}, {}));
  c = read_all(dir, merged);
  EXPECT_FALSE(c.consistent);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems[0].find("ledger.jsonl.12"), std::string::npos) << c.problems[0];
}

// A ledger line nesting 200,000 levels, planted in target/ by a process of the program's
// user: the ledger is a problem named with its line, and the root harness goes on (it was
// a SIGSEGV, with no run.json left).
TEST(Ledger, DeeplyNestedLineIsAProblemNotACrash) {
  const auto dir = testsupport::temp_dir("ledger-deep");
  std::string line = R"({"v":1,"layer":"meta","name":"ledger","ts":1,"pid":1,"tid":1,"args":{"x":)";
  for (int i = 0; i < 200000; ++i) line += "[";
  for (int i = 0; i < 200000; ++i) line += "]";
  line += "}}\n";
  std::ofstream(dir / "ledger.jsonl") << line;
  EventStream merged;
  const LedgerCheck c = read_all(dir, merged);
  EXPECT_FALSE(c.consistent);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems[0].find("nested deeper than"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[0].find(":1:"), std::string::npos) << c.problems[0];
}

// What a workload writes now: the ledger in the store's format (ledger.msgpack.zst, and
// .<pid> for a second process), read as the JSON-lines ledgers of older runs are.
TEST(LedgerCheck, LedgersInTheStoreFormatAreRead) {
  auto dir = testsupport::temp_dir("ledgers-store");
  const nlohmann::json header = {{"records", 1}, {"intended", {{"cudaMalloc", 1}}}};
  for (const auto& [file, pid] : {std::pair{std::string(ledger::kFileName), 10}, {std::string(ledger::kFileName) + ".11", 11}})
    write_ledger<EventStoreWriter>(dir / file, pid, ledger_with(header, {{"cudaMalloc", 0}}));
  int64_t calls = 0;
  const LedgerCheck c = read_ledgers(dir, uint64_t(1) << 20, [&](const Event& e) { calls += !e.is_meta(); });
  EXPECT_TRUE(c.consistent) << nlohmann::json(c.problems).dump();
  EXPECT_EQ(c.processes, 2);
  EXPECT_EQ(calls, 2);
  // Past the run's bound (--max-trace-bytes), a ledger is not read, and says why.
  const LedgerCheck small = read_ledgers(dir, 16, [](const Event&) {});
  EXPECT_FALSE(small.consistent);
  ASSERT_FALSE(small.problems.empty());
  EXPECT_NE(small.problems[0].find("--max-trace-bytes"), std::string::npos) << small.problems[0];
}

// A ledger in target/ made to inflate without end (the program's user can write there): read
// up to the run's bound (or 256 times its size), then refused with the reason.
TEST(LedgerCheck, ALedgerThatInflatesFarPastItsSizeIsRefused) {
  auto dir = testsupport::temp_dir("ledger-bomb");
  {
    EventStoreWriter out(dir / ledger::kFileName, 3);
    out.end_frame_every(1);
    EventStream s = ledger_with({{"records", 2000}, {"intended", {{"cudaMalloc", 2000}}}}, {});
    out.write(s.meta[0]);
    Event e;
    e.layer = layer::kRuntime;
    e.name = std::string(size_t(1) << 20, 'x');  // 1 MiB names that compress to almost nothing
    e.ts = 10;
    e.dur = 1;
    e.pid = s.meta[0].pid;
    e.tid = 1;
    for (int i = 0; i < 2000; ++i) out.write(e);
    out.close();
  }
  const auto size = std::filesystem::file_size(dir / ledger::kFileName);
  ASSERT_LT(size * 256, uint64_t(2000) << 20) << "the file must be a bomb for this test";
  // Read in line, and by three decoders (its frames, a record each, shared among them).
  for (size_t decoders : {size_t(0), size_t(3)}) {
    EventReadAhead::force_worth_it(decoders > 0);
    EventReadAhead::force_decoders(std::max<size_t>(decoders, 1));
    int64_t seen = 0;
    const LedgerCheck c = read_ledgers(dir, uint64_t(64) << 20, [&](const Event&) { ++seen; });
    EventReadAhead::force_worth_it(std::nullopt);
    EventReadAhead::force_decoders(std::nullopt);
    EXPECT_FALSE(c.consistent) << decoders;
    ASSERT_FALSE(c.problems.empty());
    EXPECT_NE(c.problems.back().find("inflates past"), std::string::npos) << nlohmann::json(c.problems).dump();
    EXPECT_LT(seen, 2000);
  }
}

// Reading a ledger ahead on a thread of its own (machines of 4 cores or more) changes
// nothing of what the scoring gets: every record in order with its args, the same check,
// across many of the reader's batches and two processes' ledgers, one of them inconsistent.
TEST(LedgerCheck, ReadingAheadGivesWhatReadingInLineGives) {
  auto dir = testsupport::temp_dir("ledgers-ahead");
  std::vector<std::pair<std::string, int>> calls;
  for (int i = 0; i < 12000; ++i) calls.push_back({i % 3 ? "cudaGetDevice" : "cudaMalloc", i % 7 ? 0 : 2});
  EventStream big = ledger_with({{"records", 12000}, {"intended", {{"cudaGetDevice", 8000}, {"cudaMalloc", 4000}}}}, calls);
  for (size_t i = 0; i < big.events.size(); ++i) {
    big.events[i].tid = 1 + int64_t(i % 5);
    big.events[i].args = {{"i", int64_t(i)}, {"ptr", "0x7f00" + std::to_string(i)}};
  }
  // In frames of 1,000 records, as ledger.cpp cuts them (of 16,384), so that several decoders share them.
  write_ledger<EventStoreWriter>(dir / ledger::kFileName, 10, big, 1000);
  write_ledger<EventStoreWriter>(dir / (std::string(ledger::kFileName) + ".11"), 11,
                                 ledger_with({{"records", 2}, {"intended", {{"cudaFree", 1}}}}, {{"cudaFree", 0}}));
  auto read = [&](bool ahead, std::vector<std::string>& seen, size_t decoders = 1) {
    EventReadAhead::force_worth_it(ahead);
    EventReadAhead::force_decoders(decoders);
    seen.clear();
    const LedgerCheck c = read_ledgers(dir, uint64_t(1) << 30, [&](const Event& e, std::string_view packed) {
      seen.push_back(e.layer + " " + e.name + " " + std::to_string(e.ts) + " " + std::to_string(e.tid) + " " +
                     std::to_string(e.ret.value_or(-1)) + " " + (e.is_meta() ? e.args.dump() : unpack_args(packed).dump()));
    });
    EventReadAhead::force_worth_it(std::nullopt);
    EventReadAhead::force_decoders(std::nullopt);
    return to_json(c);
  };
  std::vector<std::string> in_line, ahead, decoded_apart;
  const nlohmann::json checked_in_line = read(false, in_line), checked_ahead = read(true, ahead);
  EXPECT_EQ(read(true, decoded_apart, 3), checked_in_line) << "the frames on three decoders";
  EXPECT_EQ(decoded_apart, in_line);
  EXPECT_EQ(in_line.size(), 12000u + 1 + 1 + 1);  // two headers, their calls
  EXPECT_EQ(checked_ahead, checked_in_line);
  EXPECT_FALSE(checked_ahead["consistent"].get<bool>()) << "the second ledger is short of its header's records";
  EXPECT_EQ(checked_ahead["records"], 12001);
  ASSERT_EQ(ahead.size(), in_line.size());
  for (size_t i = 0; i < ahead.size(); ++i) ASSERT_EQ(ahead[i], in_line[i]) << "record " << i;
}
