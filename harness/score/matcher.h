#pragma once
// Scores a tracer's events against the workload's ledger, one layer at a time
// (DESIGN.md, "What complete means"): recall, phantom events, argument fidelity,
// return-code fidelity, per-thread order.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/event.h"
#include "harness/score/layer_score.h"
#include "harness/score/per_device.h"

namespace cudatrace {

struct MatchOptions {
  // How far outside the ledger's [begin, end] a tracer's entry timestamp may lie and still
  // be the same call. In-process and kernel tracers read the same clock, so the default
  // is exact; a tracer whose clock is converted (strace's wall clock) widens it.
  int64_t slack_ns = 0;
  // Device layer: an event per "block", per block with args.threads ("thread"), or per
  // launch with args.blocks ("launch") and args.threads ("launch-thread").
  std::string device_mode = "block";
  size_t max_examples = 8;
  // Labels and device names for the per-(process, device) breakdown; empty: none. The
  // names must have learnt every record, the ledger's and the method's, by finish().
  BucketContext buckets;
  // Where calls are sorted past `sort_chunk` events per side (harness/score/sorted_events.h):
  // made when first needed, removed by the matcher; empty: a folder under the system's tmp.
  // Not a bound on what is scored (past it, chunks go to disk): a working set. Measured on a
  // 2-core box, 2 M calls: chunks of 65,536 calls (about 6 MiB) scored as fast as 16 MiB
  // ones and faster than 64 MiB ones (0.38-0.40 M records/s, peak RSS 535 MiB).
  std::filesystem::path spill_dir;
  size_t sort_chunk = size_t(1) << 16;
  // The method's events may come before the ledger's records (StreamMatcher's order). Only
  // for layers whose pairing does not hang on the ledger: not runtime or driver.
  bool seen_first = false;
  // StreamMatcher's workers, each pairing its share of the threads (join_shard.h); 0: one
  // per core but the ledger reader's, at most 8.
  size_t stream_shards = 0;
};

// Scores as a stream: the ledger's records, then the method's events, each once and in file
// order, never all held; the pairing per thread and family runs over them sorted on disk.
// `layers`: the layers the tracer says it observed; the others are not scored.
class Matcher {
 public:
  Matcher(std::vector<std::string> layers, MatchOptions opts);
  ~Matcher();
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;
  void add_truth(const Event& t);  // every ledger record; meta records are passed over
  void add_seen(const Event& e);   // every event of the method, after the last add_truth
  // The same, with the args as the store holds them (EventReader's packed mode; t.args
  // and e.args are not read): the way a run is scored, with no JSON per record.
  void add_truth(const Event& t, std::string_view packed_args);
  void add_seen(const Event& e, std::string_view packed_args);
  std::vector<LayerScore> finish();  // once
  // The slack, where the labels and names the breakdown reads at finish() are, and the
  // layers to score (of those it was made with), for a matcher made before the run, when
  // none was known (seen_first only): before the first add_truth.
  void set_truth_options(int64_t slack_ns, BucketContext buckets, const std::vector<std::string>& layers);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The same over events in memory (tests, small inputs).
std::vector<LayerScore> match(const std::vector<Event>& ledger, const std::vector<Event>& events,
                              const std::vector<std::string>& layers, const MatchOptions& opts = {});

}  // namespace cudatrace
