// CUDA calls that tracers/preload/hooks.def does not describe, made the way programs make
// them: linked (-lcudart, -lcuda) or looked up with dlsym on a dlopen'ed handle. Each line
// of output is "name code" for one call, in order: what the shim must have recorded.
//   unlisted_calls runtime|driver direct|dlsym
// Meant for a machine without a GPU (the toolkit's stub as libcuda.so.1 answers every
// driver call with CUDA_ERROR_STUB_LIBRARY; cudart answers with an error of its own):
// the arguments are only good enough for that.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool g_dlsym = false;
void* g_handle = nullptr;

// The function as the program would reach it: its linked symbol, or dlsym's answer.
template <class Fn>
Fn reach(Fn linked, const char* name) {
  if (!g_dlsym) return linked;
  void* p = dlsym(g_handle, name);
  if (!p) {
    std::fprintf(stderr, "unlisted_calls: dlsym(%s) found nothing\n", name);
    std::exit(3);
  }
  return reinterpret_cast<Fn>(p);
}

#define NAME_OF(f) #f
#define EXPANDED_NAME(f) NAME_OF(f)
// Names as the headers resolve them (cuStreamBeginCapture -> cuStreamBeginCapture_v2).
#define CALL(f, ...) \
  std::printf("%s %d\n", EXPANDED_NAME(f), int(reach(&f, EXPANDED_NAME(f))(__VA_ARGS__)))

const char kPtx[] = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n";

void runtime_calls() {
  cudaDeviceProp prop{};
  int v = 0, lo = 0, hi = 0;
  unsigned flags = 0;
  size_t a = 0, b = 0;
  void* p = nullptr;
  cudaPointerAttributes attr{};
  cudaPitchedPtr pitched{};
  cudaFuncAttributes fattr{};
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  char bus[64];
  std::vector<char> page(8192);
  cudaMemLocation where{};
  where.type = cudaMemLocationTypeDevice;
  CALL(cudaGetDeviceProperties, &prop, 0);
  CALL(cudaDeviceGetAttribute, &v, cudaDevAttrMultiProcessorCount, 0);
  CALL(cudaSetDeviceFlags, cudaDeviceScheduleAuto);
  CALL(cudaGetDeviceFlags, &flags);
  CALL(cudaDeviceGetLimit, &a, cudaLimitStackSize);
  CALL(cudaMemGetInfo, &a, &b);
  CALL(cudaStreamQuery, nullptr);
  CALL(cudaPointerGetAttributes, &attr, &v);
  CALL(cudaDeviceGetStreamPriorityRange, &lo, &hi);
  CALL(cudaMallocPitch, &p, &a, 64, 64);
  const cudaExtent extent{64, 4, 4};
  CALL(cudaMalloc3D, &pitched, extent);  // a 24-byte struct by value: on the stack
  CALL(cudaMemPrefetchAsync, nullptr, 0, where, 0u, nullptr);  // a 8-byte struct by value, in a register
  CALL(cudaDeviceCanAccessPeer, &v, 0, 0);
  CALL(cudaHostRegister, page.data(), page.size(), 0u);
  CALL(cudaHostUnregister, page.data());
  CALL(cudaThreadExchangeStreamCaptureMode, &mode);
  CALL(cudaStreamGetPriority, nullptr, &v);
  CALL(cudaDeviceGetPCIBusId, bus, int(sizeof bus), 0);
  CALL(cudaFuncGetAttributes, &fattr, reinterpret_cast<const void*>(&runtime_calls));
  CALL(cudaMemset2D, nullptr, 0, 0, 0, 0);
  // Results that are not error codes come back whole: a struct returned through memory,
  // a pointer. Recorded with code 0.
  const cudaChannelFormatDesc d =
      reach(&cudaCreateChannelDesc, "cudaCreateChannelDesc")(8, 16, 0, 0, cudaChannelFormatKindUnsigned);
  std::printf("cudaCreateChannelDesc 0\n");
  const char* err = reach(&cudaGetErrorName, "cudaGetErrorName")(cudaErrorInvalidValue);
  std::printf("cudaGetErrorName 0\n");
  if (d.x != 8 || d.y != 16 || d.f != cudaChannelFormatKindUnsigned || !err || std::strcmp(err, "cudaErrorInvalidValue")) {
    std::fprintf(stderr, "unlisted_calls: a result came back damaged\n");
    std::exit(4);
  }
}

void driver_calls() {
  int v = 0;
  unsigned flags = 0;
  size_t a = 0, b = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  CUlibrary lib = nullptr;
  CUkernel kern = nullptr;
  CUdeviceptr dp = 0;
  CUgraph graph = nullptr;
  char name[64];
  CALL(cuDriverGetVersion, &v);
  CALL(cuDeviceGet, &dev, 0);
  CALL(cuDeviceGetCount, &v);
  CALL(cuDeviceGetName, name, int(sizeof name), 0);
  CALL(cuDeviceGetAttribute, &v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
  CALL(cuDeviceTotalMem, &a, 0);
  CALL(cuDevicePrimaryCtxRetain, &ctx, 0);
  CALL(cuDevicePrimaryCtxRelease, 0);
  CALL(cuCtxGetCurrent, &ctx);
  CALL(cuCtxSetCurrent, nullptr);
  CALL(cuCtxGetDevice, &dev);
  CALL(cuCtxGetApiVersion, nullptr, &flags);
  CALL(cuModuleLoadData, &mod, kPtx);
  CALL(cuModuleGetFunction, &fn, mod, "k");
  CALL(cuModuleUnload, mod);
  CALL(cuLibraryLoadData, &lib, kPtx, nullptr, nullptr, 0u, nullptr, nullptr, 0u);
  CALL(cuLibraryGetKernel, &kern, lib, "k");
  CALL(cuMemAllocAsync, &dp, 256, nullptr);
  CALL(cuMemFreeAsync, dp, nullptr);
  CALL(cuStreamBeginCapture, nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL);
  CALL(cuStreamEndCapture, nullptr, &graph);
  CALL(cuStreamQuery, nullptr);
  CALL(cuStreamGetFlags, nullptr, &flags);
  CALL(cuMemGetInfo, &a, &b);
  CALL(cuPointerGetAttribute, &v, CU_POINTER_ATTRIBUTE_CONTEXT, 0);
  CALL(cuFuncGetAttribute, &v, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
  CALL(cuOccupancyMaxActiveBlocksPerMultiprocessor, &v, fn, 128, 0);
  CALL(cuMemsetD16, 0, 0, 0);
  CALL(cuGraphCreate, &graph, 0u);
  CALL(cuGraphLaunch, nullptr, nullptr);
  CALL(cuTexRefSetMipmapLevelBias, nullptr, 1.5f);  // a float by value
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "runtime") && std::strcmp(argv[1], "driver")) ||
      (std::strcmp(argv[2], "direct") && std::strcmp(argv[2], "dlsym"))) {
    std::fprintf(stderr, "usage: unlisted_calls runtime|driver direct|dlsym\n");
    return 2;
  }
  const bool runtime = std::strcmp(argv[1], "runtime") == 0;
  g_dlsym = std::strcmp(argv[2], "dlsym") == 0;
  if (g_dlsym) {
    // The cudart this program links (libcudart.so.13 for CUDA 13), or the driver.
    const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
    g_handle = dlopen(runtime ? cudart.c_str() : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!g_handle) {
      std::fprintf(stderr, "unlisted_calls: %s\n", dlerror());
      return 3;
    }
  }
  if (runtime)
    runtime_calls();
  else
    driver_calls();
  return 0;
}
