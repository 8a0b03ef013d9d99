#pragma once
// The agent's state and its one decision per launch: run the instrumented copy of the
// kernel, or let cudart run the original. Registration calls (forwarded from hooks.cpp)
// say which fatbin and device function belong to each host stub; the first launch of a
// kernel in a context loads the fatbin's PTX, rewritten, as a module of its own.
//
// Whatever cannot be instrumented runs unchanged and is counted with its reason, so the
// results say which launches the device layer could not see and why.
#include <cuda.h>

#include <cstddef>

namespace cudatrace::devhook {

struct LaunchRequest {
  const void* kernel = nullptr;  // a host stub, cudaKernel_t, CUfunction or CUkernel, as passed
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  size_t shared_mem = 0;
  CUstream stream = nullptr;
  void** args = nullptr;
  bool per_thread_default_stream = false;  // a _ptsz entry point: stream 0 is the thread's own
  const CUlaunchConfig* config = nullptr;  // cuLaunchKernelEx's: launched with its attributes
  bool driver_api = false;                 // came through a cuLaunchKernel* export
};

void on_fatbin(void** handle, const void* fatbin);
void on_function(void** handle, const void* host_stub, const char* device_function);
void on_kernel_handle(const void* kernel, const void* host_stub);

// Modules loaded through the driver API (cuModuleLoadData/Ex, cuModuleLoad,
// cuModuleLoadFatBinary, cuLibraryLoadData): the image is PTX text, a fatbin or a cubin.
// Read now (the program may free it once loaded) and rewritten for the current context's GPU.
void on_module_loaded(const void* module, const void* image, const char* via);
// cuModuleGetFunction / cuLibraryGetKernel: `function` is `name` in that module or library.
void on_module_function(const void* function, const void* module, const char* name);
// cuKernelGetFunction: another handle of the same kernel.
void on_kernel_alias(const void* alias, const void* kernel);
// cuModuleUnload / cuLibraryUnload: its handles may be reused for something else.
void on_module_unloaded(const void* module);

// true: the instrumented kernel is on its way. false: the caller must run the original.
// A launch into a capturing stream becomes a graph kernel node whose every execution is
// numbered on the GPU (ptx_rewrite.cpp).
bool launch_instrumented(const LaunchRequest& r);

// cudaGraphAddKernelNode's node, made with the instrumented kernel (the request's stream,
// config and per_thread_default_stream are unused). true: *node is made. false: the
// caller must add the original node.
bool add_kernel_node_instrumented(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t ndeps,
                                  const LaunchRequest& r);

// After launch_instrumented() or add_kernel_node_instrumented() said false, the caller ran
// the original and says whether it worked. When the instrumented copy had failed and the
// original fails too (a bad configuration), nothing ran: the launch is counted as failed,
// not as one the device layer missed.
void original_result(bool succeeded);

// A launch that reached the agent on a path it does not instrument.
void count_uninstrumented(const char* reason);

// Paused (cudatrace_pause, for a benchmark's in-process A/B): every launch runs
// the original kernel and is neither instrumented nor counted, as if the agent were not
// there. Returns the previous state.
bool set_paused(bool paused);

// A context is about to go (cuCtxDestroy; cuDevicePrimaryCtxRelease or Reset, and
// cudaDeviceReset, for a device's primary context): its ring and counters are read now,
// while they exist, and a later context gets a ring of its own. `device` < 0: the device
// of the current context.
void before_context_destroyed(CUcontext ctx);
void before_primary_context_released(int device);

// Waits for the GPU, saves the ring and writes the agent's report. Runs once.
void save_output();

}  // namespace cudatrace::devhook
