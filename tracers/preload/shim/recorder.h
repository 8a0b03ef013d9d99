#pragma once
// The shim's hot path: one record per hooked call into a per-thread buffer, no locks.
// Buffers go to disk when full, when their thread ends, at exit, before exec and on a
// fatal signal; whatever cannot be written is counted as dropped in the thread's trailer.
#include <time.h>

#include <atomic>
#include <cstdint>

#include "tracers/preload/preload_format.h"

namespace cudatrace::preload {

// False when CUDATRACE_PRELOAD_DIR is unset: the hooks then only forward.
bool recording();

// What every hook checks first: recording, and not paused by cudatrace_preload_pause().
// One relaxed load, so that a paused hook costs what an unrecorded forward costs.
inline std::atomic<bool> g_hooks_live{false};
inline bool hooks_live() { return g_hooks_live.load(std::memory_order_relaxed); }

inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The hot-path clock: TSC ticks, converted to CLOCK_MONOTONIC ns after the run.
inline int64_t now_ns() { return int64_t(__builtin_ia32_rdtsc()); }

void emit(HookId hook, int32_t ret, int64_t t0, int64_t t1, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0,
          uint64_t a3 = 0, uint64_t a4 = 0);

// Kernel names for the converter: a handle (host stub, cudaKernel_t, CUfunction) -> name.
void note_kernel(uint64_t handle, const char* name);
void note_stub(uint64_t host_stub, const char* name);  // __cudaRegisterFunction: stub -> name
const char* kernel_name_of_stub(uint64_t host_stub);    // or null

// Everything buffered goes to disk now (before exec, at exit, on a fatal signal).
void flush_all();

}  // namespace cudatrace::preload
