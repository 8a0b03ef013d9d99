#pragma once
// A run's events as OpenTelemetry traces, so they can be read next to a service's own
// traces (Jaeger, Tempo, any Collector pipeline): OTLP's JSON encoding, one TracesData
// object per line, the form of OpenTelemetry's OTLP File Exporter and what the Collector's
// `otlpjsonfile` receiver reads. The same lines are the bodies sent to an OTLP/HTTP
// endpoint (otlp_http.h).
//
// What a run becomes:
// - a resource per traced process of each run folder: service.name "cudatrace",
//   process.pid, process.command_line (the command the harness ran: a forked worker shares
//   it), cudatrace.method / run / workload / linkage / rep, the GPU and driver from the
//   run's manifest, and the method's loss counters (cudatrace.loss.*), the layers it did not
//   observe and the run's failures, so that a lossy or partial trace says so where it is read;
// - a trace per process (ids derived from the run id, the folder and the pid: the same run
//   exports the same file);
// - a span per API call or syscall (scope "cudatrace/<method>"): start and end in Unix
//   nanoseconds (the event's CLOCK_MONOTONIC plus the offset recorded when the run started),
//   status ERROR with the error's name when the call failed, attributes cudatrace.layer,
//   thread.id, cuda.return_code, cudatrace.correlation_id and the call's arguments as
//   cuda.arg.*;
// - a span per kernel execution or device record on a GPU track of its own (scope
//   "cudatrace/<method>/gpu", the record's fields as cuda.gpu.*), linked to the calls that
//   launched it through the correlation id where the method has one (cupti, nsys).
// Events without a time (ts 0) cannot be placed: they are counted on the resource
// (cudatrace.export.events_without_time), never dropped unsaid.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/event.h"
#include "harness/run/safe_files.h"

namespace cudatrace {

// At most this many spans per line (per request when sent): a devhook run of a large grid
// has hundreds of thousands of records.
inline constexpr size_t kOtlpSpansPerLine = 1000;

struct OtlpStats {
  size_t runs = 0;
  size_t lines = 0;
  size_t spans = 0;
  size_t linked_spans = 0;  // kernel and device spans with a link to their launch
  size_t events_without_time = 0;
  void add(const OtlpStats& o);
};

// Receives each TracesData line (without its newline).
using OtlpSink = std::function<void(const std::string& line)>;

// The run folders under DIR, held open: DIR itself when it is one (it has run.json), else
// each DIR/runs/<combo> that has run.json, in name order. Root may export a folder the user
// owns: DIR, runs/ and each combo are entered never through a link, and every file is read
// through the folder held (harness/run/safe_files.h, HeldDir), so that a name swapped for a
// link to a root-only folder leads nowhere. runs/ as a link is refused; a combo that is a
// link is not a run.
struct OtlpRuns {
  HeldDir top;                      // DIR
  std::optional<HeldDir> runs;      // DIR/runs, when the runs are below it
  std::vector<std::string> names;   // the combos' names, or DIR's own name
  size_t size() const { return names.size(); }
};
// Throws with a one-line reason when there is no run.
OtlpRuns otlp_run_folders(const std::filesystem::path& dir);

// Run `i` of `runs` as TracesData lines. Reads run.json, the events (when there are some)
// and the results' manifest.json (DIR's; ../../manifest.json when DIR is the run), each
// never through a link, not one with a second hard link, and within a bound. Throws, in
// one line, on a file it cannot read or a combo that is no longer a folder to enter.
OtlpStats otlp_of_run(const OtlpRuns& runs, size_t i, const OtlpSink& sink);
// The same from what a run already holds in memory (the matrix, as each run finishes):
// its folder's name, run.json's content, the results' manifest and its events.
OtlpStats otlp_of_run(const std::string& folder_name, const nlohmann::json& run, const nlohmann::json& manifest,
                      const std::vector<Event>& events, const OtlpSink& sink);

// Pieces, for the tests.
nlohmann::json otlp_any_value(const nlohmann::json& v);  // OTLP JSON AnyValue
std::string otlp_hex_id(const std::string& key, size_t bytes);  // 8 or 16 bytes, never all zero
// The name of a failed call's code in its layer ("cudaErrorMemoryAllocation",
// "CUDA_ERROR_OUT_OF_MEMORY", a syscall's errno), or "" when the call did not fail.
std::string otlp_error_of(const std::string& layer, int64_t ret, const nlohmann::json& args);

}  // namespace cudatrace
