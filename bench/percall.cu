// percall: single CUDA calls timed one at a time (Google Benchmark), to be run under
// every tracing method. Benchmarks are named <call>/<cudart linkage>/method:<method>
// (the method from CUDATRACE_METHOD), so the runs of all methods merge into one JSON
// file that Google Benchmark's tools/compare.py can compare with its `filters` mode.
//
// Asynchronous calls are timed in batches of kBatch with a synchronisation after each
// batch, outside the timed region: the per-call time is the batch time / kBatch, without
// the launch queue ever filling up and without a sync inside the measurement.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench/pause_client.h"
#include "tracers/pause_hook.h"
#include "common/clock.h"

#ifndef CUDATRACE_CUDART
#define CUDATRACE_CUDART "unknown"
#endif

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void vecadd_kernel(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

namespace {

constexpr int kBatch = 64;
// A fixed number of batches per repetition: with manual per-call times, Google Benchmark's
// own stopping rule would run ~kBatch times longer than it thinks (and a tracer would
// record hundreds of millions of calls). 400 x 64 calls per repetition.
constexpr int kIterations = 400;

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "percall: %s failed with CUDA error %d\n", what, int(e));
    std::exit(3);
  }
}

// In-process A/B: under a tracer that can pause itself (it exports cudatrace_pause, the
// convention of tracers/pause_hook.h), every timed batch is followed by the same batch with
// the tracer paused. Counter ab_delta_ns is the median of the pairwise differences: the cost
// of recording, free of everything that varies between processes (a launch's time moves
// from one process to the next by more than a shim adds: the method cards show by how much).
// A library the driver loads (CUDA_INJECTION64_PATH) is outside the program's global scope:
// the symbol is looked up in its own handle once CUDA is initialised.
//
// The pairing control: every other pair times the same two batches with the tracer
// paused in both halves. Counter control_delta_ns, the median of those
// differences, is what the pairing itself reads when nothing differs (the second batch
// runs warmer, or colder): an A/B delta within it is no measurable cost.
// Every pause function returns whether the tracer was paused before (1) or live (0), or
// -1 when it cannot pause.
using PauseFn = int (*)(int);
PauseFn g_pause = nullptr;
// A tracer that pauses itself flips a flag: every iteration of a benchmark is a pair. One
// that pauses from outside (uprobe: a round trip to the harness, which detaches every call
// probe and attaches it again) would spend the run pausing that way: a pair every 10th
// iteration of each call is hundreds of round trips a process, a large share of a bench
// round (docs/measured-history.md). For such a tracer the pairs come from sweeps instead
// (sweep() below): one pause and resume serves a batch of every call, so the same number of
// pairs per call costs an order of magnitude fewer requests, and each benchmark then times
// live batches only.
bool g_pause_from_outside = false;

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// A pause that fails mid-run would time a live batch as the paused one, and a resume that
// fails would leave the rest of the run untraced, measured as if traced: stop instead.
void pause_or_exit(int paused) {
  if (g_pause(paused) < 0) {
    std::fprintf(stderr, "percall: the tracer could not %s: stopping\n", paused ? "pause" : "resume after a pause");
    std::exit(3);
  }
}

// A call's batch, timed: kBatch calls (Call::kCalls), then Call::after() untimed; ns per call.
template <class Call>
double timed_batch() {
  const int64_t t0 = cudatrace::monotonic_ns();
  for (int i = 0; i < Call::kCalls; ++i) Call::body();
  const int64_t t1 = cudatrace::monotonic_ns();
  Call::after();
  return double(t1 - t0) / Call::kCalls;
}

// What the sweeps measured of one call under a tracer that pauses from outside.
struct Pairs {
  std::vector<double> paused, differences, control;
};
std::map<std::string, Pairs> g_swept;  // by call (Call::kName)

void report_pairs(benchmark::State& state, const Pairs& p) {
  state.counters["paused_median_ns"] = median(p.paused);
  state.counters["ab_delta_ns"] = median(p.differences);
  state.counters["control_delta_ns"] = median(p.control);
}

// One pair: `first` timed, then the tracer paused and `second` timed, then resumed. A
// control pair (every other one) is paused in both halves. The first batch after a pause
// or a resume runs slow, so `settle` runs it untimed after every change. From outside: the
// kernel has just rewritten the probed pages. In process: CUPTI's activity was just
// switched off or on. Without the settle batch the pairing control read a sizeable share of
// the A/B itself (docs/measured-history.md).
template <class Timed, class Settle>
void pair(bool control, Timed&& timed, Settle&& settle, std::vector<Pairs>& into, std::vector<double>* live) {
  if (control) {
    pause_or_exit(1);
    settle();
  }
  const auto first = timed();
  pause_or_exit(1);  // in a control pair already paused: asked again, so that both pairs do the same between halves
  settle();
  const auto second = timed();
  pause_or_exit(0);
  settle();
  for (size_t i = 0; i < into.size(); ++i) {
    const double d = first[i] - second[i];
    if (control) {
      into[i].control.push_back(d);
      continue;
    }
    into[i].paused.push_back(second[i]);
    into[i].differences.push_back(d);
    if (live) live->push_back(first[i]);
  }
}

