#include "harness/score/workload_score.h"

#include <functional>
#include <memory>
#include <optional>

#include "common/event_store.h"
#include "harness/score/stream_matcher.h"
#include "harness/score/verdict.h"

using json = nlohmann::json;

namespace cudatrace {

namespace {

// What a run's scoring needs of the options, whichever way its calls are paired.
MatchOptions match_options(const WorkloadScoreInput& in, WorkloadScore& out, DeviceNames& names) {
  MatchOptions opts;
  opts.slack_ns = in.slack_ns;
  opts.device_mode = in.device_mode;
  opts.buckets = {&out.labels, &names};  // the labels are complete once the ledgers are read
  opts.spill_dir = in.sort_dir;
  // Twice the matcher's default: 10^7 calls then sort into no more files than one merge
  // reads at once (kFanIn), with no pass to merge files down first. Measured with
  // score_scale at 8 M calls: 9% fewer instructions, peak RSS 287 MiB rather than 249.
  opts.sort_chunk = size_t(1) << 17;
  return opts;
}

// The method's store, once, in file order: every record to the tally where one is fed
// here, and to `seen`. A store that ends early is scored on what was read (a prefix).
void read_store(const WorkloadScoreInput& in, WorkloadScore& out, const std::function<void(const Event&, std::string_view)>& seen) {
  std::error_code ec;
  if (!std::filesystem::exists(in.events_file, ec)) return;
  try {
    EventReader store(in.events_file);
    Event e, with_args;
    std::string packed;
    while (store.next(e, &packed)) {
      if (in.tally && !e.is_meta() && in.tally->wants_args(e)) {  // a meta record's args are in it
        with_args = e;
        with_args.args = unpack_args(packed);
        in.tally->add(with_args);
      } else if (in.tally) {
        in.tally->add(e);
      }
      seen(e, packed);
    }
  } catch (const std::exception& e) {
    if (out.store_error.empty()) out.store_error = e.what();
  }
}

// Learns from the ledgers' records what the run's verdicts need beside the score: the
// processes' labels, the first launch, the devices the ledger names.
struct LedgerLearner {
  ProcessLabeler labeler;
  DeviceNames names;  // the method's own word on a bus id first: learnt after its store
  // Per record, only what can change what is learnt: a record later than the first launch
  // found is not the first, and a (process, device, bus id) learnt is learnt.
  Event learnt;
  bool any_learnt = false;
  void add(const Event& e, FirstLaunch& first) {
    labeler.add(e);
    if (e.is_meta() || !first.any_record || !first.launch || e.ts < first.launch->ts) first.add(e);
    if (!e.is_meta() && e.device &&
        !(any_learnt && learnt.pid == e.pid && learnt.device == e.device && learnt.device_id == e.device_id)) {
      names.learn(e);
      learnt.pid = e.pid, learnt.device = e.device, learnt.device_id = e.device_id;
      any_learnt = true;
    }
  }
};

// The sort-based Matcher over both files again, where the stream could not pair the run:
// the ledgers first, then the store (its records reach no tally a second time).
std::vector<LayerScore> score_by_sorting(const WorkloadScoreInput& in, MatchOptions opts, WorkloadScore& out) {
  // A folder apart from the one a matcher fed while the program ran may still hold.
  opts.spill_dir = in.sort_dir.string() + ".sorted";
  Matcher matcher(in.layers, opts);
  std::string failed;
  read_ledgers(in.target_dir, in.max_ledger_bytes, [&](const Event& e, std::string_view packed) {
    if (failed.empty()) try {
        matcher.add_truth(e, packed);
      } catch (const std::exception& x) {
        failed = x.what();
      }
  });
  if (!failed.empty()) throw std::runtime_error(failed);
  WorkloadScoreInput again = in;
  again.tally = nullptr;
  read_store(again, out, [&](const Event& e, std::string_view packed) { matcher.add_seen(e, packed); });
  return matcher.finish();
}

}  // namespace

// The layers asked for, in the order asked (a matcher fed while the program ran scored every
// layer a method may report).
std::vector<LayerScore> only(std::vector<LayerScore> scored, const std::vector<std::string>& layers) {
  std::vector<LayerScore> out;
  for (const auto& l : layers)
    for (auto& s : scored)
      if (s.layer == l) out.push_back(std::move(s));
  return out;
}

// The store first, its calls kept per thread (or fed so while the program ran: in.live);
// then the ledgers, each call paired as it is read (StreamMatcher). A run it cannot stream
// (calls out of time order, too many threads) is scored again by sorting, and says so.
WorkloadScore score_workload(const WorkloadScoreInput& in, DeviceNames& names) {
  WorkloadScore out;
  const MatchOptions opts = match_options(in, out, names);
  const bool score = !in.layers.empty();
  std::unique_ptr<StreamMatcher> owned;
  StreamMatcher* stream = nullptr;
  // The matcher's own failures (its scratch files) are told apart from the ledger's and the
  // store's: they say nothing of the program or the method.
  const auto scoring = [&](auto&& step) {
    if (!stream) return;
    try {
      step();
    } catch (const NotStreamable& e) {
      out.scored_by = std::string("sort: ") + e.what();
      stream = nullptr, owned.reset();
    } catch (const std::exception& e) {
      out.scoring_error = e.what();
      stream = nullptr, owned.reset();
    }
  };
  if (!score) {
  } else if (in.live) {
    stream = in.live;
    out.scored_by = "stream, as the program ran";
    scoring([&] { stream->set_truth_options(in.slack_ns, opts.buckets, in.layers); });
  } else if (!in.not_streamable.empty()) {
    out.scored_by = "sort: " + in.not_streamable;
  } else {
    try {
      owned = std::make_unique<StreamMatcher>(in.layers, opts);
      stream = owned.get();
      out.scored_by = "stream";
    } catch (const std::exception& e) {
      out.scoring_error = e.what();
    }
  }
  if (!in.live && (stream || in.tally))
    read_store(in, out, [&](const Event& e, std::string_view packed) { scoring([&] { stream->add_seen(e, packed); }); });
  LedgerLearner learner;
  out.ledger = read_ledgers(in.target_dir, in.max_ledger_bytes, [&](const Event& e, std::string_view packed) {
    learner.add(e, out.first_launch);
    scoring([&] { stream->add_truth(e, packed); });
  });
  out.labels = learner.labeler.finish();
  names.learn_missing(learner.names);
  if (!score) return out;
  scoring([&] { out.layers = only(stream->finish(), in.layers); });
  if (!stream && out.scoring_error.empty()) try {
      out.layers = score_by_sorting(in, opts, out);
    } catch (const std::exception& e) {
      out.scoring_error = e.what();
    }
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
