// The runtime entry points the agent takes over, by exporting libcudart.so's names: kernel
// registration (to learn each host stub's fatbin and device function), every launch path
// a program linked against the shared runtime uses, and graph kernel nodes added by hand.
// (Modules loaded through the driver API: driver_hooks.cpp.) A program with cudart linked in
// statically registers and launches inside itself, where no preload reaches: the agent
// then sees no fatbin and says so in its report.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "tracers/devhook/agent/instrumenter.h"
#include "tracers/pause_hook.h"

using namespace cudatrace::devhook;

extern "C" {
void** __cudaRegisterFatBinary(void*);
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*);
cudaError_t __cudaGetKernel(cudaKernel_t*, const void*);
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t*, const void*, void**);
}

namespace {

template <class Fn>
Fn real(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    std::fprintf(stderr, "cudatrace devhook: no definition of %s behind the agent\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}

// cudart may route one public launch through another exported one; only the outermost
// call is the program's launch.
thread_local bool inside_launch = false;

struct Outermost {
  bool first;
  Outermost() : first(!inside_launch) { inside_launch = true; }
  ~Outermost() {
    if (first) inside_launch = false;
  }
};

LaunchRequest request(const void* kernel, dim3 g, dim3 b, void** args, size_t smem, cudaStream_t s, bool ptsz) {
  LaunchRequest r;
  r.kernel = kernel;
  r.grid[0] = g.x, r.grid[1] = g.y, r.grid[2] = g.z;
  r.block[0] = b.x, r.block[1] = b.y, r.block[2] = b.z;
  r.args = args;
  r.shared_mem = smem;
  r.stream = reinterpret_cast<CUstream>(s);
  r.per_thread_default_stream = ptsz;
  return r;
}

// A launch with <<<>>>'s parameters: instrumented, or else the original.
template <class Kernel>
using LaunchFn = cudaError_t (*)(Kernel, dim3, dim3, void**, size_t, cudaStream_t);
using LaunchExFn = cudaError_t (*)(const cudaLaunchConfig_t*, const void*, void**);

template <class Kernel>
cudaError_t launch(LaunchFn<Kernel> fn, bool ptsz, Kernel k, dim3 g, dim3 b, void** args, size_t smem, cudaStream_t s) {
  Outermost guard;
  if (guard.first && launch_instrumented(request(k, g, b, args, smem, s, ptsz))) return cudaSuccess;
  const cudaError_t r = fn(k, g, b, args, smem, s);
  if (guard.first) original_result(r == cudaSuccess);
  return r;
}

cudaError_t launch_ex(LaunchExFn fn, bool ptsz, const cudaLaunchConfig_t* c, const void* f, void** args) {
  Outermost guard;
  if (guard.first && c) {
    // Launch attributes (clusters, priorities, programmatic serialisation...) would need
    // cuLaunchKernelEx; such launches run unchanged and are counted.
    if (c->numAttrs != 0)
      count_uninstrumented("cudaLaunchKernelExC with launch attributes (not handled)");
    else if (launch_instrumented(request(f, c->gridDim, c->blockDim, args, c->dynamicSmemBytes, c->stream, ptsz)))
      return cudaSuccess;
  }
  const cudaError_t r = fn(c, f, args);
  if (guard.first) original_result(r == cudaSuccess);
  return r;
}

}  // namespace

extern "C" {

// For a benchmark's in-process A/B (bench/percall.cu finds it with dlsym): nonzero pauses
// the agent (launches run the original kernels, uncounted), zero resumes. Returns whether
// it was paused.
__attribute__((visibility("default"))) int cudatrace_pause(int paused) { return set_paused(paused != 0); }

void** __cudaRegisterFatBinary(void* fatbin) {
  static const auto fn = real<void** (*)(void*)>("__cudaRegisterFatBinary");
  void** handle = fn(fatbin);
  on_fatbin(handle, fatbin);
  return handle;
}

void __cudaRegisterFunction(void** handle, const char* stub, char* device_fun, const char* device_name, int limit,
                            uint3* tid, uint3* bid, dim3* bdim, dim3* gdim, int* wsize) {
  static const auto fn = real<decltype(&__cudaRegisterFunction)>("__cudaRegisterFunction");
  fn(handle, stub, device_fun, device_name, limit, tid, bid, bdim, gdim, wsize);
  on_function(handle, stub, device_fun);
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* stub) {
  static const auto fn = real<decltype(&__cudaGetKernel)>("__cudaGetKernel");
  const cudaError_t r = fn(kernel, stub);
  if (r == cudaSuccess && kernel) on_kernel_handle(*kernel, stub);
  return r;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t sm, cudaStream_t s) {
  static const auto fn = real<LaunchFn<cudaKernel_t>>("__cudaLaunchKernel");
  return launch(fn, false, k, g, b, a, sm, s);
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t sm, cudaStream_t s) {
  static const auto fn = real<LaunchFn<cudaKernel_t>>("__cudaLaunchKernel_ptsz");
  return launch(fn, true, k, g, b, a, sm, s);
}
cudaError_t cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** a, size_t sm, cudaStream_t s) {
  static const auto fn = real<LaunchFn<const void*>>("cudaLaunchKernel");
  return launch(fn, false, f, g, b, a, sm, s);
}
cudaError_t cudaLaunchKernel_ptsz(const void* f, dim3 g, dim3 b, void** a, size_t sm, cudaStream_t s) {
  static const auto fn = real<LaunchFn<const void*>>("cudaLaunchKernel_ptsz");
  return launch(fn, true, f, g, b, a, sm, s);
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* c, const void* f, void** a) {
  static const auto fn = real<LaunchExFn>("cudaLaunchKernelExC");
  return launch_ex(fn, false, c, f, a);
}
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* c, const void* f, void** a) {
  static const auto fn = real<LaunchExFn>("cudaLaunchKernelExC_ptsz");
  return launch_ex(fn, true, c, f, a);
}

// The device's primary context goes: its ring is read first.
cudaError_t cudaDeviceReset() {
  static const auto fn = real<cudaError_t (*)()>("cudaDeviceReset");
  before_primary_context_released(-1);
  return fn();
}

// A graph built node by node: its kernel nodes run the instrumented kernel, each
// execution numbered like a captured launch's.
cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                                   const cudaKernelNodeParams* p) {
  static const auto fn = real<decltype(&cudaGraphAddKernelNode)>("cudaGraphAddKernelNode");
  if (node && p && p->kernelParams && !p->extra &&
      add_kernel_node_instrumented(reinterpret_cast<CUgraphNode*>(node), reinterpret_cast<CUgraph>(graph),
                                   reinterpret_cast<const CUgraphNode*>(deps), ndeps,
                                   request(p->func, p->gridDim, p->blockDim, p->kernelParams, p->sharedMemBytes,
                                           nullptr, false)))
    return cudaSuccess;
  if (p && p->extra) count_uninstrumented("cudaGraphAddKernelNode with `extra` (a packed parameter buffer; not handled)");
  const cudaError_t r = fn(node, graph, deps, ndeps, p);
  original_result(r == cudaSuccess);
  return r;
}

}  // extern "C"

// A program that never launched (or never had a context) still gets its report, saying so.
__attribute__((destructor)) static void save_if_not_saved() { save_output(); }
