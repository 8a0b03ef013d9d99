// A workload's scoring at volume, without a GPU: writes a ledger of N calls over T threads
// (as a workload would) and a method's store that saw every call and its driver launch, then
// times score_workload() and checks that every call matched. Prints events per second and
// the process's peak RSS. tests/bench/score/CMakeLists.txt runs it (label bench).
// "live": the store is written through the harness's tap (live_scoring.h), as a tracer that
// converts while the program runs writes it, and what is timed is what is left after the
// program: the ledger read and paired. SCORE_SCALE_READ_AHEAD=on|off chooses whether the
// ledger is decoded ahead (by default: with 4 cores or more), so that the two stages can be
// weighed on a small machine too; SCORE_SCALE_DECODERS=N on how many threads, its frames
// shared among them (by default a quarter of the cores, 1 to 4).
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "common/event_io.h"
#include "common/event_read_ahead.h"
#include "common/event_store.h"
#include "harness/score/live_scoring.h"
#include "harness/score/workload_score.h"
#include "ledger/ledger.h"

using namespace cudatrace;
namespace fs = std::filesystem;

namespace {

Event call_at(int64_t pid, int64_t tid, int64_t i, int64_t threads) {
  Event e;
  e.layer = layer::kRuntime;
  const bool launch = i % 4 == 0;
  e.name = launch ? "cudaLaunchKernel" : i % 4 == 1 ? "cudaMemsetAsync" : "cudaGetDevice";
  e.ts = 1'000'000 + (i * threads + tid) * 1000;  // threads interleaved in time, as they run
  e.dur = 500;
  e.pid = pid;
  e.tid = tid;
  e.ret = 0;
  e.device = 0;
  if (launch) e.args = {{"kernel", "k"}, {"grid", {1, 1, 1}}, {"block", {32, 1, 1}}, {"stream", "0x0"}};
  else if (i % 4 == 1) e.args = {{"ptr", "0x7f0000001000"}, {"value", 0}, {"bytes", 4096}, {"stream", "0x0"}};
  return e;
}

void write_ledger(const fs::path& file, int64_t pid, int64_t calls, int64_t threads) {
  // The ledger as a workload writes it: its header, then the threads' calls in the order they
  // began (ledger.cpp, write_in_time_order).
  EventStoreWriter ledger(file);
  ledger.end_frame_every(ledger::kFrameRecords);
  Event header;
  header.layer = layer::kMeta;
  header.name = "ledger";
  header.ts = 1;
  header.pid = pid;
  header.tid = pid;
  int64_t per_name[3] = {0, 0, 0};
  for (int64_t i = 0; i < calls; ++i) ++per_name[i % 4 == 0 ? 0 : i % 4 == 1 ? 1 : 2];
  header.args = {{"records", calls},
                 {"threads", threads},
                 {"injected", nlohmann::json::array()},
                 {"intended", {{"cudaLaunchKernel", per_name[0]}, {"cudaMemsetAsync", per_name[1]}, {"cudaGetDevice", per_name[2]}}}};
  ledger.write(header);
  for (int64_t i = 0; i < calls; ++i) ledger.write(call_at(pid, 1000 + i % threads, i / threads, threads));
  ledger.close();
}

// The method's store, in time order: every call, and a driver launch inside each launch.
void write_store(const fs::path& file, int64_t pid, int64_t calls, int64_t threads) {
  EventStoreWriter store(file);
  for (int64_t i = 0; i < calls; ++i) {
    Event e = call_at(pid, 1000 + i % threads, i / threads, threads);
    e.ts += 10;
    store.write(e);
    if (e.name == "cudaLaunchKernel") {
      Event d = e;
      d.layer = layer::kDriver;
      d.name = "cuLaunchKernel";
      d.ts += 10;
      d.args = nlohmann::json::object();
      store.write(d);
    }
  }
  store.close();
}

// Under `perf record -D -1 --control=fifo:FIFO` with SCORE_SCALE_PERF_CTL=FIFO, only the
// scoring is sampled.
void profile(const char* command) {
  if (const char* fifo = std::getenv("SCORE_SCALE_PERF_CTL")) {
    std::ofstream ctl(fifo);
    ctl << command << '\n';
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}


// CPU seconds per thread of this process, sampled every 100 ms while the scoring runs (a
// thread's last sample stands for it once it has ended): which thread sets the pace.
class ThreadCpu {
 public:
  ThreadCpu() {
    sample();
    before_ = last_;  // what the threads alive now had spent before the scoring
    thread_ = std::thread([this] { sample_until_stopped(); });
  }
  ~ThreadCpu() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
  }
  void print() {
    std::map<std::string, std::pair<double, int>> by_name;  // name -> (seconds, threads)
    for (const auto& [tid, t] : last_) {
      auto& [sec, n] = by_name[t.first];
      const auto was = before_.find(tid);
      sec += t.second - (was == before_.end() ? 0.0 : was->second.second), ++n;
    }
    for (const auto& [name, v] : by_name)
      std::printf("  cpu %-16s %6.2f s over %d thread(s)\n", name.c_str(), v.first, v.second);
  }

 private:
  void sample() {
    const long hz = sysconf(_SC_CLK_TCK);
    for (const auto& d : fs::directory_iterator("/proc/self/task")) {
      std::ifstream stat(d.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const size_t close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 2));
      std::string field;
      double ticks = 0;
      for (int i = 3; i <= 15 && rest >> field; ++i)
        if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
      std::ifstream comm(d.path() / "comm");
      std::string name;
      std::getline(comm, name);
      last_[std::atoll(d.path().filename().c_str())] = {name, ticks / double(hz)};
    }
  }
  void sample_until_stopped() {
    while (!stop_) {
      sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    sample();
  }
  std::map<long long, std::pair<std::string, double>> last_, before_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: score_scale DIR CALLS [THREADS [keep|live]]\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const int64_t calls = std::atoll(argv[2]);
  const int64_t threads = argc > 3 ? std::atoll(argv[3]) : 8;
  const std::string mode = argc > 4 ? argv[4] : "";
  if (const char* ahead = std::getenv("SCORE_SCALE_READ_AHEAD"))
    EventReadAhead::force_worth_it(std::string(ahead) == "on");
  if (const char* decoders = std::getenv("SCORE_SCALE_DECODERS"))
    EventReadAhead::force_decoders(size_t(std::max(1, std::atoi(decoders))));
  // "keep": the files of an earlier run of the same size are scored again and left behind,
  // so that a profile of the scoring holds no writing.
  const bool keep = mode == "keep", live = mode == "live";
  const bool written = keep && fs::exists(dir / "events.msgpack.zst");
  if (!written) fs::remove_all(dir);
  fs::create_directories(dir / "target");
  const int64_t pid = 100;
  const fs::path store = dir / "events.msgpack.zst";
  auto t0 = std::chrono::steady_clock::now();
  if (!written) write_ledger(dir / "target" / ::ledger::kFileName, pid, calls, threads);
  std::printf("ledger written in %.1f s\n", seconds_since(t0));
  t0 = std::chrono::steady_clock::now();
  DeviceNames names;
  EventTally tally(false, false, nullptr);
  LiveScoring scoring(tally, dir / "sort");
  if (!written && live) {
    ScopedEventTap tap(store, scoring);
    write_store(store, pid, calls, threads);
  } else if (!written) {
    write_store(store, pid, calls, threads);
  }
  std::printf("store written%s in %.1f s\n", live ? ", its calls kept per thread for the scoring," : "", seconds_since(t0));
  TracerReport report;
  report.layers = {layer::kRuntime, layer::kDriver};
  LiveScoring::Taken taken = scoring.take(report);
  if (live && !taken.matcher) {
    std::fprintf(stderr, "the calls could not be kept as they were stored: %s%s\n", taken.unused.c_str(), taken.not_streamable.c_str());
    return 1;
  }
  t0 = std::chrono::steady_clock::now();
  WorkloadScoreInput in{dir / "target", store, dir / "sort", uint64_t(1) << 40, report.layers, 0, "block"};
  in.live = live ? taken.matcher.get() : nullptr;
  ThreadCpu cpu;
  profile("enable");
  const WorkloadScore s = score_workload(in, names);
  const double took = seconds_since(t0);
  profile("disable");
  cpu.stop();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  int64_t events = 0;
  for (const auto& l : s.layers) events += l.seen;
  std::printf("scored %lld ledger calls and %lld events (%s) in %.1f s%s: %.0f records/s; peak RSS %ld MiB; ledger %s\n",
              (long long)calls, (long long)events, s.scored_by.c_str(), took, live ? " after the store was written" : "",
              double(calls + (live ? 0 : events)) / took, ru.ru_maxrss / 1024,
              s.ledger.consistent ? "consistent" : s.ledger.problems.front().c_str());
  cpu.print();
  bool whole = s.ledger.consistent && !s.layers.empty() && s.scoring_error.empty();
  whole = whole && s.scored_by.rfind("stream", 0) == 0;  // this input streams: a sort is a regression
  for (const auto& l : s.layers) {
    std::printf("  %s: matched %lld of %lld, phantom %lld, args %lld/%lld\n", l.layer.c_str(), (long long)l.matched,
                (long long)l.expected, (long long)l.phantom, (long long)l.args_equal, (long long)l.args_compared);
    whole = whole && l.matched == l.expected && l.phantom == 0;
  }
  if (!keep) fs::remove_all(dir);
  else fs::remove_all(dir / "sort");
  return whole ? 0 : 1;
}
