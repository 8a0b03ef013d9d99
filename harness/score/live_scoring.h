#pragma once
// A workload's run scored while its tracer writes the store: every event goes to the run's
// tally, as before, and to a StreamMatcher that keeps the calls per thread. Once the program
// ends only the ledger is left to read (score_workload), not the method's 10^8 events again:
// a tracer that converts while the program runs (cupti, uprobe, preload) leaves the
// harness little to do after it.
//
// The matcher takes every layer a method may report, since the report comes after the run;
// what the report then says it did not observe is dropped. A device layer counted otherwise
// than per block (the sanitizer's launch modes), a store not written whole through the tap,
// or a run the matcher could not stream is scored from the store as before.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/event_store.h"
#include "harness/score/event_tally.h"
#include "harness/score/stream_matcher.h"
#include "tracers/tracer.h"

namespace cudatrace {

class LiveScoring final : public EventTap {
 public:
  LiveScoring(EventTally& tally, const std::filesystem::path& spill_dir);
  ~LiveScoring() override;
  LiveScoring(const LiveScoring&) = delete;
  LiveScoring& operator=(const LiveScoring&) = delete;

  bool wants_args(const Event& e) const override { return tally_.wants_args(e); }
  bool wants_packed() const override { return true; }
  void on_event(const Event& e) override;
  void on_packed(const Event& e, std::string_view packed_args, bool args_in_event) override;
  void on_closed(uint64_t written) override;

  struct Taken {
    std::unique_ptr<StreamMatcher> matcher;  // fed the whole store; null: see below
    std::string not_streamable;              // the run cannot be streamed: why (sort it)
    std::string unused;                      // else why the matcher fed live is not used
  };
  // The matcher, where it can score this run as the tracer's report says it observed.
  Taken take(const TracerReport& report);

 private:
  EventTally& tally_;
  std::unique_ptr<StreamMatcher> matcher_;
  std::string failed_;  // why the matcher stopped taking events
  bool not_streamable_ = false;
  uint64_t fed_ = 0;
  bool whole_ = false;
  Event with_args_;
};

}  // namespace cudatrace
