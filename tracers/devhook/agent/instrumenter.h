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
  const void* kernel = nullptr;  // a host stub or a cudaKernel_t, as the program passed it
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  size_t shared_mem = 0;
  CUstream stream = nullptr;
  void** args = nullptr;
  bool per_thread_default_stream = false;  // a _ptsz entry point: stream 0 is the thread's own
};

void on_fatbin(void** handle, const void* fatbin);
void on_function(void** handle, const void* host_stub, const char* device_function);
void on_kernel_handle(const void* kernel, const void* host_stub);

// true: the instrumented kernel is on its way. false: the caller must run the original.
bool launch_instrumented(const LaunchRequest& r);

// A launch that reached the agent on a path it does not instrument.
void count_uninstrumented(const char* reason);

// Waits for the GPU, saves the ring and writes the agent's report. Runs once.
void save_output();

}  // namespace cudatrace::devhook
