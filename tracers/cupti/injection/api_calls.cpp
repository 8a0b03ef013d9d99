// The `full` mode's API callback: CUPTI calls it at the entry and exit of every runtime and
// driver call. A finished call becomes one record in its thread's batch, and a batch goes to
// the collector through one api_batch probe hit (or each call through api_exit, where that
// probe is attached instead). Everything here runs on the program's threads, inside its
// CUDA calls: each nanosecond is paid on every call (tracers/cupti/README.md has the figures).
#include "tracers/cupti/injection/api_calls.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tracers/cupti/cupti_event.h"
#include "tracers/cupti/injection/call_clock.h"
#include "tracers/cupti/injection/call_slots.h"

static_assert(CUPTI_LEFT_OUT_CBID == CUPTI_DRIVER_TRACE_CBID_cuKernelGetName, "cupti_event.h names cuKernelGetName");

namespace cudatrace::cupti {

namespace {

// An entry stamp kept in CUPTI's per-call word: ticks carry this bit and CLOCK_MONOTONIC ns
// do not, so that an exit never reads one as the other when a collector comes or goes
// while a call is in flight (the api_exit probe's calls carry ns).
constexpr uint64_t kTicksTag = uint64_t(1) << 63;

// A thread's state, one mapping reached through one thread-local pointer (a TLS access in
// a library the driver dlopens is a call to __tls_get_addr). Plain C: nothing of libstdc++'s
// runtime gets into a library that is loaded into every kind of program.
struct ThreadCalls {
  // This thread's calls between their entry and exit callbacks, and the runtime calls among
  // them: a driver call made while one of those is in flight is cudart's, on its way down.
  uint32_t in_flight, runtime_depth;
  bool own_call;  // the library's own driver call: not the program's
  uint32_t n;     // calls in the batch
  CUcontext context;
  uint32_t device_flags;  // of `context`
  // Counted here, not in a shared atomic (a cache line bouncing between the program's
  // threads on every call); summed under g_threads_mu at exit.
  uint64_t recorded, left_out;
  ClockPoint anchor;        // the latest point taken while none of this thread's calls was in flight
  ClockPoint batch_anchor;  // the anchor when the batch began: before every entry stamp in it
  ThreadCalls *prev, *next;
  uint32_t tid;  // the kernel's id of this thread: what a batch handed over by another names
  // The hand-over at exit (hand_over_live_threads): `writing` is the owner's, set while it
  // changes its batch; `taken` the exiting thread's, after which the owner leaves it alone.
  uint32_t writing, taken;
  cupti_batch batch;
};

__thread ThreadCalls* t_calls = nullptr;
pthread_key_t g_key;
pthread_mutex_t g_threads_mu = PTHREAD_MUTEX_INITIALIZER;
ThreadCalls* g_threads = nullptr;  // the live threads' states
CallTotals g_ended;                // of the threads that are gone
std::atomic<uint64_t> g_unbatched{0};  // counted with no state to keep them in (out of memory): never emitted
bool g_ticks = false;                  // batched calls are stamped with ticks

template <class T>
T load_relaxed(const T& v) {
  return __atomic_load_n(&v, __ATOMIC_RELAXED);
}
template <class T>
void bump(T& v) {  // the owner's increment, read by another thread at exit
  __atomic_store_n(&v, v + 1, __ATOMIC_RELAXED);
}

// The collector reads a whole batch without faulting pages in, so every page of the state is
// there from the start (MAP_POPULATE): calloc may hand over pages it knows are zero without
// touching them (seen: a thread's only, part-full batch of 1024 came out unreadable). The
// first point is taken before the thread's first stamp, so that every batch of the thread
// has a point at or before its calls' entries.
ThreadCalls* make_thread_calls() {
  void* m = mmap(nullptr, sizeof(ThreadCalls), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* s = static_cast<ThreadCalls*>(m);
  s->anchor = s->batch_anchor = clock_point();
  s->tid = uint32_t(syscall(SYS_gettid));
  pthread_mutex_lock(&g_threads_mu);
  s->next = g_threads;
  if (g_threads) g_threads->prev = s;
  g_threads = s;
  pthread_mutex_unlock(&g_threads_mu);
  pthread_setspecific(g_key, s);
  t_calls = s;
  return s;
}

// The lines of the slots the calls in flight on this thread will write at their exits: this
// one's and, for a runtime call, the driver call it makes inside it. Between two callbacks
// the driver and CUPTI run and the batch's lines (a record is 160 bytes, up to three lines)
// go cold; on the H200 host the recording cost 241-656 ns a call in the benchmark against
// about 96 ns a record in a tight loop of fake calls on the same CPU. A prefetch never faults,
// so the batch's end needs no test (the addresses are integers until then: the next slot of
// the last is past the batch). n is read as a hint: the exit hand-over may be flushing it.
inline void prefetch_slots(const ThreadCalls* s) {
  const uintptr_t slot = reinterpret_cast<uintptr_t>(s->batch.calls) + load_relaxed(s->n) * sizeof(cupti_record);
  for (uintptr_t at = 0; at <= 2 * sizeof(cupti_record); at += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(slot + at), 1, 3);
}

inline ThreadCalls* this_thread() {
  ThreadCalls* s = t_calls;
  return __builtin_expect(s != nullptr, 1) ? s : make_thread_calls();
}

// The batch goes out headed by its clock: the point its calls' ticks are counted from and
// one taken now, after them. A call still in flight (a runtime call whose nested
// driver call filled the batch) entered before this batch's own first call, so the anchor
// moves on only when none is: the next batch's calls then began after the point.
void flush(ThreadCalls* s, bool handed_over = false) {
  if (s->n > 0 && CUDATRACE_PROBE_ON(api_batch)) {
    cupti_record& clock = s->batch.head;
    clock.tid = s->tid;
    clock.flags = handed_over ? CUPTI_F_HANDED_OVER : 0u;
    if (g_ticks) {  // otherwise it stays zero, as mapped: no ticks to convert
      const ClockPoint now = clock_point();
      clock.t0 = s->batch_anchor.ticks;
      clock.v[0] = s->batch_anchor.ns;
      clock.t1 = now.ticks;
      clock.v[1] = now.ns;
      clock.v[2] = std::max(s->batch_anchor.spread, now.spread);
      if (s->in_flight == 0) s->anchor = now;
    }
    STAP_PROBE2(cudatrace, api_batch, uint64_t(&s->batch), uint64_t(s->n));
  }
  s->batch_anchor = s->anchor;
  s->n = 0;
}

// The owner's side of the hand-over at exit: a store and a load with only the compiler kept
// from reordering them. The exiting thread's membarrier() puts a full fence between them on
// every running thread (the asymmetric Dekker pattern): either the owner sees its batch taken
// or the exiting thread sees it writing, and the hot path pays no fence of its own.
inline bool begin_writing(ThreadCalls* s) {
  __atomic_store_n(&s->writing, 1u, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  if (__builtin_expect(__atomic_load_n(&s->taken, __ATOMIC_RELAXED) == 0, 1)) return true;
  __atomic_store_n(&s->writing, 0u, __ATOMIC_RELEASE);
  return false;  // the batch was handed over at exit: no longer this thread's to change
}
inline void end_writing(ThreadCalls* s) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  __atomic_store_n(&s->writing, 0u, __ATOMIC_RELEASE);
}

// A thread's end (its key's destructor) hands its last batch over and keeps its counts.
void thread_ends(void* p) {
  auto* s = static_cast<ThreadCalls*>(p);
  if (begin_writing(s)) {  // else the exiting thread hands it over, under the lock taken next
    flush(s);
    end_writing(s);
  }
  pthread_mutex_lock(&g_threads_mu);
  g_ended.recorded += s->recorded;
  g_ended.left_out += s->left_out;
  if (s->prev) s->prev->next = s->next;
  if (s->next) s->next->prev = s->prev;
  if (g_threads == s) g_threads = s->next;
  pthread_mutex_unlock(&g_threads_mu);
  t_calls = nullptr;  // a CUDA call from a later destructor of this thread starts afresh
  munmap(s, sizeof(ThreadCalls));
}

// ---- which device a call is on ----
// The context current when a call returns names its device (cuptiGetDeviceId, a CUPTI
// call: no driver call in the hot path), kept per thread for the context last seen. The
// first time a process sees a device, its PCI bus id is asked of the driver once and sent
// with the status probe: ordinals differ between processes, the bus id does not.
using BusIdFn = CUresult (*)(char*, int, CUdevice);
BusIdFn g_bus_id_of = nullptr;  // resolved at start, while the driver is loading us
constexpr uint32_t kMaxNamedDevices = 64;
std::atomic<uint64_t> g_devices_named{0};

void name_device(ThreadCalls* s, uint32_t device) {
  if (device >= kMaxNamedDevices || !g_bus_id_of) return;
  const uint64_t bit = uint64_t(1) << device;
  if (g_devices_named.fetch_or(bit) & bit) return;
  char id[32] = {};
  s->own_call = true;
  const CUresult r = g_bus_id_of(id, sizeof id - 1, CUdevice(device));
  s->own_call = false;
  if (r == CUDA_SUCCESS) report(CUDATRACE_CUPTI_DEVICE, device, id);
}

uint32_t device_flags_of(ThreadCalls* s, CUcontext context) {
  if (!context) return 0;
  if (context != s->context) {
    uint32_t device = 0;
    s->device_flags = cuptiGetDeviceId(context, &device) == CUPTI_SUCCESS && device <= 0xFFFF
                          ? CUPTI_F_DEVICE | device << CUPTI_DEVICE_SHIFT
                          : 0;
    s->context = context;
    if (s->device_flags) name_device(s, device);
  }
  return s->device_flags;
}

// A forked child is this one thread: the others' states (and what they counted) are the
// parent's, which hands them over itself.
void before_fork() { pthread_mutex_lock(&g_threads_mu); }
void after_fork_in_parent() { pthread_mutex_unlock(&g_threads_mu); }
void after_fork_in_child() {
  ThreadCalls* self = t_calls;
  g_threads = self;  // the others are left as they are: freeing in a forked child is not safe
  if (self) {
    self->prev = self->next = nullptr;
    self->tid = uint32_t(syscall(SYS_gettid));
    self->writing = self->taken = 0;
    self->n = 0;
    self->recorded = self->left_out = 0;
    self->batch_anchor = self->anchor;
  }
  g_ended = {};
  g_unbatched = 0;
  g_devices_named = 0;  // the child is another process: it names its devices itself
  pthread_mutex_unlock(&g_threads_mu);
}

void record_exit(ThreadCalls* s, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb,
                 bool exit_on) {
  const bool in_ticks = g_ticks && !exit_on;
  const uint64_t exit_stamp = in_ticks ? ticks() : monotonic_ns();
  const uint64_t word = cb->correlationData ? *cb->correlationData : 0;
  const uint64_t enter_stamp = bool(word & kTicksTag) == in_ticks ? word & ~kTicksTag : 0;  // 0: not known
  // cudaError_t and CUresult are both an int-sized enum.
  const int64_t ret = cb->functionReturnValue ? *static_cast<const int*>(cb->functionReturnValue) : -1;
  const uint64_t id = uint64_t(domain) << 32 | cbid;
  if (!s) {
    g_unbatched.fetch_add(1, std::memory_order_relaxed);  // counted, so the summary shows the shortfall
    return;
  }
  bump(s->recorded);
  const uint32_t device_flags = device_flags_of(s, cb->context);
  if (exit_on) {
    uint64_t v[kSlots];
    fill_slots(domain, cbid, cb->functionParams, v);
    STAP_PROBE12(cudatrace, api_exit, uint64_t(cb->correlationId), id, ret, enter_stamp, exit_stamp, v[0], v[1], v[2],
                 v[3], v[4], cb->symbolName, uint64_t(device_flags));
    return;
  }
  if (!begin_writing(s)) return;  // recorded, never emitted: the summary shows the shortfall
  cupti_record& c = s->batch.calls[s->n];
  c.id = id;
  c.corr = cb->correlationId;
  c.t0 = enter_stamp;
  c.t1 = exit_stamp;
  c.ret = ret;
  fill_slots(domain, cbid, cb->functionParams, reinterpret_cast<uint64_t*>(c.v));
  c.flags = device_flags | (in_ticks ? CUPTI_F_TICKS : 0u);
  // Only launches have a name; it is copied up to its end, not padded to the field's.
  if (!cb->symbolName) {
    c.text[0] = 0;
  } else if (!memccpy(c.text, cb->symbolName, 0, sizeof c.text - 1)) {
    c.text[sizeof c.text - 1] = 0;
  }
  if (++s->n == CUPTI_BATCH) flush(s);
  end_writing(s);
}

}  // namespace

bool ticks_are_usable() {
  if (const char* c = std::getenv("CUDATRACE_CUPTI_CLOCK"); c && *c) {
    if (std::strcmp(c, "monotonic") == 0) return false;
    if (std::strcmp(c, "tsc") == 0) return true;
    std::fprintf(stderr, "cudatrace-cupti: unknown CUDATRACE_CUPTI_CLOCK '%s' (valid: tsc, monotonic); choosing by the "
                 "clocksource\n", c);
  }
#if defined(__x86_64__) || defined(__i386__)
  char source[16] = {};
  const int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, source, sizeof source - 1);
  close(fd);
  return n >= 3 && std::strncmp(source, "tsc", 3) == 0 && (n == 3 || source[3] == '\n');
#else
  return false;
#endif
}

void report(cudatrace_cupti_status code, uint64_t value, const char* text) {
  if (CUDATRACE_PROBE_ON(status)) STAP_PROBE3(cudatrace, status, uint64_t(code), value, text);
}

void start_api_calls() {
  // The driver that loads us is loaded already: looked up now, never inside a callback.
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD))
    g_bus_id_of = reinterpret_cast<BusIdFn>(dlsym(driver, "cuDeviceGetPCIBusId"));
  pthread_key_create(&g_key, thread_ends);
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  g_ticks = ticks_are_usable();
}

