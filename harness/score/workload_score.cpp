#include "harness/score/workload_score.h"

#include <optional>

#include "common/event_store.h"
#include "harness/score/verdict.h"

using json = nlohmann::json;

namespace cudatrace {

WorkloadScore score_workload(const WorkloadScoreInput& in, DeviceNames& names) {
  WorkloadScore out;
  MatchOptions opts;
  opts.slack_ns = in.slack_ns;
  opts.device_mode = in.device_mode;
  opts.buckets = {&out.labels, &names};  // the labels are complete once the ledgers are read
  opts.spill_dir = in.sort_dir;
  // Twice the matcher's default: 10^7 calls then sort into no more files than one merge
  // reads at once (kFanIn), with no pass to merge files down first. Measured with
  // score_scale at 8 M calls: 9% fewer instructions, peak RSS 287 MiB rather than 249.
  opts.sort_chunk = size_t(1) << 17;
  // The matcher's own failures (its sort files) are told apart from the ledger's and the
  // store's: they say nothing of the program or the method.
  std::optional<Matcher> matcher;
  try {
    matcher.emplace(in.layers, opts);
  } catch (const std::exception& e) {
    out.scoring_error = e.what();
  }
  const auto scoring = [&](auto&& step) {
    if (!matcher || !out.scoring_error.empty()) return;
    try {
      step();
    } catch (const std::exception& e) {
      out.scoring_error = e.what();
    }
  };
  ProcessLabeler labeler;
  DeviceNames ledger_names;  // the method's own word on a bus id first: learnt after its store
  // Per record, only what can change what is learnt: a record later than the first launch
  // found is not the first, and a (process, device, bus id) learnt is learnt (each a string
  // built per record before).
  Event learnt;
  bool any_learnt = false;
  out.ledger = read_ledgers(in.target_dir, in.max_ledger_bytes, [&](const Event& e, std::string_view packed) {
    labeler.add(e);
    const FirstLaunch& first = out.first_launch;
    if (e.is_meta() || !first.any_record || !first.launch || e.ts < first.launch->ts) out.first_launch.add(e);
    if (!e.is_meta() && e.device && !(any_learnt && learnt.pid == e.pid && learnt.device == e.device &&
                                      learnt.device_id == e.device_id)) {
      ledger_names.learn(e);
      learnt.pid = e.pid, learnt.device = e.device, learnt.device_id = e.device_id;
      any_learnt = true;
    }
    scoring([&] { matcher->add_truth(e, packed); });
  });
  out.labels = labeler.finish();
  const bool score = !in.layers.empty();
  std::error_code ec;
  if ((score || in.tally) && std::filesystem::exists(in.events_file, ec)) {
    try {
      EventReader store(in.events_file);
      Event e, with_args;
      std::string packed;
      while (store.next(e, &packed)) {
        if (in.tally && in.tally->wants_args() && !e.is_meta()) {
          with_args = e;
          with_args.args = unpack_args(packed);
          in.tally->add(with_args);
        } else if (in.tally) {
          in.tally->add(e);
        }
        if (score && out.scoring_error.empty()) scoring([&] { matcher->add_seen(e, packed); });
        else if (!in.tally) break;
      }
    } catch (const std::exception& e) {
      out.store_error = e.what();  // scored on what was read: a prefix
    }
  }
  names.learn_missing(ledger_names);
  if (!score) return out;
  scoring([&] { out.layers = matcher->finish(); });
  if (!out.scoring_error.empty()) out.layers.clear();  // a score of part of the calls is no score
  return out;
}

std::string shortfall_reason(const LayerScore& s, const TracerReport& report, const Method& method) {
  if (s.matched < s.expected) {
    const std::string why = partial_reason(report.partly_unobserved, report.loss, method.limits, s.layer);
    return why.empty() ? "the method names no limit for this layer (Method::limits)" : why;
  }
  for (const auto& [key, b] : s.buckets)
    if (b.matched < b.expected)
      return "the method put some of this layer's records on another process or GPU than the ledger did "
             "(per_device_short names them)";
  return "";
}

json per_device_short(const json& scores, const Method& method) {
  json out = json::array();
  for (const auto& s : scores) {
    Buckets buckets;
    for (const auto& b : s.value("per_device", json::array()))
      buckets[{b["process"].get<std::string>(), b["device"].get<std::string>()}] = {
          b["expected"].get<int64_t>(), b["matched"].get<int64_t>(), b["missing"].get<int64_t>(),
          b["phantom"].get<int64_t>()};
    if (!several(buckets)) continue;
    const std::string l = s["layer"].get<std::string>();
    const auto d = method.devices.find(l);
    const std::string why = d != method.devices.end() && !d->second.named ? " (" + d->second.how + ")" : "";
    for (const auto& line : shortfalls(buckets))
      out.push_back(l + ": " + line + (line.find(kUnattributed) != std::string::npos ? why : ""));
  }
  return out;
}

}  // namespace cudatrace
