#pragma once
// What the matcher says of one layer of one run: recall, phantom events, argument fidelity,
// return-code fidelity, per-thread order, and the same per (process, device).
#include <cstdint>
#include <map>
#include <string>
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

}  // namespace cudatrace
