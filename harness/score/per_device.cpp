#include "harness/score/per_device.h"

#include <algorithm>
#include <cstdio>

#include "harness/score/verdict.h"

namespace cudatrace {

using json = nlohmann::json;

void DeviceNames::learn(const Event& e) {
  if (!e.device || e.device_id.empty()) return;
  // Every record of a run passes here (10^7 and more): a (process, ordinal) known once is known.
  if (seen_.count({e.pid, *e.device})) return;
  const std::string id = normalize_pci_bus_id(e.device_id);
  if (!id.empty()) seen_.emplace(std::pair{e.pid, *e.device}, id);
}

void DeviceNames::learn_missing(const DeviceNames& other) {
  for (const auto& [key, id] : other.seen_) seen_.try_emplace(key, id);
}

void DeviceNames::learn(const std::vector<Event>& events) {
  for (const auto& e : events) learn(e);
}

std::string DeviceNames::key(const Event& e) const {
  if (!e.device_id.empty())
    if (std::string id = normalize_pci_bus_id(e.device_id); !id.empty()) return id;
  if (!e.device) return kNoDevice;
  if (auto it = seen_.find({e.pid, *e.device}); it != seen_.end()) return it->second;
  if (host_)
    if (auto it = host_->find(int(*e.device)); it != host_->end() && !it->second.pci_bus_id.empty()) {
      const std::lock_guard<std::mutex> lock(inferring_);
      inferred_.insert({e.pid, *e.device});
      return it->second.pci_bus_id;
    }
  return "device " + std::to_string(*e.device);
}

void ProcessLabeler::add(const Event& e) {
  if (!e.is_meta()) {
    if (!last_first_call_ || last_pid_ != e.pid) {
      last_first_call_ = &first_call_.try_emplace(e.pid, e.ts).first->second;
      last_pid_ = e.pid;
    }
    *last_first_call_ = std::min(*last_first_call_, e.ts);
    return;
  }
  header_ts_.try_emplace(e.pid, e.ts);
  const auto info = e.args.find("info");
  if (info == e.args.end() || !info->is_object()) return;
  const auto p = info->find("process");
  if (p != info->end() && p->is_string() && !p->get<std::string>().empty()) own_name_[e.pid] = p->get<std::string>();
}

ProcessLabels ProcessLabeler::finish() const {
  std::map<int64_t, int64_t> first = first_call_;
  for (const auto& [pid, ts] : header_ts_) first.try_emplace(pid, ts);
  std::map<std::string, int> named;  // a workload's own name, counted: two processes may not share one
  for (const auto& [pid, name] : own_name_) ++named[name];
  std::vector<std::pair<int64_t, int64_t>> order;  // (first call, pid)
  for (const auto& [pid, ts] : first) order.push_back({ts, pid});
  std::sort(order.begin(), order.end());
  ProcessLabels labels = own_name_;
  int n = 0;
  for (const auto& [ts, pid] : order) {
    ++n;
    auto it = labels.find(pid);
    if (it != labels.end() && named[it->second] == 1) continue;
    labels[pid] = "process " + std::to_string(n);
  }
  return labels;
}

ProcessLabels label_ledger_processes(const std::vector<Event>& ledger_meta, const std::vector<Event>& ledger) {
  ProcessLabeler labeler;
  for (const auto& h : ledger_meta) labeler.add(h);
  for (const auto& t : ledger) labeler.add(t);
  return labeler.finish();
}

std::string process_label(const ProcessLabels& labels, int64_t pid) {
  auto it = labels.find(pid);
  return it != labels.end() ? it->second : "pid " + std::to_string(pid) + " (no ledger)";
}

Event event_at(const DeviceRef& r) {
  Event e;
  e.pid = std::get<0>(r);
  e.device = std::get<1>(r);
  e.device_id = std::get<2>(r);
  return e;
}

BucketKey BucketContext::truth(const Event& t) const {
  return {labels ? process_label(*labels, t.pid) : "", names ? names->key(t) : kNoDevice};
}

BucketKey BucketContext::seen(const Event& e, bool attributing) const {
  return {labels ? process_label(*labels, e.pid) : "", !attributing ? kUnattributed : names ? names->key(e) : kNoDevice};
}

Buckets count_buckets(const std::map<BucketKey, std::map<std::string, int64_t>>& expected,
                      const std::map<BucketKey, std::map<std::string, int64_t>>& seen) {
  std::set<std::string> pooled;  // processes whose records name no device
  for (const auto& [key, kernels] : seen)
    if (key.device == kUnattributed) pooled.insert(key.process);
  // Processes whose ledger does not say on which GPU (some of) their kernels ran (a launch
  // through the driver API, which the ledger records with no device): nothing to place the
  // method's records against, so the process is compared whole, in its kNoDevice bucket.
  std::set<std::string> unplaced;
  for (const auto& [key, kernels] : expected)
    if (key.device == kNoDevice && !pooled.count(key.process)) unplaced.insert(key.process);
  auto pooled_key = [&](const BucketKey& key) {
    if (pooled.count(key.process)) return BucketKey{key.process, kUnattributed};
    if (unplaced.count(key.process)) return BucketKey{key.process, kNoDevice};
    return key;
  };
  std::map<BucketKey, std::map<std::string, int64_t>> want, got;
  for (const auto& [key, kernels] : expected)
    for (const auto& [kernel, n] : kernels) want[pooled_key(key)][kernel] += n;
  for (const auto& [key, kernels] : seen)
    for (const auto& [kernel, n] : kernels) got[pooled_key(key)][kernel] += n;
  Buckets out;
  std::set<BucketKey> keys;
  for (const auto& [k, v] : want) keys.insert(k);
  for (const auto& [k, v] : got) keys.insert(k);
  for (const auto& k : keys) {
    BucketTally& t = out[k];
    std::map<std::string, std::pair<int64_t, int64_t>> both;  // kernel -> (expected, seen)
    if (auto it = want.find(k); it != want.end())
      for (const auto& [kernel, n] : it->second) both[kernel].first += n;
    if (auto it = got.find(k); it != got.end())
      for (const auto& [kernel, n] : it->second) both[kernel].second += n;
    for (const auto& [kernel, es] : both) {
      const int64_t m = std::min(es.first, es.second);
      t.expected += es.first;
      t.matched += m;
      t.missing += es.first - m;
      t.phantom += es.second - m;
    }
  }
  return out;
}

json to_json(const Buckets& buckets) {
  json out = json::array();
  for (const auto& [k, t] : buckets)
    out.push_back({{"process", k.process},
                   {"device", k.device},
                   {"expected", t.expected},
                   {"matched", t.matched},
                   {"missing", t.missing},
                   {"phantom", t.phantom},
                   {"recall", t.expected ? json(double(t.matched) / double(t.expected)) : json(nullptr)}});
  return out;
}

namespace {
std::string where(const BucketKey& k) {
  if (k.device == kUnattributed) return k.process + " (" + kUnattributed + ")";
  if (k.device == kNoDevice) return k.process + " (calls of no device)";
  return k.process.empty() ? k.device : k.process + " on " + k.device;
}
}  // namespace

std::vector<std::string> shortfalls(const Buckets& buckets) {
  std::vector<std::string> out;
  for (const auto& [k, t] : buckets)
    if (t.expected > 0 && t.matched < t.expected) {
      // Rounded down as every share is (share_text): a shortfall never reads whole, nor higher than the verdict's.
      out.push_back(where(k) + ": " + std::to_string(t.matched) + " of " + std::to_string(t.expected) + " (" +
                    share_text(t.matched, t.expected) + ")");
    }
  return out;
}

bool several(const Buckets& buckets) {
  std::set<std::string> processes, devices;
  for (const auto& [k, t] : buckets) {
    if (t.expected == 0 && t.phantom == 0) continue;
    processes.insert(k.process);
    if (k.device != kNoDevice) devices.insert(k.device);
  }
  return processes.size() > 1 || devices.size() > 1;
}

// ---- commands ----

std::vector<ProcessCounts> count_by_process(const std::vector<Event>& events, const DeviceNames& names) {
  ProcessCounter counter;
  for (const auto& e : events) counter.add(e);
  return counter.finish(names);
}

struct ProcessCounter::Part {
  Event sample;  // a record of this part: what the device key is computed from
  FamilyCounts counts;
  FamilyCounter counter{counts};
};

ProcessCounter::ProcessCounter() = default;
ProcessCounter::~ProcessCounter() = default;

void ProcessCounter::add(const Event& e) {
  if (e.layer == layer::kMeta) return;
  part_of(e).counter.add(e);
}

void ProcessCounter::add(const Event& e, std::string_view packed_args) {
  if (e.layer == layer::kMeta) return;
  part_of(e).counter.add(e, packed_args);
}

// The record's (process, device) part, its process's first CUDA record brought forward.
ProcessCounter::Part& ProcessCounter::part_of(const Event& e) {
  Part* part = last_;
  if (!part || part->sample.pid != e.pid || part->sample.device != e.device || part->sample.device_id != e.device_id) {
    auto& slot = parts_[{e.pid, e.device, e.device_id}];
    if (!slot) {
      slot = std::make_unique<Part>();
      slot->sample.pid = e.pid;
      slot->sample.device = e.device;
      slot->sample.device_id = e.device_id;
    }
    part = last_ = slot.get();
    last_first_ts_ = &first_ts_.try_emplace(e.pid, 0).first->second;
  }
  int64_t& first = *last_first_ts_;
  if (e.layer != layer::kSyscall && e.ts > 0 && (first == 0 || e.ts < first)) first = e.ts;
  return *part;
}

std::vector<ProcessCounts> ProcessCounter::finish(const DeviceNames& names) {
  std::map<int64_t, ProcessCounts> out;
  for (const auto& [raw, part] : parts_) {
    const std::string key = names.key(part->sample);
    ProcessCounts& p = out[part->sample.pid];
    p.pid = part->sample.pid;
    p.first_ts = first_ts_[p.pid];
    if (key != kNoDevice) p.devices.insert(key);
    FamilyCounts& into = p.by_device[key];
    for (const auto& [l, families] : part->counts)
      for (const auto& [f, n] : families) into[l][f] += n;
  }
  std::vector<ProcessCounts> v;
  for (auto& [pid, p] : out) v.push_back(std::move(p));
  return v;
}

std::string ProcessTally::label() const {
  return "process " + std::to_string(order_overall) + (devices.empty() ? "" : " (" + devices + ")");
}

void add_run(ProcessTallies& into, const std::vector<ProcessCounts>& run) {
  // Processes that made no CUDA record of their own (a launcher that only forks) come after
  // the others, in pid order: their place carries no meaning.
  std::vector<const ProcessCounts*> order;
  for (const auto& p : run) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const ProcessCounts* a, const ProcessCounts* b) {
    if ((a->first_ts == 0) != (b->first_ts == 0)) return a->first_ts != 0;
    return a->first_ts < b->first_ts;
  });
  std::map<std::string, int> within;
  int overall = 0;
  for (const ProcessCounts* p : order) {
    std::string devices;
    for (const auto& d : p->devices) devices += (devices.empty() ? "" : "+") + d;
    const int n = ++within[devices];
    ProcessTally& t = into[{devices, n}];
    t.devices = devices;
    t.order_within = n;
    ++overall;
    if (t.runs++ == 0) t.order_overall = overall;
    t.pids.push_back(p->pid);
    for (const auto& [device, layers] : p->by_device)
      for (const auto& [l, families] : layers)
        for (const auto& [f, c] : families) t.by_device[device][l][f] += c;
  }
}

