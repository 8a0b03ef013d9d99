#include "harness/score/layer_score.h"

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

}  // namespace cudatrace
