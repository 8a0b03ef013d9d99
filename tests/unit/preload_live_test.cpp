// The preload conversion made while the program runs against the one made after it
// (tracers/preload/preload_conversion.h): the same shim output, replayed into a folder a
// piece at a time with a poll after each piece, must give the same events, field by field
// and in each thread's order, and the same loss and notes; and most of it before the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "common/event_store.h"
#include "test_support.h"
#include "tracers/preload/preload_conversion.h"
#include "tracers/preload/preload_format.h"
#include "tracers/preload/preload_tracer.h"
#include "tracers/preload/shim/generic_hooks.h"

using namespace cudatrace;
using namespace cudatrace::preload;
namespace fs = std::filesystem;

namespace {

Record rec(HookId hook, int64_t ts, std::initializer_list<uint64_t> a, uint16_t flags = 0) {
  Record r{};
  r.hook = hook;
  r.ts = ts;
  r.dur = 7;
  r.flags = flags;
  size_t i = 0;
  for (uint64_t v : a) r.a[i++] = v;
  return r;
}

Record point(uint16_t hook, uint64_t tsc, uint64_t mono, uint64_t emitted = 0) {
  Record r{};
  r.hook = hook;
  if (hook == kCalibration) {
    r.a[0] = tsc;
    r.a[1] = mono;
  } else {
    r.a[0] = emitted;
    r.a[2] = kMagic;
    r.a[3] = tsc;
    r.a[4] = mono;
  }
  return r;
}

void append(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::app).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A run of the shim, as files: two processes, several threads and flush windows, launches
// naming kernels, records with devices, a run-time slot, a thread cut short, a window whose
// calibration runs backwards (timed from the process's span), and a launch no table names.
void write_run(const fs::path& dir) {
  const auto dyn = HookId(kGenericBase + kMaxStaticSlots + 2);
  for (int64_t pid : {300, 301})
    for (int64_t tid = pid; tid < pid + 3; ++tid) {
      std::vector<Record> rs;
      uint64_t tsc = 1000 * uint64_t(tid), mono = 5000 * uint64_t(pid);
      int64_t made = 0;
      for (int w = 0; w < 6; ++w) {
        rs.push_back(point(kCalibration, tsc, mono));
        for (int i = 0; i < 40; ++i, ++made) {
          const int64_t ts = int64_t(tsc + 30 * uint64_t(i) + 5);
          switch (i % 5) {
            case 0: rs.push_back(rec(k___cudaLaunchKernel, ts, {0xa0 + uint64_t(w), pack_dim3(8, 1, 1), pack_dim3(64, 1, 1)})); break;
            case 1: rs.push_back(rec(k_cudaMalloc, ts, {4096, 0x7f00}, uint16_t(kRecordDevice | (i % 2)))); break;
            case 2: {  // one launch, in the main thread's last window, of a kernel no table names
              const uint64_t handle = tid == pid && w == 5 && i == 2 ? 0xbeef : 0xa0 + uint64_t(w);
              rs.push_back(rec(k_cuLaunchKernel, ts, {handle, pack_dim3(1, 1, 1), pack_dim3(32, 1, 1)}));
              break;
            }
            case 3: rs.push_back(rec(dyn, ts, {})); break;
            default: rs.push_back(rec(k_cudaFree, ts, {0x7f00}, uint16_t(kRecordDevice | 1))); break;
          }
        }
        // The window of thread pid+1 at w == 3 ends on a point that runs backwards.
        tsc += (tid == pid + 1 && w == 3) ? 0 : 3000;
        mono += 1100;
      }
      if (tid != pid + 2) rs.push_back(point(kTrailer, tsc + 100, mono + 40, uint64_t(made)));  // pid+2: cut short
      std::string bytes(reinterpret_cast<const char*>(rs.data()), rs.size() * sizeof(Record));
      append(dir / ("preload." + std::to_string(pid) + "." + std::to_string(tid) + ".bin"), bytes);
    }
  for (int64_t pid : {300, 301}) {
    std::ofstream kernels(dir / ("preload." + std::to_string(pid) + ".kernels"));
    for (int w = 0; w < 6; ++w) kernels << std::hex << "0x" << (0xa0 + w) << std::dec << " kernel_" << w << "\n";
    std::ofstream(dir / ("preload." + std::to_string(pid) + ".devices")) << "0 0000:41:00.0\n1 0000:c1:00.0\n";
    std::ofstream(dir / ("preload." + std::to_string(pid) + ".generic")) << kMaxStaticSlots + 2 << " driver cuCtxGetCurrent\n";
  }
  std::ofstream(dir / "preload.300.resolved") << "1 cuLaunchKernel\n2 cuCtxGetCurrent\n";
}

// Counts the events written before finish(): the conversion's part made while the program ran.
struct Counter : EventTap {
  uint64_t seen = 0;
  void on_event(const Event&) override { ++seen; }
  void on_closed(uint64_t) override {}
};

// Replays every file of `from` into `to` in `steps` pieces each (cut inside records, tables
// appearing only halfway, so that records wait for the names they need), polling after each.
// Returns the report, and how many events were written before the end.
std::pair<TracerReport, uint64_t> convert_live(const fs::path& from, const fs::path& to, int steps, uint64_t max_bytes) {
  Counter counter;
  ScopedEventTap tap(to / kEventsFile, counter);
  PreloadConversion live(to, to / kEventsFile, max_bytes);
  std::map<fs::path, std::string> whole;
  for (const auto& e : fs::directory_iterator(from))
    if (e.path().filename().string().rfind("preload.", 0) == 0) whole[e.path().filename()] = slurp(e.path());
  for (int s = 1; s <= steps; ++s) {
    for (const auto& [name, bytes] : whole) {
      const bool table = name.extension() != ".bin";
      if (table && s < steps / 2) continue;
      const size_t before = table && s == steps / 2 ? 0 : bytes.size() * size_t(s - 1) / size_t(steps);
      const size_t upto = table ? (s == steps / 2 ? bytes.size() : before) : bytes.size() * size_t(s) / size_t(steps);
      if (upto > before) append(to / name, bytes.substr(before, upto - before));
    }
    live.poll();
  }
  const uint64_t before_end = counter.seen;
  return {live.finish(), before_end};
}

// Each thread's events in the store's order: the live store interleaves threads.
std::vector<Event> by_thread(const fs::path& store) {
  std::vector<Event> ev = read_events(store).events;
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) {
    return std::tie(a.pid, a.tid) < std::tie(b.pid, b.tid);
  });
  return ev;
}

