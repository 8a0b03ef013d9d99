// Hostile input, round 2, item 4 (#56): root exports a results folder the user owns
// (--export-otlp, --export-trace, --export-jsonl). Whatever the user made of the names below
// the folder given (runs/, a combo, target/ swapped for a link to a root-only folder, a file
// hard-linked to a root-only one), the export refuses in one line or skips that folder, and
// nothing of the root-only folder reaches any output: the files written and the console.
// The race itself (a name swapped between a check and an open) is made deterministic in
// tests/unit/held_dir_test.cpp; here are its outcomes, through the real harness.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "harness_run.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// In every file of the root-only folder: it must appear in no output.
constexpr const char* kMarker = "ROOTONLYMARKER";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A run folder: run.json, events.jsonl (one call named <word>Call) and target/ledger.jsonl
// (one named <word>Ledger): the forms of an older run, which the exporters still read.
void write_run(const fs::path& dir, const std::string& word) {
  fs::create_directories(dir / "target");
  std::ofstream(dir / "run.json") << json{{"method", "none"}, {"ok", true}, {"argv", {word}}}.dump();
  cudatrace::Event e;
  e.layer = "runtime";
  e.ts = 1000;
  e.dur = 10;
  e.pid = 1;
  e.tid = 1;
  for (const auto& [file, name] : {std::pair{dir / "events.jsonl", word + "Call"},
                                   std::pair{dir / "target" / ::ledger::kOldFileName, word + "Ledger"}}) {
    cudatrace::EventWriter out(file);
    e.name = name;
    out.write(e);
    out.close();
  }
}

// The user's results folder (results/runs/a.r1) and a root-only one of the same shape
// (secret/runs/s.r1, the folder 0700), every file of which holds kMarker.
struct Folders {
  fs::path results = testsupport::temp_dir("export-user") / "results";
  fs::path secret = testsupport::temp_dir("export-root") / "secret";
  fs::path out = testsupport::temp_dir("export-out");
  Folders() {
    write_run(results / "runs" / "a.r1", "user");
    std::ofstream(results / "manifest.json") << json{{"run_id", "user-run"}}.dump();
    write_run(secret / "runs" / "s.r1", kMarker);
    std::ofstream(secret / "manifest.json") << json{{"run_id", kMarker}}.dump();
    chmod(secret.c_str(), 0700);
  }
  fs::path run() const { return results / "runs" / "a.r1"; }
  fs::path secret_run() const { return secret / "runs" / "s.r1"; }
};

testsupport::CommandResult harness(const std::string& args) {
  return testsupport::run_command(std::string(HARNESS_PATH) + " " + args);
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// A refusal: exit 2, one line that says `why`, and the marker nowhere.
void expect_refused(const testsupport::CommandResult& r, const std::string& why, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << what << ": " << r.output;
  EXPECT_EQ(lines(r.output), 1u) << what << ": " << r.output;
  EXPECT_NE(r.output.find(why), std::string::npos) << what << ": " << r.output;
  EXPECT_EQ(r.output.find(kMarker), std::string::npos) << what << ": " << r.output;
}

// No file under `dir` holds the marker (what an export wrote there, whatever its name).
void expect_no_marker_under(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (!e.is_symlink() && e.is_regular_file())  // the link to the root-only folder is not entered
      EXPECT_EQ(slurp(e.path()).find(kMarker), std::string::npos) << e.path();
}

}  // namespace

// results/runs swapped for a link to a root-only results folder's runs/: refused, and the
// folder given as a link is refused too, with a trailing slash as without ("link/" makes
// open() follow the link: it used to export root's runs).
TEST(HostileInput, ExportOfARunsFolderSwappedForALinkReadsNothingBehindIt) {
  Folders d;
  fs::rename(d.results / "runs", d.results / "runs-moved");
  fs::create_directory_symlink(d.secret / "runs", d.results / "runs");
  expect_refused(harness("--export-otlp '" + d.results.string() + "' -o '" + (d.out / "a.jsonl").string() + "'"),
                 "is a link: not followed", "runs/ a link");
  EXPECT_FALSE(fs::exists(d.out / "a.jsonl"));

  fs::create_directory_symlink(d.secret, d.out / "link");
  for (const std::string tail : {"", "/", "/."}) {
    const fs::path file = d.out / ("b" + std::to_string(tail.size()) + ".jsonl");
    expect_refused(harness("--export-otlp '" + (d.out / "link").string() + tail + "' -o '" + file.string() + "'"),
                   "is a link", "the folder given, a link, '" + tail + "'");
    EXPECT_FALSE(fs::exists(file)) << tail;
  }
  expect_no_marker_under(d.out);
}

