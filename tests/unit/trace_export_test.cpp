#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/event_store.h"
#include "common/event_io.h"
#include "harness/out/otlp_export.h"
#include "harness/out/trace_export.h"
#include "test_support.h"

using namespace cudatrace;

TEST(TraceExport, EventsAndLedgerSideBySideInMicroseconds) {
  auto dir = testsupport::temp_dir("trace");
  {
    cudatrace::EventStoreWriter ev(dir / cudatrace::kEventsFile);
    Event e;
    e.layer = "runtime";
    e.name = "__cudaLaunchKernel";
    e.ts = 2'000'000;
    e.dur = 1'500;
    e.pid = 7;
    e.tid = 8;
    e.ret = 0;
    ev.write(e);
    Event open_ended = e;  // exit never seen
    open_ended.dur.reset();
    ev.write(open_ended);
    ev.close();
    EventWriter led(dir / "ledger.jsonl");
    e.name = "cudaLaunchKernel";
    e.ts = 1'999'000;
    e.dur = 3'000;
    led.write(e);
    led.close();
  }
  EXPECT_EQ(export_trace(dir), 5u);  // 3 slices + 2 process names
  std::ifstream f(dir / "trace.json");
  auto j = nlohmann::json::parse(f);
  const auto& t = j["traceEvents"];
  EXPECT_EQ(t[0]["ph"], "X");
  EXPECT_DOUBLE_EQ(t[0]["ts"].get<double>(), 2000.0);
  EXPECT_DOUBLE_EQ(t[0]["dur"].get<double>(), 1.5);
  EXPECT_EQ(t[0]["args"]["ret"], 0);
  EXPECT_EQ(t[1]["ph"], "i");
  EXPECT_EQ(t[2]["cat"], "ledger");
  EXPECT_NE(t[2]["pid"], t[0]["pid"]) << "the ledger is its own process on the timeline";
  EXPECT_EQ(t[2]["tid"], 8);
}

TEST(TraceExport, HarnessFlagWritesTheFileOrSaysWhy) {
  auto dir = testsupport::temp_dir("trace");
  std::ofstream(dir / "run.json") << "{}\n";  // what makes a folder a run folder
  auto r = testsupport::run_command(std::string(HARNESS_PATH) + " --export-trace " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "trace.json"));
  r = testsupport::run_command(std::string(HARNESS_PATH) + " --export-trace /no/such/run");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "harness: no such run folder: /no/such/run\n");
}

// Root exports a folder the user owns (hostile input, round 2): a target/ the user made a
// link to a root-only folder is not followed, and neither is the run folder itself when it
// is a link; runs/ as a link is refused by the OTLP export's walk.
TEST(TraceExport, LinksBelowTheFolderGivenAreNotFollowed) {
  auto dir = testsupport::temp_dir("trace-links");
  const auto secret = testsupport::temp_dir("trace-links-secret");
  {
    EventWriter led(secret / "ledger.jsonl");
    Event e;
    e.layer = "runtime";
    e.name = "rootOnlySecretCall";
    e.ts = 1;
    e.pid = 1;
    e.tid = 1;
    led.write(e);
    led.close();
  }
  std::filesystem::create_directory_symlink(secret, dir / "target");
  export_trace(dir);
  std::ifstream f(dir / "trace.json");
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(text.str().find("rootOnlySecretCall"), std::string::npos) << text.str();
  EXPECT_TRUE(nlohmann::json::parse(text.str(), nullptr, false).is_object()) << "still a whole trace";
  std::filesystem::create_directory_symlink(dir, secret / "run-link");
  EXPECT_THROW(export_trace(secret / "run-link"), std::runtime_error);

  auto results = testsupport::temp_dir("otlp-links");
  std::filesystem::create_directory_symlink(secret, results / "runs");
  try {
    (void)otlp_run_folders(results);
    ADD_FAILURE() << "followed runs/ through a link";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is a link"), std::string::npos) << e.what();
  }
}
