#include "harness/score/matcher.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <unordered_map>

#include "common/cuda_names.h"

namespace cudatrace {

void LayerScore::add(const LayerScore& o) {
  if (layer.empty()) layer = o.layer;
  if (expectation.empty()) expectation = o.expectation;
  expected += o.expected;
  seen += o.seen;
  matched += o.matched;
  missing += o.missing;
  phantom += o.phantom;
  unscored += o.unscored;
  args_compared += o.args_compared;
  args_equal += o.args_equal;
  args_undecoded += o.args_undecoded;
  ret_compared += o.ret_compared;
  ret_equal += o.ret_equal;
  order_violations += o.order_violations;
  device_compared += o.device_compared;
  device_equal += o.device_equal;
  device_unnamed += o.device_unnamed;
  for (const auto& [k, t] : o.buckets) buckets[k].add(t);
  for (const auto& [name, n] : o.by_name) {
    auto& mine = by_name[name];
    mine.expected += n.expected;
    mine.seen += n.seen;
    mine.matched += n.matched;
  }
  for (const auto& e : o.examples)
    if (examples.size() < 8) examples.push_back(e);
  for (const auto& [call, syscalls] : o.seen_during)
    for (const auto& [sc, n] : syscalls) seen_during[call][sc] += n;
}

namespace {

// Pointers are hex strings; compare them without regard to case.
bool same_value(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_string() && b.is_string()) {
    const auto &x = a.get_ref<const std::string&>(), &y = b.get_ref<const std::string&>();
    return std::equal(x.begin(), x.end(), y.begin(), y.end(),
                      [](char p, char q) { return std::tolower(uint8_t(p)) == std::tolower(uint8_t(q)); });
  }
  return a == b;
}

std::string describe(const Event& e) {
  std::string s = e.name + " tid " + std::to_string(e.tid) + " ts " + std::to_string(e.ts);
  if (e.ret) s += " ret " + std::to_string(*e.ret);
  return s;
}

struct Scorer {
  LayerScore& score;
  const MatchOptions& opts;

  void example(const std::string& what) {
    if (score.examples.size() < opts.max_examples) score.examples.push_back(what);
  }

