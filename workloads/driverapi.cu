// driverapi: a JIT compiler's launcher (Triton, NVRTC users). PTX made at build time is
// loaded with cuModuleLoadData and with cuLibraryLoadData, kernels are launched with
// cuLaunchKernel and cuLaunchKernelEx, and nothing is registered with cudart. Like such
// launchers it links libcuda (-lcuda) and also resolves a function through dlsym on a
// handle of its own. Three driver calls are made to fail (an impossible allocation, a
// double free, a launch with too many threads per block); the ledger records every driver
// call with its code (args.step names an injected failure), and the program carries on.
#include <cuda.h>
#include <dlfcn.h>

#include <vector>

#include "workloads/ptx_kernels.h"
#include "workloads/workload_main.h"

namespace {

const char* kName = "driverapi";

// The driver calls, recorded (layer "driver"); DRV's must succeed.
template <class Call>
CUresult driver(const char* name, Call&& call, std::initializer_list<ledger::Arg> args = {}) {
  return workload::recorded_call(true, name, std::forward<Call>(call), args);
}
#define DRV(NAME, CALL, ...) MUST_CALL(true, kName, NAME, CALL, __VA_ARGS__)

using ledger::Arg;

}  // namespace

int main(int argc, char** argv) {
  workload::Flags flags(kName, "PTX loaded through the driver API and launched with cuLaunchKernel(Ex), plus three "
                               "driver calls made to fail; the result is checked.",
                        {{"n", {"elements per vector", 1 << 16}},
                         {"iters", {"cuLaunchKernelEx launches of ptx_axpy", 20}},
                         {"block", {"threads per block", 256}},
                         {"host_path", {workload::kHostPathHelp, 1}}});
  flags.parse(argc, argv);
  const int n = int(flags["n"]), iters = int(flags["iters"]), block = int(flags["block"]);
  ledger::start(kName, CUDATRACE_CUDART, argc, argv);
  ledger::intend("cuInit", 1);
  const CUresult init = driver("cuInit", [] { return cuInit(0); });
  if (flags["host_path"] && workload::means_no_gpu(int(init))) workload::host_path_only(kName, int(init));
  if (init != CUDA_SUCCESS) {
    std::fprintf(stderr, "%s: cuInit failed with CUDA driver error %d\n", kName, int(init));
    ledger::finish();
    return workload::kCudaFailed;
  }

  CUdevice dev;
  CUcontext ctx, current = nullptr;
  DRV("cuDeviceGet", cuDeviceGet(&dev, 0), Arg::Int("ordinal", 0));
  DRV("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev), Arg::Int("device", dev));
  DRV("cuCtxSetCurrent", cuCtxSetCurrent(ctx), Arg::Ptr("ctx", ctx));
  // The launcher's own handle on libcuda, as Python extensions keep one.
  void* self_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto get_current = self_handle ? reinterpret_cast<CUresult (*)(CUcontext*)>(dlsym(self_handle, "cuCtxGetCurrent"))
                                 : nullptr;
  if (!get_current) {
    std::fprintf(stderr, "%s: cannot resolve cuCtxGetCurrent through dlsym: %s\n", kName, dlerror());
    return workload::kCudaFailed;
  }
  DRV("cuCtxGetCurrent", get_current(&current), Arg::Str("via", "dlsym"));

  CUmodule module;
  CUlibrary library;
  CUfunction fill, axpy;
  CUkernel axpy_kernel;
  DRV("cuModuleLoadData", cuModuleLoadData(&module, kPtxKernels));
  DRV("cuModuleGetFunction", cuModuleGetFunction(&fill, module, "ptx_fill"), Arg::Str("name", "ptx_fill"));
  DRV("cuLibraryLoadData", cuLibraryLoadData(&library, kPtxKernels, nullptr, nullptr, 0, nullptr, nullptr, 0));
  DRV("cuLibraryGetKernel", cuLibraryGetKernel(&axpy_kernel, library, "ptx_axpy"), Arg::Str("name", "ptx_axpy"));
  DRV("cuKernelGetFunction", cuKernelGetFunction(&axpy, axpy_kernel));

  const size_t bytes = size_t(n) * sizeof(float);
  CUdeviceptr x, y;
  DRV("cuMemAlloc", cuMemAlloc(&x, bytes), Arg::Int("bytes", int64_t(bytes)));
  DRV("cuMemAlloc", cuMemAlloc(&y, bytes), Arg::Int("bytes", int64_t(bytes)));

  const unsigned grid = unsigned((n + block - 1) / block);
  // A macro, not a function: an initializer_list returned from a function dangles.
#define LAUNCH_ARGS(KERNEL) Arg::Str("kernel", KERNEL), Arg::Dim3("grid", grid, 1, 1), Arg::Dim3("block", unsigned(block), 1, 1)
  float one = 1.0f, two = 2.0f, a = 1.0f;
  void* fill_x[] = {&x, &one, const_cast<int*>(&n)};
  void* fill_y[] = {&y, &two, const_cast<int*>(&n)};
  DRV("cuLaunchKernel", cuLaunchKernel(fill, grid, 1, 1, unsigned(block), 1, 1, 0, nullptr, fill_x, nullptr),
      LAUNCH_ARGS("ptx_fill"));
  DRV("cuLaunchKernel", cuLaunchKernel(fill, grid, 1, 1, unsigned(block), 1, 1, 0, nullptr, fill_y, nullptr),
      LAUNCH_ARGS("ptx_fill"));
  CUlaunchConfig config{};
  config.gridDimX = grid;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = unsigned(block);
  config.blockDimY = config.blockDimZ = 1;
  void* axpy_args[] = {&y, &x, &a, const_cast<int*>(&n)};
  for (int i = 0; i < iters; ++i)
    DRV("cuLaunchKernelEx", cuLaunchKernelEx(&config, axpy, axpy_args, nullptr), LAUNCH_ARGS("ptx_axpy"));

  // Failures a JIT launcher meets, each expected and recorded with its code.
  CUdeviceptr huge = 0;
  ledger::expect("impossible allocation", "cuMemAlloc", {CUDA_ERROR_OUT_OF_MEMORY});
  driver("cuMemAlloc", [&] { return cuMemAlloc(&huge, size_t(1) << 50); },
         {Arg::Int("bytes", int64_t(1) << 50), Arg::Str("step", "impossible allocation")});
  CUdeviceptr scratch;
  DRV("cuMemAlloc", cuMemAlloc(&scratch, 4096), Arg::Int("bytes", 4096));
  DRV("cuMemFree", cuMemFree(scratch), Arg::Ptr("ptr", reinterpret_cast<void*>(scratch)));
  ledger::expect("double free", "cuMemFree", {CUDA_ERROR_INVALID_VALUE});
  driver("cuMemFree", [&] { return cuMemFree(scratch); },
         {Arg::Ptr("ptr", reinterpret_cast<void*>(scratch)), Arg::Str("step", "double free")});
  CUlaunchConfig too_wide = config;
  too_wide.blockDimX = 4096;  // over the 1024 threads a block may have: nothing runs
  ledger::expect("bad launch configuration", "cuLaunchKernelEx", {CUDA_ERROR_INVALID_VALUE});
  driver("cuLaunchKernelEx", [&] { return cuLaunchKernelEx(&too_wide, axpy, axpy_args, nullptr); },
         {Arg::Str("kernel", "ptx_axpy"), Arg::Dim3("grid", grid, 1, 1), Arg::Dim3("block", 4096, 1, 1),
          Arg::Str("expect", "launch error"), Arg::Str("step", "bad launch configuration")});

  DRV("cuCtxSynchronize", cuCtxSynchronize());
  std::vector<float> host(n);
  DRV("cuMemcpyDtoH", cuMemcpyDtoH(host.data(), y, bytes), Arg::Int("bytes", int64_t(bytes)));
  DRV("cuMemFree", cuMemFree(x), Arg::Ptr("ptr", reinterpret_cast<void*>(x)));
  DRV("cuMemFree", cuMemFree(y), Arg::Ptr("ptr", reinterpret_cast<void*>(y)));
  DRV("cuModuleUnload", cuModuleUnload(module));
  DRV("cuLibraryUnload", cuLibraryUnload(library));
  DRV("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(dev), Arg::Int("device", dev));

  const float want = 2.0f + float(iters);
  bool ok = current == ctx;
  for (int i = 0; i < n && ok; ++i) ok = host[i] == want;
  if (!ok) std::fprintf(stderr, "%s: wrong result (y[0] %g, want %g; context %s)\n", kName, host[0], want,
                        current == ctx ? "ok" : "not the one set");

  ledger::intend("cuDeviceGet", 1);
  ledger::intend("cuDevicePrimaryCtxRetain", 1);
  ledger::intend("cuCtxSetCurrent", 1);
  ledger::intend("cuCtxGetCurrent", 1);
  ledger::intend("cuModuleLoadData", 1);
  ledger::intend("cuModuleGetFunction", 1);
  ledger::intend("cuLibraryLoadData", 1);
  ledger::intend("cuLibraryGetKernel", 1);
  ledger::intend("cuKernelGetFunction", 1);
  ledger::intend("cuMemAlloc", 4);
  ledger::intend("cuLaunchKernel", 2);
  ledger::intend("cuLaunchKernelEx", iters + 1);
  ledger::intend("cuMemFree", 4);
  ledger::intend("cuCtxSynchronize", 1);
  ledger::intend("cuMemcpyDtoH", 1);
  ledger::intend("cuModuleUnload", 1);
  ledger::intend("cuLibraryUnload", 1);
  ledger::intend("cuDevicePrimaryCtxRelease", 1);
  return workload::close_session(ok);
}
