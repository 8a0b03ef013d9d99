// record_cost: what one preload record costs on this host's CPU, and its parts, without
// a GPU. A record is two TSC reads (entry and exit) and an append to the thread's buffer.
// Two hooks around it are timed: a listed hook (the code hooks.def's hooks are made of,
// with an argument) and the generic forwarder (generic_hooks.cpp), the path of every call
// hooks.def does not list: its slim path (most functions) and its full frame. Each
// is timed live and paused (forward only) in alternating batches, as the
// per-call benchmark does on the GPU; counter median_ns is the median batch of 64 calls
// per call, so that the one batch in 8192 records that writes the buffer to disk does not
// move it. `fake_driver` stands for the driver: it takes a lock (as the driver does), and
// with --footprint_kib it also touches that much memory per call, to show what a record
// costs once the driver's work has pushed the shim's lines out of the caches.
//
//   record_cost [--footprint_kib=N] [Google Benchmark flags]
//
// It re-runs itself with CUDATRACE_PRELOAD_DIR set to a temporary folder (the recorder
// starts when the process does) and removes the folder afterwards.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/clock.h"
#include "harness/stats/bench_stats.h"
#include "tracers/preload/shim/generic_hooks.h"
#include "tracers/preload/shim/real_symbols.h"
#include "tracers/preload/shim/recorder.h"

extern "C" int cudatrace_pause(int paused);

namespace {

using namespace cudatrace::preload;
using cudatrace::median_of;

constexpr int kBatch = 64;
std::atomic<long> g_lock;
std::vector<char> g_scratch;

int fake_driver(uint64_t a) {
  g_lock.fetch_add(1);
  for (size_t i = 0; i < g_scratch.size(); i += 64) g_scratch[i] = char(g_scratch[i] + char(a));
  g_lock.fetch_sub(1);
  return int(a & 1);
}

template <class Body>
double batch(Body&& body) {
  const int64_t t0 = cudatrace::monotonic_ns();
  for (int i = 0; i < kBatch; ++i) body(i);
  return double(cudatrace::monotonic_ns() - t0) / kBatch;
}

void tsc_read(benchmark::State& s) {
  std::vector<double> v;
  for (auto _ : s) v.push_back(batch([](int) { benchmark::DoNotOptimize(now_ns()); }));
  s.counters["median_ns"] = median_of(v);
}

void append(benchmark::State& s) {
  std::vector<double> v;
  int64_t t = 0;
  for (auto _ : s) v.push_back(batch([&](int i) { emit(HookId(0), 0, t, t + 1, uint64_t(i)); ++t; }));
  s.counters["median_ns"] = median_of(v);
}

// What DRIVER_HOOK expands to (driver_hooks.cpp), around fake_driver: the real function
// read from its slot (null until resolved: the hook tests it, as a generic stub tests its
// table entry), then the same recorded call. A model that left out the test would read a
// generic forward as dearer than the listed hooks that ship.
std::atomic<void*> g_listed_real{reinterpret_cast<void*>(&fake_driver)};
[[gnu::noinline]] int listed_hook(uint64_t a) {
  const auto real = real_driver<int (*)(uint64_t)>(g_listed_real, "cuFakeDriver");
  CUDATRACE_RECORDED_CALL(HookId(0), int, real, (a), a);
}

// Every hook is reached as a program reaches it, through a pointer (the PLT's GOT slot).
using Hook = int (*)(uint64_t);
Hook through_pointer(Hook h) {
  static volatile Hook slot;
  slot = h;
  return slot;
}

// Live and paused batches alternate; ab_delta_ns is the median paired difference.
// kind 0: the listed hook. 1: a generic forwarder for a function with neither stack nor
// floating-point arguments (most of CUDA's: it is handed out under the name of one,
// cuCtxGetDevice, so that it gets that function's frame flags). 2: the worst case, a
// function the headers do not declare (stack copied, xmm registers saved).
template <int kKind>
void forwarder(benchmark::State& s) {
  void* fake = reinterpret_cast<void*>(&fake_driver);
  const Hook call = through_pointer(
      kKind == 0   ? &listed_hook
      : kKind == 1 ? reinterpret_cast<Hook>(generic_wrapper_for("cuCtxGetDevice", false, fake))
                   : reinterpret_cast<Hook>(generic_wrapper_for("cuFakeDriver", false, fake)));
  auto timed = [&](bool live_batch) {
    cudatrace_pause(live_batch ? 0 : 1);
    const double ns = batch([&](int i) { benchmark::DoNotOptimize(call(uint64_t(i))); });
    cudatrace_pause(0);
    return ns;
  };
  // The order flips every iteration: a batch that always ran second would run on what
  // the first left in the caches and predictors, a bias of the order of the hook's cost.
  std::vector<double> live, paused, diff;
  int64_t iteration = 0;
  for (auto _ : s) {
    const bool live_first = iteration++ % 2 == 0;
    const double first = timed(live_first);
    const double second = timed(!live_first);
    live.push_back(live_first ? first : second);
    paused.push_back(live_first ? second : first);
    diff.push_back(live.back() - paused.back());
  }
  s.counters["median_ns"] = median_of(live);
  s.counters["paused_median_ns"] = median_of(paused);
  s.counters["ab_delta_ns"] = median_of(diff);
}

// The question the listed and generic hooks' separate A/B runs leave to noise, asked
// directly: both live, batches alternating, the median paired difference. The order flips
// every iteration (the second batch of a pair runs on what the first left in the caches
// and predictors), and a pairing control (the listed hook against itself) says what the
// pairing reads when nothing differs.
void generic_minus_listed(benchmark::State& s) {
  const Hook generic = through_pointer(reinterpret_cast<Hook>(
      generic_wrapper_for("cuCtxGetDevice", false, reinterpret_cast<void*>(&fake_driver))));
  const Hook listed = through_pointer(&listed_hook);
  auto timed = [](Hook h) { return batch([h](int i) { benchmark::DoNotOptimize(h(uint64_t(i))); }); };
  std::vector<double> diff, control;
  int64_t iteration = 0;
  for (auto _ : s) {
    if (iteration++ % 2 == 0) {
      const double listed_ns = timed(listed);
      diff.push_back(timed(generic) - listed_ns);
    } else {
      const double generic_ns = timed(generic);
      diff.push_back(generic_ns - timed(listed));
    }
    const double first = timed(listed);
    control.push_back(timed(listed) - first);
  }
  s.counters["generic_minus_listed_ns"] = median_of(diff);
  s.counters["control_ns"] = median_of(control);
}

}  // namespace

