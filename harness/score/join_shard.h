#pragma once
// One worker's share of a run's pairing (stream_matcher.h): the threads whose id falls to it
// (shard_of), with their runtime, launch and driver joins (stream_join.h), fed batches of the
// ledger's calls by the thread that reads the ledger. Reading and pairing run side by side,
// and the pairing of a program's threads on as many cores: at 10^8 calls the ledger's
// reading alone is left after the program.
#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "harness/score/stream_join.h"

namespace cudatrace {

class JoinShard {
 public:
  enum Join : uint8_t { kRuntime, kLaunch, kDriver, kJoins };
  struct Item {
    Join join = kRuntime;
    StreamJoin::Truth t;
  };
  static constexpr size_t kBatch = 1024;    // calls handed over at once
  static constexpr size_t kInFlight = 4;    // batches waiting at most: the reader waits past it

  // A join for each setup with a spool; none for the others.
  explicit JoinShard(const std::array<StreamJoin::Setup, kJoins>& setups);
  ~JoinShard();  // stops the worker
  JoinShard(const JoinShard&) = delete;
  JoinShard& operator=(const JoinShard&) = delete;

  // The next call's slot in the batch being filled (its strings keep their room): fill it,
  // then commit() it. Throws what the worker threw, if it did.
  Item& slot();
  void commit();
  // After the last call: the worker has paired every call. Rethrows what it threw.
  void close();
  LayerScore& score(Join j) { return scores_[j]; }
  StreamJoin* join(Join j) { return joins_[j].get(); }

 private:
  using Batch = std::vector<Item>;
  void hand_over();
  void work();
  std::array<LayerScore, kJoins> scores_;
  std::array<std::unique_ptr<StreamJoin>, kJoins> joins_;
  Batch filling_;
  size_t used_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Batch, size_t>> queue_;
  std::vector<Batch> free_;  // batches paired, their strings' room kept
  bool closing_ = false;
  std::exception_ptr failed_;
  std::thread worker_;
};

}  // namespace cudatrace
