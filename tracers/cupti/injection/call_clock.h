#pragma once
// The clocks the injection library stamps calls with. clock_gettime costs about 33 ns on the
// H100 host, and a call takes two: most of what timing a call costs (docs/measured-history.md,
// "bare-clock"). A TSC read costs a few ns, so batched calls carry TSC ticks, and each batch
// carries two (ticks, CLOCK_MONOTONIC ns) points that the decoder maps its ticks to the
// ledger's clock with (tracers/cupti/cupti_event.h, CUPTI_REC_BATCH), as the preload shim
// does with its calibration records.
#include <cstdint>
#include <ctime>

namespace cudatrace::cupti {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// Elsewhere than x86 the "ticks" are CLOCK_MONOTONIC ns, and the batch's points map them to
// themselves.
inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return monotonic_ns();
#endif
}

// A point of both clocks: a CLOCK_MONOTONIC read bracketed by two tick reads, the bracket's
// midpoint kept. Of three tries the narrowest bracket wins: a read preempted or slowed (the
// first in a thread can take microseconds) would move every time converted with it.
struct ClockPoint {
  uint64_t ticks = 0, ns = 0;
  uint64_t spread = 0;  // the bracket's width in ticks: the point is known to half of it
};

inline ClockPoint clock_point() {
  ClockPoint best{0, 0, UINT64_MAX};
  for (int i = 0; i < 3; ++i) {
    const uint64_t before = ticks();
    const uint64_t ns = monotonic_ns();
    const uint64_t after = ticks();
    if (after >= before && after - before < best.spread) best = {before + (after - before) / 2, ns, after - before};
  }
  if (best.spread == UINT64_MAX) best = {ticks(), monotonic_ns(), 0};  // ticks went backwards thrice: no bracket
  return best;
}

// Whether the kernel keeps its own time with the TSC (clocksource "tsc"): it chose it only if
// it found it constant-rate and in step across CPUs, which converting ticks per batch needs.
// CUDATRACE_CUPTI_CLOCK=monotonic or =tsc overrides.
bool ticks_are_usable();

}  // namespace cudatrace::cupti
