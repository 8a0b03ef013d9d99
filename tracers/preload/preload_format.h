#pragma once
// What the preload shim writes and the harness reads back: per thread, a file
// preload.<pid>.<tid>.bin of fixed-size records, closed by one trailer record that says
// how many records the thread made and how many it could not keep. Per process, a text
// file preload.<pid>.kernels mapping kernel handles to names.
#include <cstdint>

#include "common/dim3_pack.h"

namespace cudatrace::preload {

inline constexpr const char* kDirEnv = "CUDATRACE_PRELOAD_DIR";
inline constexpr const char* kDevicesEnv = "CUDATRACE_PRELOAD_DEVICES";  // "off": records name no device
inline constexpr uint32_t kMagic = 0x43545052;  // "RPTC"

enum HookId : uint16_t {
#define HOOK(layer, symbol, args) k_##symbol,
#include "tracers/preload/hooks.def"
#undef HOOK
  kHookCount
};
inline constexpr uint16_t kTrailer = 0xFFFF;
// A calibration point: a[0] = TSC, a[1] = CLOCK_MONOTONIC ns, read back to back. Records
// carry TSC ticks (cheaper to read than clock_gettime, and two per record are most of what
// a record costs: the card has the figures);
// the converter maps them to the monotonic clock by interpolating between the calibration
// points that surround them (one at thread start, one at every flush, one in the trailer).
inline constexpr uint16_t kCalibration = 0xFFFE;

struct Record {
  uint16_t hook;      // HookId, or kTrailer
  uint16_t flags;     // kRecordDevice | device ordinal, or 0: the call's device is not known
  int32_t ret;        // cudaError_t / CUresult
  int64_t ts;         // CLOCK_MONOTONIC ns at entry
  int64_t dur;        // ns
  uint64_t a[5];      // argument slots, as hooks.def lays them out
};
static_assert(sizeof(Record) == 64, "records are one cache line");

inline constexpr uint16_t kRecordDevice = 0x8000;
// Per process, preload.<pid>.devices: "ORDINAL PCI_BUS_ID" per device the process used.

// The trailer reuses a record: a[0] records emitted by the thread (trailer excluded),
// a[1] records dropped, a[2] kMagic, a[3] TSC, a[4] CLOCK_MONOTONIC (a last calibration
// point), ts = the thread's id.

using cudatrace::pack_dim3;

}  // namespace cudatrace::preload
