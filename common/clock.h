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

}  // namespace cudatrace
