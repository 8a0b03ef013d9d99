#include "common/event_read_ahead.h"

#include <pthread.h>

#include <atomic>

#include <utility>

namespace cudatrace {

EventReadAhead::EventReadAhead(const std::filesystem::path& path, const StoreLimits& limits, OnRead on_read,
                               size_t batch, size_t depth)
    : ring_(depth < 2 ? 2 : depth), batch_size_(batch < 1 ? 1 : batch) {
  for (Batch& b : ring_) b.events.resize(batch_size_), b.packed.resize(batch_size_);
  thread_ = std::thread([this, path, limits, on_read = std::move(on_read)] { read(path, limits, on_read); });
  pthread_setname_np(thread_.native_handle(), "ct-read-ahead");  // named in top and per-thread figures
}

EventReadAhead::~EventReadAhead() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  emptied_.notify_all();
  thread_.join();
}

namespace {
std::atomic<int> g_forced{-1};  // -1: the machine decides; else 0 or 1
}  // namespace

bool EventReadAhead::worth_it() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? forced == 1 : std::thread::hardware_concurrency() >= 4;
}

void EventReadAhead::force_worth_it(std::optional<bool> forced) { g_forced = forced ? int(*forced) : -1; }

// The reading thread: fills the ring's free batches in order until the file ends, fails, or
// the consumer goes away. A batch being filled is the thread's alone (between tail_ and head_
// + depth); the consumer takes only batches counted by tail_.
void EventReadAhead::read(const std::filesystem::path& path, const StoreLimits& limits, const OnRead& on_read) {
  std::unique_ptr<EventReader> in;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      emptied_.wait(lk, [&] { return stop_ || tail_ - head_ < ring_.size(); });
      if (stop_) return;
    }
    Batch& b = ring_[tail_ % ring_.size()];
    b.n = 0, b.last = false, b.error = nullptr;
    try {
      if (!in) in = std::make_unique<EventReader>(path, limits);
      while (b.n < batch_size_ && in->next(b.events[b.n], &b.packed[b.n])) {
        if (on_read) on_read(b.events[b.n], b.packed[b.n]);
        ++b.n;
      }
      b.last = b.n < batch_size_;
    } catch (...) {
      b.error = std::current_exception();
      b.last = true;
    }
    {
      std::lock_guard lk(mu_);
      ++tail_;
    }
    filled_.notify_one();
    if (b.last) return;
  }
}

const Event* EventReadAhead::next(std::string_view& packed_args) {
  while (!done_) {
    if (!ready_) {  // tail_ read under the lock: the batch's contents come with it
      std::unique_lock lk(mu_);
      filled_.wait(lk, [&] { return tail_ > head_; });
      ready_ = true;
    }
    Batch& b = ring_[head_ % ring_.size()];
    if (at_ < b.n) {
      packed_args = b.packed[at_];
      return &b.events[at_++];
    }
    if (b.last) {
      done_ = true;
      if (b.error) std::rethrow_exception(b.error);
      return nullptr;
    }
    {  // the batch is read to its end (the caller is past its last record): it may be filled again
      std::lock_guard lk(mu_);
      ++head_;
    }
    at_ = 0, ready_ = false;
    emptied_.notify_one();
  }
  return nullptr;
}

}  // namespace cudatrace
