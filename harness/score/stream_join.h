#pragma once
// One call layer scored as the ledger is read: the method's calls, kept per thread
// (call_spool.h), are paired with the ledger's thread by thread in time order, family by
// family, with no sort. The pairs are the ones the sort-based Matcher::join makes: within a
// (thread, family), an event belongs to the call whose [entry - slack, exit + slack] holds
// its entry time, the earliest such call first; an event before its call's window is a
// phantom, a call passed by an event of its family is missing.
//
// Why it equals the sorted join: both sides of a thread come in entry-time order (checked;
// a method's thread may be out of order by a few calls, kReorderWindow), and an event is
// decided once every ledger call that could hold it has come, a call once every event that
// could be its own has. What breaks the assumptions throws NotStreamable: the caller scores
// that run with the sort-based Matcher instead.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/event.h"
#include "harness/score/call_families.h"
#include "harness/score/call_spool.h"
#include "harness/score/layer_score.h"

namespace cudatrace {

struct NotStreamable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Which of `shards` joins pairs a thread's calls (every join of a run shares the rule).
inline size_t shard_of(int64_t tid, size_t shards) { return size_t(uint64_t(tid) % shards); }

class StreamJoin {
 public:
  static constexpr size_t kReorderWindow = 32;        // a method's calls read ahead per thread
  static constexpr size_t kPairsHeld = size_t(1) << 20;  // pairs, or ledger calls, waiting per thread
  static constexpr uint32_t kMaxFamilies = 1024;         // call families a join pairs
  static constexpr size_t kMaxPlaces = size_t(1) << 16;  // (process, device) places it tallies

  struct Setup {
    const CallSpool* spool = nullptr;
    // The join's family of each family the spool's calls carry, or -1: not joined here.
    std::vector<int32_t> family_of_seen;
    const Families* families = nullptr;  // the names of the join's families
    int64_t slack_ns = 0;
    size_t max_examples = 8;
    // This join pairs the threads whose id is `shard` modulo `shards` (join_shard.h).
    size_t shard = 0, shards = 1;
  };
  // A ledger call as the join keeps it.
  struct Truth {
    int64_t ts = 0, pid = 0, tid = 0;
    std::optional<int64_t> dur, ret, device;
    uint64_t seq = 0;
    uint32_t family = 0;  // the join's
    std::string name, device_id, args;  // args packed
  };
  StreamJoin(LayerScore& score, Setup setup);
  ~StreamJoin();
  StreamJoin(const StreamJoin&) = delete;
  StreamJoin& operator=(const StreamJoin&) = delete;

  // The ledger's calls of this layer, in ledger order. Its strings are swapped with those
  // of the slot it takes (no allocation per call once the slots have grown).
  void add_truth(Truth& t);
  // Every thread played to its end, then the tallies kept by place (process, device) put in
  // their buckets, now that the names are whole. `scored(f)`: whether phantoms of the join's
  // family f count (false: the layer has no truth for that family; the caller counts them
  // as unscored).
  void finish(const BucketContext& buckets, bool attributing, const std::function<bool(uint32_t)>& scored);

  struct Thread;

 private:
  Thread& thread(int64_t tid);
  void play_until(Thread& s, int64_t key);  // the method's calls before `key`, decided
  void seen(Thread& s, const SpooledCall& e);
  void settle(Thread& s, uint32_t family);
  void missing(const Truth& t);
  void matched(Thread& s, const Truth& t, const SpooledCall& e);
  void expected(const Truth& t);
  void phantom(const SpooledCall& e);
  void release_pairs(Thread& s, bool all);
  BucketTally& truth_bucket(const Truth& t);
  bool wants_example(int32_t phantom_family) const;  // -1: not a phantom's
  void example(int32_t phantom_family, std::string what);

  LayerScore& score_;
  Setup setup_;
  std::unordered_map<int64_t, std::unique_ptr<Thread>> threads_;
  Thread* last_thread_ = nullptr;
  std::vector<NameScore> by_family_;  // named at finish(): the families may grow meanwhile
  // Per-(process, device) tallies by place until finish() names the buckets.
  std::map<DeviceRef, BucketTally> truth_places_;
  std::map<std::pair<uint32_t, DeviceRef>, int64_t> phantom_places_;  // (family, place)
  BucketTally* last_truth_place_ = nullptr;
  DeviceRef last_truth_ref_;
  std::vector<int64_t> phantoms_;  // per join family
  int64_t* last_phantom_place_ = nullptr;
  uint32_t last_phantom_family_ = 0;
  DeviceRef last_phantom_ref_;
  DeferredDevices devices_;
  // Examples in the order they came: a phantom's with its family (dropped if not scored).
  std::vector<std::pair<int32_t, std::string>> examples_;
  std::map<int32_t, size_t> examples_per_family_;
  BucketContext no_buckets_;
  std::unique_ptr<PairScorer> scorer_;
  Event truth_event_, seen_event_;  // reused for PairScorer::compare
};

}  // namespace cudatrace