// How many calls and kernel runs two processes have in common, family by family, over
// all their devices and layers (per repetition, so runs of different counts compare).
static int64_t calls_in_common(const ProcessTally& a, const ProcessTally& b) {
  std::map<std::pair<std::string, std::string>, int64_t> mine;
  for (const auto& [device, layers] : a.by_device)
    for (const auto& [l, families] : layers)
      for (const auto& [f, c] : families) mine[{l, f}] += c / std::max(1, a.runs);
  std::map<std::pair<std::string, std::string>, int64_t> theirs;
  for (const auto& [device, layers] : b.by_device)
    for (const auto& [l, families] : layers)
      for (const auto& [f, c] : families) theirs[{l, f}] += c / std::max(1, b.runs);
  int64_t common = 0;
  for (const auto& [k, c] : mine)
    if (auto it = theirs.find(k); it != theirs.end()) common += std::min(c, it->second);
  return common;
}

std::vector<ProcessPair> match_processes(const ProcessTallies& reference, const ProcessTallies& method) {
  std::vector<ProcessPair> out;
  std::set<const ProcessTally*> taken;
  std::vector<const ProcessTally*> ref_left;
  for (const auto& [key, r] : reference) {
    auto it = method.find(key);
    if (!key.first.empty() && it != method.end()) {
      out.push_back({&r, &it->second, "the devices both used"});
      taken.insert(&it->second);
    } else {
      ref_left.push_back(&r);
    }
  }
  std::vector<const ProcessTally*> seen_left;
  for (const auto& [key, m] : method)
    if (!taken.count(&m)) seen_left.push_back(&m);
  auto by_order = [](const ProcessTally* a, const ProcessTally* b) { return a->order_overall < b->order_overall; };
  std::sort(ref_left.begin(), ref_left.end(), by_order);
  std::sort(seen_left.begin(), seen_left.end(), by_order);
  // Order alone misleads where one run has a process the other lacks: a launcher that
  // touches CUDA before spawning its ranks (torch's mp.spawn) shifted every rank by one
  // and read as "rank 0: 0 of its calls". Each reference process takes the remaining
  // process whose calls overlap its own most; order decides only between equals.
  for (const ProcessTally* r : ref_left) {
    auto best = seen_left.end();
    int64_t best_overlap = -1;
    for (auto it = seen_left.begin(); it != seen_left.end(); ++it) {
      const int64_t o = calls_in_common(*r, **it);
      if (o > best_overlap) best_overlap = o, best = it;
    }
    if (best == seen_left.end()) {
      out.push_back({r, nullptr, "no process of this method's run left"});
      continue;
    }
    out.push_back({r, *best, best == seen_left.begin() ? "the order of their first CUDA call" : "the calls both made"});
    seen_left.erase(best);
  }
  for (const ProcessTally* m : seen_left) out.push_back({nullptr, m, "not in the reference"});
  std::stable_sort(out.begin(), out.end(), [](const ProcessPair& a, const ProcessPair& b) {
    const int x = a.reference ? a.reference->order_overall : 1 << 30, y = b.reference ? b.reference->order_overall : 1 << 30;
    return x < y;
  });
  return out;
}

