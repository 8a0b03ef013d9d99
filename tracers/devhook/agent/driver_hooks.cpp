// The driver entry points the agent takes over, by exporting libcuda's names: module loads
// (to read each image's PTX), the lookups that name a kernel in a module or library, the
// driver's launch calls, and the calls that destroy a context (its ring is read first). This is how JIT compilers, NVRTC users and Python launchers
// load and run code, with or without cudart, shared or static.
//
// What it reaches: calls a program or library makes to these functions by name (linked
// with -lcuda). Not reached: pointers from cuGetProcAddress / cudaGetDriverEntryPoint, or
// from dlsym on a handle of libcuda; those launches run unchanged and are not counted.
#include <cuda.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tracers/devhook/agent/driver_api.h"
#include "tracers/devhook/agent/instrumenter.h"

using namespace cudatrace::devhook;

// cuda.h makes these names macros for their _v2 forms; libcuda exports both, and programs
// built against older headers call the first ones.
#undef cuCtxDestroy
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset

extern "C" {
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        CUstream, void**);
CUresult cuCtxDestroy(CUcontext);
CUresult cuDevicePrimaryCtxRelease(CUdevice);
CUresult cuDevicePrimaryCtxReset(CUdevice);
}

namespace {

template <class Fn>
Fn real(const char* name) {
  void* p = real_driver_symbol(name);
  if (!p) {
    std::fprintf(stderr, "cudatrace devhook: libcuda.so.1 has no %s\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}

// cuModuleLoad's file, read whole (the driver reads it too): up to 256 MiB of a regular file.
std::string read_module_file(const char* path) {
  std::string data;
  const int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) return data;
  struct stat st{};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size <= (off_t(256) << 20)) {
    data.resize(size_t(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = read(fd, data.data() + got, data.size() - got);
      if (n <= 0) break;
      got += size_t(n);
    }
    data.resize(got);
  }
  close(fd);
  return data;
}

LaunchRequest request(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned smem, CUstream s, void** params, bool ptsz) {
  LaunchRequest r;
  r.kernel = f;
  r.grid[0] = gx, r.grid[1] = gy, r.grid[2] = gz;
  r.block[0] = bx, r.block[1] = by, r.block[2] = bz;
  r.shared_mem = smem;
  r.stream = s;
  r.args = params;
  r.per_thread_default_stream = ptsz;
  r.driver_api = true;
  return r;
}

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                              void**, void**);
using LaunchExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using CooperativeFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   CUstream, void**);

CUresult launch(LaunchFn fn, bool ptsz, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned smem, CUstream s, void** params, void** extra) {
  // No kernelParams and no extra: a kernel that takes no arguments (launch_instrumented
  // checks that it takes none).
  if (extra)
    count_uninstrumented("cuLaunchKernel with `extra` (a packed parameter buffer; not handled)");
  else if (launch_instrumented(request(f, gx, gy, gz, bx, by, bz, smem, s, params, ptsz)))
    return CUDA_SUCCESS;
  const CUresult r = fn(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
  original_result(r == CUDA_SUCCESS);
  return r;
}

CUresult launch_ex(LaunchExFn fn, bool ptsz, const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  if (c && extra) {
    count_uninstrumented("cuLaunchKernelEx with `extra` (a packed parameter buffer; not handled)");
  } else if (c) {
    LaunchRequest r = request(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                              c->sharedMemBytes, c->hStream, params, ptsz);
    r.config = c;
    if (launch_instrumented(r)) return CUDA_SUCCESS;
  }
  const CUresult r = fn(c, f, params, extra);
  original_result(r == CUDA_SUCCESS);
  return r;
}

}  // namespace

extern "C" {

CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  static const auto fn = real<decltype(&cuModuleLoadData)>("cuModuleLoadData");
  const CUresult r = fn(m, image);
  if (r == CUDA_SUCCESS && m) on_module_loaded(*m, image, "cuModuleLoadData");
  return r;
}

// The program's JIT options are not applied to the instrumented copy (it is compiled with
// the defaults).
CUresult cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned n, CUjit_option* opts, void** values) {
  static const auto fn = real<decltype(&cuModuleLoadDataEx)>("cuModuleLoadDataEx");
  const CUresult r = fn(m, image, n, opts, values);
  if (r == CUDA_SUCCESS && m) on_module_loaded(*m, image, "cuModuleLoadDataEx");
  return r;
}

CUresult cuModuleLoadFatBinary(CUmodule* m, const void* fatbin) {
  static const auto fn = real<decltype(&cuModuleLoadFatBinary)>("cuModuleLoadFatBinary");
  const CUresult r = fn(m, fatbin);
  if (r == CUDA_SUCCESS && m) on_module_loaded(*m, fatbin, "cuModuleLoadFatBinary");
  return r;
}

