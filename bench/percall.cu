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
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <string>

#include "bench/pause_client.h"
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

// Times `body` kBatch times per iteration; `after` runs untimed after each batch. Before
// timing, the same loop runs untimed (GPU and caches awake). Besides Google Benchmark's
// mean, each repetition reports the median batch as counter median_ns: one preempted batch
// (this runs in a VM) moves a mean by hundreds of ns, a median not.
//
// In-process A/B: under a tracer that can pause itself (the preload shim exports
// cudatrace_preload_pause; the devhook agent cudatrace_devhook_pause, which runs the
// original kernels), every timed batch is followed by the same batch with the
// tracer paused. Counter ab_delta_ns is the median of the pairwise differences: the cost of
// recording, free of everything that varies between processes (a launch's ~4 us moves by
// ±15% from one process to the next, far more than the shim adds). The cupti library
// (cudatrace_cupti_pause) is loaded by the driver, not the program: it is looked up in its
// own handle once CUDA is initialised.
//
// The pairing control: every other pair times the same two batches with the tracer
// paused in both halves. Counter control_delta_ns, the median of those
// differences, is what the pairing itself reads when nothing differs (the second batch
// runs warmer, or colder): an A/B delta within it is no measurable cost.
// Every pause function returns whether the tracer was paused before (1) or live (0), or
// -1 when it cannot pause.
using PauseFn = int (*)(int);
PauseFn g_pause = nullptr;
// A tracer that pauses itself flips a flag: every iteration is a pair. One that pauses from
// outside (uprobe: a round trip to the harness, which detaches every call probe and
// attaches it again) pairs every 10th, 40 pairs of 400 iterations: each pause and resume
// re-registers every call probe. H100 host, nine methods, one linkage: at every 5th one
// round took 191 s (the run folders' times put ~170 s of it on uprobe); at every 10th,
// two rounds took 220 s.
int64_t g_pair_every = 1;
// After a pause from outside, the first batch in either state runs slow: the kernel has
// just rewritten the probed pages (H100 host, uprobe, cudaGetDevice: a control pair whose
// first half followed a detach read +444 ns per call against an A/B of +1871). Such a
// tracer gets one untimed batch after every change, so that each timed half is settled.
bool g_settle = false;

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

