// percall: single CUDA calls timed one at a time (Google Benchmark), to be run under
// every tracing method. Benchmarks are named <call>/<cudart linkage>/method:<method>
// (the method from CUDATRACE_METHOD), so the runs of all methods merge into one JSON
// file that Google Benchmark's tools/compare.py can compare with its `filters` mode.
//
// Asynchronous calls are timed in batches of kBatch with a synchronisation after each
// batch, outside the timed region: the per-call time is the batch time / kBatch, without
// the launch queue ever filling up and without a sync inside the measurement.
//
// Every call is measured in passes that take one batch of each call in turn, over the
// whole life of the process (measure() below), not in one stretch per call: on the GPU
// host a call's time drifts by a third over a few hundred milliseconds (not the CPU's
// speed: a fixed loop timed beside it stays flat), so a call timed in one 100 ms stretch
// read whichever phase it landed in, and the same call moved by that much between
// processes (docs/measured-history.md). Google Benchmark then only reports: each
// benchmark's counters are medians over the passes.
//
// Each benchmark's label is its call's kind (launch, copy or other): the harness holds
// cupti against Nsight Systems on launches and copies and against an empty CUPTI
// subscriber on the rest. A call this process cannot make (the two-GPU ones with one GPU,
// NCCL's all-reduce without libnccl) is not registered; the reason goes into the JSON's
// context as "skipped:<call>", which the harness copies into its summary.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <type_traits>
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
// Passes per process: kLivePasses live ones where the tracer cannot pause (and untraced);
// kInProcessPairs pairs (half A/B, half control; four passes each) where it pauses itself.
// A call of one launch and its kernel's run (vecadd+sync) joins one pass in kSparseEvery:
// a tracer with a probe per GPU thread records a million events per such launch, and its
// ring must hold a whole process's.
constexpr int kLivePasses = 400, kInProcessPairs = 200, kSparseEvery = 11;  // odd: the pairs it joins alternate A/B and control

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
// A tracer that pauses itself flips a flag, so pairs are cheap. One that pauses from
// outside (uprobe: a round trip to the harness, which detaches every call probe and
// attaches it again) gets fewer pairs (kSweeps in measure()): hundreds of round trips a
// process were a large share of a bench round (docs/measured-history.md).
bool g_pause_from_outside = false;

// Records per call: a tracer that counts the records it made for this thread (the optional
// CUDATRACE_RECORDS_SYMBOL of tracers/pause_hook.h) is read around each timed batch, so the
// harness can give its cost per record (counter records_per_call, the median over the live
// batches). A runtime call makes as many records as the tracer sees driver calls inside it:
// the real libraries decide that, not this program.
using RecordsFn = unsigned long long (*)();
RecordsFn g_records = nullptr;

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

// A batch's time and, where the tracer counts them, its records, both per call (-1: not counted).
struct Timing {
  double ns, records;
};

// A call's batch, timed: kBatch calls (Call::kCalls), then Call::after() untimed.
template <class Call>
Timing timed_batch() {
  const unsigned long long before = g_records ? g_records() : 0;
  const int64_t t0 = cudatrace::monotonic_ns();
  for (int i = 0; i < Call::kCalls; ++i) Call::body();
  const int64_t t1 = cudatrace::monotonic_ns();
  const unsigned long long after = g_records ? g_records() : 0;
  // A count that went back (the tracer started its thread's count again) is no count.
  const double records = g_records && after >= before ? double(after - before) / Call::kCalls : -1;
  Call::after();
  return {double(t1 - t0) / Call::kCalls, records};
}

// What the passes measured of one call: live batches (and their records per call), and the
// pairs where the tracer pauses.
struct Pairs {
  std::vector<double> live, paused, differences, control, records;
};
std::map<std::string, Pairs> g_measured;  // by call (Call::kName)

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
void pair(bool control, Timed&& timed, Settle&& settle, std::vector<Pairs>& into) {
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
    const double d = first[i].ns - second[i].ns;
    if (control) {
      if (first[i].ns >= 0) into[i].control.push_back(d);
      continue;
    }
    if (first[i].ns < 0) continue;  // a call that sat this pass out (kSparseEvery)
    into[i].paused.push_back(second[i].ns);
    into[i].differences.push_back(d);
    into[i].live.push_back(first[i].ns);
    if (first[i].records >= 0) into[i].records.push_back(first[i].records);
  }
}