void flush_this_thread() {
  if (t_calls) flush(t_calls);
}

// At exit, the threads still alive (a pool's workers, a thread blocked in a wait: a JAX
// program leaves a few dozen calls there) are ended by exit_group with their last batch
// unsent. This thread sends it for each, naming its owner. A thread caught inside a callback
// is waited for a little, then left: its batch is counted lost. membarrier is registered
// here, once, rather than at start: a forked child's registration would be its own to make.
void hand_over_live_threads() {
  if (!CUDATRACE_PROBE_ON(api_batch)) return;
  pthread_mutex_lock(&g_threads_mu);
  const ThreadCalls* self = t_calls;
  const bool others = g_threads && (g_threads != self || self->next);
  if (!others || syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0) {
    pthread_mutex_unlock(&g_threads_mu);  // no membarrier (Linux < 4.14, a seccomp filter): counted lost
    return;
  }
  for (ThreadCalls* s = g_threads; s; s = s->next)
    if (s != self) __atomic_store_n(&s->taken, 1u, __ATOMIC_RELAXED);
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
    for (ThreadCalls* s = g_threads; s; s = s->next) {
      if (s == self) continue;
      for (int spins = 0; spins < 1000 && __atomic_load_n(&s->writing, __ATOMIC_ACQUIRE); ++spins) sched_yield();
      if (!__atomic_load_n(&s->writing, __ATOMIC_ACQUIRE)) flush(s, true);
    }
  }
  pthread_mutex_unlock(&g_threads_mu);
}