template <class Body, class After>
void batched(benchmark::State& state, Body&& body, After&& after, int batch = kBatch) {
  auto timed = [&] {
    const int64_t t0 = cudatrace::monotonic_ns();
    for (int i = 0; i < batch; ++i) body();
    const int64_t t1 = cudatrace::monotonic_ns();
    after();
    return double(t1 - t0) / batch;
  };
  for (int64_t w = 0; w < std::max<int64_t>(1, state.max_iterations / 4); ++w) timed();
  std::vector<double> per_call, paused, differences, control;
  per_call.reserve(size_t(state.max_iterations));
  int64_t iteration = 0;
  for (auto _ : state) {
    // Every g_pair_every-th iteration is a pair: A/B and control in turn.
    const bool pair = g_pause && iteration % g_pair_every == 0;
    const bool control_pair = pair && (iteration / g_pair_every) % 2 == 1;
    ++iteration;
    if (control_pair) {
      pause_or_exit(1);
      if (g_settle) timed();
    }
    const double first = timed();
    state.SetIterationTime(first / 1e9);
    if (!pair) {
      per_call.push_back(first);
      continue;
    }
    pause_or_exit(1);  // in a control pair already paused: asked again, so that both pairs do the same between halves
    if (g_settle) timed();
    const double second = timed();
    pause_or_exit(0);
    if (g_settle) timed();
    if (control_pair) {
      control.push_back(first - second);
    } else {
      per_call.push_back(first);
      paused.push_back(second);
      differences.push_back(first - second);
    }
  }
  state.counters["median_ns"] = median(per_call);
  if (g_pause) {
    state.counters["paused_median_ns"] = median(paused);
    state.counters["ab_delta_ns"] = median(differences);
    state.counters["control_delta_ns"] = median(control);
  }
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
void nothing() {}

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

void register_all(const std::string& suffix) {
  auto add = [&](const std::string& call, void (*fn)(benchmark::State&)) {
    benchmark::RegisterBenchmark((call + suffix).c_str(), fn)
        ->UseManualTime()
        ->Iterations(kIterations)
        ->Unit(benchmark::kNanosecond);
  };
  add("launch<<<>>>", [](benchmark::State& s) { batched(s, [] { empty_kernel<<<1, 1, 0, g_stream>>>(); }, sync); });
  add("cudaLaunchKernel", [](benchmark::State& s) {
    batched(s, [] { cudaLaunchKernel(reinterpret_cast<const void*>(&empty_kernel), dim3(1), dim3(1), nullptr, 0, g_stream); },
            sync);
  });
  add("cuLaunchKernel", [](benchmark::State& s) {
    batched(s, [] { g_cuLaunchKernel(g_function, 1, 1, 1, 1, 1, 1, 0, g_stream, nullptr, nullptr); }, sync);
  });
  add("cudaMemcpyAsync_4B_HtoD", [](benchmark::State& s) {
    batched(s, [] { cudaMemcpyAsync(g_device, g_pinned, 4, cudaMemcpyHostToDevice, g_stream); }, sync);
  });
  add("cudaMalloc+cudaFree_1MiB", [](benchmark::State& s) {
    batched(s, [] {
      void* p = nullptr;
      cudaMalloc(&p, 1 << 20);
      cudaFree(p);
    }, nothing);
  });
  add("cudaEventRecord", [](benchmark::State& s) { batched(s, [] { cudaEventRecord(g_event, g_stream); }, sync); });
  add("cudaStreamSynchronize_idle", [](benchmark::State& s) { batched(s, [] { cudaStreamSynchronize(g_stream); }, nothing); });
  for (const int n : {kVecaddSmall, kVecaddLarge}) {
    const std::string name = "vecadd_n" + std::to_string(n) + "+sync";
    benchmark::RegisterBenchmark((name + suffix).c_str(), [n](benchmark::State& s) {
      batched(s, [n] {
        vecadd_kernel<<<(n + 255) / 256, 256, 0, g_stream>>>(g_vec[0], g_vec[1], g_vec[2], n);
        sync();
      }, nothing, 1);
    })->UseManualTime()->Iterations(kVecaddIterations)->Unit(benchmark::kNanosecond);
  }
  add("cudaGetDevice", [](benchmark::State& s) {
    batched(s, [] {
      int d;
      cudaGetDevice(&d);
    }, nothing);
  });
}

}  // namespace

int main(int argc, char** argv) {
  const char* method = std::getenv("CUDATRACE_METHOD");
  for (const char* pause : {"cudatrace_preload_pause", "cudatrace_devhook_pause"})
    if (!g_pause) g_pause = reinterpret_cast<PauseFn>(dlsym(RTLD_DEFAULT, pause));
  setup();
  if (const char* injected = std::getenv("CUDA_INJECTION64_PATH"); !g_pause && injected && *injected)
    if (void* library = dlopen(injected, RTLD_NOW | RTLD_NOLOAD))
      g_pause = reinterpret_cast<PauseFn>(dlsym(library, "cudatrace_cupti_pause"));
  // A tracer outside the process (uprobe) pauses through the channel it handed us.
  if (!g_pause && cudatrace::pause_channel_fd() >= 0) {
    g_pause = &cudatrace::pause_through_channel;
    g_pair_every = 10;
    g_settle = true;
  }
  // One pause and resume before anything is timed: a tracer that cannot pause here (the
  // kernel lacks what it needs) measures without the A/B, and says why on stderr.
  if (g_pause && g_pause(1) < 0) {
    std::fprintf(stderr, "percall: the tracer refused to pause: no in-process A/B in this run\n");
    g_pause = nullptr;
  }
  if (g_pause) pause_or_exit(0);
  register_all(std::string("/") + CUDATRACE_CUDART + "/method:" + (method && *method ? method : "unknown"));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
