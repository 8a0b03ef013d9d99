#pragma once
// The shim's hot path: one record per hooked call into a per-thread buffer, no locks.
// Buffers go to disk when full (through the writer thread, buffer_writer.h), when their
// thread ends, at exit, before exec and on a fatal signal; whatever cannot be written is
// counted as dropped in the thread's trailer.
//
// What a record costs is not instructions. Measured by compiling parts out (the card,
// tracers/preload/README.md): the two TSC reads are most of it, and the rest is
// cache misses, since between two hooked calls the driver runs for microseconds and
// evicts the shim's data. So the append is inlined into every hook, reads one
// thread-local line (the buffer's header lives in static TLS, not behind a pointer) and
// one process-wide line, and prefetches the next records' lines for writing.
#include <atomic>
#include <cstdint>

#include "common/clock.h"
#include "tracers/preload/preload_format.h"

namespace cudatrace::preload {

// Records per thread buffer: 512 KiB, mapped and populated when the thread first records
// (a page fault every 64 records would otherwise be paid on the hot path during the
// buffer's first pass).
inline constexpr uint32_t kBufferRecords = 1 << 13;

// libcuda's cuCtxGetCurrent (device_tag()).
using CtxGetCurrentFn = int (*)(void**);

// What every hook reads, on one cache line.
struct alignas(64) ShimState {
  // Recording and not paused by cudatrace_pause(): the hooks only forward when
  // false, so that a paused hook costs what an unrecorded forward costs.
  std::atomic<bool> live{false};
  // A thread's buffer belongs to the current generation or must be (re)attached first.
  // Bumped in a forked child (the parent's buffers are not ours) and by flush_all()
  // (a thread that records after the exit flush starts a new segment of its file).
  std::atomic<uint32_t> generation{1};
  // A thread's cached device (ThreadBuffer::device_epoch) holds while it equals this. Odd,
  // so never 0 (a thread's "not known"); moved on by contexts_may_have_changed().
  std::atomic<uint32_t> context_epoch{1};
  // Set once libcuda.so.1 is loaded (note_libcuda_loaded), never earlier, and never with
  // --set preload.devices=off: null, records name no device.
  std::atomic<CtxGetCurrentFn> ctx_get_current{nullptr};
};
// Named for the generic forwarder's assembly, which reads `live` itself (generic_hooks.cpp).
inline ShimState g_shim __asm__("cudatrace_preload_shim") __attribute__((visibility("hidden")));

inline bool hooks_live() { return g_shim.live.load(std::memory_order_relaxed); }

// One thread's buffer. The header is thread-local (initial-exec: %fs-relative, no
// __tls_get_addr call in a preloaded library); the records are a separate mapping.
// flush_all() may read another thread's header, hence the atomics.
struct alignas(64) ThreadBuffer {
  // Hot: what emit() reads and writes.
  Record* records = nullptr;               // kBufferRecords + 2 spare (calibration, prefetch)
  std::atomic<uint32_t> count{0};          // records held, calibration points included
  std::atomic<uint32_t> generation{0};     // g_shim.generation while attached, else 0
  // The driver hooks' cache of the kernel handles this thread launched last (their names
  // are known): checked on every launch, so it shares the hot line.
  static constexpr int kRecentKernels = 4;
  uint64_t recent_kernels[kRecentKernels] = {};
  uint32_t next_recent_kernel = 0;
  // The device tag of this thread's current context (device_tag()), valid while
  // device_epoch equals g_shim.context_epoch. device_epoch 0: nothing kept, the next
  // record asks the driver; a new thread starts so.
  uint16_t last_device_tag = 0;
  uint32_t device_epoch = 0;
  // Cold: the context last_device_tag was asked for, and in which epoch (a context handle
  // is trusted to mean the same device only within one epoch).
  void* last_context = nullptr;
  uint32_t context_epoch = 0;
  // Cold: the second buffer, which the writer thread writes while `records` fills
  // (buffer_writer.h), mapped at the first hand-off; in_flight: how many of its records
  // the writer has yet to write (0: none, the spare is free).
  Record* spare = nullptr;
  std::atomic<uint32_t> in_flight{0};
  // Cold: attach, flush, close.
  int fd = -1;
  int64_t tid = 0;
  uint64_t emitted = 0;                    // records the thread made (trailer's a[0])
  uint64_t dropped = 0;                    // records it could not keep (trailer's a[1])
  uint32_t leading_calibrations = 0;       // calibration points among `count`
  bool registered = false;
  bool exited = false;                     // its thread is ending: late records go alone
};
extern constinit thread_local ThreadBuffer t_buffer __attribute__((tls_model("initial-exec")));

// False when CUDATRACE_PRELOAD_DIR is unset: the hooks then only forward.
bool recording();

using cudatrace::monotonic_ns;

// Which GPU a call is on: the device of the context current on the calling thread when the
// call returned, written into the record's flags (kRecordDevice | ordinal; 0: no context,
// or the driver not loaded yet). The first time a process sees a device its PCI bus id
// goes into preload.<pid>.devices.
//
// A thread's current context changes only through a call, so the device is asked once
// and kept per thread, and asked again after a call that may have changed it: one that
// sets, pushes, pops or creates a context, or sets the runtime's device, drops the calling
// thread's (context_may_have_changed()); one that destroys or resets a context, which
// other threads may have current, and a fork or resumed recording, everyone's
// (contexts_may_have_changed()). Which calls those are: changes_context() and
// context_flags() (generic_hooks.h). A runtime call that makes a primary context current
// implicitly (a thread's first call) finds nothing kept on that thread: its record, and
// the driver records inside it, ask at their exit, after the context exists. A thread
// with no context current keeps nothing, and asks at every record until it has one.
void note_libcuda_loaded(void* libcuda_handle);
[[gnu::cold, gnu::noinline]] uint16_t device_tag_slow();

inline uint16_t device_tag() {
  if (!g_shim.ctx_get_current.load(std::memory_order_relaxed)) return 0;
  const ThreadBuffer& b = t_buffer;
  if (__builtin_expect(b.device_epoch == g_shim.context_epoch.load(std::memory_order_relaxed), 1))
    return b.last_device_tag;
  return device_tag_slow();
}

inline void context_may_have_changed() { t_buffer.device_epoch = 0; }
inline void contexts_may_have_changed() { g_shim.context_epoch.fetch_add(2, std::memory_order_relaxed); }

// The listed hooks after whose call the calling thread's context may differ: cudaSetDevice
// (it makes the device's primary context current), and cuInit, which makes none current
// that the driver documents, but runs once, so asking again after it costs nothing.
constexpr bool changes_context(HookId hook) { return hook == k_cudaSetDevice || hook == k_cuInit; }

// The hot-path clock: TSC ticks, converted to CLOCK_MONOTONIC ns after the run.
inline int64_t now_ns() { return int64_t(__builtin_ia32_rdtsc()); }

// Everything that is not a plain append: first record of a thread, a full buffer, a new
// generation, a thread that is ending.
void emit_slow(const Record& r);

// Inlined by force: with a hundred hooks calling it, the compiler kept one out-of-line copy,
// and every record paid a call with three arguments on the stack.
[[gnu::always_inline]] inline void emit(HookId hook, int32_t ret, int64_t t0, int64_t t1, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0,
                 uint64_t a3 = 0, uint64_t a4 = 0) {
  ThreadBuffer& b = t_buffer;
  const uint32_t i = b.count.load(std::memory_order_relaxed);
  if (__builtin_expect(b.generation.load(std::memory_order_relaxed) != g_shim.generation.load(std::memory_order_relaxed) ||
                           i >= kBufferRecords,
                       0)) {
    emit_slow(Record{hook, device_tag(), ret, t0, t1 - t0, {a0, a1, a2, a3, a4}});
    return;
  }
  Record* r = b.records + i;
  r->hook = hook;
  r->flags = device_tag();
  r->ret = ret;
  r->ts = t0;
  r->dur = t1 - t0;
  r->a[0] = a0;
  r->a[1] = a1;
  r->a[2] = a2;
  r->a[3] = a3;
  r->a[4] = a4;
  b.count.store(i + 1, std::memory_order_release);
  // Two slots ahead: a shared-cudart launch makes two records (driver, then runtime), so
  // the next launch finds both of its lines owned. Both exist even past the last record
  // (the mapping has two spare slots).
  __asm__ volatile("prefetchw %0\n\tprefetchw %1" ::"m"(r[1]), "m"(r[2]));
}

// What a listed hook does once its real function is known (DRIVER_HOOK, RUNTIME_HOOK):
// paused, forward; live, time the call and append its record. bench/record_cost times this
// same body against the generic forwarder, so that the comparison is with what ships.
#define CUDATRACE_RECORDED_CALL(HOOK, RESULT, REAL, ARGS, ...)                 \
  if (!::cudatrace::preload::hooks_live()) return REAL ARGS;                  \
  const int64_t t0 = ::cudatrace::preload::now_ns();                          \
  const RESULT r = REAL ARGS;                                                 \
  if constexpr (::cudatrace::preload::changes_context(HOOK))                  \
    ::cudatrace::preload::context_may_have_changed();                         \
  ::cudatrace::preload::emit(HOOK, int32_t(r), t0, ::cudatrace::preload::now_ns(), ##__VA_ARGS__); \
  return r

// Kernel names for the converter: a handle (host stub, cudaKernel_t, CUfunction) -> name.
void note_kernel(uint64_t handle, const char* name);
void note_stub(uint64_t host_stub, const char* name);  // __cudaRegisterFunction: stub -> name
const char* kernel_name_of_stub(uint64_t host_stub);    // or null

// Everything buffered goes to disk now (before exec, at exit, on a fatal signal).
void flush_all();
// flush_all() for an exec hook: in the process that owns the buffers only, never in a vfork
// child, which shares them with a parent that goes on recording.
void flush_before_exec();

}  // namespace cudatrace::preload
