// The CUDA driver API functions hooks.def describes, with their arguments. Every other
// function libcuda exports is a generic forwarder (generic_exports.cpp), and what dlsym
// and cuGetProcAddress hand out is swapped for these in lookup_hooks.cpp.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tracers/preload/shim/generic_hooks.h"
#include "tracers/preload/shim/real_symbols.h"
#include "tracers/preload/shim/recorder.h"

// cuda.h maps these names to their _v2 entry points; we hook both by their own names.
#undef cuEventElapsedTime
#undef cuGetProcAddress

using namespace cudatrace::preload;

namespace {

inline uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Kernel names for driver launches: asked of the driver once per handle and thread.
// cudart hands cuLaunchKernel a CUkernel (library kernel) as often as a CUfunction, and
// each has its own name query.
[[gnu::noinline]] void name_kernel(CUfunction f) {
  ThreadBuffer& b = t_buffer;
  b.recent_kernels[b.next_recent_kernel++ % ThreadBuffer::kRecentKernels] = u64(f);
  thread_local std::unordered_set<CUfunction> named;
  if (f && named.insert(f).second) {
    using FuncName = CUresult (*)(const char**, CUfunction);
    using KernelName = CUresult (*)(const char**, CUkernel);
    static auto func_name = reinterpret_cast<FuncName>(driver_symbol("cuFuncGetName"));
    static auto kernel_name = reinterpret_cast<KernelName>(driver_symbol("cuKernelGetName"));
    const char* name = nullptr;
    if ((func_name && func_name(&name, f) == CUDA_SUCCESS && name) ||
        (kernel_name && kernel_name(&name, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS && name))
      note_kernel(u64(f), name);
  }
}

// The last few handles this thread launched are checked first: a launch loop repeats a
// handful of kernels, and a hash-set lookup costs more than the comparisons.
inline uint64_t kernel_of(CUfunction f) {
  for (uint64_t r : t_buffer.recent_kernels)
    if (r == u64(f)) return u64(f);
  name_kernel(f);
  return u64(f);
}

}  // namespace

extern "C" CUresult CUDAAPI cuEventElapsedTime(float*, CUevent, CUevent);

#define DRIVER_HOOK(NAME, PARAMS, ARGS, ...)                                              \
  static std::atomic<void*> real_##NAME{nullptr};                                        \
  extern "C" CUresult CUDAAPI NAME PARAMS {                                              \
    const auto real = real_driver<CUresult(*) PARAMS>(real_##NAME, #NAME);                \
    CUDATRACE_RECORDED_CALL(k_##NAME, CUresult, real, ARGS, ##__VA_ARGS__);              \
  }

#define OK (r == CUDA_SUCCESS)
#define LAUNCH_ARGS u64(reinterpret_cast<void*>(kernel_of(f))), pack_dim3(gx, gy, gz), pack_dim3(bx, by, bz), sm, u64(s)
#define LAUNCH_PARAMS                                                                                      \
  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sm, \
   CUstream s, void** params, void** extra)
#define LAUNCH_EX_ARGS                                                                                  \
  u64(reinterpret_cast<void*>(kernel_of(f))), c ? pack_dim3(c->gridDimX, c->gridDimY, c->gridDimZ) : 0, \
      c ? pack_dim3(c->blockDimX, c->blockDimY, c->blockDimZ) : 0, c ? c->sharedMemBytes : 0, c ? u64(c->hStream) : 0

DRIVER_HOOK(cuInit, (unsigned flags), (flags), flags)
DRIVER_HOOK(cuCtxSynchronize, (), ())
DRIVER_HOOK(cuMemAlloc_v2, (CUdeviceptr * p, size_t n), (p, n), n, OK && p ? *p : 0)
DRIVER_HOOK(cuMemFree_v2, (CUdeviceptr p), (p), p)
DRIVER_HOOK(cuMemAllocHost_v2, (void** p, size_t n), (p, n), n, OK && p ? u64(*p) : 0)
DRIVER_HOOK(cuMemHostAlloc, (void** p, size_t n, unsigned fl), (p, n, fl), n, OK && p ? u64(*p) : 0, fl)
DRIVER_HOOK(cuMemFreeHost, (void* p), (p), u64(p))
DRIVER_HOOK(cuMemcpy, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), d, s, n)
DRIVER_HOOK(cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), d, s, n)
DRIVER_HOOK(cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), d, s, n, u64(st))
DRIVER_HOOK(cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), d, s, n, u64(st))
DRIVER_HOOK(cuMemcpyHtoD_v2, (CUdeviceptr d, const void* s, size_t n), (d, s, n), d, u64(s), n)
DRIVER_HOOK(cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void* s, size_t n), (d, s, n), d, u64(s), n)
DRIVER_HOOK(cuMemcpyDtoH_v2, (void* d, CUdeviceptr s, size_t n), (d, s, n), u64(d), s, n)
DRIVER_HOOK(cuMemcpyDtoH_v2_ptds, (void* d, CUdeviceptr s, size_t n), (d, s, n), u64(d), s, n)
DRIVER_HOOK(cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), d, s, n)
DRIVER_HOOK(cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), d, s, n)
DRIVER_HOOK(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void* s, size_t n, CUstream st), (d, s, n, st), d, u64(s), n, u64(st))
DRIVER_HOOK(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void* s, size_t n, CUstream st), (d, s, n, st), d, u64(s), n,
            u64(st))
