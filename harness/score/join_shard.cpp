#include "harness/score/join_shard.h"

#include <pthread.h>

namespace cudatrace {

JoinShard::JoinShard(const std::array<StreamJoin::Setup, kJoins>& setups) : filling_(kBatch) {
  for (size_t j = 0; j < kJoins; ++j)
    if (setups[j].spool) joins_[j] = std::make_unique<StreamJoin>(scores_[j], setups[j]);
  worker_ = std::thread([this] { work(); });
  pthread_setname_np(worker_.native_handle(), "ct-join");  // named in top and per-thread figures
}

JoinShard::~JoinShard() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    queue_.clear();  // not closed: the run is scored another way, or not at all
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

JoinShard::Item& JoinShard::slot() { return filling_[used_]; }

void JoinShard::commit() {
  if (++used_ == kBatch) hand_over();
}

void JoinShard::hand_over() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.size() < kInFlight || failed_; });
  if (failed_) std::rethrow_exception(failed_);
  queue_.emplace_back(std::move(filling_), used_);
  if (free_.empty()) {
    filling_ = Batch(kBatch);
  } else {
    filling_ = std::move(free_.back());
    free_.pop_back();
  }
  used_ = 0;
  lock.unlock();
  cv_.notify_all();
}

void JoinShard::close() {
  if (used_) hand_over();
  {
    std::unique_lock<std::mutex> lock(mu_);
    closing_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return queue_.empty() || failed_; });
  }
  cv_.notify_all();
  worker_.join();
  if (failed_) std::rethrow_exception(failed_);
}

// Pairs each batch in order. After a failure it takes no more calls: the reader learns of
// it at its next hand-over (or close), and the run is scored another way.
void JoinShard::work() {
  for (;;) {
    std::pair<Batch, size_t> next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
      if (queue_.empty()) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    cv_.notify_all();
    try {
      if (!failed_)
        for (size_t i = 0; i < next.second; ++i) joins_[next.first[i].join]->add_truth(next.first[i].t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      failed_ = std::current_exception();
      queue_.clear();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(std::move(next.first));
    }
    cv_.notify_all();
  }
}

}  // namespace cudatrace
