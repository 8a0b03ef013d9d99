#pragma once
// The one clock of the project: every event and ledger record is stamped with
// CLOCK_MONOTONIC nanoseconds, so records from the workload, the shim and kernel-side
// collectors (bpf_ktime_get_ns is the same clock) can be compared directly.
#include <cstdint>
#include <ctime>

namespace cudatrace {

inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC now, for tools that stamp wall-clock time (strace,
// Nsight Systems' session start): the realtime clock read between two monotonic reads, so
// the offset is known to within half their gap (`uncertainty_ns`).
struct ClockOffset {
  int64_t realtime_minus_monotonic_ns = 0;
  int64_t uncertainty_ns = 0;
};
// The tightest of several readings: one reading preempted between its two monotonic reads
// (a loaded machine) had an uncertainty of milliseconds, which widened every strace
// window the matcher drew with it.
inline ClockOffset realtime_minus_monotonic() {
  ClockOffset best{0, INT64_MAX};
  for (int i = 0; i < 16; ++i) {
    const int64_t m1 = monotonic_ns();
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const int64_t m2 = monotonic_ns();
    const int64_t uncertainty = (m2 - m1) / 2 + 1;
    if (uncertainty < best.uncertainty_ns)
      best = {int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec - (m1 + m2) / 2, uncertainty};
  }
  return best;
}

}  // namespace cudatrace