// Before timing, the same loop runs untimed (GPU and caches awake). Besides Google
// Benchmark's mean, each repetition reports the median batch as counter median_ns: one
// preempted batch (this runs in a VM) moves a mean by hundreds of ns, a median not.
template <class Call>
void batched(benchmark::State& state) {
  for (int64_t w = 0; w < std::max<int64_t>(1, state.max_iterations / 4); ++w) timed_batch<Call>();
  std::vector<double> per_call;
  per_call.reserve(size_t(state.max_iterations));
  std::vector<Pairs> pairs(1);
  const bool paired = g_pause && !g_pause_from_outside;
  int64_t iteration = 0;
  for (auto _ : state) {
    if (!paired) {
      per_call.push_back(timed_batch<Call>());
      state.SetIterationTime(per_call.back() / 1e9);
      continue;
    }
    // Every iteration is a pair: A/B and control in turn.
    const bool control = iteration++ % 2 == 1;
    double first = 0;
    pair(control, [&] { return std::array<double, 1>{first = timed_batch<Call>()}; }, [] { (void)timed_batch<Call>(); },
         pairs, &per_call);
    state.SetIterationTime(first / 1e9);
  }
  state.counters["median_ns"] = median(per_call);
  if (paired) report_pairs(state, pairs[0]);
  if (g_pause_from_outside) report_pairs(state, g_swept.at(Call::kName));
}

// vecadd launched and waited for, at two sizes: the cost a device-side tracer adds to a
// kernel's run, not only to its launch. Few launches, so that a probe per thread (millions
// of records per launch) still fits a tracer's ring.
constexpr int kVecaddSmall = 1 << 16, kVecaddLarge = 1 << 19, kVecaddIterations = 30;

cudaStream_t g_stream;
float* g_vec[3];
void* g_pinned;
void* g_device;
cudaEvent_t g_event;
CUfunction g_function;
CUresult (*g_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**);

void sync() { must(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize"); }

void setup() {
  must(cudaSetDevice(0), "cudaSetDevice");
  must(cudaStreamCreate(&g_stream), "cudaStreamCreate");
  must(cudaMallocHost(&g_pinned, 4096), "cudaMallocHost");
  must(cudaMalloc(&g_device, 4096), "cudaMalloc");
  must(cudaEventCreate(&g_event), "cudaEventCreate");
  for (float*& v : g_vec) {
    must(cudaMalloc(&v, kVecaddLarge * sizeof(float)), "cudaMalloc");
    must(cudaMemset(v, 0, kVecaddLarge * sizeof(float)), "cudaMemset");
  }
  must(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&g_function), reinterpret_cast<const void*>(&empty_kernel)),
       "cudaGetFuncBySymbol");
  cudaDriverEntryPointQueryResult found;
  must(cudaGetDriverEntryPointByVersion("cuLaunchKernel", reinterpret_cast<void**>(&g_cuLaunchKernel), 12000,
                                        cudaEnableDefault, &found),
       "cudaGetDriverEntryPointByVersion(cuLaunchKernel)");
  // Warm up: module loading, first launch.
  empty_kernel<<<1, 1, 0, g_stream>>>();
  sync();
}

// The calls. Asynchronous ones are followed by a sync after each batch, outside the timed
// region: the per-call time is the batch time / kBatch, without the launch queue ever
// filling up and without a sync inside the measurement.
struct Async {
  static constexpr int kCalls = kBatch, kIterationsPerRep = kIterations;
  static void after() { sync(); }
};
struct Sync {
  static constexpr int kCalls = kBatch, kIterationsPerRep = kIterations;
  static void after() {}
};
struct LaunchChevrons : Async {
  static constexpr const char* kName = "launch<<<>>>";
  static void body() { empty_kernel<<<1, 1, 0, g_stream>>>(); }
};
struct LaunchRuntime : Async {
  static constexpr const char* kName = "cudaLaunchKernel";
  static void body() {
    cudaLaunchKernel(reinterpret_cast<const void*>(&empty_kernel), dim3(1), dim3(1), nullptr, 0, g_stream);
  }
};
struct LaunchDriver : Async {
  static constexpr const char* kName = "cuLaunchKernel";
  static void body() { g_cuLaunchKernel(g_function, 1, 1, 1, 1, 1, 1, 0, g_stream, nullptr, nullptr); }
};
struct CopyAsync : Async {
  static constexpr const char* kName = "cudaMemcpyAsync_4B_HtoD";
  static void body() { cudaMemcpyAsync(g_device, g_pinned, 4, cudaMemcpyHostToDevice, g_stream); }
};
struct MallocFree : Sync {
  static constexpr const char* kName = "cudaMalloc+cudaFree_1MiB";
  static void body() {
    void* p = nullptr;
    cudaMalloc(&p, 1 << 20);
    cudaFree(p);
  }
};
struct EventRecord : Async {
  static constexpr const char* kName = "cudaEventRecord";
  static void body() { cudaEventRecord(g_event, g_stream); }
};
struct StreamSyncIdle : Sync {
  static constexpr const char* kName = "cudaStreamSynchronize_idle";
  static void body() { cudaStreamSynchronize(g_stream); }
};
template <int kN>
struct VecaddSync {
  static constexpr int kCalls = 1, kIterationsPerRep = kVecaddIterations;
  static constexpr const char* kName = kN == kVecaddSmall ? "vecadd_n65536+sync" : "vecadd_n524288+sync";
  static_assert(kN == kVecaddSmall || kN == kVecaddLarge);
  static void body() {
    vecadd_kernel<<<(kN + 255) / 256, 256, 0, g_stream>>>(g_vec[0], g_vec[1], g_vec[2], kN);
    sync();
  }
  static void after() {}
};
struct GetDevice : Sync {
  static constexpr const char* kName = "cudaGetDevice";
  static void body() {
    int d;
    cudaGetDevice(&d);
  }
};