  void compare(const Event& truth, const Event& seen) {
    for (const auto& [key, value] : truth.args.items()) {
      // How the workload launched, what it expects, which injected step and which library
      // made the call: the ledger's notes, not arguments.
      if (key == "via" || key == "expect" || key == "step" || key == "by") continue;
      auto it = seen.args.find(key);
      if (it == seen.args.end()) {
        ++score.args_undecoded;
        continue;
      }
      ++score.args_compared;
      if (same_value(value, *it)) {
        ++score.args_equal;
      } else {
        example("argument " + key + " of " + describe(truth) + ": ledger " + value.dump() + ", tracer " + it->dump());
      }
    }
    if (DeviceNames::names_a_device(truth)) {
      if (!DeviceNames::names_a_device(seen)) {
        ++score.device_unnamed;
      } else {
        ++score.device_compared;
        const BucketContext& b = opts.buckets;
        const bool same = b.names ? b.names->key(truth) == b.names->key(seen)
                                  : truth.device == seen.device && truth.device_id == seen.device_id;
        if (same) {
          ++score.device_equal;
        } else {
          const auto shown = [&](const Event& e) { return b.names ? b.names->key(e) : std::to_string(e.device.value_or(-1)); };
          example("device of " + describe(truth) + ": ledger " + shown(truth) + ", tracer " + shown(seen));
        }
      }
    }
    if (truth.ret && seen.ret) {
      ++score.ret_compared;
      if (*truth.ret == *seen.ret) {
        ++score.ret_equal;
      } else {
        example("return code of " + describe(truth) + ": ledger " + std::to_string(*truth.ret) + ", tracer " +
                std::to_string(*seen.ret));
      }
    }
  }
};

// Ledger entries and tracer events of one thread and one call family, each in file order.
struct Lane {
  std::vector<size_t> truth, seen;  // indices into ledger / events
};

// Pairs ledger calls with tracer events of the same thread and family. Where both carry
// timestamps, an event belongs to the call whose [begin, end] holds its entry time, so a
// phantom or a missing call does not shift every later pair; otherwise pairs go in order.
void pair_lane(const Lane& lane, const std::vector<Event>& ledger, const std::vector<Event>& events,
               const MatchOptions& opts, const std::function<void(size_t, size_t)>& on_pair,
               const std::function<void(size_t)>& on_missing, const std::function<void(size_t)>& on_phantom) {
  size_t i = 0, j = 0;
  while (i < lane.truth.size() && j < lane.seen.size()) {
    const Event& t = ledger[lane.truth[i]];
    const Event& e = events[lane.seen[j]];
    if (t.ts == 0 || e.ts == 0) {
      on_pair(lane.truth[i++], lane.seen[j++]);
      continue;
    }
    const int64_t lo = t.ts - opts.slack_ns, hi = t.ts + t.dur.value_or(0) + opts.slack_ns;
    if (e.ts < lo) {
      on_phantom(lane.seen[j++]);
    } else if (e.ts > hi) {
      on_missing(lane.truth[i++]);
    } else {
      on_pair(lane.truth[i++], lane.seen[j++]);
    }
  }
  for (; i < lane.truth.size(); ++i) on_missing(lane.truth[i]);
  for (; j < lane.seen.size(); ++j) on_phantom(lane.seen[j]);
}

// Counts matched events that appear out of the ledger's order within their thread.
int64_t order_violations(std::vector<std::pair<size_t, size_t>> pairs) {
  std::sort(pairs.begin(), pairs.end());  // by ledger index = program order per thread
  int64_t violations = 0;
  size_t latest = 0;
  bool any = false;
  for (const auto& [truth, seen] : pairs) {
    if (any && seen < latest) ++violations;
    latest = any ? std::max(latest, seen) : seen;
    any = true;
  }
  return violations;
}

// Runtime or driver layer: ledger calls (selected, keyed by family) vs tracer events.
LayerScore score_calls(const std::string& layer, const std::string& expectation, const std::vector<Event>& ledger,
                       const std::vector<Event>& events, const MatchOptions& opts,
                       const std::function<std::string(const Event&)>& truth_key,
                       const std::function<std::string(const Event&)>& seen_key,
                       const std::function<bool(const Event&)>& seen_unscored) {
  LayerScore score;
  score.layer = layer;
  score.expectation = expectation;
  Scorer scorer{score, opts};

  const BucketContext& bc = opts.buckets;
  const bool breakdown = bc.labels != nullptr;
  bool attributing = false;  // the method names a device on some record of this layer
  for (const auto& e : events)
    if (e.layer == layer && DeviceNames::names_a_device(e)) attributing = true;

  std::map<std::pair<int64_t, std::string>, Lane> lanes;
  for (size_t i = 0; i < ledger.size(); ++i) {
    std::string key = truth_key(ledger[i]);
    if (key.empty()) continue;
    lanes[{ledger[i].tid, key}].truth.push_back(i);
    ++score.expected;
    ++score.by_name[key].expected;
    if (breakdown) ++score.buckets[bc.truth(ledger[i])].expected;
  }
  for (size_t j = 0; j < events.size(); ++j) {
    const Event& e = events[j];
    if (e.layer != layer) continue;
    ++score.seen;
    if (seen_unscored(e)) {
      ++score.unscored;
      continue;
    }
    std::string key = seen_key(e);
    ++score.by_name[key].seen;
    lanes[{e.tid, key}].seen.push_back(j);
  }

  // A method's store holds each thread's calls of a layer in the order they were made, but a
  // method that hands calls over as they return may interleave another layer's, and some
  // (cupti's kernels) come in the order the GPU finished: pair each lane in time order.
  auto by_entry = [&](size_t a, size_t b) { return events[a].ts < events[b].ts; };
  for (auto& [key, lane] : lanes)
    if (!std::is_sorted(lane.seen.begin(), lane.seen.end(), by_entry))
      std::stable_sort(lane.seen.begin(), lane.seen.end(), by_entry);
  std::map<int64_t, std::vector<std::pair<size_t, size_t>>> pairs_by_thread;
  for (const auto& [key, lane] : lanes) {
    pair_lane(
        lane, ledger, events, opts,
        [&](size_t t, size_t e) {
          ++score.matched;
          ++score.by_name[key.second].matched;
          if (breakdown) ++score.buckets[bc.truth(ledger[t])].matched;
          scorer.compare(ledger[t], events[e]);
          pairs_by_thread[key.first].push_back({t, e});
        },
        [&](size_t t) {
          ++score.missing;
          if (breakdown) ++score.buckets[bc.truth(ledger[t])].missing;
          scorer.example("missing: " + describe(ledger[t]));
        },
        [&](size_t e) {
          ++score.phantom;
          if (breakdown) ++score.buckets[bc.seen(events[e], attributing)].phantom;
          scorer.example("phantom: " + describe(events[e]));
        });
  }
  for (auto& [tid, pairs] : pairs_by_thread) score.order_violations += order_violations(std::move(pairs));
  return score;
}

// Kernel-level layers have no host thread: compare counts per kernel name.
// `bucketed`: the same expectation per (process, device) and kernel, for the breakdown.
LayerScore score_counts(const std::string& layer, const std::string& expectation,
                        const std::map<std::string, int64_t>& expected, const std::vector<Event>& events,
                        const MatchOptions& opts, const char* weight_arg = nullptr,
                        const std::map<BucketKey, std::map<std::string, int64_t>>* bucketed = nullptr) {
  LayerScore score;
  score.layer = layer;
  score.expectation = expectation;
  Scorer scorer{score, opts};
  for (const auto& [name, n] : expected) score.by_name[name].expected += n;
  bool attributing = false;
  for (const auto& e : events)
    if (e.layer == layer && DeviceNames::names_a_device(e)) attributing = true;
  std::map<BucketKey, std::map<std::string, int64_t>> seen_by_bucket;
  for (const auto& e : events) {
    if (e.layer != layer) continue;
    // An event may stand for several units (the device layer in thread mode: one event per
    // block, args.threads threads seen in it).
    const auto w = weight_arg ? e.args.find(weight_arg) : e.args.end();
    const int64_t units = w != e.args.end() && w->is_number_integer() ? w->get<int64_t>() : 1;
    score.seen += units;
    const auto k = e.args.find("kernel");
    std::string kernel = k != e.args.end() && k->is_string() ? k->get<std::string>() : e.name;
    if (bucketed && opts.buckets.labels) seen_by_bucket[opts.buckets.seen(e, attributing)][kernel] += units;
    score.by_name[kernel].seen += units;
  }
  if (bucketed && opts.buckets.labels) score.buckets = count_buckets(*bucketed, seen_by_bucket);
  for (auto& [name, n] : score.by_name) {
    n.matched = std::min(n.expected, n.seen);
    score.expected += n.expected;
    score.matched += n.matched;
    score.missing += n.expected - n.matched;
    score.phantom += n.seen - n.matched;
    if (n.seen != n.expected)
      scorer.example(name + ": expected " + std::to_string(n.expected) + ", seen " + std::to_string(n.seen));
  }
  return score;
}

// A ledger launch whose kernel runs on the GPU now: not one the workload made to fail, nor
// one captured into a graph (the graph's replays run it: "execution" records say how often).
bool kernel_runs(const Event& t) {
  const std::string c = canonical_name(t.name);
  if (!(t.layer == layer::kRuntime ? is_runtime_launch(c) : t.layer == layer::kDriver && is_driver_launch(c)))
    return false;
  const std::string expect = t.args.value("expect", "");
  return t.args.contains("kernel") && expect != "launch error" && expect != "captured" && (!t.ret || *t.ret == 0);
}

int64_t dim_product(const nlohmann::json& d) {
  if (!d.is_array()) return 0;
  int64_t p = 1;
  for (const auto& x : d) p *= x.get<int64_t>();
  return p;
}

// Syscall layer (strace): no call is a syscall, so the score is visibility: a ledger call
// is "seen" when its thread made at least one syscall while it ran.
LayerScore score_syscall_visibility(const std::vector<Event>& ledger, const std::vector<Event>& events,
                                    const MatchOptions& opts) {
  LayerScore score;
  score.layer = layer::kSyscall;
  score.expectation = "ledger calls during which their thread made at least one syscall";
  // Per thread, (entry time, label) sorted by time; ioctls are labelled by request name.
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, std::string>>> by_thread;
  for (const auto& e : events) {
    if (e.layer != layer::kSyscall) continue;
    ++score.seen;
    std::string label = e.name;
    if (auto r = e.args.find("request"); r != e.args.end() && r->is_string()) label += ":" + r->get<std::string>();
    by_thread[e.tid].push_back({e.ts, std::move(label)});
  }
  for (auto& [tid, v] : by_thread) std::sort(v.begin(), v.end());
  for (const auto& t : ledger) {
    if (t.layer != layer::kRuntime && t.layer != layer::kDriver) continue;
    std::string name = canonical_name(t.name);
    ++score.expected;
    ++score.by_name[name].expected;
    BucketTally* bucket = opts.buckets.labels ? &score.buckets[opts.buckets.truth(t)] : nullptr;
    if (bucket) ++bucket->expected;
    auto it = by_thread.find(t.tid);
    bool visible = false;
    if (it != by_thread.end()) {
      const int64_t lo = t.ts - opts.slack_ns, hi = t.ts + t.dur.value_or(0) + opts.slack_ns;
      auto sc = std::lower_bound(it->second.begin(), it->second.end(), std::pair<int64_t, std::string>{lo, ""});
      for (; sc != it->second.end() && sc->first <= hi; ++sc) {
        visible = true;
        ++score.seen_during[name][sc->second];
      }
    }
    if (visible) {
      ++score.matched;
      ++score.by_name[name].matched;
      if (bucket) ++bucket->matched;
    } else {
      ++score.missing;
      if (bucket) ++bucket->missing;
    }
  }
  return score;
}

}  // namespace

