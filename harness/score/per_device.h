#pragma once
// The per-(process, device) bookkeeping behind every verdict: a total can hide that one
// rank saw none of its kernels, so each layer's coverage is also kept per process and per
// GPU, and the console names those that fell short.
//
// Workloads: a ledger call belongs to the process that made it and the device the workload
// says it was on; the matcher pairs calls as before and each pair, miss or phantom lands in
// its (process, device) bucket (MatchOptions::buckets). Kernel-level layers have no pairs:
// runs are compared per bucket, by the device the method's own record names.
//
// Commands: no ledger; each method's events are counted per process and device, its
// processes are matched to the CUPTI reference's (a separate run: other pids), and each
// (process, device) is covered against the reference's.
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/device_id.h"
#include "common/event.h"

namespace cudatrace {

// Device keys that are not a bus id.
inline constexpr const char* kNoDevice = "no device";  // a record of no GPU (a call before any context)
inline constexpr const char* kUnattributed = "device not attributable by this method";
inline constexpr const char* kAllDevices = "all its devices";  // a command's process, whatever GPU

// Turns a record's device into a key every process of the run shares: its bus id where the
// record, another record of the same process naming both, or the host's table (ordinal as
// a process that inherits the harness's CUDA_VISIBLE_DEVICES numbers it) gives one; else
// "device N" (an ordinal alone, meaningful within its process); kNoDevice when the record
// names no device.
class DeviceNames {
 public:
  explicit DeviceNames(const std::map<int, HostDevice>* host = nullptr) : host_(host) {}
  void learn(const Event& e);
  void learn(const std::vector<Event>& events);
  // What `other` learnt of a (process, ordinal) this one has not: a method's own word on a
  // bus id comes first, whichever was read first (a workload's ledger is).
  void learn_missing(const DeviceNames& other);
  std::string key(const Event& e) const;
  static bool names_a_device(const Event& e) { return e.device.has_value() || !e.device_id.empty(); }
  // Where a key came from, for the docs and the notes: which (pid, ordinal) used the host's table.
  const std::set<std::pair<int64_t, int64_t>>& inferred_from_host() const { return inferred_; }

 private:
  std::map<std::pair<int64_t, int64_t>, std::string> seen_;  // (pid, ordinal) -> bus id
  const std::map<int, HostDevice>* host_;
  mutable std::set<std::pair<int64_t, int64_t>> inferred_;
  mutable std::mutex inferring_;  // key() is called from each layer's scoring thread
};

// pid -> the name a process has in the tables, the same in every repetition: the ledger's
// info.process where the workload gives one ("rank 1"), else "process N" by the order of
// each process's first recorded call.
using ProcessLabels = std::map<int64_t, std::string>;
// Learnt from the ledgers' records as they stream past (headers included).
class ProcessLabeler {
 public:
  ProcessLabeler() = default;
  ProcessLabeler(const ProcessLabeler&) = delete;  // it points into its own map
  ProcessLabeler& operator=(const ProcessLabeler&) = delete;
  void add(const Event& e);
  ProcessLabels finish() const;

