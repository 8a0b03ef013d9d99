#include "harness/score/layer_score.h"

#include <array>

#include "common/packed_args.h"

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

std::string describe(const Event& e) {
  std::string s = e.name + " tid " + std::to_string(e.tid) + " ts " + std::to_string(e.ts);
  if (e.ret) s += " ret " + std::to_string(*e.ret);
  return s;
}

const std::string& PairScorer::device_key(int side, const Event& e) {
  KeyMemo& m = memo_[side];
  if (!m.any || m.pid != e.pid || m.device != e.device || m.device_id != e.device_id) {
    m.key = buckets_.names->key(e);
    m.any = true, m.pid = e.pid, m.device = e.device, m.device_id = e.device_id;
  }
  return m.key;
}

void PairScorer::example(const std::string& what) {
  if (score_.examples.size() < max_examples_) score_.examples.push_back(what);
}

// Ledger args first: what the method's record says of each (hex pointers without regard
// to case, see same_value).
void PairScorer::compare(const Event& truth, std::string_view truth_args, const Event& seen, std::string_view seen_args) {
  const PackedArgsView got(seen_args);
  // The method's args decoded once, not once per ledger arg (find() decodes them all from
  // the start each time); looked up by key alone, first entry first, as find() does.
  struct Entry {
    std::string_view key;
    PackedValue value;
  };
  std::array<Entry, 16> entries;
  const size_t held = got.size() <= entries.size() ? got.size() : 0;
  size_t n = 0;
  if (held) got.each([&](std::string_view k, const PackedValue& v) { entries[n++] = {k, v}; });
  const auto find = [&](std::string_view key) -> std::optional<PackedValue> {
    if (!held) return got.find(key);
    for (size_t i = 0; i < n; ++i)
      if (entries[i].key == key) return entries[i].value;
    return std::nullopt;
  };
  PackedArgsView(truth_args).each([&](std::string_view key, const PackedValue& value) {
    // How the workload launched, what it expects, which injected step and which library
    // made the call: the ledger's notes, not arguments.
    if (key == "via" || key == "expect" || key == "step" || key == "by") return;
    const auto it = find(key);
    if (!it) {
      ++score_.args_undecoded;
      return;
    }
    ++score_.args_compared;
    if (same_value(value, *it)) {
      ++score_.args_equal;
    } else {
      example("argument " + std::string(key) + " of " + describe(truth) + ": ledger " + value.to_json().dump() +
              ", tracer " + it->to_json().dump());
    }
  });
  if (DeviceNames::names_a_device(truth)) {
    if (!DeviceNames::names_a_device(seen)) {
      ++score_.device_unnamed;
    } else {
      ++score_.device_compared;
      if (deferred_) {  // decided at the end, with the names whole
        deferred_->add(truth, seen, max_examples_);
      } else {
        const BucketContext& b = buckets_;
        const bool same = b.names ? device_key(0, truth) == device_key(1, seen)
                                  : truth.device == seen.device && truth.device_id == seen.device_id;
        if (same) {
          ++score_.device_equal;
        } else {
          const auto shown = [&](const Event& e) { return b.names ? b.names->key(e) : std::to_string(e.device.value_or(-1)); };
          example("device of " + describe(truth) + ": ledger " + shown(truth) + ", tracer " + shown(seen));
        }
      }
    }
  }
  compare_ret(truth, seen);
}

void PairScorer::compare_ret(const Event& truth, const Event& seen) {
  if (truth.ret && seen.ret) {
    ++score_.ret_compared;
    if (*truth.ret == *seen.ret) {
      ++score_.ret_equal;
    } else {
      example("return code of " + describe(truth) + ": ledger " + std::to_string(*truth.ret) + ", tracer " +
              std::to_string(*seen.ret));
    }
  }
}

void DeferredDevices::add(const Event& truth, const Event& seen, size_t max_examples) {
  const auto same_place = [](const DeviceRef& r, const Event& e) {
    return std::get<0>(r) == e.pid && std::get<1>(r) == e.device && std::get<2>(r) == e.device_id;
  };
  if (!last_ || !same_place(last_truth_, truth) || !same_place(last_seen_, seen)) {
    last_truth_ = ref_of(truth), last_seen_ = ref_of(seen);
    last_ = &pairs_[{last_truth_, last_seen_}];
  }
  ++last_->n;
  if (last_->described.size() < max_examples) last_->described.push_back(describe(truth));
}

// As PairScorer::compare decides a pair at once, for every pair of these places.
void DeferredDevices::decide(LayerScore& score, const BucketContext& b, PairScorer& scorer) {
  for (const auto& [places, p] : pairs_) {
    const Event truth = event_at(places.first), seen = event_at(places.second);
    const bool same = b.names ? b.names->key(truth) == b.names->key(seen)
                              : truth.device == seen.device && truth.device_id == seen.device_id;
    if (same) {
      score.device_equal += p.n;
      continue;
    }
    const auto shown = [&](const Event& e) { return b.names ? b.names->key(e) : std::to_string(e.device.value_or(-1)); };
    for (const auto& d : p.described)
      scorer.example("device of " + d + ": ledger " + shown(truth) + ", tracer " + shown(seen));
  }
  pairs_.clear();
  last_ = nullptr;
}

}  // namespace cudatrace
