// streams: several host threads, each driving its own streams with async copies, kernels
// and events, chained across streams with cudaStreamWaitEvent. Checks per-thread order
// and thread attribution in every tracer.
#include <atomic>
#include <thread>
#include <vector>

#include "workloads/workload_main.h"

extern "C" __global__ void affine_kernel(const float* in, float* out, int n, float mul, float add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * mul + add;
}

namespace {

struct Lane {  // one stream with its buffers
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  float *host_in = nullptr, *host_out = nullptr, *dev_in = nullptr, *dev_out = nullptr;
};

bool drive(int lanes, int iters, int n, std::atomic<int>& failures) {
  const size_t bytes = size_t(n) * sizeof(float);
  const int block = 256, grid = (n + block - 1) / block;
  auto must = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
      std::fprintf(stderr, "streams: %s failed with CUDA error %d\n", what, int(e));
      ++failures;
    }
    return e == cudaSuccess;
  };
  if (!must(rt::SetDevice(0), "cudaSetDevice")) return false;
  std::vector<Lane> ls(lanes);
  for (auto& l : ls) {
    must(rt::StreamCreate(&l.stream), "cudaStreamCreate");
    must(rt::EventCreate(&l.done), "cudaEventCreate");
    must(rt::MallocHost(reinterpret_cast<void**>(&l.host_in), 2 * bytes), "cudaMallocHost");
    must(rt::Malloc(reinterpret_cast<void**>(&l.dev_in), 2 * bytes), "cudaMalloc");
    if (failures) return false;
    l.host_out = l.host_in + n;
    l.dev_out = l.dev_in + n;
    for (int i = 0; i < n; ++i) l.host_in[i] = float(i % 4096);
  }
  for (int it = 0; it < iters; ++it) {
    for (int s = 0; s < lanes; ++s) {
      Lane& l = ls[s];
      must(rt::MemcpyAsync(l.dev_in, l.host_in, bytes, cudaMemcpyHostToDevice, l.stream), "cudaMemcpyAsync");
      if (s > 0) must(rt::StreamWaitEvent(l.stream, ls[s - 1].done), "cudaStreamWaitEvent");
      rt::Launch("affine_kernel", affine_kernel, grid, block, 0, l.stream, l.dev_in, l.dev_out, n, 2.0f, float(it));
      must(rt::EventRecord(l.done, l.stream), "cudaEventRecord");
      must(rt::MemcpyAsync(l.host_out, l.dev_out, bytes, cudaMemcpyDeviceToHost, l.stream), "cudaMemcpyAsync");
    }
  }
  bool ok = true;
  for (auto& l : ls) {
    must(rt::StreamSynchronize(l.stream), "cudaStreamSynchronize");
    must(rt::EventSynchronize(l.done), "cudaEventSynchronize");
    for (int i = 0; i < n && ok; ++i) ok = l.host_out[i] == l.host_in[i] * 2.0f + float(iters - 1);
  }
  for (auto& l : ls) {
    must(rt::EventDestroy(l.done), "cudaEventDestroy");
    must(rt::StreamDestroy(l.stream), "cudaStreamDestroy");
    must(rt::Free(l.dev_in), "cudaFree");
    must(rt::FreeHost(l.host_in), "cudaFreeHost");
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  workload::Flags flags("streams", "Host threads each drive their own CUDA streams: async copies, kernels, events.",
                        {{"threads", {"host threads", 2}},
                         {"streams", {"streams per thread", 2}},
                         {"iters", {"rounds over every stream", 50}},
                         {"n", {"elements per buffer", 1 << 16}}});
  flags.parse(argc, argv);
  const int threads = int(flags["threads"]), lanes = int(flags["streams"]), iters = int(flags["iters"]),
            n = int(flags["n"]);
  if (threads < 1 || lanes < 1) {
    std::fprintf(stderr, "streams: --threads and --streams must be at least 1 (see --help)\n");
    return workload::kUsage;
  }
  workload::open_session("streams", argc, argv);

  std::atomic<int> failures{0};
  std::atomic<bool> all_ok{true};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      if (!drive(lanes, iters, n, failures)) all_ok = false;
    });
  for (auto& th : pool) th.join();
  if (failures) {
    ledger::finish();
    return workload::kCudaFailed;
  }
  if (!all_ok) std::fprintf(stderr, "streams: wrong result\n");

  const int64_t per_thread_lanes = int64_t(lanes), T = threads;
  ledger::intend("cudaSetDevice", T);
  for (const char* setup : {"cudaStreamCreate", "cudaEventCreate", "cudaMallocHost", "cudaMalloc",
                            "cudaStreamSynchronize", "cudaEventSynchronize", "cudaEventDestroy",
                            "cudaStreamDestroy", "cudaFree", "cudaFreeHost"})
    ledger::intend(setup, T * per_thread_lanes);
  ledger::intend("cudaMemcpyAsync", T * per_thread_lanes * iters * 2);
  ledger::intend("cudaLaunchKernel", T * per_thread_lanes * iters);
  ledger::intend("cudaEventRecord", T * per_thread_lanes * iters);
  ledger::intend("cudaStreamWaitEvent", T * (per_thread_lanes - 1) * iters);
  ledger::info("host_threads", T);
  ledger::info("streams", T * per_thread_lanes);
  return workload::close_session(all_ok);
}
