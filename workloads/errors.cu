// errors: injected failures, each checked against the code CUDA must return, after which
// the program carries on. Tracers must report these calls with their error codes.
// Without a GPU (or driver) it still runs: every call then fails with the same
// initialisation error (cudaErrorInsufficientDriver, 35, where libcuda is missing), and
// every call is still recorded. That is what lets CI check host-side tracers.
#include <vector>

#include "workloads/workload_main.h"

extern "C" __global__ void empty_kernel() {}

namespace {

int mismatches = 0;
int no_driver_code = 0;  // 0: a GPU is there; else the code every call fails with

// Records what the step expects (in the ledger header) and compares with what came back.
void check(const char* step, const char* call, cudaError_t got, std::vector<int> want) {
  if (no_driver_code) want = {no_driver_code};
  bool ok = false;
  for (int w : want) ok = ok || int(got) == w;
  if (!ok) {
    std::fprintf(stderr, "errors: step %s: %s returned %d, expected", step, call, int(got));
    for (int w : want) std::fprintf(stderr, " %d", w);
    std::fprintf(stderr, "\n");
    ++mismatches;
  }
  ledger::expect(step, call, want);
}

}  // namespace

int main(int argc, char** argv) {
  workload::Flags flags("errors", "Injected CUDA failures (OOM, invalid value, bad pointer, double free, "
                                  "bad launch configuration, invalid device), each checked; runs without a GPU.",
                        {{"repeat", {"times to run the whole sequence", 1}}});
  flags.parse(argc, argv);
  const int repeat = int(flags["repeat"]);
  ledger::start("errors", CUDATRACE_CUDART, argc, argv);

  int version = 0, count = 0;
  check("probe", "cudaRuntimeGetVersion", rt::RuntimeGetVersion(&version), {cudaSuccess});
  ledger::info("cuda_runtime_version", version);
  cudaError_t probe = rt::GetDeviceCount(&count);
  if (probe != cudaSuccess || count < 1) {
    no_driver_code = probe != cudaSuccess ? int(probe) : int(cudaErrorNoDevice);
    std::fprintf(stderr, "errors: no usable GPU (cudaGetDeviceCount returned %d): expecting %d from every call\n",
                 int(probe), no_driver_code);
  }
  ledger::info("no_driver_code", no_driver_code);
  ledger::info("mode", no_driver_code ? "no-gpu" : "gpu");

  for (int r = 0; r < repeat; ++r) {
    void* p = nullptr;
    check("oom", "cudaMalloc", rt::Malloc(&p, size_t(1) << 50), {cudaErrorMemoryAllocation});
    check("invalid-value", "cudaMalloc", rt::Malloc(nullptr, 16), {cudaErrorInvalidValue});
    char host[64];
    check("bad-pointer", "cudaMemcpy",
          rt::Memcpy(host, reinterpret_cast<void*>(uintptr_t(0x10)), sizeof host, cudaMemcpyDeviceToHost),
          {cudaErrorInvalidValue});
    void* q = nullptr;
    check("double-free", "cudaMalloc", rt::Malloc(&q, 4096), {cudaSuccess});
    check("double-free", "cudaFree", rt::Free(q), {cudaSuccess});
    check("double-free", "cudaFree", rt::Free(q), {cudaErrorInvalidValue});
    rt::LaunchThatFails("empty_kernel", empty_kernel, 1, 4096);  // > 1024 threads per block
    // Measured on the H100 with CUDA 13.0 / driver 580: cudaErrorInvalidValue. Older
    // releases report cudaErrorInvalidConfiguration for the same launch.
    check("bad-launch", "cudaGetLastError", rt::GetLastError(),
          {cudaErrorInvalidValue, cudaErrorInvalidConfiguration});
    check("invalid-device", "cudaSetDevice", rt::SetDevice(9999), {cudaErrorInvalidDevice});
    // None of the above is sticky: the context must still work.
    check("recovery", "cudaDeviceSynchronize", rt::DeviceSynchronize(), {cudaSuccess});
  }

  ledger::intend("cudaRuntimeGetVersion", 1);
  ledger::intend("cudaGetDeviceCount", 1);
  ledger::intend("cudaMalloc", 3 * repeat);
  ledger::intend("cudaMemcpy", repeat);
  ledger::intend("cudaFree", 2 * repeat);
  ledger::intend("cudaLaunchKernel", repeat);
  ledger::intend("cudaGetLastError", repeat);
  ledger::intend("cudaSetDevice", repeat);
  ledger::intend("cudaDeviceSynchronize", repeat);
  if (mismatches) std::fprintf(stderr, "errors: %d call(s) returned an unexpected code\n", mismatches);
  return workload::close_session(mismatches == 0);
}