void expect_same_conversion(const fs::path& recorded, int steps, uint64_t max_bytes = uint64_t(128) << 20) {
  const fs::path after = testsupport::temp_dir("preload-after"), live = testsupport::temp_dir("preload-live");
  for (const auto& e : fs::directory_iterator(recorded))
    if (e.path().filename().string().rfind("preload.", 0) == 0) fs::copy_file(e.path(), after / e.path().filename());
  const TracerReport want = convert_preload_output(after, after / kEventsFile, max_bytes);
  const auto [got, converted_live] = convert_live(recorded, live, steps, max_bytes);
  const auto want_events = by_thread(after / kEventsFile);
  testsupport::expect_same_events(by_thread(live / kEventsFile), want_events);
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.notes, want.notes);
  EXPECT_GT(converted_live, want_events.size() / 2) << "most records are converted while the program runs";
}

}  // namespace

TEST(PreloadLive, ConvertsWhileTheProgramRunsWhatTheAfterRunConversionDoes) {
  const fs::path recorded = testsupport::temp_dir("preload-run");
  write_run(recorded);
  expect_same_conversion(recorded, 10);
  expect_same_conversion(recorded, 97);  // pieces that cut records and windows elsewhere
}

// The same for what the shim itself wrote: threads, flushes, a fork, exit paths.
TEST(PreloadLive, ConvertsTheRecorderExercisersOutputAsAfterTheRun) {
  const fs::path recorded = testsupport::temp_dir("preload-recorder");
  const auto r = testsupport::run_command(std::string(kDirEnv) + "=" + recorded.string() + " " + CUDATRACE_RECORDER_EXERCISER);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_conversion(recorded, 23);
}

// Past the run's bound: the same number of records counted lost either way.
TEST(PreloadLive, CountsWhatLiesPastTheBoundAsTheAfterRunConversionDoes) {
  const fs::path recorded = testsupport::temp_dir("preload-run"), after = testsupport::temp_dir("preload-after"),
                 live = testsupport::temp_dir("preload-live");
  write_run(recorded);
  for (const auto& e : fs::directory_iterator(recorded)) fs::copy_file(e.path(), after / e.path().filename());
  const uint64_t bound = 500 * sizeof(Record);
  const TracerReport want = convert_preload_output(after, after / kEventsFile, bound);
  const TracerReport got = convert_live(recorded, live, 10, bound).first;
  ASSERT_GT(want.loss["over_bound_records"].get<int64_t>(), 0);
  EXPECT_EQ(got.loss["over_bound_records"], want.loss["over_bound_records"]);
  EXPECT_TRUE(got.notes.contains("over_bound"));
}

// The program's folder, changed under the reader: a record file that shrinks, one replaced
// by a link. Counted, never followed, never a crash.
TEST(PreloadLive, AFileThatShrinksOrIsReplacedIsCountedNotFollowed) {
  const fs::path dir = testsupport::temp_dir("preload-live");
  PreloadConversion live(dir, dir / kEventsFile, uint64_t(128) << 20);
  std::vector<Record> rs = {point(kCalibration, 0, 0), rec(k_cudaFree, 5, {0}), point(kCalibration, 100, 100),
                            rec(k_cudaFree, 105, {0}), point(kTrailer, 200, 200, 2)};
  const std::string bytes(reinterpret_cast<const char*>(rs.data()), rs.size() * sizeof(Record));
  append(dir / "preload.5.5.bin", bytes);
  append(dir / "preload.5.6.bin", bytes);
  live.poll();
  fs::resize_file(dir / "preload.5.5.bin", sizeof(Record));
  fs::remove(dir / "preload.5.6.bin");
  fs::create_symlink("/etc/shadow", dir / "preload.5.6.bin");
  live.poll();
  const TracerReport r = live.finish();
  EXPECT_EQ(r.loss["changed_files"], 2) << r.loss.dump();
  EXPECT_TRUE(r.notes.contains("changed_files"));
  EXPECT_EQ(read_events(dir / kEventsFile).events.size(), 4u) << "what was read of each before the change";
}
