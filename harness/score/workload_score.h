#pragma once
// A workload's run scored against its ground truth, both read as streams: the method's
// store, once, in file order, its calls kept per thread; then the ledgers the program's
// processes wrote (checked, and each call paired as it is read: harness/score/
// stream_matcher.h). Nothing of either is held whole.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/score/event_tally.h"
#include "harness/score/ledger_check.h"
#include "harness/score/matcher.h"
#include "harness/score/stream_matcher.h"
#include "harness/score/per_device.h"
#include "harness/stats/cost.h"
#include "tracers/tracer.h"

namespace cudatrace {

struct WorkloadScore {
  LedgerCheck ledger;
  ProcessLabels labels;
  FirstLaunch first_launch;        // the end of the start-up (run.json's "startup")
  std::vector<LayerScore> layers;  // the layers the method observed, scored
  std::string store_error;         // the method's store could not be read to its end: why
  std::string scoring_error;       // the matcher's own work failed (its sort files: a full disk): why
  // How the calls were paired: "stream" (as the ledger was read), or "sort: <why the
  // stream could not>" (harness/score/stream_matcher.h); empty where nothing was scored.
  std::string scored_by;
};

struct WorkloadScoreInput {
  std::filesystem::path target_dir;   // where the ledgers are
  std::filesystem::path events_file;  // the method's store
  std::filesystem::path sort_dir;     // made and removed for the matcher's sorting
  uint64_t max_ledger_bytes = 0;      // over all the run's ledgers
  std::vector<std::string> layers;    // the layers the method observed
  int64_t slack_ns = 0;
  std::string device_mode;
  // Fed every record of the store as it is read, where nothing counted them while they were
  // written (a converter in a process of its own): the store is read once, not twice.
  EventTally* tally = nullptr;
  // A matcher fed the whole store while the program ran (live_scoring.h): the store is not
  // read again. Or why such a matcher found the run not streamable: it is sorted at once.
  StreamMatcher* live = nullptr;
  std::string not_streamable;
};

// `names` has learnt the method's records, or learns them here from the store (`tally`); the
// ledger's fill in only what the method's did not say.
WorkloadScore score_workload(const WorkloadScoreInput& in, DeviceNames& names);

// Why a scored layer reads short, never a bare number: the tracer's account, its loss, or
// the method's stated limit; or, whole yet short for some (process, device), that the
// method placed records elsewhere than the ledger did. Empty when it is whole and in place.
std::string shortfall_reason(const LayerScore& s, const TracerReport& report, const Method& method);

// The (process, device) buckets of each layer that matched less than they expected, when
// the run has more than one process or device: "runtime: rank 1 on 0000:1a:00.0: 0 of 120
// (0.0%)". A layer whose records name no device says so, with the method's reason.
nlohmann::json per_device_short(const nlohmann::json& scores, const Method& method);

}  // namespace cudatrace
