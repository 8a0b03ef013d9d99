#pragma once
// What the matcher says of one layer of one run: recall, phantom events, argument fidelity,
// return-code fidelity, per-thread order, and the same per (process, device).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/score/per_device.h"

namespace cudatrace {

struct NameScore {
  int64_t expected = 0, seen = 0, matched = 0;
};

struct LayerScore {
  std::string layer;
  std::string expectation;  // what "expected" is built from
  int64_t expected = 0;     // ledger entries this layer should show
  int64_t seen = 0;         // tracer events considered for this layer
  int64_t matched = 0;
  int64_t missing = 0;      // expected, not seen
  int64_t phantom = 0;      // seen, in no ledger entry
  int64_t unscored = 0;     // seen, but the ledger has no truth for them (cudart internals, other driver calls)
  int64_t args_compared = 0, args_equal = 0, args_undecoded = 0;
  int64_t ret_compared = 0, ret_equal = 0;
  int64_t order_violations = 0;  // matched events out of the ledger's per-thread order
  std::map<std::string, NameScore> by_name;
  // Syscall layer: which syscalls (ioctls by request name) ran during calls of each name.
  std::map<std::string, std::map<std::string, int64_t>> seen_during;
  std::vector<std::string> examples;  // the first few disagreements, for a person to read
  // Per (process, device): the same counts, so that a total cannot hide a rank or a GPU
  // that saw nothing (harness/score/per_device.h). Empty without MatchOptions::buckets.
  Buckets buckets;
  // Matched calls whose ledger record names a device: how many the method's record names
  // too, and how many of those agree (the method's device attribution, apart from coverage).
  int64_t device_compared = 0, device_equal = 0, device_unnamed = 0;

  double recall() const { return expected ? double(matched) / double(expected) : 1.0; }
  void add(const LayerScore& other);  // sums counters (repetitions, several runs)
};

nlohmann::json to_json(const LayerScore& s);

// A call as the examples name it: "cudaFree tid 7 ts 1000 ret 0".
std::string describe(const Event& e);

class PairScorer;

// Device agreement of pairs scored before the device names are whole (the streaming join
// scores as the ledger is read, and the ledger teaches names too): counted per (ledger's,
// method's) device and decided once the names are.
class DeferredDevices {
 public:
  void add(const Event& truth, const Event& seen, size_t max_examples);
  void decide(LayerScore& score, const BucketContext& b, PairScorer& scorer);

 private:
  struct Pairs {
    int64_t n = 0;
    std::vector<std::string> described;  // the first few pairs' ledger calls
  };
  std::map<std::pair<DeviceRef, DeviceRef>, Pairs> pairs_;
  Pairs* last_ = nullptr;  // the last (truth, seen) places: the same for run after run of pairs
  DeviceRef last_truth_, last_seen_;
};

// How the matcher's pairs count into a layer's score: argument, return-code and device
// fidelity, and the first few disagreements as examples.
class PairScorer {
 public:
  PairScorer(LayerScore& score, size_t max_examples, const BucketContext& buckets,
             DeferredDevices* deferred = nullptr)
      : score_(score), max_examples_(max_examples), buckets_(buckets), deferred_(deferred) {}
  // Only the first few are kept: the rest are not built (at 10^8 calls, a run that lost
  // most of them would build a string per loss).
  bool wants_example() const { return score_.examples.size() < max_examples_; }
  void example(const std::string& what);
  void compare(const Event& truth, std::string_view truth_args, const Event& seen, std::string_view seen_args);

 private:
  const std::string& device_key(int side, const Event& e);
  void compare_ret(const Event& truth, const Event& seen);
  LayerScore& score_;
  size_t max_examples_;
  const BucketContext& buckets_;
  DeferredDevices* deferred_;
  // DeviceNames::key of the last (pid, device, bus id) on each side: the same for every call
  // of a thread, and a string built (a bus id normalized) per call otherwise. The names are
  // whole and only read while pairs are scored, so a key once made stays right.
  struct KeyMemo {
    bool any = false;
    int64_t pid = 0;
    std::optional<int64_t> device;
    std::string device_id, key;
  };
  KeyMemo memo_[2];
};

}  // namespace cudatrace