 private:
  std::map<int64_t, int64_t> first_call_;   // pid -> its first recorded call
  int64_t* last_first_call_ = nullptr;       // that of the last record's pid (no lookup per record)
  int64_t last_pid_ = 0;
  std::map<int64_t, int64_t> header_ts_;    // pid -> its ledger header's time
  std::map<int64_t, std::string> own_name_;  // pid -> info.process
};
ProcessLabels label_ledger_processes(const std::vector<Event>& ledger_meta, const std::vector<Event>& ledger);
// A pid the labels do not know: named by its pid (a process that wrote no ledger).
std::string process_label(const ProcessLabels& labels, int64_t pid);

// Where a record is, for the per-(process, device) breakdown, before the device names are
// complete: (pid, ordinal, bus id), given its bucket at the end.
using DeviceRef = std::tuple<int64_t, std::optional<int64_t>, std::string>;
inline DeviceRef ref_of(const Event& e) { return {e.pid, e.device, e.device_id}; }
Event event_at(const DeviceRef& r);  // a record at that place, nothing else of it

struct BucketKey {
  std::string process, device;
  auto operator<=>(const BucketKey&) const = default;
};

struct BucketTally {
  int64_t expected = 0, matched = 0, missing = 0, phantom = 0;
  void add(const BucketTally& o) {
    expected += o.expected, matched += o.matched, missing += o.missing, phantom += o.phantom;
  }
};
using Buckets = std::map<BucketKey, BucketTally>;

// What the matcher needs to fill a layer's buckets (null members: no breakdown).
struct BucketContext {
  const ProcessLabels* labels = nullptr;
  const DeviceNames* names = nullptr;
  BucketKey truth(const Event& t) const;  // a ledger record's bucket
  // A method's record: its own device, or kUnattributed when the method names no device
  // in this layer at all (`attributing` false).
  BucketKey seen(const Event& e, bool attributing) const;
};

// Kernel-level layers: per bucket and kernel, runs expected and seen; matched = the
// smaller. A process whose records of this layer name no device is compared whole, in its
// (process, kUnattributed) bucket; one whose ledger names no device for some of its
// kernels (driver API launches), whole in its (process, kNoDevice) bucket.
Buckets count_buckets(const std::map<BucketKey, std::map<std::string, int64_t>>& expected,
                      const std::map<BucketKey, std::map<std::string, int64_t>>& seen);

// [{process, device, expected, matched, missing, phantom, recall}], in key order.
nlohmann::json to_json(const Buckets& buckets);
// "rank 1 on 0000:1a:00.0: 0 of 120" for each bucket that expected something and matched
// less than all of it; empty when none fell short.
std::vector<std::string> shortfalls(const Buckets& buckets);
// Whether any bucket holds something (a layer with a breakdown worth showing).
bool several(const Buckets& buckets);

// ---- commands ----

// One process of one run: which devices its records name and what they add up to, per
// device key (count_families' units).
struct ProcessCounts {
  int64_t pid = 0;
  int64_t first_ts = 0;           // its first CUDA record: the order of processes
  std::set<std::string> devices;  // bus ids (or "device N") its records name
  std::map<std::string, std::map<std::string, std::map<std::string, int64_t>>> by_device;  // device -> layer -> family -> n
};
std::vector<ProcessCounts> count_by_process(const std::vector<Event>& events, const DeviceNames& names);
// The same, one event at a time: counts are kept per (pid, device as the record names it)
// and given their shared device key at the end, once every record has taught `names`.
class ProcessCounter {
 public:
  ProcessCounter();
  ~ProcessCounter();
  void add(const Event& e);
  void add(const Event& e, std::string_view packed_args);  // a kernel's args as the store packs them
  std::vector<ProcessCounts> finish(const DeviceNames& names);

 private:
  struct Part;
  Part& part_of(const Event& e);
  std::map<std::tuple<int64_t, std::optional<int64_t>, std::string>, std::unique_ptr<Part>> parts_;
  std::map<int64_t, int64_t> first_ts_;  // pid -> its first CUDA record
  Part* last_ = nullptr;                  // the part of the previous record: most follow one of theirs
  int64_t* last_first_ts_ = nullptr;
};

// Processes summed over a method's repetitions, each under a key that does not depend on
// pids: the devices it used and its place among the processes that used the same ones,
// and its place among all (first CUDA record first).
struct ProcessTally {
  std::string devices;  // "0000:18:00.0+0000:1a:00.0", or "" when its records name none
  int order_within = 0, order_overall = 0;
  int runs = 0;
  std::vector<int64_t> pids;
  std::map<std::string, std::map<std::string, std::map<std::string, int64_t>>> by_device;
  std::string label() const;  // "process 2 (0000:1a:00.0)"
};
using ProcessTallies = std::map<std::pair<std::string, int>, ProcessTally>;
void add_run(ProcessTallies& into, const std::vector<ProcessCounts>& run);

// The reference's processes, each with the method's process matched to it (or none) and how:
// by the devices both used where the method names devices, else by the calls they have in
// common (the order of their first CUDA record between equals). The method's unmatched processes come last with a null reference.
struct ProcessPair {
  const ProcessTally* reference = nullptr;
  const ProcessTally* seen = nullptr;
  std::string how;
};
std::vector<ProcessPair> match_processes(const ProcessTallies& reference, const ProcessTallies& method);

// Per method, layer, process and device: the method's coverage of the reference's
// (CUPTI's) counts for that process and device, divided by each side's repetitions.
// `ref_layer` maps a layer to the reference layer it is measured against; `left_out`:
// families the reference holds that no other method can see (kMadeForCupti).
struct PerDeviceInput {
  std::string method;
  int reps = 1;
  std::vector<std::string> layers;  // those it observed
  const ProcessTallies* processes = nullptr;
};
nlohmann::json per_device_verdict(const PerDeviceInput& reference, const std::vector<PerDeviceInput>& methods,
                                  const std::map<std::string, std::string>& ref_layer,
                                  const std::set<std::string>& left_out);

}  // namespace cudatrace
