#include "harness/out/trace_export.h"

#include "common/event_store.h"

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <optional>
#include <set>

#include "common/event_io.h"
#include "common/outside_text.h"
#include "harness/out/results_io.h"
#include "harness/score/ledger_check.h"
#include "harness/run/safe_files.h"

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

namespace {

// The trace, written through `out`, from the folder held: its events, then the ledgers of
// its target/ (or of the folder itself, for a run of before target/ existed).
size_t write_trace(const HeldDir& run, EventWriter& out) {
  size_t n = 0;
  auto put = [&](const nlohmann::json& j) { out.write_line((n++ ? "," : "") + dump_safe(j)); };
  out.write_line("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  std::set<int64_t> traced_pids, ledger_pids;
  if (const auto file = events_file_of(run.path_of()); std::filesystem::exists(file)) {
    StoreLimits limits;
    limits.max_inflated_bytes = uint64_t(256) << 30;  // a folder the user owns: no zstd bomb
    EventReader in(file, limits);
    Event e;
    while (in.next(e))
      if (!e.is_meta()) {
        put(slice(e, e.pid, e.layer));
        if (traced_pids.size() < 100000) traced_pids.insert(e.pid);
      }
  }
  // The program's ledgers (one per process) are in its own folder, target/, entered never
  // through a link: a target/ that is a link (or not a folder) is not read.
  int err = 0;
  const std::optional<HeldDir> target = run.try_sub("target", &err);
  if (target || err == ENOENT) {
    const HeldDir& ledgers = target ? *target : run;
    // Streamed, within the bound a run had at most (half the disk's free space).
    (void)read_ledgers(ledgers.path_of(), half_free_space(ledgers.path_of()), [&](const Event& e) {
      if (e.is_meta()) return;
      put(slice(e, e.pid + kLedgerPidOffset, "ledger"));
      if (ledger_pids.size() < 100000) ledger_pids.insert(e.pid);
    });
  }
  for (int64_t pid : traced_pids)
    put({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "traced: pid " + std::to_string(pid)}}}});
  for (int64_t pid : ledger_pids)
    put({{"ph", "M"}, {"name", "process_name"}, {"pid", pid + kLedgerPidOffset},
         {"args", {{"name", "ledger (ground truth): pid " + std::to_string(pid)}}}});
  out.write_line("]}");
  out.close();
  return n;
}

}  // namespace

size_t export_trace(const std::filesystem::path& run_dir) {
  // Root may export a folder the user owns: the folder is held open (never through a link)
  // and everything below it is reached from it, so that a name swapped for a link to a
  // root-only folder, before or during the export, leads nowhere (safe_files.h, HeldDir).
  const HeldDir run = HeldDir::open(run_dir);
  // Written as a stream, one trace event a line, as the events are read: a run of 10^8
  // events is never held. Root may run this on a folder it already handed to the user:
  // created exclusively in the folder held, never through a link; a failed write removes
  // the partial file (by its name in the folder held).
  run.remove_file("trace.json");
  try {
    EventWriter out(run.create_file("trace.json"), run.path_of("trace.json"));
    return write_trace(run, out);
  } catch (const std::exception& e) {
    throw std::runtime_error(run.named(e.what()));
  }
}

int export_jsonl(const std::filesystem::path& run_dir, const std::filesystem::path& file) {
  const HeldDir run = HeldDir::open(run_dir);  // as export_trace: never through a link below it
  if (!run.has(kEventsFile) && !run.has("events.jsonl"))
    throw std::runtime_error("no events in " + shown(run_dir.string()) + " (give results/<run-id>/runs/<combo>)");
  const std::filesystem::path events = events_file_of(run.path_of());
  StoreLimits limits;
  limits.max_inflated_bytes = uint64_t(256) << 30;  // a folder the user owns: no zstd bomb
  try {
    EventReader in(events, limits);
    const bool to_stdout = file == "-";
    std::unique_ptr<EventWriter> out = to_stdout ? std::make_unique<EventWriter>(dup(1), "standard output")
                                                 : std::make_unique<EventWriter>(file);
    Event e;
    while (in.next(e)) out->write(e);
    out->close();
    std::fprintf(stderr, "harness: wrote %llu events to %s\n", static_cast<unsigned long long>(in.records()),
                 to_stdout ? "standard output" : file.c_str());
  } catch (const std::exception& e) {
    throw std::runtime_error(run.named(e.what()));
  }
  return 0;
}

}  // namespace cudatrace