DRIVER_HOOK(cuMemcpyDtoHAsync_v2, (void* d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), u64(d), s, n, u64(st))
DRIVER_HOOK(cuMemcpyDtoHAsync_v2_ptsz, (void* d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), u64(d), s, n,
            u64(st))
DRIVER_HOOK(cuMemcpyDtoDAsync_v2, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), d, s, n, u64(st))
DRIVER_HOOK(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), d, s, n,
            u64(st))
DRIVER_HOOK(cuMemsetD8_v2, (CUdeviceptr p, unsigned char v, size_t n), (p, v, n), p, v, n)
DRIVER_HOOK(cuMemsetD8_v2_ptds, (CUdeviceptr p, unsigned char v, size_t n), (p, v, n), p, v, n)
DRIVER_HOOK(cuMemsetD8Async, (CUdeviceptr p, unsigned char v, size_t n, CUstream st), (p, v, n, st), p, v, n, u64(st))
DRIVER_HOOK(cuMemsetD8Async_ptsz, (CUdeviceptr p, unsigned char v, size_t n, CUstream st), (p, v, n, st), p, v, n,
            u64(st))
DRIVER_HOOK(cuMemsetD32_v2, (CUdeviceptr p, unsigned v, size_t n), (p, v, n), p, v, n)
DRIVER_HOOK(cuMemsetD32_v2_ptds, (CUdeviceptr p, unsigned v, size_t n), (p, v, n), p, v, n)
DRIVER_HOOK(cuMemsetD32Async, (CUdeviceptr p, unsigned v, size_t n, CUstream st), (p, v, n, st), p, v, n, u64(st))
DRIVER_HOOK(cuMemsetD32Async_ptsz, (CUdeviceptr p, unsigned v, size_t n, CUstream st), (p, v, n, st), p, v, n, u64(st))
DRIVER_HOOK(cuStreamCreate, (CUstream * s, unsigned fl), (s, fl), OK && s ? u64(*s) : 0, fl)
DRIVER_HOOK(cuStreamCreateWithPriority, (CUstream * s, unsigned fl, int pr), (s, fl, pr), OK && s ? u64(*s) : 0, fl,
            uint64_t(pr))
DRIVER_HOOK(cuStreamDestroy_v2, (CUstream s), (s), u64(s))
DRIVER_HOOK(cuStreamSynchronize, (CUstream s), (s), u64(s))
DRIVER_HOOK(cuStreamSynchronize_ptsz, (CUstream s), (s), u64(s))
DRIVER_HOOK(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned fl), (s, e, fl), u64(s), u64(e), fl)
DRIVER_HOOK(cuStreamWaitEvent_ptsz, (CUstream s, CUevent e, unsigned fl), (s, e, fl), u64(s), u64(e), fl)
DRIVER_HOOK(cuEventCreate, (CUevent * e, unsigned fl), (e, fl), OK && e ? u64(*e) : 0, fl)
DRIVER_HOOK(cuEventRecord, (CUevent e, CUstream s), (e, s), u64(e), u64(s))
DRIVER_HOOK(cuEventRecord_ptsz, (CUevent e, CUstream s), (e, s), u64(e), u64(s))
DRIVER_HOOK(cuEventRecordWithFlags, (CUevent e, CUstream s, unsigned fl), (e, s, fl), u64(e), u64(s), fl)
DRIVER_HOOK(cuEventRecordWithFlags_ptsz, (CUevent e, CUstream s, unsigned fl), (e, s, fl), u64(e), u64(s), fl)
DRIVER_HOOK(cuEventSynchronize, (CUevent e), (e), u64(e))
DRIVER_HOOK(cuEventDestroy_v2, (CUevent e), (e), u64(e))
DRIVER_HOOK(cuEventElapsedTime, (float* ms, CUevent a, CUevent b), (ms, a, b), u64(a), u64(b))
DRIVER_HOOK(cuEventElapsedTime_v2, (float* ms, CUevent a, CUevent b), (ms, a, b), u64(a), u64(b))
DRIVER_HOOK(cuLaunchKernel, LAUNCH_PARAMS, (f, gx, gy, gz, bx, by, bz, sm, s, params, extra), LAUNCH_ARGS)
DRIVER_HOOK(cuLaunchKernel_ptsz, LAUNCH_PARAMS, (f, gx, gy, gz, bx, by, bz, sm, s, params, extra), LAUNCH_ARGS)
DRIVER_HOOK(cuLaunchKernelEx, (const CUlaunchConfig* c, CUfunction f, void** params, void** extra), (c, f, params, extra),
            LAUNCH_EX_ARGS)
DRIVER_HOOK(cuLaunchKernelEx_ptsz, (const CUlaunchConfig* c, CUfunction f, void** params, void** extra),
            (c, f, params, extra), LAUNCH_EX_ARGS)

#undef OK
