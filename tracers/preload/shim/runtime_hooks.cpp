// The CUDA runtime API, hooked by exporting the same symbols as libcudart.so: a program
// linked against the shared runtime calls these first. A program with cudart linked in
// statically never comes here (its driver calls still reach driver_hooks.cpp).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "tracers/preload/shim/recorder.h"
#include "tracers/preload/shim/real_symbols.h"

using namespace cudatrace::preload;

namespace {

inline uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }
inline uint64_t dim(const dim3& d) { return pack_dim3(d.x, d.y, d.z); }

}  // namespace

// The variants cudart exports for per-thread default streams, and the hidden entry points
// of <<<>>> and kernel registration: not all are declared by the public headers.
extern "C" {
cudaError_t cudaMemcpy_ptds(void*, const void*, size_t, cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemset_ptds(void*, int, size_t);
cudaError_t cudaMemsetAsync_ptsz(void*, int, size_t, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t, cudaEvent_t, unsigned);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t, cudaStream_t);
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t*, const void*, void**);
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaGetKernel(cudaKernel_t*, const void*);
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t, cudaStream_t, unsigned);
cudaError_t cudaMallocAsync_ptsz(void**, size_t, cudaStream_t);
cudaError_t cudaFreeAsync_ptsz(void*, cudaStream_t);
cudaError_t cudaMemcpy2D_ptds(void*, size_t, const void*, size_t, size_t, size_t, cudaMemcpyKind);
cudaError_t cudaMemcpy2DAsync_ptsz(void*, size_t, const void*, size_t, size_t, size_t, cudaMemcpyKind, cudaStream_t);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t, cudaStreamCaptureMode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t, cudaGraph_t*);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t, cudaStream_t);
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*);
}