namespace {

using Families = std::map<std::string, int64_t>;

// One side's counts of `layer` for a process, per device key, divided by its repetitions.
std::map<std::string, Families> per_device(const ProcessTally* p, const std::string& layer, int reps,
                                           const std::set<std::string>& left_out) {
  std::map<std::string, Families> out;
  if (!p) return out;
  for (const auto& [device, layers] : p->by_device) {
    auto it = layers.find(layer);
    if (it == layers.end()) continue;
    for (const auto& [f, n] : it->second)
      if (!left_out.count(f)) out[device][f] += n / std::max(1, reps);
  }
  return out;
}

Families pooled(const std::map<std::string, Families>& by_device) {
  Families out;
  for (const auto& [d, fams] : by_device)
    for (const auto& [f, n] : fams) out[f] += n;
  return out;
}

}  // namespace

json per_device_verdict(const PerDeviceInput& reference, const std::vector<PerDeviceInput>& methods,
                        const std::map<std::string, std::string>& ref_layer, const std::set<std::string>& left_out) {
  json out = {{"reference", reference.method},
              {"matching", "a method's processes are matched to the reference's by the devices both used where the "
                           "method names devices, else by the calls they have in common, then the order of their first CUDA call"},
              {"processes", json::array()},
              {"rows", json::array()},
              {"short", json::object()}};
  if (!reference.processes) return out;
  for (const auto& [key, r] : *reference.processes)
    out["processes"].push_back({{"process", r.label()}, {"devices", r.devices}, {"pids", r.pids}});
  for (const auto& m : methods) {
    if (!m.processes) continue;
    const std::vector<ProcessPair> pairs = match_processes(*reference.processes, *m.processes);
    for (const auto& l : m.layers) {
      const auto rl_it = ref_layer.find(l);
      const std::string rl = rl_it != ref_layer.end() ? rl_it->second : l;
      if (std::find(reference.layers.begin(), reference.layers.end(), rl) == reference.layers.end()) continue;
      // The method names devices in this layer if any of its records of it does.
      bool attributing = false;
      for (const auto& [key, p] : *m.processes)
        for (const auto& [device, layers] : p.by_device)
          if (device != kNoDevice && layers.count(l)) attributing = true;
      for (const auto& pair : pairs) {
        const auto ref = per_device(pair.reference, rl, reference.reps, left_out);
        const auto seen = per_device(pair.seen, l, m.reps, {});
        const std::string who = pair.reference ? pair.reference->label() : pair.seen->label();
        // The whole process first: its coverage whatever device the records name. Then, for a
        // method that names devices, each device strictly; its records that name none (a
        // call before any context, or one its way of naming missed) count on no GPU, so
        // where it has more of those than the reference its per-GPU counts are a floor and
        // the process's total is what says whether it fell short.
        std::vector<std::pair<std::string, std::pair<Families, Families>>> rows;  // device -> (reference, seen)
        rows.push_back({attributing ? kAllDevices : kUnattributed, {pooled(ref), pooled(seen)}});
        int64_t unnamed_excess = 0;
        if (attributing) {
          std::map<std::string, std::pair<Families, Families>> by_device;
          for (const auto& [d, f] : ref) by_device[d].first = f;
          for (const auto& [d, f] : seen) by_device[d].second = f;
          for (auto& [d, sides] : by_device) rows.push_back({d, std::move(sides)});
          const auto nr = ref.find(kNoDevice), ns = seen.find(kNoDevice);
          int64_t ref_none = 0, seen_none = 0;
          if (nr != ref.end())
            for (const auto& [f, n] : nr->second) ref_none += n;
          if (ns != seen.end())
            for (const auto& [f, n] : ns->second) seen_none += n;
          unnamed_excess = std::max<int64_t>(0, seen_none - ref_none);
        }
        std::vector<std::string> short_lines;
        for (auto& [device, sides] : rows) {
          // Kernel names the reference cut shorter (join_cut_kernel_families), as in the totals.
          if (rl == layer::kGpuActivity || l == layer::kDevice) join_cut_kernel_families(sides.first, sides.second);
          int64_t total = 0, matched = 0, seen_total = 0;
          for (const auto& [f, n] : sides.first) {
            total += n;
            auto s = sides.second.find(f);
            matched += std::min(n, s == sides.second.end() ? int64_t(0) : s->second);
          }
          for (const auto& [f, n] : sides.second) seen_total += n;
          if (total == 0 && seen_total == 0) continue;
          json row = {{"method", m.method},
                      {"layer", l},
                      {"process", who},
                      {"device", device},
                      {"matched_by", pair.how},
                      {"reference", total},
                      {"seen", seen_total},
                      {"matched", matched},
                      {"coverage", total ? json(double(matched) / double(total)) : json(nullptr)}};
          if (pair.seen) row["method_process"] = pair.seen->label();
          if (pair.seen) row["method_pids"] = pair.seen->pids;
          if (device == kAllDevices && unnamed_excess > 0) row["records_naming_no_device"] = unnamed_excess;
          row["status"] = total == 0 ? "not in the reference" : matched == total ? "complete" : matched == 0 ? "blind" : "partial";
          const bool whole = device == kAllDevices || device == kUnattributed;
          if (total > 0 && matched < total && (whole == (unnamed_excess > 0 || !attributing))) {
            short_lines.push_back((whole ? who + " (" + device + ")" : who + " on " + device) + ": " +
                                  std::to_string(matched) + " of " + std::to_string(total) + " (" +
                                  share_text(matched, total) + ")");
          }
          out["rows"].push_back(row);
        }
        if (unnamed_excess > 0 && !short_lines.empty())
          short_lines.push_back(who + ": " + std::to_string(unnamed_excess) +
                                " of its records name no device, so its per-GPU counts are a floor");
        for (auto& line : short_lines) out["short"][m.method][l].push_back(std::move(line));
      }
    }
  }
  return out;
}

}  // namespace cudatrace
