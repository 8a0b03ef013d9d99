// The CUDA driver API. cudart (static or shared) does not call libcuda through the
// dynamic linker: it dlopen()s libcuda.so.1, dlsym()s cuGetProcAddress and asks that for
// every entry point. So the shim hooks three doors: the exported cu* symbols (programs
// linked with -lcuda), dlsym (programs and cudart looking symbols up), and
// cuGetProcAddress. Whatever pointer the real lookup returns, if it is the address of a
// function we wrap, the caller gets our wrapper instead: matching by address keeps every
// variant (_v2, _ptsz, _ptds) paired with the wrapper of exactly that variant.
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

void* libcuda() {
  static void* handle = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? h : dlopen("libcuda.so.1", RTLD_NOW);
  }();
  return handle;
}

void* driver_symbol(const char* name) {
  void* h = libcuda();
  return h ? real_dlsym()(h, name) : nullptr;
}

[[gnu::noinline, gnu::cold]] void* resolve_driver_symbol(std::atomic<void*>& slot, const char* name) {
  void* p = driver_symbol(name);
  if (!p) {
    std::fprintf(stderr, "cudatrace preload: libcuda.so.1 has no %s\n", name);
    std::abort();
  }
  slot.store(p, std::memory_order_release);
  return p;
}

// Lazily resolved real entry point of one wrapped driver function.
template <class Fn>
[[gnu::always_inline]] inline Fn real_driver(std::atomic<void*>& slot, const char* name) {
  void* p = slot.load(std::memory_order_acquire);
  if (__builtin_expect(!p, 0)) p = resolve_driver_symbol(slot, name);
  return reinterpret_cast<Fn>(p);
}

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
    if (!hooks_live()) return real ARGS;                                                  \
    const int64_t t0 = now_ns();                                                          \
    const CUresult r = real ARGS;                                                         \
    emit(k_##NAME, int32_t(r), t0, now_ns(), ##__VA_ARGS__);                             \
    return r;                                                                             \
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

// ---- handing out wrappers: dlsym and cuGetProcAddress ----

namespace {

// What cuGetProcAddress handed out, hooked or not, for the run's notes (a coverage check).
std::mutex g_resolved_mu;
enum class Coverage { None = 0, Decoded = 1, Generic = 2 };
std::unordered_map<std::string, Coverage>* g_resolved = new std::unordered_map<std::string, Coverage>;

const std::unordered_map<void*, void*>& wrapper_by_real_address() {
  static const std::unordered_map<void*, void*> table = [] {
    std::unordered_map<void*, void*> t;
    struct Entry {
      const char* name;
      void* wrapper;
    };
    static const Entry entries[] = {
#define HOOK_runtime(symbol)
#define HOOK_driver(symbol) {#symbol, reinterpret_cast<void*>(&symbol)},
#define HOOK(layer, symbol, args) HOOK_##layer(symbol)
#include "tracers/preload/hooks.def"
#undef HOOK
#undef HOOK_driver
#undef HOOK_runtime
    };
    for (const auto& e : entries)
      if (void* real = driver_symbol(e.name)) t.emplace(real, e.wrapper);
    return t;
  }();
  return table;
}

void* swap_for_wrapper(const char* name, void* real);

}  // namespace

extern "C" CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);

static std::atomic<void*> real_cuGetProcAddress_v2{nullptr};
extern "C" CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                                CUdriverProcAddressQueryResult* status) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  CUresult r = real_driver<Fn>(real_cuGetProcAddress_v2, "cuGetProcAddress_v2")(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = swap_for_wrapper(symbol, *pfn);
  return r;
}

static std::atomic<void*> real_cuGetProcAddress{nullptr};
extern "C" CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t);
  CUresult r = real_driver<Fn>(real_cuGetProcAddress, "cuGetProcAddress")(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = swap_for_wrapper(symbol, *pfn);
  return r;
}

namespace {

void* swap_for_wrapper(const char* name, void* real) {
  // Resolved once: this runs for every entry point cudart asks for, and every cu* dlsym.
  static void* const real_v2 = driver_symbol("cuGetProcAddress_v2");
  static void* const real_v1 = driver_symbol("cuGetProcAddress");
  if (real == real_v2) return reinterpret_cast<void*>(&cuGetProcAddress_v2);
  if (real == real_v1) return reinterpret_cast<void*>(&cuGetProcAddress);
  const auto& table = wrapper_by_real_address();
  auto it = table.find(real);
  if (it != table.end()) {
    if (name && recording()) {
      std::lock_guard lk(g_resolved_mu);
      (*g_resolved)[name] = Coverage::Decoded;
    }
    return it->second;
  }
  if (!recording() || !name) return real;
  void* generic = generic_wrapper_for(name, real);
  std::lock_guard lk(g_resolved_mu);
  (*g_resolved)[name] = generic ? Coverage::Generic : Coverage::None;
  return generic ? generic : real;
}

// The list of entry points cudart asked for, hooked (1) or not (0), next to the records.
__attribute__((destructor)) void write_resolved() {
  const char* dir = std::getenv(kDirEnv);
  if (!dir || !recording()) return;
  std::lock_guard lk(g_resolved_mu);
  if (g_resolved->empty()) return;
  std::string path = std::string(dir) + "/preload." + std::to_string(getpid()) + ".resolved";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    for (const auto& [name, how] : *g_resolved) std::fprintf(f, "%d %s\n", int(how), name.c_str());
    std::fclose(f);
  }
}

}  // namespace

namespace cudatrace::preload {

DlsymFn real_dlsym() {
  static const DlsymFn fn = [] {
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return reinterpret_cast<DlsymFn>(p);
  }();
  return fn;
}

}  // namespace cudatrace::preload

// A lookup of a driver function by name gets the wrapper. Known limit: a dlsym(RTLD_NEXT)
// made by the program resolves relative to the shim, not to its caller.
extern "C" void* dlsym(void* handle, const char* name) {
  void* p = real_dlsym()(handle, name);
  if (p && name && name[0] == 'c' && name[1] == 'u' && name[2] != 'd') p = swap_for_wrapper(name, p);
  return p;
}
