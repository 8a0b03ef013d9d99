// The CUPTI injection library: the CUDA driver loads it into the program when
// CUDA_INJECTION64_PATH names it, and calls InitializeInjection at cuInit. From then on
// CUPTI calls us at the entry and exit of every runtime and driver API call, and hands us
// buffers of kernel activity records; we re-emit both as USDT probes (usdt_probes.h) for
// an eBPF collector outside the process. Works the same with static and shared cudart.
//
// CUDATRACE_CUPTI_MODE picks what is switched on (kModes below): `full` is the method,
// the others are cost references that split its cost into CUPTI's parts (which callback
// domain, which activity kind) for the per-call benchmark.
#include <cupti.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/dim3_pack.h"
#include "tracers/cupti/cupti_event.h"
#include "tracers/cupti/injection/api_calls.h"
#include "tracers/cupti/injection/call_clock.h"
#include "tracers/cupti/injection/usdt_probes.h"
#include "tracers/pause_hook.h"

// The probes' semaphores: the kernel adds one per attached collector.
extern "C" {
#define CUDATRACE_DEFINE_SEMAPHORE(name) \
  __attribute__((visibility("hidden"), section(".probes"))) volatile unsigned short cudatrace_##name##_semaphore = 0;
CUDATRACE_PROBES(CUDATRACE_DEFINE_SEMAPHORE)
#undef CUDATRACE_DEFINE_SEMAPHORE
}

namespace {

using cudatrace::pack_dim3;
using cudatrace::cupti::report;

constexpr size_t kActivityBufferBytes = 8u << 20;

CUpti_SubscriberHandle g_subscriber = nullptr;
// What the library emitted of kernels, for the collector to compare with what it received
// (the API calls are counted per thread: api_calls.cpp).
std::atomic<uint64_t> g_kernels{0}, g_activity_dropped{0};

// CUPTI stamps activity records with this clock too (it converts GPU times to it), so
// kernel times and API times share the ledger's clock.
uint64_t CUPTIAPI cupti_timestamp() { return cudatrace::cupti::monotonic_ns(); }

void report_error(const char* what, CUptiResult r) {
  const char* why = nullptr;
  cuptiGetResultString(r, &why);
  char text[256];
  std::snprintf(text, sizeof text, "%s: %s", what, why ? why : "unknown CUPTI error");
  std::fprintf(stderr, "cudatrace-cupti: %s; this process is not traced\n", text);
  report(CUDATRACE_CUPTI_ERROR, uint64_t(r), text);
}

}  // namespace

extern "C" {

// One kernel activity record (exported for the same test).
__attribute__((visibility("default"))) void cudatrace_cupti_on_kernel(const CUpti_ActivityKernel10* k) {
  g_kernels.fetch_add(1, std::memory_order_relaxed);
  if (!CUDATRACE_PROBE_ON(kernel)) return;
  const uint64_t corr = k->correlationId, start = k->start, end = k->end;
  const uint64_t grid = pack_dim3(uint32_t(k->gridX), uint32_t(k->gridY), uint32_t(k->gridZ));
  const uint64_t block = pack_dim3(uint32_t(k->blockX), uint32_t(k->blockY), uint32_t(k->blockZ));
  const uint64_t stream = k->streamId, device = k->deviceId;
  STAP_PROBE8(cudatrace, kernel, corr, start, end, grid, block, stream, device, k->name);
}

}  // extern "C"

namespace {

void CUPTIAPI on_api_bare(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// An empty callback that reads a clock at each call's entry and exit, as a tracer must to
// time a call, and keeps the entry's in CUPTI's word: the floor of any CUPTI tracer that
// times calls with that clock, above `bare` by its two reads. `bare-clock` reads
// CLOCK_MONOTONIC (clock_gettime), `bare-tsc` the TSC, which is what `full` reads now.
template <uint64_t (*Read)()>
void CUPTIAPI on_api_clock(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const uint64_t t = Read();
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (cb->correlationData) *cb->correlationData = t;
  } else if (cb->correlationData) {
    static volatile uint64_t sink;
    sink = t - *cb->correlationData;
  }
}

// An empty callback that counts the callbacks per (domain, id), printed at exit: how many
// CUPTI callbacks one runtime call costs (the runtime's own driver calls come as driver
// callbacks too, each one paying CUPTI's dispatch). Ids past this CUPTI's tables (a newer
// driver) are counted together, not dropped.
constexpr uint32_t kCountedIds =
    std::max(uint32_t(CUPTI_DRIVER_TRACE_CBID_SIZE), uint32_t(CUPTI_RUNTIME_TRACE_CBID_SIZE));
std::atomic<uint64_t> g_callback_counts[2][kCountedIds + 1];  // the last: ids past the tables

void CUPTIAPI on_api_count(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_EXIT) return;
  const int d = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? 0 : 1;
  g_callback_counts[d][cbid < kCountedIds ? cbid : kCountedIds].fetch_add(1, std::memory_order_relaxed);
}

