#pragma once
// Is the ground truth itself sound? A ledger is consistent when it has its header, every
// record is well-formed, the calls per name are exactly what the workload intended, and
// (errors workload) every injected failure returned one of the codes it should. A run
// whose processes each wrote a ledger (multiproc) is checked file by file.
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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

// Checks one process's ledger as it streams past: its header first (the workload writes it
// first), then its records in file order. Holds counts, never the records.
class LedgerChecker {
 public:
  void add(const Event& e);
  // A record whose args come packed (EventReader's packed mode: e.args is not read, but a
  // meta record's are).
  void add(const Event& e, std::string_view packed_args);
  LedgerCheck finish();

 private:
  void problem(std::string p);
  void check_injected(const Event& e, std::string_view packed_args);
  int64_t* count_of(const std::string& name);
  LedgerCheck c_;
  std::array<std::pair<std::string, int64_t*>, 4> recent_{};  // names and their counts in c_.counts
  size_t recent_next_ = 0;
  // The last few threads seen, all in tids_: a ledger interleaves its threads' calls in
  // time order, and a std::set lookup per record was a twentieth of reading one.
  std::array<int64_t, 16> recent_tids_{};
  size_t recent_tids_used_ = 0, recent_tid_next_ = 0;
  std::optional<Event> header_;
  std::set<int64_t> tids_;
  bool too_many_tids_ = false, too_many_names_ = false;
  // Injected failures: per call name, the return codes of its first recorded calls (as many
  // as were injected), of all of them and of those the workload tagged with args.step.
  std::map<std::string, size_t> injected_per_name_;
  std::map<std::string, std::vector<std::optional<int64_t>>> first_rets_, tagged_rets_;
};

LedgerCheck check_ledger(const EventStream& ledger);

// Reads and checks every ledger a run's processes wrote in `run_dir` (ledger.msgpack.zst and
// ledger.msgpack.zst.<pid>; ledger.jsonl[.<pid>] of older runs), each in a stream, handing
// each record (meta included) to `visit`.
// Consistent only if each one is. At most `max_bytes` are read over all of them (a run's
// --max-trace-bytes): one past it is not read, and the run's ledger is inconsistent.
LedgerCheck read_ledgers(const std::filesystem::path& run_dir, uint64_t max_bytes,
                         const std::function<void(const Event&)>& visit);
// The same, each record other than meta with its args packed and e.args empty (the scoring's
// way: EventReader::next(Event&, std::string*)).
LedgerCheck read_ledgers(const std::filesystem::path& run_dir, uint64_t max_bytes,
                         const std::function<void(const Event&, std::string_view packed_args)>& visit);
nlohmann::json to_json(const LedgerCheck& c);

}  // namespace cudatrace
