#pragma once
// What every workload that uses the CUDA runtime shares: the flags (workload_flags.h), the
// ledger session, and one set of exit codes the harness understands.
#include "ledger/recorded_cuda.h"
#include "workloads/workload_flags.h"

#ifndef CUDATRACE_CUDART
#define CUDATRACE_CUDART "unknown"
#endif

namespace workload {

// A call that must succeed: on failure, say which and stop with kCudaFailed.
#define MUST(call)                                                                          \
  do {                                                                                      \
    cudaError_t must_err_ = (call);                                                         \
    if (must_err_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s failed with CUDA error %d\n", __FILE__, __LINE__, #call, \
                   int(must_err_));                                                         \
      ledger::finish();                                                                     \
      std::exit(workload::kCudaFailed);                                                     \
    }                                                                                       \
  } while (0)

// Every GPU workload opens the same way: start the ledger, find a device, record the
// runtime version. Both calls are counted as intended. With --host_path=1, no usable GPU
// ends the workload there with success (host_path_only) instead of failing it.
inline void open_session(const char* name, int argc, char** argv) {
  const bool host_path = g_host_path;
  ledger::start(name, CUDATRACE_CUDART, argc, argv);
  int version = 0, count = 0;
  MUST(rt::RuntimeGetVersion(&version));
  ledger::info("cuda_runtime_version", version);
  const cudaError_t counted = rt::GetDeviceCount(&count);
  if (host_path && means_no_gpu(int(counted))) {
    ledger::intend("cudaRuntimeGetVersion", 1);
    ledger::intend("cudaGetDeviceCount", 1);
    host_path_only(name, int(counted));
  }
  MUST(counted);
  if (count < 1) {
    std::fprintf(stderr, "%s: no CUDA device\n", name);
    ledger::finish();
    std::exit(kCudaFailed);
  }
  ledger::intend("cudaRuntimeGetVersion", 1);
  ledger::intend("cudaGetDeviceCount", 1);
}


}  // namespace workload