// A registered call, for the sweeps: its name, its batch and how many calls that is.
struct Registered {
  std::string call;
  double (*timed)();
  int calls;
};

template <class... Calls>
std::vector<Registered> register_all(const std::string& suffix) {
  std::vector<Registered> all;
  (
      [&] {
        benchmark::RegisterBenchmark((std::string(Calls::kName) + suffix).c_str(), batched<Calls>)
            ->UseManualTime()
            ->Iterations(Calls::kIterationsPerRep)
            ->Unit(benchmark::kNanosecond);
        all.push_back({Calls::kName, &timed_batch<Calls>, Calls::kCalls});
      }(),
      ...);
  return all;
}

// The pairs for a tracer that pauses from outside, before the benchmarks run: every sweep
// times one batch of each call live and one paused (A/B and control sweeps in turn), each
// pass after a settling pass in its state. kSweeps is what a benchmark got from pairing
// every 10th of its 400 iterations: 20 A/B and 20 control pairs (the vecadd ones, 3, now
// get as many). Every registered call is swept, whatever --benchmark_filter keeps: a few
// seconds more on a filtered run, and no second reading of the filter that could leave a
// benchmark without pairs.
constexpr int kSweeps = 40;
void sweep(const std::vector<Registered>& calls) {
  if (calls.empty()) return;
  std::vector<Pairs> pairs(calls.size());
  // A batch of one call (vecadd+sync) is timed after an untimed one of its own, as in its
  // benchmark's loop: the first launch of a kernel after another kernel's costs more under
  // uprobe than a repeated one, and on a batch of one it lands whole, not 1/64th of it
  // (swept after other kernels, its A/B read far above its own loop's; after one of its own
  // the two agree: docs/measured-history.md).
  auto pass = [&] {
    std::vector<double> ns;
    for (const auto& c : calls) {
      if (c.calls == 1) (void)c.timed();
      ns.push_back(c.timed());
    }
    return ns;
  };
  auto settle = [&] { (void)pass(); };
  settle();
  for (int k = 0; k < kSweeps; ++k) pair(k % 2 == 1, pass, settle, pairs, nullptr);
  for (size_t i = 0; i < calls.size(); ++i) g_swept[calls[i].call] = std::move(pairs[i]);
}

}  // namespace

int main(int argc, char** argv) {
  const char* method = std::getenv("CUDATRACE_METHOD");
  g_pause = reinterpret_cast<PauseFn>(dlsym(RTLD_DEFAULT, CUDATRACE_PAUSE_SYMBOL));
  setup();
  if (const char* injected = std::getenv("CUDA_INJECTION64_PATH"); !g_pause && injected && *injected)
    if (void* library = dlopen(injected, RTLD_NOW | RTLD_NOLOAD))
      g_pause = reinterpret_cast<PauseFn>(dlsym(library, CUDATRACE_PAUSE_SYMBOL));
  // A tracer outside the process (uprobe) pauses through the channel it handed us.
  if (!g_pause && cudatrace::pause_channel_fd() >= 0) {
    g_pause = &cudatrace::pause_through_channel;
    g_pause_from_outside = true;
  }
  // One pause and resume before anything is timed: a tracer that cannot pause here (the
  // kernel lacks what it needs) measures without the A/B, and says why on stderr.
  if (g_pause && g_pause(1) < 0) {
    std::fprintf(stderr, "percall: the tracer refused to pause: no in-process A/B in this run\n");
    g_pause = nullptr;
    g_pause_from_outside = false;  // no sweeps either: every benchmark times live batches
  }
  if (g_pause) pause_or_exit(0);
  const auto calls = register_all<LaunchChevrons, LaunchRuntime, LaunchDriver, CopyAsync, MallocFree, EventRecord,
                                  StreamSyncIdle, VecaddSync<kVecaddSmall>, VecaddSync<kVecaddLarge>, GetDevice>(
      std::string("/") + CUDATRACE_CUDART + "/method:" + (method && *method ? method : "unknown"));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (g_pause && g_pause_from_outside) sweep(calls);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
