#pragma once
// Is the ground truth itself sound? A ledger is consistent when it has its header, every
// record is well-formed, the calls per name are exactly what the workload intended, and
// (errors workload) every injected failure returned one of the codes it should. A run
// whose processes each wrote a ledger (multiproc) is checked file by file.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/event_io.h"

namespace cudatrace {

struct LedgerCheck {
  bool consistent = false;
  std::vector<std::string> problems;
  std::map<std::string, int64_t> counts;  // recorded calls per name
  int64_t records = 0;     // calls (runtime and driver)
  int64_t executions = 0;  // "execution" records: kernel runs of graph replays
  int64_t threads = 0;
  int64_t processes = 0;  // ledger files read
  int64_t injected_checked = 0;  // injected failures whose code was compared
  nlohmann::json header = nlohmann::json::object();
};

LedgerCheck check_ledger(const EventStream& ledger);

// Reads and checks every ledger a run's processes wrote in `run_dir` (ledger.jsonl and
// ledger.jsonl.<pid>); `merged` gets all their records. Consistent only if each one is.
LedgerCheck read_ledgers(const std::filesystem::path& run_dir, EventStream& merged);
nlohmann::json to_json(const LedgerCheck& c);

}  // namespace cudatrace
