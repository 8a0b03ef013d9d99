#pragma once
// Scores a run's calls as the ledger is read: the method's events first (as its store is
// written or read), kept per thread; then the ledger's records, each paired as it comes
// (stream_join.h). The runtime and driver layers go this way; the layers that are counts
// (gpu-activity, device) and strace's syscall layer go through a Matcher of their own.
// The same scores as Matcher gives (matcher.h), bar the order of the examples; where a
// run's input is not one it can stream, it throws NotStreamable and the caller scores the
// run with Matcher instead.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/event.h"
#include "harness/score/layer_score.h"
#include "harness/score/matcher.h"
#include "harness/score/stream_join.h"

namespace cudatrace {

class StreamMatcher {
 public:
  StreamMatcher(std::vector<std::string> layers, MatchOptions opts);
  ~StreamMatcher();
  StreamMatcher(const StreamMatcher&) = delete;
  StreamMatcher& operator=(const StreamMatcher&) = delete;

  void add_seen(const Event& e, std::string_view packed_args);   // every event of the method first
  // What only the method's report says (the slack, the layers it observed, of those the
  // matcher was made with), or only the ledger's reading makes (labels and names), for a
  // matcher fed while the program ran: before the first add_truth.
  void set_truth_options(int64_t slack_ns, BucketContext buckets, const std::vector<std::string>& layers);
  void add_truth(const Event& t, std::string_view packed_args);  // then every ledger record
  std::vector<LayerScore> finish();  // once, with the names and labels (opts.buckets) whole

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The same over events in memory (tests).
std::vector<LayerScore> stream_match(const std::vector<Event>& ledger, const std::vector<Event>& events,
                                     const std::vector<std::string>& layers, const MatchOptions& opts = {});

}  // namespace cudatrace
