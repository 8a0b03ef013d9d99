#pragma once
// Reads what Nsight Systems captured, once `nsys export --type sqlite` has turned its
// report into a database: the CUDA runtime and driver API calls and the kernel runs,
// as the harness's events. Only the tables and columns below are read; a table a
// capture lacks (nsys creates them lazily) is an empty layer, a column it lacks is left
// out of the events, and a table or column the reader needs and cannot find is an error
// that names it, never a silent zero.
//
// Tables (Nsight Systems' SQLite export; columns checked by name, not position):
//   StringIds(id, value)                                   names of calls and kernels
//   CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER(start, end, globalTid, correlationId, nameId
//                                         [, returnValue])  one row per API call
//   CUPTI_ACTIVITY_KIND_KERNEL(start, end, globalPid, correlationId, deviceId, streamId,
//                              gridX..Z, blockX..Z, demangledName or shortName
//                              [, mangledName])             one row per kernel run
//   TARGET_INFO_SESSION_START_TIME(utcEpochNs)             when start = 0 was
//   DIAGNOSTIC_EVENT(severity, text)                       nsys's own warnings (optional)
//   TARGET_INFO_CUDA_DEVICE(pid, cudaId, gpuId), TARGET_INFO_GPU(id, busLocation)
//                                                          each process's devices and their bus
//                                                          ids (optional: ordinals alone without)
// A kernel run carries its device; its launching call takes the same. Other calls name no
// device: the export does not say which context was current for them.
// Read as a stream: each event goes to the caller's sink as it is read (the calls, runtime
// then driver, then the kernels), so what is held is one entry per kernel run (its launch's
// device, thread and name, to join the two), not every event.
// globalTid packs the process and thread: pid = globalTid / 2^24 % 2^24, tid = globalTid % 2^24.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/event.h"

namespace cudatrace {

struct NsysCapture {
  int64_t runtime_calls = 0, driver_calls = 0, kernels = 0;
  int64_t kernels_joined = 0;  // kernel runs whose launching call was found (correlation id)
  std::vector<std::string> missing_tables;  // tables of the three above that the capture has not
  bool return_codes = false;  // the API tables have returnValue (recent Nsight Systems)
  bool device_ids = false;    // the export maps each process's devices to bus ids
  // nsys's warnings and errors (DIAGNOSTIC_EVENT, severity above 1), and of those the ones
  // that speak of data dropped or lost: its only word on loss in the export.
  int64_t warnings = 0, warnings_of_loss = 0;
  std::vector<std::string> warning_examples;  // the first few texts
  std::string error;          // non-empty: the database could not be read; the events sent are not usable
};

// `realtime_minus_monotonic_ns`: CLOCK_REALTIME - CLOCK_MONOTONIC on this machine, read by
// the harness; with the session's UTC start it puts nsys's session-relative times on the
// harness's clock. The file is opened without following a link and read only.
// `sink` gets runtime, driver and gpu-activity events, in the export's order per table.
// `max_database_bytes`: what the database may take in memory; 0, half the memory available
// (at least 1 GiB). A larger one is an error that says so: nothing of it is read.
using NsysEventSink = std::function<void(Event&&)>;
NsysCapture read_nsys_capture(const std::filesystem::path& sqlite_file, int64_t realtime_minus_monotonic_ns,
                              const NsysEventSink& sink, uint64_t max_database_bytes = 0);

}  // namespace cudatrace