// One hooked runtime function: forward to the next definition (libcudart.so), time it,
// record `SLOTS` (expressions over the parameters and `r`, the result).
#define RUNTIME_HOOK(NAME, PARAMS, ARGS, ...)                                             \
  static std::atomic<void*> real_##NAME{nullptr};                                        \
  extern "C" cudaError_t NAME PARAMS {                                                   \
    const auto real = next_symbol_once<cudaError_t(*) PARAMS>(real_##NAME, #NAME,         \
                                                              __builtin_return_address(0)); \
    CUDATRACE_RECORDED_CALL(k_##NAME, cudaError_t, real, ARGS, ##__VA_ARGS__);           \
  }

#define OK (r == cudaSuccess)

RUNTIME_HOOK(cudaRuntimeGetVersion, (int* v), (v), uint64_t(OK ? *v : 0))
RUNTIME_HOOK(cudaDriverGetVersion, (int* v), (v), uint64_t(OK ? *v : 0))
RUNTIME_HOOK(cudaGetDeviceCount, (int* n), (n), uint64_t(OK ? *n : 0))
RUNTIME_HOOK(cudaSetDevice, (int d), (d), uint64_t(d))
RUNTIME_HOOK(cudaGetDevice, (int* d), (d), uint64_t(int64_t(OK ? *d : -1)))
RUNTIME_HOOK(cudaMalloc, (void** p, size_t n), (p, n), n, OK && p ? u64(*p) : 0)
RUNTIME_HOOK(cudaFree, (void* p), (p), u64(p))
RUNTIME_HOOK(cudaMallocHost, (void** p, size_t n), (p, n), n, OK && p ? u64(*p) : 0)
RUNTIME_HOOK(cudaHostAlloc, (void** p, size_t n, unsigned f), (p, n, f), n, OK && p ? u64(*p) : 0, f)
RUNTIME_HOOK(cudaFreeHost, (void* p), (p), u64(p))
RUNTIME_HOOK(cudaMemcpy, (void* d, const void* s, size_t n, cudaMemcpyKind k), (d, s, n, k), u64(d), u64(s), n,
             uint64_t(k))
RUNTIME_HOOK(cudaMemcpy_ptds, (void* d, const void* s, size_t n, cudaMemcpyKind k), (d, s, n, k), u64(d), u64(s), n,
             uint64_t(k))
RUNTIME_HOOK(cudaMemcpyAsync, (void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t st), (d, s, n, k, st),
             u64(d), u64(s), n, uint64_t(k), u64(st))
RUNTIME_HOOK(cudaMemcpyAsync_ptsz, (void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t st),
             (d, s, n, k, st), u64(d), u64(s), n, uint64_t(k), u64(st))
RUNTIME_HOOK(cudaMemset, (void* p, int v, size_t n), (p, v, n), u64(p), uint64_t(v), n)
RUNTIME_HOOK(cudaMemset_ptds, (void* p, int v, size_t n), (p, v, n), u64(p), uint64_t(v), n)
RUNTIME_HOOK(cudaMemsetAsync, (void* p, int v, size_t n, cudaStream_t st), (p, v, n, st), u64(p), uint64_t(v), n,
             u64(st))
RUNTIME_HOOK(cudaMemsetAsync_ptsz, (void* p, int v, size_t n, cudaStream_t st), (p, v, n, st), u64(p), uint64_t(v),
             n, u64(st))
RUNTIME_HOOK(cudaStreamCreate, (cudaStream_t * s), (s), OK ? u64(*s) : 0)
RUNTIME_HOOK(cudaStreamCreateWithFlags, (cudaStream_t * s, unsigned f), (s, f), OK ? u64(*s) : 0, f)
RUNTIME_HOOK(cudaStreamDestroy, (cudaStream_t s), (s), u64(s))
RUNTIME_HOOK(cudaStreamSynchronize, (cudaStream_t s), (s), u64(s))
RUNTIME_HOOK(cudaStreamSynchronize_ptsz, (cudaStream_t s), (s), u64(s))
RUNTIME_HOOK(cudaStreamWaitEvent, (cudaStream_t s, cudaEvent_t e, unsigned f), (s, e, f), u64(s), u64(e), f)
RUNTIME_HOOK(cudaStreamWaitEvent_ptsz, (cudaStream_t s, cudaEvent_t e, unsigned f), (s, e, f), u64(s), u64(e), f)
RUNTIME_HOOK(cudaEventCreate, (cudaEvent_t * e), (e), OK ? u64(*e) : 0)
RUNTIME_HOOK(cudaEventCreateWithFlags, (cudaEvent_t * e, unsigned f), (e, f), OK ? u64(*e) : 0, f)
RUNTIME_HOOK(cudaEventRecord, (cudaEvent_t e, cudaStream_t s), (e, s), u64(e), u64(s))
RUNTIME_HOOK(cudaEventRecord_ptsz, (cudaEvent_t e, cudaStream_t s), (e, s), u64(e), u64(s))
RUNTIME_HOOK(cudaEventSynchronize, (cudaEvent_t e), (e), u64(e))
RUNTIME_HOOK(cudaEventElapsedTime, (float* ms, cudaEvent_t a, cudaEvent_t b), (ms, a, b), u64(a), u64(b))
RUNTIME_HOOK(cudaEventDestroy, (cudaEvent_t e), (e), u64(e))
RUNTIME_HOOK(cudaDeviceSynchronize, (), ())
RUNTIME_HOOK(cudaGetLastError, (), ())
RUNTIME_HOOK(cudaPeekAtLastError, (), ())
RUNTIME_HOOK(cudaLaunchKernel, (const void* f, dim3 g, dim3 b, void** a, size_t sm, cudaStream_t s),
             (f, g, b, a, sm, s), u64(f), dim(g), dim(b), sm, u64(s))
RUNTIME_HOOK(cudaLaunchKernel_ptsz, (const void* f, dim3 g, dim3 b, void** a, size_t sm, cudaStream_t s),
             (f, g, b, a, sm, s), u64(f), dim(g), dim(b), sm, u64(s))
RUNTIME_HOOK(__cudaLaunchKernel, (cudaKernel_t k, dim3 g, dim3 b, void** a, size_t sm, cudaStream_t s),
             (k, g, b, a, sm, s), u64(k), dim(g), dim(b), sm, u64(s))
RUNTIME_HOOK(__cudaLaunchKernel_ptsz, (cudaKernel_t k, dim3 g, dim3 b, void** a, size_t sm, cudaStream_t s),
             (k, g, b, a, sm, s), u64(k), dim(g), dim(b), sm, u64(s))
RUNTIME_HOOK(cudaLaunchKernelExC, (const cudaLaunchConfig_t* c, const void* f, void** a), (c, f, a), u64(f),
             c ? dim(c->gridDim) : 0, c ? dim(c->blockDim) : 0, c ? c->dynamicSmemBytes : 0, c ? u64(c->stream) : 0)
RUNTIME_HOOK(cudaLaunchKernelExC_ptsz, (const cudaLaunchConfig_t* c, const void* f, void** a), (c, f, a), u64(f),
             c ? dim(c->gridDim) : 0, c ? dim(c->blockDim) : 0, c ? c->dynamicSmemBytes : 0, c ? u64(c->stream) : 0)

RUNTIME_HOOK(cudaEventRecordWithFlags, (cudaEvent_t e, cudaStream_t s, unsigned f), (e, s, f), u64(e), u64(s), f)
RUNTIME_HOOK(cudaEventRecordWithFlags_ptsz, (cudaEvent_t e, cudaStream_t s, unsigned f), (e, s, f), u64(e), u64(s), f)
RUNTIME_HOOK(cudaMallocAsync, (void** p, size_t n, cudaStream_t s), (p, n, s), n, OK && p ? u64(*p) : 0, u64(s))
RUNTIME_HOOK(cudaMallocAsync_ptsz, (void** p, size_t n, cudaStream_t s), (p, n, s), n, OK && p ? u64(*p) : 0, u64(s))
RUNTIME_HOOK(cudaFreeAsync, (void* p, cudaStream_t s), (p, s), u64(p), u64(s))
RUNTIME_HOOK(cudaFreeAsync_ptsz, (void* p, cudaStream_t s), (p, s), u64(p), u64(s))
RUNTIME_HOOK(cudaMallocManaged, (void** p, size_t n, unsigned f), (p, n, f), n, OK && p ? u64(*p) : 0, f)
#define MEMCPY2D_PARAMS (void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind k)
#define MEMCPY2D_ASYNC_PARAMS \
  (void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind k, cudaStream_t st)
RUNTIME_HOOK(cudaMemcpy2D, MEMCPY2D_PARAMS, (d, dp, s, sp, w, h, k), u64(d), u64(s), w, h, uint64_t(k))
RUNTIME_HOOK(cudaMemcpy2D_ptds, MEMCPY2D_PARAMS, (d, dp, s, sp, w, h, k), u64(d), u64(s), w, h, uint64_t(k))
RUNTIME_HOOK(cudaMemcpy2DAsync, MEMCPY2D_ASYNC_PARAMS, (d, dp, s, sp, w, h, k, st), u64(d), u64(s), w, h, u64(st))
RUNTIME_HOOK(cudaMemcpy2DAsync_ptsz, MEMCPY2D_ASYNC_PARAMS, (d, dp, s, sp, w, h, k, st), u64(d), u64(s), w, h, u64(st))
#undef MEMCPY2D_PARAMS
#undef MEMCPY2D_ASYNC_PARAMS

// CUDA graphs: what a captured or built graph does on the GPU is not a call; its capture,
// instantiation and every replay are.
RUNTIME_HOOK(cudaStreamBeginCapture, (cudaStream_t s, cudaStreamCaptureMode m), (s, m), u64(s), uint64_t(m))
RUNTIME_HOOK(cudaStreamBeginCapture_ptsz, (cudaStream_t s, cudaStreamCaptureMode m), (s, m), u64(s), uint64_t(m))
RUNTIME_HOOK(cudaStreamEndCapture, (cudaStream_t s, cudaGraph_t* g), (s, g), u64(s), OK && g ? u64(*g) : 0)
RUNTIME_HOOK(cudaStreamEndCapture_ptsz, (cudaStream_t s, cudaGraph_t* g), (s, g), u64(s), OK && g ? u64(*g) : 0)
RUNTIME_HOOK(cudaGraphCreate, (cudaGraph_t * g, unsigned f), (g, f), OK && g ? u64(*g) : 0, f)
RUNTIME_HOOK(cudaGraphInstantiate, (cudaGraphExec_t * e, cudaGraph_t g, unsigned long long f), (e, g, f), u64(g),
             OK && e ? u64(*e) : 0, f)
RUNTIME_HOOK(cudaGraphInstantiateWithFlags, (cudaGraphExec_t * e, cudaGraph_t g, unsigned long long f), (e, g, f),
             u64(g), OK && e ? u64(*e) : 0, f)
RUNTIME_HOOK(cudaGraphLaunch, (cudaGraphExec_t e, cudaStream_t s), (e, s), u64(e), u64(s))
RUNTIME_HOOK(cudaGraphLaunch_ptsz, (cudaGraphExec_t e, cudaStream_t s), (e, s), u64(e), u64(s))
RUNTIME_HOOK(cudaGraphExecDestroy, (cudaGraphExec_t e), (e), u64(e))
RUNTIME_HOOK(cudaGraphDestroy, (cudaGraph_t g), (g), u64(g))

#undef OK

// Not recorded (cudart's plumbing, not a call the program makes), but watched: they tie
// the handles that launches carry to kernel names.
extern "C" void __cudaRegisterFunction(void** fatbin, const char* stub, char* device_fun, const char* device_name,
                                       int thread_limit, uint3* tid, uint3* bid, dim3* bdim, dim3* gdim, int* wsize) {
  static const auto real =
      next_symbol<decltype(&__cudaRegisterFunction)>("__cudaRegisterFunction", __builtin_return_address(0));
  note_stub(reinterpret_cast<uint64_t>(stub), device_name);
  real(fatbin, stub, device_fun, device_name, thread_limit, tid, bid, bdim, gdim, wsize);
}

extern "C" cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* stub) {
  static const auto real = next_symbol<decltype(&__cudaGetKernel)>("__cudaGetKernel", __builtin_return_address(0));
  cudaError_t r = real(kernel, stub);
  if (r == cudaSuccess && kernel)
    if (const char* name = kernel_name_of_stub(reinterpret_cast<uint64_t>(stub)))
      note_kernel(reinterpret_cast<uint64_t>(*kernel), name);
  return r;
}