void print_callback_counts() {
  for (int d = 0; d < 2; ++d)
    for (uint32_t id = 0; id <= kCountedIds; ++id)
      if (uint64_t n = g_callback_counts[d][id].load(); n > 0)
        std::fprintf(stderr, "cudatrace-cupti: count %s cbid %s%u: %llu\n", d == 0 ? "runtime" : "driver",
                     id == kCountedIds ? ">=" : "", id, static_cast<unsigned long long>(n));
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kActivityBufferBytes));
  *size = *buffer ? kActivityBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL)
      cudatrace_cupti_on_kernel(reinterpret_cast<const CUpti_ActivityKernel10*>(record));
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    g_activity_dropped.fetch_add(dropped, std::memory_order_relaxed);
    if (CUDATRACE_PROBE_ON(activity_dropped)) STAP_PROBE1(cudatrace, activity_dropped, uint64_t(dropped));
  }
  std::free(buffer);
}

// At exit: hand over every kernel record still in CUPTI's buffers, then say what was emitted.
void flush_at_exit() {
  cudatrace::cupti::flush_this_thread();
  cudatrace::cupti::hand_over_live_threads();
  if (CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS)
    report_error("cuptiActivityFlushAll at exit", r);
  const cudatrace::cupti::CallTotals calls = cudatrace::cupti::call_totals();
  const uint64_t kernels = g_kernels.load(), dropped = g_activity_dropped.load();
  if (CUDATRACE_PROBE_ON(summary)) STAP_PROBE4(cudatrace, summary, calls.recorded, kernels, dropped, calls.left_out);
}

// A forked child counts its own kernels (its calls: api_calls.cpp).
void reset_counts_in_child() {
  g_kernels = 0;
  g_activity_dropped = 0;
}

bool subscribe(CUpti_CallbackFunc callback) {
  char holder[256] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "cudatrace";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof holder;
  CUptiResult r = cuptiSubscribe_v2(&g_subscriber, callback, nullptr, &params);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    // CUPTI has one subscriber per process: another tool (Nsight, a profiler in the
    // program) has it. Say so and stay out of the way; the program runs untouched.
    std::fprintf(stderr, "cudatrace-cupti: CUPTI is already in use by %s; this process is not traced\n",
                 holder[0] ? holder : "another tool");
    report(CUDATRACE_CUPTI_SUBSCRIBER_TAKEN, 0, holder[0] ? holder : "another tool");
    return false;
  }
  if (r != CUPTI_SUCCESS) {
    report_error("cuptiSubscribe", r);
    return false;
  }
  return true;
}

// What a mode switches on. Every mode but `full` is a cost reference: it observes nothing.
struct Mode {
  const char* name;
  CUpti_CallbackFunc callback;   // nullptr: no subscription at all
  bool runtime_domain, driver_domain;
  bool kernel_activity;          // CONCURRENT_KERNEL records
  bool api_activity;             // RUNTIME and DRIVER activity records (CUPTI times the calls itself)
};
constexpr Mode kModes[] = {
    {"full", cudatrace_cupti_on_api, true, true, true, false},
    // A subscriber whose callback does nothing: the floor of any callback tracer.
    {"bare", on_api_bare, true, true, false, false},
    {"bare-runtime", on_api_bare, true, false, false, false},
    {"bare-driver", on_api_bare, false, true, false, false},
    {"bare-clock", on_api_clock<cudatrace::cupti::monotonic_ns>, true, true, false, false},
    {"bare-tsc", on_api_clock<cudatrace::cupti::ticks>, true, true, false, false},
    // bare, counting callbacks per call id (printed at exit; costs an atomic per callback).
    {"count", on_api_count, true, true, false, false},
    // Kernel activity records alone, no callbacks.
    {"kernel-activity", nullptr, false, false, true, false},
    // API calls as activity records (no callback into us) plus kernels: what a tracer
    // that gives up the calls' arguments would cost.
    {"api-activity", nullptr, false, false, true, true},
};
const Mode* g_mode = nullptr;