int main(int argc, char** argv) {
  size_t footprint_kib = 0;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--footprint_kib=", 16) == 0)
      footprint_kib = std::strtoul(argv[i] + 16, nullptr, 10);
    else
      args.push_back(argv[i]);
  }
  if (!recording()) {  // start again with the recorder on, in a folder of our own
    char dir[] = "/tmp/cudatrace-record-cost-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    const pid_t child = fork();
    if (child == 0) {
      setenv(kDirEnv, dir, 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    std::filesystem::remove_all(dir);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  g_scratch.assign(footprint_kib << 10, 0);
  const std::string suffix = "/footprint_kib:" + std::to_string(footprint_kib);
  benchmark::RegisterBenchmark("tsc_read", tsc_read)->Iterations(20000);
  benchmark::RegisterBenchmark("append", append)->Iterations(20000);
  benchmark::RegisterBenchmark(("listed_hook_live_vs_paused" + suffix).c_str(), forwarder<0>)->Iterations(5000);
  benchmark::RegisterBenchmark(("generic_forwarder_live_vs_paused" + suffix).c_str(), forwarder<1>)->Iterations(5000);
  benchmark::RegisterBenchmark(("generic_forwarder_full_frame_live_vs_paused" + suffix).c_str(), forwarder<2>)
      ->Iterations(5000);
  benchmark::RegisterBenchmark(("generic_minus_listed" + suffix).c_str(), generic_minus_listed)->Iterations(5000);
  int n = int(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
