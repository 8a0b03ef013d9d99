// dlopen: a Python framework's way of using CUDA. The program links no CUDA library; some
// time after start it dlopens libcudart.so.N from a folder of its own, outside the
// loader's search path (private-cudart/ beside it, as a wheel's nvidia/cu13/lib), looks
// every function up with dlsym on that handle (as JAX/XLA does), loads its kernels from
// PTX with cudaLibraryLoadData and launches them with cudaLaunchKernel through the
// looked-up pointers. Without a usable GPU it stops after cudaGetDeviceCount, with success.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "ledger/ledger.h"
#include "workloads/ptx_kernels.h"
#include "workloads/workload_flags.h"

namespace {

const char* kName = "dlopen";
using ledger::Arg;

// The runtime functions this program uses, looked up on its own handle.
struct Cudart {
  decltype(&cudaRuntimeGetVersion) RuntimeGetVersion;
  decltype(&cudaGetDeviceCount) GetDeviceCount;
  cudaError_t (*Malloc)(void**, size_t);  // cuda_runtime.h overloads cudaMalloc
  decltype(&cudaMemcpy) Memcpy;
  decltype(&cudaLibraryLoadData) LibraryLoadData;
  decltype(&cudaLibraryGetKernel) LibraryGetKernel;
  cudaError_t (*LaunchKernel)(const void*, dim3, dim3, void**, size_t, cudaStream_t);
  decltype(&cudaGetLastError) GetLastError;
  decltype(&cudaDeviceSynchronize) DeviceSynchronize;
  decltype(&cudaFree) Free;
  decltype(&cudaLibraryUnload) LibraryUnload;
};

template <class F>
void resolve(void* handle, F& fn, const char* symbol) {
  fn = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!fn) {
    std::fprintf(stderr, "%s: %s not found in the loaded cudart: %s\n", kName, symbol, dlerror());
    std::exit(workload::kCudaFailed);
  }
}

// The runtime calls through the looked-up pointers, recorded; CALL's must succeed.
template <class Call>
cudaError_t call(const char* name, Call&& fn, std::initializer_list<Arg> args = {}) {
  return workload::recorded_call(false, name, std::forward<Call>(fn), args);
}
#define CALL(NAME, EXPR, ...) MUST_CALL(false, kName, NAME, EXPR, __VA_ARGS__)

}  // namespace

