#include "harness/trace_export.h"

#include <fstream>
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
  if (std::filesystem::exists(run_dir / "events.jsonl"))
    for (const auto& e : read_events(run_dir / "events.jsonl").events) {
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

}  // namespace cudatrace
