#include "harness/trace_export.h"

#include "common/event_store.h"

#include <unistd.h>

#include <fstream>
#include <memory>
#include <set>

#include "common/event_io.h"
#include "common/outside_text.h"
#include "harness/ledger_check.h"
#include "harness/safe_files.h"

namespace cudatrace {

namespace {

// The ledger gets processes of its own next to the traced ones (Chrome's format wants
// integer pids): ledger pid = traced pid + this.
constexpr int64_t kLedgerPidOffset = int64_t(1) << 30;

nlohmann::json slice(const Event& e, int64_t pid, const std::string& category) {
  nlohmann::json args = e.args;
  if (e.ret) args["ret"] = *e.ret;
  nlohmann::json j = {{"name", e.name}, {"cat", category}, {"pid", pid}, {"tid", e.tid},
                      {"ts", double(e.ts) / 1000.0}, {"args", args}};
  if (e.dur) {
    j["ph"] = "X";
    j["dur"] = double(*e.dur) / 1000.0;
  } else {
    j["ph"] = "i";  // no exit seen: an instant
    j["s"] = "t";
  }
  return j;
}

}  // namespace

size_t export_trace(const std::filesystem::path& run_dir) {
  nlohmann::json trace = nlohmann::json::array();
  std::set<int64_t> traced_pids, ledger_pids;
  if (const auto file = events_file_of(run_dir); std::filesystem::exists(file))
    for (const auto& e : read_events(file).events) {
      trace.push_back(slice(e, e.pid, e.layer));
      traced_pids.insert(e.pid);
    }
  // The program's ledgers (one per process) are in its own folder, target/.
  const auto ledger_dir = std::filesystem::is_directory(run_dir / "target") ? run_dir / "target" : run_dir;
  EventStream ledgers;
  (void)read_ledgers(ledger_dir, ledgers);
  for (const auto& e : ledgers.events) {
    trace.push_back(slice(e, e.pid + kLedgerPidOffset, "ledger"));
    ledger_pids.insert(e.pid);
  }
  for (int64_t pid : traced_pids)
    trace.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "traced: pid " + std::to_string(pid)}}}});
  for (int64_t pid : ledger_pids)
    trace.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid + kLedgerPidOffset},
                     {"args", {{"name", "ledger (ground truth): pid " + std::to_string(pid)}}}});
  const size_t n = trace.size();
  // Root may run this on a folder it already handed to the user: exclusive, never a link.
  std::filesystem::remove(run_dir / "trace.json");
  write_file_atomic(run_dir / "trace.json",
                    dump_safe(nlohmann::json{{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ns"}}) + "\n");
  return n;
}

int export_jsonl(const std::filesystem::path& run_dir, const std::filesystem::path& file) {
  const std::filesystem::path events = events_file_of(run_dir);
  if (!std::filesystem::exists(events))
    throw std::runtime_error("no events in " + run_dir.string() + " (give results/<run-id>/runs/<combo>)");
  StoreLimits limits;
  limits.max_inflated_bytes = uint64_t(256) << 30;  // a folder the user owns: no zstd bomb
  EventReader in(events, limits);
  const bool to_stdout = file == "-";
  std::unique_ptr<EventWriter> out = to_stdout ? std::make_unique<EventWriter>(dup(1), "standard output")
                                               : std::make_unique<EventWriter>(file);
  Event e;
  while (in.next(e)) out->write(e);
  out->close();
  std::fprintf(stderr, "harness: wrote %llu events to %s\n", static_cast<unsigned long long>(in.records()),
               to_stdout ? "standard output" : file.c_str());
  return 0;
}

}  // namespace cudatrace
