// The preload method's conversion at volume, without a GPU: N records in the shim's format
// (preload_format.h: 8 threads, a calibration point every 8192 records as the shim flushes,
// launches naming kernels, copies, allocations), converted twice, with a tally tapping the
// store as the harness does: after the run (what PreloadTracer::finish() did before issue
// #50), and while it runs, the files appended a buffer at a time while the follower polls,
// timing only what is left once the last buffer is written (what the harness now spends
// after the program). Prints events per second and those seconds.
// tests/bench/score/CMakeLists.txt runs it (label bench).
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/event_store.h"
#include "tracers/preload/preload_follower.h"
#include "tracers/preload/preload_format.h"
#include "tracers/preload/preload_tracer.h"

using namespace cudatrace;
using namespace cudatrace::preload;
namespace fs = std::filesystem;

namespace {

constexpr int kThreads = 8;
constexpr size_t kBuffer = 8192;

struct Tally : EventTap {
  uint64_t n = 0;
  bool wants_args(const Event&) const override { return false; }
  void on_event(const Event&) override { ++n; }
  void on_closed(uint64_t) override {}
};

// One thread's buffer `b` of records: a calibration point first, the trailer after the last.
std::vector<Record> buffer_of(int thread, uint64_t b, uint64_t buffers) {
  std::vector<Record> rs;
  uint64_t tsc = 1'000'000 + b * kBuffer * 300;
  Record c{};
  c.hook = kCalibration;
  c.a[0] = tsc;
  c.a[1] = tsc / 3;
  rs.push_back(c);
  for (size_t i = 0; i < kBuffer; ++i) {
    Record r{};
    r.ts = int64_t(tsc + i * 300 + 7);
    r.dur = 90;
    r.flags = kRecordDevice;
    switch (i % 4) {
      case 0: r.hook = k___cudaLaunchKernel, r.a[0] = 0x1000 + i % 64, r.a[1] = pack_dim3(128, 1, 1), r.a[2] = pack_dim3(256, 1, 1); break;
      case 1: r.hook = k_cudaMemcpyAsync, r.a[0] = 0xa000, r.a[1] = 0xb000, r.a[2] = 4096, r.a[3] = 1, r.a[4] = 0x5; break;
      case 2: r.hook = k_cudaMalloc, r.a[0] = 4096, r.a[1] = 0x7f00; break;
      default: r.hook = k_cuLaunchKernel, r.a[0] = 0x1000 + i % 64, r.a[1] = pack_dim3(1, 1, 1), r.a[2] = pack_dim3(32, 1, 1); break;
    }
    rs.push_back(r);
  }
  if (b + 1 == buffers) {
    Record t{};
    t.hook = kTrailer;
    t.ts = thread;
    t.a[0] = buffers * kBuffer;
    t.a[2] = kMagic;
    t.a[3] = tsc + kBuffer * 300;
    t.a[4] = t.a[3] / 3;
    rs.push_back(t);
  }
  return rs;
}

void write_tables(const fs::path& dir) {
  std::ofstream k(dir / "preload.77.kernels");
  for (int i = 0; i < 64; ++i) k << "0x" << std::hex << (0x1000 + i) << std::dec << " _ZN2at6native8kernel_" << i << "EPf\n";  // mangled, as the shim writes them
  std::ofstream(dir / "preload.77.devices") << "0 0000:41:00.0\n";
}

// Appends buffer `b` of every thread, as the shim's flushes do.
void write_buffers(const fs::path& dir, uint64_t b, uint64_t buffers) {
  for (int t = 0; t < kThreads; ++t) {
    const std::vector<Record> rs = buffer_of(t, b, buffers);
    std::ofstream(dir / ("preload.77." + std::to_string(100 + t) + ".bin"), std::ios::binary | std::ios::app)
        .write(reinterpret_cast<const char*>(rs.data()), std::streamsize(rs.size() * sizeof(Record)));
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DIR RECORDS\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  const uint64_t buffers = std::max<uint64_t>(1, std::strtoull(argv[2], nullptr, 10) / (kThreads * kBuffer));
  const uint64_t bound = uint64_t(1) << 40;
  fs::remove_all(dir);
  const fs::path after = dir / "after", live = dir / "live";
  fs::create_directories(after);
  fs::create_directories(live);

  write_tables(after);
  for (uint64_t b = 0; b < buffers; ++b) write_buffers(after, b, buffers);
  Tally after_tally;
  auto t0 = std::chrono::steady_clock::now();
  {
    ScopedEventTap tap(after / kEventsFile, after_tally);
    convert_preload_output(after, after / kEventsFile, bound);
  }
  const double after_s = seconds_since(t0);
  fs::remove_all(after);

  Tally live_tally;
  double program_s = 0, end_s = 0;
  {
    ScopedEventTap tap(live / kEventsFile, live_tally);
    t0 = std::chrono::steady_clock::now();
    PreloadFollower follower(live, live / kEventsFile, bound);
    write_tables(live);
    // At a program's pace, not a disk's: the buffers spread over twice what converting them
    // took, as a real program's calls come slower than they convert (written at once, they
    // would all land within one of the follower's polls and be left to the end).
    const auto pace = std::chrono::duration<double>(2 * after_s / double(buffers));
    for (uint64_t b = 0; b < buffers; ++b) {
      write_buffers(live, b, buffers);
      std::this_thread::sleep_for(pace);
    }
    program_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    follower.finish();
    end_s = seconds_since(t0);
  }
  std::printf("preload conversion of %llu events: after the run %.2f s (%.0f events/s); live: the 'program' wrote for "
              "%.2f s, then %.3f s left at its end (%.1f%%)\n",
              (unsigned long long)after_tally.n, after_s, double(after_tally.n) / after_s, program_s, end_s,
              100.0 * end_s / program_s);
  fs::remove_all(dir);
  return after_tally.n == live_tally.n && after_tally.n == buffers * kThreads * kBuffer ? 0 : 1;
}
