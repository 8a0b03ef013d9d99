#include "harness/score/ledger_check.h"

#include "common/event_read_ahead.h"

#include <sys/stat.h>

#include <algorithm>
#include <iterator>
#include <set>

#include "common/event_store.h"
#include "ledger/ledger.h"

namespace cudatrace {

namespace {
// What one ledger may name before it is taken for garbage rather than a workload's record
// (a file in target/ is the program's user's to write): distinct threads and call names.
constexpr size_t kMaxThreads = size_t(1) << 16;
constexpr size_t kMaxNames = size_t(1) << 12;
}  // namespace

void LedgerChecker::problem(std::string p) {
  if (c_.problems.size() < 20) c_.problems.push_back(std::move(p));
}

// The name's count (nullptr past kMaxNames names): the last few names' are kept at hand,
// since a std::map lookup per record was a tenth of reading a ledger.
int64_t* LedgerChecker::count_of(const std::string& name) {
  for (auto& [n, count] : recent_)
    if (count && n == name) return count;
  const auto it = c_.counts.find(name);
  int64_t* count = it != c_.counts.end() ? &it->second : c_.counts.size() < kMaxNames ? &c_.counts[name] : nullptr;
  if (count) recent_[recent_next_++ % recent_.size()] = {name, count};
  return count;
}

void LedgerChecker::add(const Event& e) { add(e, e.is_meta() ? std::string() : pack_json_args(e.args)); }

void LedgerChecker::add(const Event& e, std::string_view packed_args) {
  if (e.is_meta()) {
    if (e.name != "ledger" || header_) return;
    header_ = e;
    c_.header = e.args;
    for (const auto& inj : e.args.value("injected", nlohmann::json::array()))
      if (inj.is_object()) ++injected_per_name_[inj.value("name", "")];
    return;
  }
  if (!header_) {
    problem("a record before the ledger header: " + e.name);
    return;
  }
  if (e.pid != header_->pid) problem(e.name + " recorded by pid " + std::to_string(e.pid));
  if (e.layer == layer::kExecution) {  // kernel runs a graph replay caused: not calls
    ++c_.executions;
    return;
  }
  ++c_.records;
  if (int64_t* n = count_of(e.name)) {
    ++*n;
  } else if (!too_many_names_) {
    too_many_names_ = true;
    problem("more than " + std::to_string(kMaxNames) + " distinct call names: not a workload's ledger");
  }
  if (std::find(recent_tids_.begin(), recent_tids_.begin() + recent_tids_used_, e.tid) !=
      recent_tids_.begin() + recent_tids_used_) {
    // a thread of the last few records: known already
  } else if (tids_.size() < kMaxThreads) {
    tids_.insert(e.tid);
    recent_tids_[recent_tid_next_++ % recent_tids_.size()] = e.tid;
    recent_tids_used_ = std::min(recent_tids_used_ + 1, recent_tids_.size());
  } else if (!tids_.count(e.tid) && !too_many_tids_) {
    too_many_tids_ = true;
    problem("more than " + std::to_string(kMaxThreads) + " threads: not a workload's ledger");
  }
  if (e.layer != layer::kRuntime && e.layer != layer::kDriver)
    problem("record of layer " + e.layer + " in a ledger: " + e.name);
  if (e.ts <= 0 || !e.dur || *e.dur < 0) problem("bad timestamps on " + e.name + " at ts " + std::to_string(e.ts));
  check_injected(e, packed_args);
}

// Injected failures are checked in program order per call name, against the recorded calls
// of that name on the thread that made them (the errors workload is single-threaded). A
// workload whose other calls of that name succeed tags the injected ones with args.step.
void LedgerChecker::check_injected(const Event& e, std::string_view packed_args) {
  if (injected_per_name_.empty()) return;
  const auto n = injected_per_name_.find(e.name);
  if (n == injected_per_name_.end()) return;
  if (auto& all = first_rets_[e.name]; all.size() < n->second) all.push_back(e.ret);
  if (PackedArgsView(packed_args).contains("step"))
    if (auto& tagged = tagged_rets_[e.name]; tagged.size() < n->second) tagged.push_back(e.ret);
}

LedgerCheck LedgerChecker::finish() {
  LedgerCheck c = std::move(c_);
  c_ = {};
  recent_ = {};  // they point into the counts moved to c
  recent_tids_used_ = recent_tid_next_ = 0;
  auto problem = [&](std::string p) {
    if (c.problems.size() < 20) c.problems.push_back(std::move(p));
  };
  if (!header_) {
    c.problems = {"no ledger header record"};
    c.consistent = false;
    return c;
  }
  const nlohmann::json& args = header_->args;
  c.threads = int64_t(tids_.size());
  if (c.records + c.executions != args.value("records", int64_t(-1)))
    problem("header says " + std::to_string(args.value("records", int64_t(-1))) + " records, file has " +
            std::to_string(c.records + c.executions));
  const auto intended = args.value("intended", nlohmann::json::object());
  if (intended.empty()) problem("the workload declared no intended calls");
  for (const auto& [name, n] : intended.items()) {
    const int64_t got = c.counts.count(name) ? c.counts[name] : 0;
    const int64_t want = n.is_number_integer() ? n.get<int64_t>() : -1;
    if (got != want) problem(name + ": intended " + n.dump() + ", recorded " + std::to_string(got));
  }
  for (const auto& [name, got] : c.counts)
    if (!intended.contains(name)) problem(name + ": recorded " + std::to_string(got) + " but never intended");
  std::map<std::string, size_t> next;
  for (const auto& inj : args.value("injected", nlohmann::json::array())) {
    if (!inj.is_object()) continue;
    const std::string name = inj.value("name", "");
    const std::string step = inj.value("step", "");
    const auto tagged = tagged_rets_.find(name);
    const auto& rets = tagged != tagged_rets_.end() && !tagged->second.empty() ? tagged->second : first_rets_[name];
    size_t& k = next[name];
    if (k >= rets.size()) {
      problem("injected step " + step + ": no recorded " + name + " left to check");
      continue;
    }
    const std::optional<int64_t> ret = rets[k++];
    ++c.injected_checked;
    bool ok = false;
    for (const auto& code : inj.value("codes", nlohmann::json::array()))
      ok = ok || (ret && code.is_number_integer() && *ret == code.get<int64_t>());
    if (!ok)
      problem("injected step " + step + ": " + name + " returned " + (ret ? std::to_string(*ret) : "nothing") +
              ", expected one of " + inj.value("codes", nlohmann::json::array()).dump());
  }
  c.consistent = c.problems.empty();
  c.processes = 1;
  header_.reset();
  tids_.clear();
  injected_per_name_.clear();
  first_rets_.clear();
  tagged_rets_.clear();
  return c;
}

LedgerCheck check_ledger(const EventStream& ledger) {
  LedgerChecker checker;
  for (const auto& m : ledger.meta) checker.add(m);
  for (const auto& e : ledger.events) checker.add(e);
  return checker.finish();
}

LedgerCheck read_ledgers(const std::filesystem::path& run_dir, uint64_t max_bytes,
                         const std::function<void(const Event&)>& visit) {
  Event with_args;
  return read_ledgers(run_dir, max_bytes, [&](const Event& e, std::string_view packed) {
    if (e.is_meta()) return visit(e);
    with_args = e;
    with_args.args = unpack_args(packed);
    visit(with_args);
  });
}

LedgerCheck read_ledgers(const std::filesystem::path& run_dir, uint64_t max_bytes,
                         const std::function<void(const Event&, std::string_view packed_args)>& visit) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string base : {ledger::kFileName, ledger::kOldFileName})
      if (name == base || name.rfind(base + ".", 0) == 0) files.push_back(entry.path());
  }
  // The first process's ledger first (its info is the run's): the bare name sorts before
  // the names with a pid.
  std::sort(files.begin(), files.end());
  LedgerCheck all;
  all.consistent = true;
  if (files.empty()) {
    all.consistent = false;
    all.problems.push_back("no ledger written");
    return all;
  }
  uint64_t left = max_bytes;
  for (const auto& f : files) {
    LedgerCheck one;
    LedgerChecker checker;
    try {
      struct stat st {};
      const uint64_t size = lstat(f.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
      if (size > left)
        throw std::runtime_error(std::to_string(size) + " bytes, over what is left of the run's bound of " +
                                 std::to_string(max_bytes) + " bytes for all its ledgers (--max-trace-bytes): not read");
      left -= size;
      StoreLimits limits;
      limits.max_file_bytes = size;
      // Real ledgers inflate far: a synthetic one of 2 M short calls past 64-fold (the
      // bench), one with 500-byte kernel names 106-fold. A file made to inflate without end
      // (a zstd bomb in target/) is read up to the run's bound, or 256 times its size where
      // that is more, then refused.
      limits.max_inflated_bytes = std::max<uint64_t>(max_bytes, std::max<uint64_t>(size, uint64_t(1) << 20) * 256);
      // Decoded a few thousand records ahead on a thread of its own, and checked there, where
      // there are cores for it: at 10^8 calls the pairing waits on this loop.
      std::unique_ptr<EventReadAhead> ahead;
      std::unique_ptr<EventReader> in;
      if (EventReadAhead::worth_it())
        ahead = std::make_unique<EventReadAhead>(
            f, limits, [&checker](const Event& e, std::string_view packed) { checker.add(e, packed); }, 2048, 4,
            EventReadAhead::decoders_worth_it());
      else
        in = std::make_unique<EventReader>(f, limits);
      if (ahead) {
        std::string_view packed;
        while (const Event* e = ahead->next(packed)) visit(*e, packed);
      } else {
        Event e;
        std::string packed;
        while (in->next(e, &packed)) {
          checker.add(e, packed);
          visit(e, packed);
        }
      }
      one = checker.finish();
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
    if (all.header.empty()) all.header = one.header;  // the first (the bare name): info shown
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
