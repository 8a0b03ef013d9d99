#pragma once
// Reads the trace jax.profiler.trace(dir, create_perfetto_trace=True) writes
// (plugins/profile/<run>/perfetto_trace.json.gz): Chrome trace-event JSON, gzip'd, as XLA's
// profiler converts its XSpace (tsl/profiler/convert/trace_events_to_json). No definitions
// from outside are needed to read it, unlike the .xplane.pb next to it, whose messages
// ship only with TensorFlow and XLA. Streamed: the file inflated a slice at a time
// (jaxprof_gzip.h), parsed a token at a time by torchprof's tokenizer (torchprof_json.h,
// with its filter: bytes that are not UTF-8 kept as \xHH, strings cut at a bound).
//
// What the file holds, and what becomes of it (checked on jax 0.11.2, tests/fixtures/jaxprof/real/):
//   {"ph":"M","name":"process_name","pid":P,"args":{"name":"/device:GPU:N"}}  pid P is GPU N
//   {"ph":"M","name":"process_name","pid":H,"args":{"name":"/host:CPU"}}      pid H is the host
//   ph "X" on a GPU process, with args.kernel_details ("regs:.. grid:x,y,z block:x,y,z ..."):
//       a kernel run: layer gpu-activity, args kernel, grid, block, stream (the event's
//       "tid"), device N; args.correlation_id (a string of digits) as its corr
//   ph "X" on a GPU process without kernel_details (copies, XLA's op and module lines):
//       counted (gpu_other_events), not converted
//   ph "X" on the host named cuXxx (the few driver calls XLA's CUPTI tracer keeps, such as
//       cuLaunchHostFunc): layer driver, tid the event's "tid" (XLA's thread id, which need
//       not be the OS's)
//   ph "X" on the host with args.correlation_id and another name: a kernel launch, which
//       XLA names after its kernel, not after the driver function it called: counted
//       (launches_named_by_kernel), not converted (which function it was is not written)
//   any other "X" on the host (XLA's, PJRT's and Python's spans): counted (host_spans)
// There is no runtime layer: XLA calls the driver itself.
//
// Times: "ts" and "dur" are microseconds with three decimals counted from the trace's start,
// which the file does not write (XLA keeps it in the XSpace, not in the JSON). So a record's
// ts is the caller's base plus the relative time, and the reading says the clock is unknown
// (clock_known false): no mapping to the harness's clock is made up here.
//
// Events before the process_name of their "pid" are counted (events_of_unnamed_process),
// not converted: XLA writes every process's metadata first, and holding events back for a
// name that may never come would be unbounded.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "common/event.h"
#include "tracers/torchprof/torchprof_trace.h"

namespace cudatrace {

struct JaxTraceLimits {
  // The byte bounds follow the run's (--max-trace-bytes, itself from the free space under
  // --out): the file may take all of it, and its text, only streamed through, 64 times that:
  // five times what the recorded trace inflates by (112,396 bytes of text from 9,261 of gzip,
  // tests/fixtures/jaxprof/real), so that a trace that fits is never refused for its text,
  // while a gzip bomb stops there. Saturating.
  static JaxTraceLimits for_run(uint64_t run_bytes);
  uint64_t max_file_bytes = 0;                      // of the file (compressed, where gzip'd)
  uint64_t max_text_bytes = 0;                      // of the JSON text (inflated)
  size_t max_string = size_t(64) << 10;             // bytes kept of one string
  size_t max_event_values = 4096;                   // values in one event (its args included)
  size_t max_event_bytes = size_t(1) << 20;         // string bytes in one event
  size_t max_processes = 4096;                      // process_name entries kept
};

struct JaxTraceClock {
  int64_t base_ns = 0;  // added to each relative ts: the caller's guess of the trace's start
};

struct JaxTraceReading {
  int64_t kernels = 0, driver_calls = 0;
  int64_t kernels_without_dims = 0;       // kernel_details without a grid:x,y,z and block:x,y,z
  int64_t launches_named_by_kernel = 0;   // host launches, named after their kernel
  int64_t gpu_other_events = 0;           // on a GPU process, no kernel_details
  int64_t host_spans = 0;                 // XLA's, PJRT's and Python's spans on the host
  int64_t other_process_events = 0;       // on a process neither a GPU nor the host
  int64_t metadata_events = 0, other_events = 0;  // ph "M"; other phases
  std::map<std::string, int64_t> other_processes;  // their names (the first 32) -> events
  // Loss: events that were not read or not converted for want of what they needed.
  int64_t events_of_unnamed_process = 0;  // an "X" whose pid had no process_name before it
  int64_t processes_unkept = 0;           // process_name entries past max_processes
  int64_t events_malformed = 0;           // not an object; an "X" of ours without a name or ts
  int64_t events_too_large = 0;           // past max_event_values or max_event_bytes
  int64_t strings_cut = 0, invalid_utf8_bytes = 0;
  bool clock_known = false;               // always: the file does not say when its ts 0 was
  std::string display_time_unit;          // "ns" from XLA: how a viewer shows it; ts is in us
  bool gzip = false, has_events = false;
  // Read to the end of its top-level object, within the bounds. Else `cut` says where and why.
  bool complete = false;
  std::string cut;
  bool file_over_bound = false;           // the file went on past max_file_bytes
  bool text_over_bound = false;           // its text inflated past max_text_bytes: refused there
  std::string unreadable;                 // could not be opened (a link, two links, not a file)
  uint64_t file_bytes = 0, file_bytes_read = 0, text_bytes_read = 0;
  // What of the file was not read: past a bound, or after a cut.
  uint64_t file_bytes_unread() const { return file_bytes > file_bytes_read ? file_bytes - file_bytes_read : 0; }
  int64_t events() const { return kernels + driver_calls; }
};

// What a reading lost, as the loss counters every method reports (TracerReport::loss), so
// that a bound reached reaches the verdict: the trace cut or refused, the file's bytes past
// its bound, the events not read.
nlohmann::json jax_trace_loss(const JaxTraceReading& r);

// Streams `file`, written by process `pid`, into `sink` (TraceSink: the event and its args
// packed as the store holds them). `bus_ids`: that process's device ordinals -> PCI bus ids,
// where known. Never throws for what the file holds; `sink` may throw, and that passes through.
JaxTraceReading read_jax_trace(const std::filesystem::path& file, int64_t pid, const JaxTraceClock& clock,
                               const std::map<int64_t, std::string>& bus_ids, const JaxTraceLimits& limits,
                               const TraceSink& sink);
// The same, each event's args in e.args as JSON (tests).
JaxTraceReading read_jax_trace(const std::filesystem::path& file, int64_t pid, const JaxTraceClock& clock,
                               const std::map<int64_t, std::string>& bus_ids, const JaxTraceLimits& limits,
                               const std::function<void(const Event&)>& sink);

}  // namespace cudatrace