int main(int argc, char** argv) {
  workload::Flags flags(kName, "dlopen()s a private libcudart some time after start and calls it through dlsym'd "
                               "pointers: PTX kernels loaded with cudaLibraryLoadData, launched, checked.",
                        {{"n", {"elements per vector", 1 << 16}},
                         {"iters", {"cudaLaunchKernel launches of ptx_axpy", 20}},
                         {"block", {"threads per block", 256}},
                         {"delay_ms", {"milliseconds between start and the dlopen of cudart", 200}},
                         {"host_path", {workload::kHostPathHelp, 1}}});
  flags.parse(argc, argv);
  const int n = int(flags["n"]), iters = int(flags["iters"]), block = int(flags["block"]);
  ledger::start(kName, "shared", argc, argv);
  std::this_thread::sleep_for(std::chrono::milliseconds(flags["delay_ms"]));

  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string library =
      (self.parent_path() / "private-cudart" / ("libcudart.so." + std::to_string(CUDART_VERSION / 1000))).string();
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::fprintf(stderr, "%s: cannot load %s: %s\n", kName, library.c_str(), dlerror());
    return workload::kCudaFailed;
  }
  ledger::info("cudart_loaded_from", library);
  Cudart rt{};
  resolve(handle, rt.RuntimeGetVersion, "cudaRuntimeGetVersion");
  resolve(handle, rt.GetDeviceCount, "cudaGetDeviceCount");
  resolve(handle, rt.Malloc, "cudaMalloc");
  resolve(handle, rt.Memcpy, "cudaMemcpy");
  resolve(handle, rt.LibraryLoadData, "cudaLibraryLoadData");
  resolve(handle, rt.LibraryGetKernel, "cudaLibraryGetKernel");
  resolve(handle, rt.LaunchKernel, "cudaLaunchKernel");
  resolve(handle, rt.GetLastError, "cudaGetLastError");
  resolve(handle, rt.DeviceSynchronize, "cudaDeviceSynchronize");
  resolve(handle, rt.Free, "cudaFree");
  resolve(handle, rt.LibraryUnload, "cudaLibraryUnload");

  int version = 0, count = 0;
  CALL("cudaRuntimeGetVersion", rt.RuntimeGetVersion(&version));
  ledger::intend("cudaRuntimeGetVersion", 1);
  ledger::intend("cudaGetDeviceCount", 1);
  const cudaError_t counted = call("cudaGetDeviceCount", [&] { return rt.GetDeviceCount(&count); });
  if (flags["host_path"] && workload::means_no_gpu(int(counted))) workload::host_path_only(kName, int(counted));
  if (counted != cudaSuccess || count < 1) {
    std::fprintf(stderr, "%s: cudaGetDeviceCount: error %d, %d devices\n", kName, int(counted), count);
    ledger::finish();
    return workload::kCudaFailed;
  }

  const size_t bytes = size_t(n) * sizeof(float);
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  void *dx, *dy;
  CALL("cudaMalloc", rt.Malloc(&dx, bytes), Arg::Int("bytes", int64_t(bytes)));
  CALL("cudaMalloc", rt.Malloc(&dy, bytes), Arg::Int("bytes", int64_t(bytes)));
  CALL("cudaMemcpy", rt.Memcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice), Arg::Int("bytes", int64_t(bytes)),
       Arg::Str("kind", "HtoD"));
  CALL("cudaMemcpy", rt.Memcpy(dy, y.data(), bytes, cudaMemcpyHostToDevice), Arg::Int("bytes", int64_t(bytes)),
       Arg::Str("kind", "HtoD"));
  cudaLibrary_t lib;
  cudaKernel_t axpy;
  CALL("cudaLibraryLoadData", rt.LibraryLoadData(&lib, kPtxKernels, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CALL("cudaLibraryGetKernel", rt.LibraryGetKernel(&axpy, lib, "ptx_axpy"), Arg::Str("name", "ptx_axpy"));

  const unsigned grid = unsigned((n + block - 1) / block);
  float a = 1.0f;
  void* args[] = {&dy, &dx, &a, const_cast<int*>(&n)};
  for (int i = 0; i < iters; ++i)
    CALL("cudaLaunchKernel", rt.LaunchKernel(reinterpret_cast<const void*>(axpy), dim3(grid), dim3(unsigned(block)), args, 0, nullptr),
         Arg::Str("kernel", "ptx_axpy"), Arg::Dim3("grid", grid, 1, 1), Arg::Dim3("block", unsigned(block), 1, 1),
         Arg::Str("via", "dlsym"));
  CALL("cudaGetLastError", rt.GetLastError());
  CALL("cudaDeviceSynchronize", rt.DeviceSynchronize());
  CALL("cudaMemcpy", rt.Memcpy(y.data(), dy, bytes, cudaMemcpyDeviceToHost), Arg::Int("bytes", int64_t(bytes)),
       Arg::Str("kind", "DtoH"));
  CALL("cudaFree", rt.Free(dx));
  CALL("cudaFree", rt.Free(dy));
  CALL("cudaLibraryUnload", rt.LibraryUnload(lib));

  const float want = 2.0f + float(iters);
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = y[i] == want;
  if (!ok) std::fprintf(stderr, "%s: wrong result (y[0] %g, want %g)\n", kName, y[0], want);
  ledger::intend("cudaMalloc", 2);
  ledger::intend("cudaMemcpy", 3);
  ledger::intend("cudaLibraryLoadData", 1);
  ledger::intend("cudaLibraryGetKernel", 1);
  ledger::intend("cudaLaunchKernel", iters);
  ledger::intend("cudaGetLastError", 1);
  ledger::intend("cudaDeviceSynchronize", 1);
  ledger::intend("cudaFree", 2);
  ledger::intend("cudaLibraryUnload", 1);
  return workload::close_session(ok);
}
