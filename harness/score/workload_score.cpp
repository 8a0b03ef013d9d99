#include "harness/score/workload_score.h"

#include "common/event_store.h"

namespace cudatrace {

WorkloadScore score_workload(const WorkloadScoreInput& in, DeviceNames& names) {
  WorkloadScore out;
  MatchOptions opts;
  opts.slack_ns = in.slack_ns;
  opts.device_mode = in.device_mode;
  opts.buckets = {&out.labels, &names};  // the labels are complete once the ledgers are read
  opts.spill_dir = in.sort_dir;
  Matcher matcher(in.layers, opts);
  ProcessLabeler labeler;
  out.ledger = read_ledgers(in.target_dir, in.max_ledger_bytes, [&](const Event& e) {
    labeler.add(e);
    out.first_launch.add(e);
    if (!e.is_meta()) names.learn(e);
    matcher.add_truth(e);
  });
  out.labels = labeler.finish();
  if (in.layers.empty()) return out;
  std::error_code ec;
  if (std::filesystem::exists(in.events_file, ec)) {
    try {
      EventReader store(in.events_file);
      Event e;
      while (store.next(e)) matcher.add_seen(e);
    } catch (const std::exception& e) {
      out.store_error = e.what();  // scored on what was read: a prefix
    }
  }
  out.layers = matcher.finish();
  return out;
}

}  // namespace cudatrace
