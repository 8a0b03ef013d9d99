#pragma once
// The USDT probes of the injection library: provider "cudatrace", one probe per kind of
// fact. Each probe has a semaphore (a counter in the .probes section) that the kernel
// raises while some collector has the probe attached; the library tests it first, so an
// unattached probe costs one load and one branch, and its arguments are never computed.
//
// Probes and arguments (all 64-bit):
//   api_enter(corr, id, enter_ns)
//   api_exit(corr, id, ret, enter_ns, exit_ns, slot0..slot4, kernel_name, device_flags)
//       id = domain << 32 | cbid (CUPTI's callback domain and id); slots as hooks.def lays
//       out that call's arguments; kernel_name = a char* for launches, else 0;
//       device_flags = CUPTI_F_DEVICE | ordinal << CUPTI_DEVICE_SHIFT, or 0 (no context).
//   api_batch(batch, count)
//       the same facts for `count` finished calls of this thread, as a struct cupti_batch
//       (tracers/cupti/cupti_event.h): a clock record, then CUPTI_BATCH call records, the
//       first `count` used. While api_batch is attached and api_exit is not, calls are kept
//       per thread and handed over CUPTI_BATCH at a time (and the rest when the thread
//       ends): one probe hit per batch instead of one per call. Their t0/t1 are TSC ticks
//       where CUPTI_F_TICKS says so, mapped to CLOCK_MONOTONIC ns with the clock record.
//   kernel(corr, start_ns, end_ns, grid, block, stream, device, name)
//       one per kernel activity record; grid and block packed as common/dim3_pack.h says.
//   activity_dropped(count)   CUPTI dropped this many activity records (buffer full)
//   status(code, value, text) see enum cudatrace_cupti_status
//   summary(api_exits, kernels, activity_dropped, left_out) at process exit: what the
//       library emitted, and the nested driver calls it left out (CUPTI_LEFT_OUT_CBID)
// Timestamps are CLOCK_MONOTONIC ns (kernel times are CUPTI's, converted to that clock),
// but for api_batch's ticks.
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

enum cudatrace_cupti_status {
  CUDATRACE_CUPTI_LOADED = 0,           // value: CUPTI API version; text: the mode
  CUDATRACE_CUPTI_SUBSCRIBER_TAKEN = 1, // text: the tool that holds CUPTI's one subscriber
  CUDATRACE_CUPTI_ERROR = 2,            // value: CUptiResult; text: what failed
  CUDATRACE_CUPTI_DEVICE = 3,           // value: a device ordinal of this process; text: its PCI bus id
};

#define CUDATRACE_PROBES(X) \
  X(api_enter) X(api_exit) X(api_batch) X(kernel) X(activity_dropped) X(status) X(summary)

extern "C" {
#define CUDATRACE_DECLARE_SEMAPHORE(name) extern volatile unsigned short cudatrace_##name##_semaphore;
CUDATRACE_PROBES(CUDATRACE_DECLARE_SEMAPHORE)
#undef CUDATRACE_DECLARE_SEMAPHORE
}

#define CUDATRACE_PROBE_ON(name) __builtin_expect(cudatrace_##name##_semaphore != 0, 0)
