#pragma once
// A run as a Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev): the tracer's
// events and the workload's ledger side by side, one track per thread, so what a method
// missed or invented is visible on the timeline.
#include <filesystem>

namespace cudatrace {

// Reads RUN_DIR's events and its program's ledgers in target/ (either may be absent), writes
// RUN_DIR/trace.json; returns the number of trace events written. Throws on bad input.
size_t export_trace(const std::filesystem::path& run_dir);

// The run folder's events (the store) as JSON lines, one event a line, to `file` (created
// exclusively, never through a link) or standard output ("-"); 0 once written. The store
// is read in a stream, with the bounds of a file the user owns.
int export_jsonl(const std::filesystem::path& run_dir, const std::filesystem::path& file);

}  // namespace cudatrace
