#pragma once
// Reads one Chrome trace as torch.profiler's export_chrome_trace writes it (Kineto's
// ChromeTraceLogger, libkineto/src/output_json.cpp), as a stream: the file is parsed once, a
// token at a time (torchprof_json.h), the fields of each event it converts kept in one
// reused struct within bounds and turned into the harness's records as it passes; what it
// does not convert (CPU ops, flows, their args) is passed over, never built. What it takes
// from the trace:
//
//   traceEvents[] with "ph": "X" and "cat":
//     cuda_runtime, cuda_driver   API calls: name, ts, dur, tid; args.correlation, cbid
//                                 ("pid" is the process: ignored, the file names it;
//                                 a runtime "INVALID" is named from its cbid)
//     kernel                      kernel runs: args.device, stream, grid, block, correlation
//                                 ("pid" is the device and "tid" the stream there)
//     gpu_memcpy, gpu_memset      copies and sets on the GPU: args.device, stream, bytes
//   baseTimeNanoseconds           what "ts" counts from (Kineto since 2024; before it,
//                                 ts counted from the epoch, or from the base unwritten)
//   WARNING, ERROR                Kineto's own log lines (torch 2.11 still writes them, after
//                                 the events)
//
// Times: "ts" and "dur" are microseconds with three decimals (nanoseconds exactly, parsed
// from the text, not through a double). Kineto stamps unix time (CLOCK_REALTIME, through
// its TSC clock calibrated against it); a "ts" below 10^14 us counts from the base: the
// file's baseTimeNanoseconds where it comes before the events, else Kineto's own rule
// (the unix time floored to 7,889,238 s: three months), computed here from the run's start.
// Then CLOCK_REALTIME - CLOCK_MONOTONIC, read by the harness, puts them on its clock.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/event.h"

namespace cudatrace {

class PackedArgs;

// Copies and sets on the GPU: stored, exported, not scored (no ledger and no reference
// records them). Kernels are the gpu-activity layer.
inline constexpr const char* kGpuMemoryLayer = "gpu-memory";

struct TraceClock {
  int64_t realtime_minus_monotonic_ns = 0;
  int64_t base_ns = 0;  // Kineto's base for a trace that does not write it: kineto_base_for()
};
// Kineto's ChromeTraceBaseTime: unix time floored to three months (7,889,238 s).
int64_t kineto_base_for(int64_t realtime_ns);

struct TraceLimits {
  uint64_t max_bytes = uint64_t(1) << 30;  // of the file
  size_t max_string = size_t(64) << 10;    // bytes kept of one string
  size_t max_event_values = 4096;          // values in one event (its args included)
  size_t max_event_bytes = size_t(1) << 20;  // string bytes in one event
  // How many API calls wait for their GPU record (a launch for its kernel, a copy for its
  // copy), and GPU records for their call, to give the call its device: past it, a call
  // is written without one.
  size_t join_window = size_t(1) << 16;
};

// What one trace held and how far it was read.
struct TraceReading {
  int64_t runtime_calls = 0, driver_calls = 0, kernels = 0, memcpys = 0, memsets = 0;
  int64_t other_events = 0;                       // CPU ops, annotations, syncs, flows, metadata
  std::map<std::string, int64_t> other_categories;  // "cat" -> events (the first 32 categories)
  int64_t events_malformed = 0;   // a CUDA event without a name or a time, or not an object
  int64_t events_too_large = 0;   // past max_event_values or max_event_bytes: not read
  int64_t calls_given_device = 0;  // API calls joined to their GPU record
  int64_t calls_of_other_pid = 0;  // API calls whose "pid" is not the file's process
  int64_t runtime_named_from_cbid = 0;  // runtime calls Kineto named "INVALID", named by cbid
  int64_t strings_cut = 0, invalid_utf8_bytes = 0;
  int64_t kineto_log_lines = 0;    // WARNING and ERROR entries
  // Entries of a WARNING or ERROR array past the bounds of one event's values and bytes:
  // not read, so a "stopped tracing" among them would go unseen (loss).
  int64_t kineto_log_lines_unread = 0;
  int64_t kineto_stopped_tracing = 0;  // of those, Kineto's "Exceeded max GPU buffer count"
  std::vector<std::string> kineto_log_examples;  // the first few
  bool base_in_file = false;       // baseTimeNanoseconds came before the events
  bool base_disagrees = false;     // one came after them, other than the base used
  bool has_events = false;         // a traceEvents array was there
  // Read to the end of its top-level object, within the bound. Else `cut` says where and why.
  bool complete = false;
  std::string cut;
  bool over_bound = false;         // the file went on past max_bytes
  std::string unreadable;          // the file could not be opened at all (a link, two links)
  uint64_t file_bytes = 0, bytes_read = 0;
  int64_t events() const { return runtime_calls + driver_calls + kernels + memcpys + memsets; }
};

// Where the records go: an event and its args packed as the store holds them
// (EventStoreWriter::write(e, *args)), or, where `args` is null, in e.args as JSON.
using TraceSink = std::function<void(const Event&, const PackedArgs* args)>;

// Streams `file`, the trace of process `pid`, into `sink`. `bus_ids`: that process's device
// ordinals -> PCI bus ids, where it could say (the hook's status file). Never throws for
// what the file holds; `sink` may throw (a full disk), and that passes through.
TraceReading read_torch_trace(const std::filesystem::path& file, int64_t pid, const TraceClock& clock,
                              const std::map<int64_t, std::string>& bus_ids, const TraceLimits& limits,
                              const TraceSink& sink);
// The same, each event's args in e.args (for a reader that looks at them as JSON: tests).
TraceReading read_torch_trace(const std::filesystem::path& file, int64_t pid, const TraceClock& clock,
                              const std::map<int64_t, std::string>& bus_ids, const TraceLimits& limits,
                              const std::function<void(const Event&)>& sink);

}  // namespace cudatrace