constexpr CUpti_ActivityKind kApiActivityKinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

// Switches the mode's callbacks and activity kinds on (1) or off (0). On a refusal, names
// what CUPTI refused in `what`.
CUptiResult switch_mode(uint32_t on, const char** what) {
  const std::pair<bool, CUpti_CallbackDomain> domains[] = {{g_mode->runtime_domain, CUPTI_CB_DOMAIN_RUNTIME_API},
                                                            {g_mode->driver_domain, CUPTI_CB_DOMAIN_DRIVER_API}};
  CUptiResult r = CUPTI_SUCCESS;
  *what = "cuptiEnableDomain";
  for (const auto& [wanted, domain] : domains)
    if (wanted && (r = cuptiEnableDomain(on, g_subscriber, domain)) != CUPTI_SUCCESS) return r;
  auto activity = [on](CUpti_ActivityKind kind) {
    return on ? cuptiActivityEnable(kind) : cuptiActivityDisable(kind);
  };
  *what = "kernel activity";
  if (g_mode->kernel_activity && (r = activity(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) != CUPTI_SUCCESS) return r;
  *what = "API activity";
  if (g_mode->api_activity)
    for (CUpti_ActivityKind kind : kApiActivityKinds)
      if ((r = activity(kind)) != CUPTI_SUCCESS) return r;
  return CUPTI_SUCCESS;
}

bool start_mode() {
  if (g_mode->callback && !subscribe(g_mode->callback)) return false;
  if (g_mode->kernel_activity || g_mode->api_activity) {
    CUptiResult r = cuptiActivityRegisterTimestampCallback(cupti_timestamp);
    if (r == CUPTI_SUCCESS) r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
      report_error("activity buffers", r);
      return false;
    }
  }
  const char* what = nullptr;
  if (CUptiResult r = switch_mode(1, &what); r != CUPTI_SUCCESS) {
    report_error(what, r);
    if (g_subscriber) cuptiUnsubscribe(g_subscriber);
    return false;
  }
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* name = std::getenv("CUDATRACE_CUPTI_MODE");
  g_mode = &kModes[0];
  if (name && *name) {
    const Mode* found = nullptr;
    char valid[256] = {};  // no std::string: its template code would be exported from the library
    for (const Mode& m : kModes) {
      if (std::strcmp(m.name, name) == 0) found = &m;
      const size_t used = std::strlen(valid);
      std::snprintf(valid + used, sizeof valid - used, "%s%s", used ? ", " : "", m.name);
    }
    if (!found)
      std::fprintf(stderr, "cudatrace-cupti: unknown CUDATRACE_CUPTI_MODE '%s' (valid: %s); using full\n", name, valid);
    else
      g_mode = found;
  }
  // Before the callbacks are switched on: they may come on another thread at once.
  if (g_mode->callback == cudatrace_cupti_on_api) {
    cudatrace::cupti::start_api_calls();
    pthread_atfork(nullptr, nullptr, reset_counts_in_child);
  }
  if (!start_mode()) {
    g_mode = nullptr;
    return 1;
  }
  if (g_mode->callback == on_api_count) std::atexit(print_callback_counts);
  // Kernel records still in CUPTI's buffers are handed over at exit (and, in full mode,
  // the last batch and the summary).
  if (g_mode->kernel_activity) std::atexit(flush_at_exit);
  uint32_t version = 0;
  cuptiGetVersion(&version);
  report(CUDATRACE_CUPTI_LOADED, version, g_mode->name);
  return 1;
}

// The per-call benchmark's in-process A/B (bench/percall finds this through the library's
// handle): 1 switches off what the mode switched on (callback domains, activity kinds), 0
// switches it on again. A subscription stays, so in the callback modes the paused half is
// what a subscribed but idle CUPTI costs: the difference is the callbacks and activity,
// not all of CUPTI. Returns, like the preload shim's and devhook's pause, whether it was
// paused before (1) or not (0); -1 when CUPTI refused or the library is not running.
extern "C" __attribute__((visibility("default"))) int cudatrace_pause(int paused) {
  static bool was_paused = false;
  if (!g_mode) return -1;
  if ((paused != 0) == was_paused) return was_paused ? 1 : 0;
  const char* what = nullptr;
  if (switch_mode(paused ? 0 : 1, &what) != CUPTI_SUCCESS) return -1;
  was_paused = paused != 0;
  return was_paused ? 0 : 1;
}
