#pragma once
// What the hook left in the program's folder, process by process, read as the program's
// files: torchprof.<pid>.status.json (how far the process got: hook/cudatrace_torchprof.py
// writes its phases), torchprof.<pid>.json (its trace) and torchprof.<pid>.json.tmp (a
// trace Kineto began and never renamed: the export was cut short). And Kineto's own words
// on loss, which reach only the program's stderr.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cudatrace {

struct SpooledProcess {
  int64_t pid = 0;
  bool has_status = false;
  std::string phase;         // the status's phase; empty when it has none or could not be read
  std::string status_error;  // why the status could not be read
  nlohmann::json status;     // as read (bounded), for the notes
  std::map<int64_t, std::string> bus_ids;  // device ordinal -> PCI bus id, where it said
  std::string trace;  // the trace file's name, or its .tmp, or empty
  bool trace_tmp = false;
};

// How far the folder is read, and what that reading left unread, each a loss (unit: files).
// The folder is the program's: one that writes a million status files must cost the harness
// neither their memory nor their time, and the processes past the bounds are counted, never
// dropped. The bounds follow the run's (--max-trace-bytes, from the free space under --out):
// statuses kept in memory, a 1024th of it between 64 MiB and 1 GiB; a name per KiB of that.
struct SpoolBounds {
  size_t max_names = size_t(1) << 16;
  uint64_t max_status_bytes = uint64_t(64) << 20;
  int64_t names_unread = 0;     // names past max_names, not looked at
  int64_t statuses_unread = 0;  // status files not read: past max_status_bytes in all, or unreadable
  static SpoolBounds for_run(uint64_t run_bytes);
};

// Every process the hook left a file for, by pid. Names of any other shape are not read.
// `method`: the names' first part, which the hook's module writes (jaxprof's hook writes its
// status files as torchprof's does: cudatrace_jaxprof.py, and no .json trace).
std::map<int64_t, SpooledProcess> read_spool(const std::filesystem::path& dir, const std::string& method = "torchprof",
                                             SpoolBounds* bounds = nullptr);

// "<method>.<digits><suffix>" -> the pid; -1 for any other name.
int64_t spool_pid_in(const std::string& name, const std::string& method, const std::string& suffix);

// The phases (cudatrace_torchprof.py): which ones mean the profiler ran in the process.
bool phase_profiled(const std::string& phase);

// Kineto's warnings in the program's stderr: that it stopped tracing (its GPU buffers
// full) and records CUPTI dropped. The program could print the same lines: they would
// only count against its own trace.
struct KinetoLossLines {
  int64_t stopped_tracing = 0, dropped_records = 0;
  std::vector<std::string> examples;
  std::string unread;  // why the file was not read, or past what bound
  // Bytes of the program's stderr past `max_bytes`: Kineto's lines there are unseen, so
  // they are counted as loss (kineto_log_unread_bytes), never a clean "no drops".
  int64_t unread_bytes = 0;
};
// `max_bytes`: the run's bound on what the method reads (HostFacts::max_trace_bytes, from the
// free space under --out), not a fixed size.
KinetoLossLines read_kineto_loss_lines(const std::filesystem::path& program_stderr, uint64_t max_bytes);

}  // namespace cudatrace
