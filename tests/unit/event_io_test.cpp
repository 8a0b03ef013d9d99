#include <gtest/gtest.h>

#include <fstream>

#include "common/event_io.h"
#include "test_support.h"

using namespace cudatrace;

namespace {

Event sample() {
  Event e;
  e.layer = layer::kRuntime;
  e.name = "cudaMemcpy";
  e.ts = 123456789;
  e.dur = 42;
  e.pid = 10;
  e.tid = 11;
  e.ret = 0;
  e.args = {{"bytes", 4096}, {"kind", "HtoD"}, {"grid", {1, 2, 3}}};
  e.corr = 17;
  e.device = 1;
  e.device_id = "0000:1a:00.0";
  return e;
}

}  // namespace

TEST(EventIo, RoundTripKeepsEveryField) {
  auto dir = testsupport::temp_dir("eventio");
  {
    EventWriter w(dir / "e.jsonl");
    w.write(sample());
    Event minimal;  // no dur, ret or corr: they must stay absent, not become 0
    minimal.layer = layer::kDriver;
    minimal.name = "cuLaunchKernel";
    minimal.ts = 5;
    minimal.pid = minimal.tid = 1;
    w.write(minimal);
    w.close();
  }
  EventStream s = read_events(dir / "e.jsonl");
  ASSERT_EQ(s.events.size(), 2u);
  const Event& a = s.events[0];
  EXPECT_EQ(a.name, "cudaMemcpy");
  EXPECT_EQ(a.ts, 123456789);
  EXPECT_EQ(a.dur, 42);
  EXPECT_EQ(a.ret, 0);
  EXPECT_EQ(a.corr, 17u);
  EXPECT_EQ(a.args["kind"], "HtoD");
  EXPECT_EQ(a.args["grid"], nlohmann::json({1, 2, 3}));
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.device_id, "0000:1a:00.0");
  const Event& b = s.events[1];
  EXPECT_FALSE(b.dur.has_value());
  EXPECT_FALSE(b.ret.has_value());
  EXPECT_FALSE(b.corr.has_value());
  EXPECT_FALSE(b.device.has_value()) << "a device not known stays absent, never 0";
  EXPECT_TRUE(b.device_id.empty());
}

// The line EventWriter writes for sample(), as it is on disk.
std::string sample_as_written() {
  auto dir = testsupport::temp_dir("eventio");
  {
    EventWriter w(dir / "e.jsonl");
    w.write(sample());
    w.close();
  }
  std::ifstream in(dir / "e.jsonl");
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(EventIo, VersionFieldComesFirst) {
  const std::string line = sample_as_written();
  EXPECT_EQ(line.rfind("{\"v\":1,", 0), 0u) << line;
}

// The schema file in the repo and the writer must agree: every required field written,
// nothing written that the schema does not describe, layers from the schema's enum.
TEST(EventIo, WriterFollowsTheSchemaFile) {
  std::ifstream f(CUDATRACE_SCHEMA_FILE);
  ASSERT_TRUE(f) << CUDATRACE_SCHEMA_FILE;
  nlohmann::json schema = nlohmann::json::parse(f);
  nlohmann::json written = nlohmann::json::parse(sample_as_written());  // what the writer really wrote
  for (const auto& req : schema["required"]) EXPECT_TRUE(written.contains(req.get<std::string>())) << req;
  for (const auto& [key, v] : written.items()) EXPECT_TRUE(schema["properties"].contains(key)) << key;
  for (const char* l : {layer::kRuntime, layer::kDriver, layer::kDevice, layer::kGpuActivity, layer::kSyscall, layer::kMeta})
    EXPECT_NE(std::find(schema["properties"]["layer"]["enum"].begin(), schema["properties"]["layer"]["enum"].end(), l),
              schema["properties"]["layer"]["enum"].end())
        << l;
}

TEST(EventIo, StringsAreEscaped) {
  auto dir = testsupport::temp_dir("eventio");
  Event e = sample();
  e.name = "odd \"name\"\n";
  e.args = {{"text", "a\\b \"c\""}};
  {
    EventWriter w(dir / "e.jsonl");
    w.write(e);
    w.close();
  }
  auto back = read_events(dir / "e.jsonl").events.at(0);
  EXPECT_EQ(back.name, e.name);
  EXPECT_EQ(back.args, e.args);
}

TEST(EventIo, BadLinesNameFileLineAndReason) {
  auto dir = testsupport::temp_dir("eventio");
  auto check = [&](const std::string& content, const std::string& expect) {
    std::ofstream(dir / "bad.jsonl") << content;
    try {
      read_events(dir / "bad.jsonl");
      FAIL() << "accepted: " << content;
    } catch (const EventFormatError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  check("{\"v\":1,\"layer\":\"runtime\",\"name\":\"x\",\"ts\":1,\"pid\":1,\"tid\":1}\nnot json\n", "bad.jsonl:2: not JSON");
  check("{\"v\":2,\"layer\":\"runtime\",\"name\":\"x\",\"ts\":1,\"pid\":1,\"tid\":1}\n", "unsupported record version 2");
  check("{\"v\":1,\"layer\":\"runtime\",\"ts\":1,\"pid\":1,\"tid\":1}\n", "missing field \"name\"");
  check("{\"v\":1,\"layer\":\"runtime\",\"name\":\"x\",\"ts\":\"soon\",\"pid\":1,\"tid\":1}\n", "\"ts\" has the wrong type");
}

TEST(EventIo, MetaRecordsAreKeptApart) {
  auto dir = testsupport::temp_dir("eventio");
  EventWriter w(dir / "e.jsonl");
  Event m = sample();
  m.layer = layer::kMeta;
  m.name = "ledger";
  w.write(m);
  w.write(sample());
  w.close();
  EventStream s = read_events(dir / "e.jsonl");
  EXPECT_EQ(s.meta.size(), 1u);
  EXPECT_EQ(s.events.size(), 1u);
}

TEST(EventIo, UnwritableFileIsAnError) {
  EXPECT_THROW(EventWriter("/nonexistent-dir/x.jsonl"), std::runtime_error);
}