CallTotals call_totals() {
  pthread_mutex_lock(&g_threads_mu);
  CallTotals t = g_ended;
  for (const ThreadCalls* s = g_threads; s; s = s->next) {
    t.recorded += load_relaxed(s->recorded);
    t.left_out += load_relaxed(s->left_out);
  }
  pthread_mutex_unlock(&g_threads_mu);
  t.recorded += g_unbatched.load(std::memory_order_relaxed);
  return t;
}

}  // namespace cudatrace::cupti

using namespace cudatrace::cupti;

// CUPTI's API callback (exported so that a test can drive it without a GPU).
extern "C" __attribute__((visibility("default"))) void CUPTIAPI cudatrace_cupti_on_api(void*,
                                                                                      CUpti_CallbackDomain domain,
                                                                                      CUpti_CallbackId cbid,
                                                                                      const void* data) {
  // A collector attaches to api_exit (a probe hit per call) or to api_batch.
  const bool enter_on = CUDATRACE_PROBE_ON(api_enter), exit_on = CUDATRACE_PROBE_ON(api_exit),
             batch_on = CUDATRACE_PROBE_ON(api_batch);
  if (!enter_on && !exit_on && !batch_on) return;
  ThreadCalls* s = this_thread();  // null only when out of memory
  if (s && s->own_call) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  // cudart's cuKernelGetName for the launch in flight: the launch's record carries the name.
  if (s && !runtime && s->runtime_depth > 0 && cbid == CUPTI_LEFT_OUT_CBID) {
    if (cb->callbackSite == CUPTI_API_EXIT) bump(s->left_out);
    return;
  }
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (s) {
      ++s->in_flight;
      s->runtime_depth += runtime;
      if (batch_on) prefetch_slots(s);
    }
    // CUPTI keeps this word for us until the matching exit. The api_enter and api_exit
    // probes carry CLOCK_MONOTONIC ns, as their readers expect.
    const bool in_ticks = g_ticks && !exit_on;
    const uint64_t t = in_ticks ? ticks() | kTicksTag : monotonic_ns();
    if (cb->correlationData) *cb->correlationData = t;
    if (enter_on)
      STAP_PROBE3(cudatrace, api_enter, uint64_t(cb->correlationId), uint64_t(domain) << 32 | cbid,
                  in_ticks ? monotonic_ns() : t);
    return;
  }
  if (s) {
    s->in_flight -= s->in_flight > 0;  // an exit whose entry came before we subscribed
    if (runtime) s->runtime_depth -= s->runtime_depth > 0;
  }
  if (exit_on || batch_on) record_exit(s, domain, cbid, cb, exit_on);
}

// The calling thread's calls recorded so far (tracers/pause_hook.h): the per-call benchmark
// gives cupti's recording per record with it.
extern "C" __attribute__((visibility("default"))) unsigned long long cudatrace_records(void) {
  const ThreadCalls* s = t_calls;
  return s ? load_relaxed(s->recorded) : 0;
}
