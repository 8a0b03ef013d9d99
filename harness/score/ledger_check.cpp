#include "harness/score/ledger_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <iterator>
#include <set>

namespace cudatrace {

LedgerCheck check_ledger(const EventStream& ledger) {
  LedgerCheck c;
  auto problem = [&](std::string p) {
    if (c.problems.size() < 20) c.problems.push_back(std::move(p));
  };

  const Event* header = nullptr;
  for (const auto& m : ledger.meta)
    if (m.name == "ledger") header = &m;
  if (!header) {
    problem("no ledger header record");
    return c;
  }
  c.header = header->args;

  std::set<int64_t> tids;
  for (const auto& e : ledger.events) {
    if (e.pid != header->pid) problem(e.name + " recorded by pid " + std::to_string(e.pid));
    if (e.layer == layer::kExecution) {  // kernel runs a graph replay caused: not calls
      ++c.executions;
      continue;
    }
    ++c.records;
    ++c.counts[e.name];
    tids.insert(e.tid);
    if (e.layer != layer::kRuntime && e.layer != layer::kDriver)
      problem("record of layer " + e.layer + " in a ledger: " + e.name);
    if (e.ts <= 0 || !e.dur || *e.dur < 0) problem("bad timestamps on " + e.name + " at ts " + std::to_string(e.ts));
  }
  c.threads = int64_t(tids.size());

  if (c.records + c.executions != header->args.value("records", int64_t(-1)))
    problem("header says " + std::to_string(header->args.value("records", int64_t(-1))) + " records, file has " +
            std::to_string(c.records + c.executions));

  const auto intended = header->args.value("intended", nlohmann::json::object());
  if (intended.empty()) problem("the workload declared no intended calls");
  for (const auto& [name, n] : intended.items()) {
    int64_t got = c.counts.count(name) ? c.counts[name] : 0;
    if (got != n.get<int64_t>())
      problem(name + ": intended " + std::to_string(n.get<int64_t>()) + ", recorded " + std::to_string(got));
  }
  for (const auto& [name, got] : c.counts)
    if (!intended.contains(name)) problem(name + ": recorded " + std::to_string(got) + " but never intended");

  // Injected failures, in program order per call name, against the recorded calls of that
  // name on the thread that made them (the errors workload is single-threaded). A workload
  // whose other calls of that name succeed tags the injected ones with args.step.
  std::map<std::string, std::vector<const Event*>> recorded_by_name;
  std::set<std::string> tagged;
  for (const auto& e : ledger.events)
    if (e.args.contains("step")) tagged.insert(e.name);
  for (const auto& e : ledger.events)
    if (!tagged.count(e.name) || e.args.contains("step")) recorded_by_name[e.name].push_back(&e);
  std::map<std::string, size_t> next;
  for (const auto& inj : header->args.value("injected", nlohmann::json::array())) {
    const std::string name = inj.value("name", "");
    const std::string step = inj.value("step", "");
    auto& list = recorded_by_name[name];
    size_t& k = next[name];
    if (k >= list.size()) {
      problem("injected step " + step + ": no recorded " + name + " left to check");
      continue;
    }
    const Event& e = *list[k++];
    ++c.injected_checked;
    bool ok = false;
    for (int code : inj.value("codes", std::vector<int>{})) ok = ok || (e.ret && *e.ret == code);
    if (!ok)
      problem("injected step " + step + ": " + name + " returned " + (e.ret ? std::to_string(*e.ret) : "nothing") +
              ", expected one of " + inj.value("codes", nlohmann::json::array()).dump());
  }
  c.consistent = c.problems.empty();
  c.processes = 1;
  return c;
}

// The program wrote its ledgers: one larger than this, or past this in all of a run's, is
// not read (and the run's ledger is then inconsistent, with that reason), so a runaway
// file, or one hard-linked under many names, cannot exhaust the harness.
// (A ledger line becomes an event of about 340 bytes in memory: 128 MiB of the shortest
// lines, 2.2 M events, is about 750 MB.)
constexpr uint64_t kMaxLedgerBytes = uint64_t(128) << 20;
constexpr uint64_t kMaxLedgersBytes = uint64_t(128) << 20;

LedgerCheck read_ledgers(const std::filesystem::path& run_dir, EventStream& merged) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "ledger.jsonl" || name.rfind("ledger.jsonl.", 0) == 0) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  LedgerCheck all;
  all.consistent = true;
  if (files.empty()) {
    all.consistent = false;
    all.problems.push_back("no ledger written");
    return all;
  }
  uint64_t left = kMaxLedgersBytes;
  for (const auto& f : files) {
    LedgerCheck one;
    try {
      struct stat st {};
      const uint64_t size = lstat(f.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
      if (size > left)
        throw std::runtime_error(std::to_string(size) + " bytes, over what is left of the run's bound of " +
                                 std::to_string(kMaxLedgersBytes >> 20) + " MiB for all its ledgers: not read");
      left -= size;
      EventStream s = read_events(f, kMaxLedgerBytes);
      one = check_ledger(s);
      merged.meta.insert(merged.meta.end(), std::make_move_iterator(s.meta.begin()), std::make_move_iterator(s.meta.end()));
      merged.events.insert(merged.events.end(), std::make_move_iterator(s.events.begin()),
                           std::make_move_iterator(s.events.end()));
    } catch (const std::exception& e) {
      one.problems.push_back(e.what());
    }
    const std::string who = files.size() > 1 ? f.filename().string() + ": " : "";
    for (const auto& p : one.problems)
      if (all.problems.size() < 20) all.problems.push_back(who + p);
    all.consistent = all.consistent && one.consistent;
    for (const auto& [name, n] : one.counts) all.counts[name] += n;
    all.records += one.records;
    all.executions += one.executions;
    all.threads += one.threads;
    all.injected_checked += one.injected_checked;
    ++all.processes;
    if (all.header.empty()) all.header = one.header;  // the first (ledger.jsonl): info shown
  }
  return all;
}

nlohmann::json to_json(const LedgerCheck& c) {
  return {{"consistent", c.consistent}, {"problems", c.problems}, {"records", c.records},
          {"threads", c.threads},       {"counts", c.counts},     {"executions", c.executions},
          {"processes", c.processes},     {"injected_checked", c.injected_checked},
          {"info", c.header.value("info", nlohmann::json::object())}};
}

}  // namespace cudatrace
