#include "harness/trace_export.h"

#include <fstream>
#include <set>

#include "common/event_io.h"

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
  if (std::filesystem::exists(run_dir / "ledger.jsonl"))
    for (const auto& e : read_events(run_dir / "ledger.jsonl").events) {
      trace.push_back(slice(e, e.pid + kLedgerPidOffset, "ledger"));
      ledger_pids.insert(e.pid);
    }
  for (int64_t pid : traced_pids)
    trace.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "traced: pid " + std::to_string(pid)}}}});
  for (int64_t pid : ledger_pids)
    trace.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid + kLedgerPidOffset},
                     {"args", {{"name", "ledger (ground truth): pid " + std::to_string(pid)}}}});
  const size_t n = trace.size();
  std::ofstream out(run_dir / "trace.json");
  out << nlohmann::json{{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ns"}}.dump() << "\n";
  if (!out) throw std::runtime_error("cannot write " + (run_dir / "trace.json").string());
  return n;
}

}  // namespace cudatrace