// A benchmark times one batch (Google Benchmark wants a loop) and reports what the passes
// measured: counter median_ns, the median live batch (one preempted batch moves a mean by
// hundreds of ns, a median not), and under a tracer that pauses, the A/B pairs' counters.
template <class Call>
void batched(benchmark::State& state) {
  state.SetLabel(Call::kKind);
  for (auto _ : state) state.SetIterationTime(timed_batch<Call>().ns / 1e9);
  const Pairs& measured = g_measured.at(Call::kName);
  state.counters["median_ns"] = median(measured.live);
  state.counters["batches"] = double(measured.live.size());
  if (!measured.records.empty()) state.counters["records_per_call"] = median(measured.records);
  if (g_pause) report_pairs(state, measured);
}

// vecadd launched and waited for, at two sizes: the cost a device-side tracer adds to a
// kernel's run, not only to its launch. Few launches, so that a probe per thread (millions
// of records per launch) still fits a tracer's ring.
constexpr int kVecaddSmall = 1 << 16, kVecaddLarge = 1 << 19;

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
  static constexpr int kCalls = kBatch;
  static void after() { sync(); }
};
struct Sync {
  static constexpr int kCalls = kBatch;
  static void after() {}
};
struct LaunchChevrons : Async {
  static constexpr const char* kName = "launch<<<>>>", *kKind = "launch";
  static void body() { empty_kernel<<<1, 1, 0, g_stream>>>(); }
};
struct LaunchRuntime : Async {
  static constexpr const char* kName = "cudaLaunchKernel", *kKind = "launch";
  static void body() {
    cudaLaunchKernel(reinterpret_cast<const void*>(&empty_kernel), dim3(1), dim3(1), nullptr, 0, g_stream);
  }
};
struct LaunchDriver : Async {
  static constexpr const char* kName = "cuLaunchKernel", *kKind = "launch";
  static void body() { g_cuLaunchKernel(g_function, 1, 1, 1, 1, 1, 1, 0, g_stream, nullptr, nullptr); }
};
struct CopyAsync : Async {
  static constexpr const char* kName = "cudaMemcpyAsync_4B_HtoD", *kKind = "copy";
  static void body() { cudaMemcpyAsync(g_device, g_pinned, 4, cudaMemcpyHostToDevice, g_stream); }
};
struct MallocFree : Sync {
  static constexpr const char* kName = "cudaMalloc+cudaFree_1MiB", *kKind = "other";
  static void body() {
    void* p = nullptr;
    cudaMalloc(&p, 1 << 20);
    cudaFree(p);
  }
};
struct EventRecord : Async {
  static constexpr const char* kName = "cudaEventRecord", *kKind = "other";
  static void body() { cudaEventRecord(g_event, g_stream); }
};
struct StreamSyncIdle : Sync {
  static constexpr const char* kName = "cudaStreamSynchronize_idle", *kKind = "other";
  static void body() { cudaStreamSynchronize(g_stream); }
};
template <int kN>
struct VecaddSync {
  static constexpr int kCalls = 1;
  static constexpr const char* kName = kN == kVecaddSmall ? "vecadd_n65536+sync" : "vecadd_n524288+sync";
  static constexpr const char* kKind = "launch";  // a launch waited for: its kernel's run, traced or not, included
  static_assert(kN == kVecaddSmall || kN == kVecaddLarge);
  static void body() {
    vecadd_kernel<<<(kN + 255) / 256, 256, 0, g_stream>>>(g_vec[0], g_vec[1], g_vec[2], kN);
    sync();
  }
  static void after() {}
};
struct GetDevice : Sync {
  static constexpr const char* kName = "cudaGetDevice", *kKind = "other";
  static void body() {
    int d;
    cudaGetDevice(&d);
  }
};