std::vector<LayerScore> match(const std::vector<Event>& ledger, const std::vector<Event>& events,
                              const std::vector<std::string>& layers, const MatchOptions& opts) {
  std::vector<Event> calls, driver_calls;
  // Kernel runs: launches that run now, and the executions graph replays cause.
  std::vector<std::pair<const Event*, int64_t>> runs;  // (launch or execution record, times)
  for (const auto& t : ledger) {
    if (t.layer == layer::kRuntime) calls.push_back(t);
    if (t.layer == layer::kDriver) driver_calls.push_back(t);
    if (kernel_runs(t)) runs.push_back({&t, 1});
    if (t.layer == layer::kExecution) runs.push_back({&t, t.args.value("times", int64_t(1))});
  }
  auto kernel_of = [](const Event& t) { return t.layer == layer::kExecution ? t.name : t.args["kernel"].get<std::string>(); };

  std::vector<LayerScore> out;
  for (const auto& l : layers) {
    if (l == layer::kRuntime) {
      out.push_back(score_calls(
          l, "every runtime call in the ledger", calls, events, opts,
          [](const Event& t) { return canonical_name(t.name); },
          [](const Event& e) { return canonical_name(e.name); },
          [](const Event& e) { return is_runtime_internal(e.name); }));
    } else if (l == layer::kDriver && !driver_calls.empty()) {
      // The program calls the driver itself (driverapi): every such call is ground truth.
      // Driver calls of families it never makes are counted, not scored.
      std::set<std::string> families;
      for (const auto& t : driver_calls) families.insert(canonical_name(t.name));
      out.push_back(score_calls(
          l, "every driver call in the ledger (other driver families: unscored)", driver_calls, events, opts,
          [](const Event& t) { return canonical_name(t.name); },
          [](const Event& e) { return canonical_name(e.name); },
          [families](const Event& e) { return !families.count(canonical_name(e.name)); }));
    } else if (l == layer::kDriver) {
      // cudart makes its driver calls itself; the only exact expectation is one driver
      // launch inside each runtime launch. Other driver calls are counted, not scored.
      out.push_back(score_calls(
          l, "one driver launch (cuLaunchKernel family) inside each ledger launch", calls, events, opts,
          [](const Event& t) { return is_runtime_launch(canonical_name(t.name)) ? std::string("launch") : ""; },
          [](const Event&) { return std::string("launch"); },
          [](const Event& e) { return !is_driver_launch(canonical_name(e.name)); }));
    } else if (l == layer::kGpuActivity) {
      std::map<std::string, int64_t> expected;
      std::map<BucketKey, std::map<std::string, int64_t>> bucketed;
      for (const auto& [t, times] : runs) {
        expected[kernel_of(*t)] += times;
        if (opts.buckets.labels) bucketed[opts.buckets.truth(*t)][kernel_of(*t)] += times;
      }
      out.push_back(score_counts(l, "one kernel record per kernel run (launches, and graph replays' executions)",
                                 expected, events, opts, nullptr, &bucketed));
    } else if (l == layer::kDevice) {
      // An event per block ("block"), per block with args.threads ("thread"), or per launch
      // with args.blocks, and args.threads too ("launch", "launch-thread").
      const bool per_thread = opts.device_mode == "thread" || opts.device_mode == "launch-thread";
      const char* weight = per_thread ? "threads" : opts.device_mode == "launch" ? "blocks" : nullptr;
      std::map<std::string, int64_t> expected;
      std::map<BucketKey, std::map<std::string, int64_t>> bucketed;
      for (const auto& [t, times] : runs) {
        const int64_t units = times * dim_product(t->args.value("grid", nlohmann::json())) *
                              (per_thread ? dim_product(t->args.value("block", nlohmann::json())) : 1);
        expected[kernel_of(*t)] += units;
        if (opts.buckets.labels) bucketed[opts.buckets.truth(*t)][kernel_of(*t)] += units;
      }
      out.push_back(score_counts(l, per_thread ? "grid x block threads per kernel run" : "grid blocks per kernel run",
                                 expected, events, opts, weight, &bucketed));
    } else if (l == layer::kSyscall) {
      std::vector<Event> all_calls = calls;
      all_calls.insert(all_calls.end(), driver_calls.begin(), driver_calls.end());
      out.push_back(score_syscall_visibility(all_calls, events, opts));
    }
  }
  return out;
}

nlohmann::json to_json(const LayerScore& s) {
  nlohmann::json by_name = nlohmann::json::object();
  for (const auto& [name, n] : s.by_name)
    by_name[name] = {{"expected", n.expected}, {"seen", n.seen}, {"matched", n.matched}};
  return {{"layer", s.layer},
          {"expectation", s.expectation},
          {"expected", s.expected},
          {"seen", s.seen},
          {"matched", s.matched},
          {"missing", s.missing},
          {"phantom", s.phantom},
          {"unscored", s.unscored},
          {"recall", s.recall()},
          {"args_compared", s.args_compared},
          {"args_equal", s.args_equal},
          {"args_undecoded", s.args_undecoded},
          {"ret_compared", s.ret_compared},
          {"ret_equal", s.ret_equal},
          {"order_violations", s.order_violations},
          {"device_compared", s.device_compared},
          {"device_equal", s.device_equal},
          {"device_unnamed", s.device_unnamed},
          {"per_device", to_json(s.buckets)},
          {"by_name", by_name},
          {"seen_during", s.seen_during},
          {"examples", s.examples}};
}

}  // namespace cudatrace
