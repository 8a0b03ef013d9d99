#pragma once
// The `full` mode's API callback (api_calls.cpp) and what the rest of the library asks of it.
#include <cupti.h>

#include <cstdint>

#include "tracers/cupti/injection/usdt_probes.h"

extern "C" void CUPTIAPI cudatrace_cupti_on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                                const void* data);

namespace cudatrace::cupti {

// At InitializeInjection, in full mode: the thread key whose destructor hands a thread's last
// batch over, the fork handlers, the driver's bus id function, and the call clock.
void start_api_calls();

// The calling thread's batch, handed over now (at exit).
void flush_this_thread();
// At exit: every other live thread's batch, handed over by the calling thread.
void hand_over_live_threads();

// What the library counted over all threads, ended ones included: calls recorded (each
// emitted, in a batch or by api_exit, or still waiting in a live thread's batch: a
// shortfall at the collector), and nested driver calls left out (CUPTI_LEFT_OUT_CBID).
struct CallTotals {
  uint64_t recorded = 0, left_out = 0;
};
CallTotals call_totals();

// The status probe.
void report(cudatrace_cupti_status code, uint64_t value, const char* text);

}  // namespace cudatrace::cupti