// The calls that need two GPUs: a peer copy, and an NCCL all-reduce over both from this one
// process (what a data-parallel step does between its kernels). Set up only where the
// process sees two GPUs; each says why not otherwise, or why its set-up failed.
void* g_peer;  // on device 1
std::string g_peer_skipped, g_nccl_skipped;

// NCCL is loaded at run time (CUDATRACE_NCCL_LIB, else libnccl.so.2 as the loader finds it):
// nothing links against it, and a host without it skips the call. Only what the benchmark
// calls is declared, with nccl.h's values; its enums are passed as the ints they are.
namespace nccl {
using Comm = struct Opaque*;
using Result = int;  // ncclResult_t; ncclSuccess is 0
constexpr int kFloat32 = 7, kSum = 0;  // ncclFloat32, ncclSum
constexpr size_t kCount = 1024;        // floats per GPU: 4 KiB
Result (*comm_init_all)(Comm*, int, const int*);
Result (*all_reduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t);
Result (*group_start)();
Result (*group_end)();
const char* (*error_string)(Result);
Result (*get_version)(int*);
Result (*comm_destroy)(Comm);
Comm comms[2];
cudaStream_t streams[2];
float* buffers[2];
}  // namespace nccl

// NCCL's kernels on the two GPUs wait for each other, so a tracer that makes one launch wait
// for another would hang them for good: a batch not done in time ends the process with the
// reason, rather than the harness's timeout, minutes later and without one. Polled with a
// pause between queries, so that the wait itself adds few calls to a tracer's record.
void sync_within(cudaStream_t stream, const char* what) {
  constexpr int64_t kDeadlineNs = 30'000'000'000;
  const int64_t deadline = cudatrace::monotonic_ns() + kDeadlineNs;
  cudaError_t e;
  while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    if (cudatrace::monotonic_ns() > deadline) {
      std::fprintf(stderr, "percall: %s not done after %lld s (its kernels wait for each other's): stopping\n", what,
                   (long long)(kDeadlineNs / 1'000'000'000));
      std::_Exit(3);
    }
    const timespec pause{0, 50'000};
    nanosleep(&pause, nullptr);
  }
  must(e, what);
}

std::string load_nccl() {
  const char* named = std::getenv("CUDATRACE_NCCL_LIB");
  const std::string path = named && *named ? named : "libnccl.so.2";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return "NCCL not loaded (" + std::string(why ? why : path) + "): set CUDATRACE_NCCL_LIB to a libnccl.so.2";
  }
  bool all = true;
  auto find = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    all = all && fn;
  };
  find(nccl::comm_init_all, "ncclCommInitAll");
  find(nccl::all_reduce, "ncclAllReduce");
  find(nccl::group_start, "ncclGroupStart");
  find(nccl::group_end, "ncclGroupEnd");
  find(nccl::error_string, "ncclGetErrorString");
  find(nccl::get_version, "ncclGetVersion");
  find(nccl::comm_destroy, "ncclCommDestroy");
  if (!all) return path + " lacks one of ncclCommInitAll, ncclAllReduce, ncclGroupStart/End, ncclGetErrorString, ncclCommDestroy";
  int version = 0;
  if (nccl::get_version(&version) == 0) benchmark::AddCustomContext("nccl_version", std::to_string(version));
  return {};
}

void nccl_all_reduce() {
  nccl::group_start();
  for (int d = 0; d < 2; ++d)
    nccl::all_reduce(nccl::buffers[d], nccl::buffers[d], nccl::kCount, nccl::kFloat32, nccl::kSum, nccl::comms[d],
                     nccl::streams[d]);
  nccl::group_end();
}

void sync_nccl() {
  for (cudaStream_t s : nccl::streams) sync_within(s, "an NCCL all-reduce");
}