// A combo swapped for a link to a root-only run: not a run of the export, and refused when
// given itself (--export-jsonl read through it before; --export-trace did with "combo/").
TEST(HostileInput, ExportsSkipOrRefuseAComboSwappedForALink) {
  Folders d;
  fs::create_directory_symlink(d.secret_run(), d.results / "runs" / "b.r1");
  auto r = harness("--export-otlp '" + d.results.string() + "' -o '" + (d.out / "all.jsonl").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("of 1 run(s)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(kMarker), std::string::npos) << r.output;
  const std::string otlp = slurp(d.out / "all.jsonl");
  EXPECT_NE(otlp.find("userCall"), std::string::npos) << "the user's own run is exported";
  EXPECT_EQ(otlp.find(kMarker), std::string::npos);

  const std::string link = (d.results / "runs" / "b.r1").string();
  for (const std::string tail : {"", "/"}) {
    expect_refused(harness("--export-trace '" + link + tail + "'"), "is a link", "--export-trace '" + tail + "'");
    const fs::path file = d.out / ("b" + std::to_string(tail.size()) + ".jsonl");
    expect_refused(harness("--export-jsonl '" + link + tail + "' -o '" + file.string() + "'"), "is a link",
                   "--export-jsonl '" + tail + "'");
    EXPECT_FALSE(fs::exists(file)) << tail;
  }
  EXPECT_FALSE(fs::exists(d.secret_run() / "trace.json")) << "root's folder got a trace.json through the link";
  expect_no_marker_under(d.out);
}

// target/ swapped for a link to a root-only run's target/: the trace has the run's own
// events and no ledger read through the link.
TEST(HostileInput, TraceExportDoesNotReadATargetSwappedForALink) {
  Folders d;
  fs::rename(d.run() / "target", d.run() / "target-moved");
  fs::create_directory_symlink(d.secret_run() / "target", d.run() / "target");
  const auto r = harness("--export-trace '" + d.run().string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find(kMarker), std::string::npos) << r.output;
  const std::string trace = slurp(d.run() / "trace.json");
  EXPECT_NE(trace.find("userCall"), std::string::npos) << trace;
  EXPECT_EQ(trace.find(kMarker), std::string::npos) << trace;
  EXPECT_TRUE(json::parse(trace, nullptr, false).is_object()) << "still a whole trace";
}

// The events file, and a ledger, made hard links to a root-only run's (a host with
// fs.protected_hardlinks=0 lets the user do it): not read. A refusal in one line where the
// run was given; the run skipped, with the reason, by --export-otlp; the ledger not read.
TEST(HostileInput, ExportsRefuseAHardLinkedFile) {
  Folders d;
  fs::remove(d.run() / "events.jsonl");
  ASSERT_EQ(link((d.secret_run() / "events.jsonl").c_str(), (d.run() / "events.jsonl").c_str()), 0);
  expect_refused(harness("--export-trace '" + d.run().string() + "'"), "hard links", "--export-trace");
  expect_refused(harness("--export-jsonl '" + d.run().string() + "' -o '" + (d.out / "j.jsonl").string() + "'"),
                 "hard links", "--export-jsonl");
  auto r = harness("--export-otlp '" + d.results.string() + "' -o '" + (d.out / "o.jsonl").string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("run not exported: a.r1: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hard links"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(kMarker), std::string::npos) << r.output;
  EXPECT_EQ(slurp(d.run() / "trace.json").find(kMarker), std::string::npos);
  expect_no_marker_under(d.out);

  // The events are the user's again; the ledger in target/ is the root-only one's.
  fs::remove(d.run() / "events.jsonl");
  write_run(d.out / "fresh", "user");
  fs::copy_file(d.out / "fresh" / "events.jsonl", d.run() / "events.jsonl");
  fs::remove(d.run() / "target" / ::ledger::kOldFileName);
  ASSERT_EQ(link((d.secret_run() / "target" / ::ledger::kOldFileName).c_str(),
                 (d.run() / "target" / ::ledger::kOldFileName).c_str()), 0);
  r = harness("--export-trace '" + d.run().string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string trace = slurp(d.run() / "trace.json");
  EXPECT_NE(trace.find("userCall"), std::string::npos) << trace;
  EXPECT_EQ(trace.find(kMarker), std::string::npos) << trace;
}