CUresult cuModuleLoad(CUmodule* m, const char* path) {
  static const auto fn = real<decltype(&cuModuleLoad)>("cuModuleLoad");
  const CUresult r = fn(m, path);
  if (r == CUDA_SUCCESS && m) {
    const std::string image = read_module_file(path);  // NUL-terminated, as PTX text must be
    on_module_loaded(*m, image.empty() ? nullptr : image.c_str(), "cuModuleLoad");
  }
  return r;
}

CUresult cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option* jit_opts, void** jit_values, unsigned njit,
                           CUlibraryOption* lib_opts, void** lib_values, unsigned nlib) {
  static const auto fn = real<decltype(&cuLibraryLoadData)>("cuLibraryLoadData");
  const CUresult r = fn(lib, code, jit_opts, jit_values, njit, lib_opts, lib_values, nlib);
  if (r == CUDA_SUCCESS && lib) on_module_loaded(*lib, code, "cuLibraryLoadData");
  return r;
}

CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  static const auto fn = real<decltype(&cuModuleGetFunction)>("cuModuleGetFunction");
  const CUresult r = fn(f, m, name);
  if (r == CUDA_SUCCESS && f) on_module_function(*f, m, name);
  return r;
}

CUresult cuLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  static const auto fn = real<decltype(&cuLibraryGetKernel)>("cuLibraryGetKernel");
  const CUresult r = fn(k, lib, name);
  if (r == CUDA_SUCCESS && k) on_module_function(*k, lib, name);
  return r;
}

CUresult cuKernelGetFunction(CUfunction* f, CUkernel k) {
  static const auto fn = real<decltype(&cuKernelGetFunction)>("cuKernelGetFunction");
  const CUresult r = fn(f, k);
  if (r == CUDA_SUCCESS && f) on_kernel_alias(*f, k);
  return r;
}

CUresult cuModuleUnload(CUmodule m) {
  static const auto fn = real<decltype(&cuModuleUnload)>("cuModuleUnload");
  on_module_unloaded(m);
  return fn(m);
}

CUresult cuLibraryUnload(CUlibrary lib) {
  static const auto fn = real<decltype(&cuLibraryUnload)>("cuLibraryUnload");
  on_module_unloaded(lib);
  return fn(lib);
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, CUstream s, void** params, void** extra) {
  static const auto fn = real<LaunchFn>("cuLaunchKernel");
  return launch(fn, false, f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             unsigned smem, CUstream s, void** params, void** extra) {
  static const auto fn = real<LaunchFn>("cuLaunchKernel_ptsz");
  return launch(fn, true, f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  static const auto fn = real<LaunchExFn>("cuLaunchKernelEx");
  return launch_ex(fn, false, c, f, params, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  static const auto fn = real<LaunchExFn>("cuLaunchKernelEx_ptsz");
  return launch_ex(fn, true, c, f, params, extra);
}

// A context about to go: its ring is read first (instrumenter.h). Both the names cuda.h
// selects (_v2) and the older ones are exported by libcuda, so both are taken over. A
// primary context's release may leave it alive (other retains): reading it early then only
// means that later launches in it use a new ring.
#define CUDATRACE_BEFORE_CONTEXT_GOES(NAME, ARG, NOTE)             \
  CUresult NAME(ARG x) {                                            \
    static const auto fn = real<CUresult (*)(ARG)>(#NAME);          \
    NOTE(x);                                                        \
    return fn(x);                                                   \
  }
CUDATRACE_BEFORE_CONTEXT_GOES(cuCtxDestroy_v2, CUcontext, before_context_destroyed)
CUDATRACE_BEFORE_CONTEXT_GOES(cuCtxDestroy, CUcontext, before_context_destroyed)
CUDATRACE_BEFORE_CONTEXT_GOES(cuDevicePrimaryCtxRelease_v2, CUdevice, before_primary_context_released)
CUDATRACE_BEFORE_CONTEXT_GOES(cuDevicePrimaryCtxRelease, CUdevice, before_primary_context_released)
CUDATRACE_BEFORE_CONTEXT_GOES(cuDevicePrimaryCtxReset_v2, CUdevice, before_primary_context_released)
CUDATRACE_BEFORE_CONTEXT_GOES(cuDevicePrimaryCtxReset, CUdevice, before_primary_context_released)
#undef CUDATRACE_BEFORE_CONTEXT_GOES

// Cooperative launches run unchanged (grid-wide sync needs the original's residency), counted.
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned smem, CUstream s, void** params) {
  static const auto fn = real<CooperativeFn>("cuLaunchCooperativeKernel");
  count_uninstrumented("cuLaunchCooperativeKernel (not handled)");
  return fn(f, gx, gy, gz, bx, by, bz, smem, s, params);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned smem, CUstream s, void** params) {
  static const auto fn = real<CooperativeFn>("cuLaunchCooperativeKernel_ptsz");
  count_uninstrumented("cuLaunchCooperativeKernel (not handled)");
  return fn(f, gx, gy, gz, bx, by, bz, smem, s, params);
}

}  // extern "C"