std::string setup_nccl() {
  if (std::string why = load_nccl(); !why.empty()) return why;
  const int devices[2] = {0, 1};
  if (nccl::Result r = nccl::comm_init_all(nccl::comms, 2, devices); r != 0)
    return std::string("ncclCommInitAll over devices 0 and 1 failed: ") + nccl::error_string(r);
  for (int d = 0; d < 2; ++d) {
    must(cudaSetDevice(d), "cudaSetDevice");
    must(cudaStreamCreate(&nccl::streams[d]), "cudaStreamCreate");
    must(cudaMalloc(&nccl::buffers[d], nccl::kCount * sizeof(float)), "cudaMalloc");
    must(cudaMemset(nccl::buffers[d], 0, nccl::kCount * sizeof(float)), "cudaMemset");
  }
  must(cudaSetDevice(0), "cudaSetDevice");
  // One all-reduce before anything is timed: NCCL's own set-up, and a failure found here
  // is a skipped call with its reason rather than a batch of failed calls.
  nccl::group_start();
  nccl::Result r = 0;
  for (int d = 0; d < 2 && r == 0; ++d)
    r = nccl::all_reduce(nccl::buffers[d], nccl::buffers[d], nccl::kCount, nccl::kFloat32, nccl::kSum, nccl::comms[d],
                         nccl::streams[d]);
  if (nccl::Result end = nccl::group_end(); r == 0) r = end;
  if (r != 0) return std::string("ncclAllReduce failed: ") + nccl::error_string(r);
  sync_nccl();
  return {};
}

void setup_two_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  if (n < 2) {
    g_peer_skipped = g_nccl_skipped = "this process sees " + std::to_string(n) + " GPU: the call needs two";
    return;
  }
  must(cudaSetDevice(1), "cudaSetDevice(1)");
  must(cudaMalloc(&g_peer, 4096), "cudaMalloc on device 1");
  must(cudaSetDevice(0), "cudaSetDevice(0)");
  // Direct where the GPUs can reach each other, staged through the host otherwise: the
  // context says which this run timed.
  int direct = 0;
  if (cudaDeviceCanAccessPeer(&direct, 0, 1) == cudaSuccess && direct) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) direct = 0;
    (void)cudaGetLastError();
  }
  benchmark::AddCustomContext("peer_copy_0to1", direct ? "direct (peer access enabled)" : "staged through the host");
  g_nccl_skipped = setup_nccl();
}

struct PeerCopy : Async {
  static constexpr const char* kName = "cudaMemcpyPeerAsync_4B_0to1", *kKind = "copy";
  static void body() { cudaMemcpyPeerAsync(g_peer, 1, g_device, 0, 4, g_stream); }
};
struct NcclAllReduce {
  static constexpr int kCalls = kBatch;
  static constexpr const char* kName = "ncclAllReduce_4KiB_2GPUs", *kKind = "launch";
  static void body() { nccl_all_reduce(); }
  static void after() { sync_nccl(); }
};

// A registered call, for the passes: its name, its batch and how many calls that is.
struct Registered {
  std::string call;
  Timing (*timed)();
  int calls;
};

template <class Call>
void add(std::vector<Registered>& all, const std::string& suffix) {
  benchmark::RegisterBenchmark((std::string(Call::kName) + suffix).c_str(), batched<Call>)
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kNanosecond);
  all.push_back({Call::kName, &timed_batch<Call>, Call::kCalls});
}

// Registered where it can run; otherwise its reason goes where the harness reads it.
template <class Call>
void add_unless(const std::string& skipped, std::vector<Registered>& all, const std::string& suffix) {
  if (skipped.empty())
    add<Call>(all, suffix);
  else
    benchmark::AddCustomContext(std::string("skipped:") + Call::kName, skipped);
}

template <class... Calls>
std::vector<Registered> register_all(const std::string& suffix) {
  std::vector<Registered> all;
  (add<Calls>(all, suffix), ...);
  return all;
}

// Every call measured in passes, before the benchmarks report (see the top of the file).
// A pass times one batch of each call; a call of kCalls 1 (vecadd+sync) joins every
// kSparseEvery-th pass only, and is timed after an untimed batch of its own, as a repeated
// launch: the first launch of a kernel after another kernel's costs more under uprobe, and
// on a batch of one it lands whole (docs/measured-history.md). A call left out of a pass
// reads -1 there. Under a tracer that pauses from outside it joins every pair (that
// tracer records calls, not GPU threads) and the live passes between them sparsely.
//   - untraced, or a tracer that cannot pause: kLivePasses live passes;
//   - a tracer that pauses itself: kInProcessPairs pairs, A/B and control in turn;
//   - a tracer that pauses from outside (each pause a round trip to the harness that
//     detaches and attaches every probe): kSweeps pairs, each followed by kLiveBetween
//     live passes, so that its live batches too are spread over the process's life.
constexpr int kSweeps = 40, kLiveBetween = 4;
void measure(const std::vector<Registered>& calls) {
  std::vector<Pairs> pairs(calls.size());
  int pass_index = 0;  // counts pairs and live passes: the sparse calls join every kSparseEvery-th
  bool every_call = false;
  auto pass = [&] {
    std::vector<Timing> ns;
    for (const auto& c : calls) {
      const bool sparse = c.calls == 1;
      if (sparse && !every_call && pass_index % kSparseEvery != 0) {
        ns.push_back({-1, -1});
        continue;
      }
      if (sparse) (void)c.timed();
      ns.push_back(c.timed());
    }
    return ns;
  };
  auto settle = [&] { (void)pass(); };
  auto live_pass = [&] {
    const std::vector<Timing> ns = pass();
    for (size_t i = 0; i < calls.size(); ++i) {
      if (ns[i].ns < 0) continue;
      pairs[i].live.push_back(ns[i].ns);
      if (ns[i].records >= 0) pairs[i].records.push_back(ns[i].records);
    }
    ++pass_index;
  };
  settle();
  if (!g_pause) {
    for (int k = 0; k < kLivePasses; ++k) live_pass();
  } else {
    const int n = g_pause_from_outside ? kSweeps : kInProcessPairs;
    for (int k = 0; k < n; ++k) {
      every_call = g_pause_from_outside;
      pair(k % 2 == 1, pass, settle, pairs);
      every_call = false;
      ++pass_index;
      if (g_pause_from_outside)
        for (int j = 0; j < kLiveBetween; ++j) live_pass();
    }
  }
  for (size_t i = 0; i < calls.size(); ++i) g_measured[calls[i].call] = std::move(pairs[i]);
}

}  // namespace

int main(int argc, char** argv) {
  const char* method = std::getenv("CUDATRACE_METHOD");
  g_pause = reinterpret_cast<PauseFn>(dlsym(RTLD_DEFAULT, CUDATRACE_PAUSE_SYMBOL));
  setup();
  setup_two_gpus();
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
    g_pause_from_outside = false;  // no pairs either: every pass is live
  }
  if (g_pause) pause_or_exit(0);
  g_records = reinterpret_cast<RecordsFn>(dlsym(RTLD_DEFAULT, CUDATRACE_RECORDS_SYMBOL));
  if (const char* injected = std::getenv("CUDA_INJECTION64_PATH"); !g_records && injected && *injected)
    if (void* library = dlopen(injected, RTLD_NOW | RTLD_NOLOAD))
      g_records = reinterpret_cast<RecordsFn>(dlsym(library, CUDATRACE_RECORDS_SYMBOL));
  const std::string suffix = std::string("/") + CUDATRACE_CUDART + "/method:" + (method && *method ? method : "unknown");
  auto calls = register_all<LaunchChevrons, LaunchRuntime, LaunchDriver, CopyAsync, MallocFree, EventRecord,
                            StreamSyncIdle, VecaddSync<kVecaddSmall>, VecaddSync<kVecaddLarge>, GetDevice>(suffix);
  add_unless<PeerCopy>(g_peer_skipped, calls, suffix);
  add_unless<NcclAllReduce>(g_nccl_skipped, calls, suffix);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  measure(calls);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // NCCL's proxy threads are stopped before the process exits, not left to race its teardown.
  if (g_nccl_skipped.empty() && nccl::comm_destroy)
    for (nccl::Comm c : nccl::comms) nccl::comm_destroy(c);
  return 0;
}
