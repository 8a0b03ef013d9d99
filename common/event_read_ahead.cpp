#include "common/event_read_ahead.h"

#include <pthread.h>

#include <atomic>

#include <algorithm>
#include <utility>

#include "common/machine.h"
#include "common/store_frames.h"

namespace cudatrace {

EventReadAhead::EventReadAhead(const std::filesystem::path& path, const StoreLimits& limits, OnRead on_read,
                               size_t batch, size_t depth, size_t decoders)
    : ring_(std::max<size_t>(depth, decoders > 1 ? kHeld : 2)), batch_size_(batch < 1 ? 1 : batch) {
  for (Batch& b : ring_) b.events.resize(batch_size_), b.packed.resize(batch_size_);
  try {
    if (decoders <= 1) {
      threads_.emplace_back([this, path, limits, on_read = std::move(on_read)] { read(path, limits, on_read); });
    } else {
      frame_memory_ = FrameMemory::for_machine(decoders);
      frames_ = std::make_unique<StoreFrames>(path, limits, frame_memory_.frame_bytes);
      auto shared = std::make_shared<OnRead>(std::move(on_read));
      for (size_t i = 0; i < decoders; ++i)
        threads_.emplace_back([this, path, limits, shared] { decode_frames(path, limits, *shared); });
    }
  } catch (...) {  // a thread that could not start: those that did are stopped first
    stop_all();
    throw;
  }
  for (auto& t : threads_) pthread_setname_np(t.native_handle(), "ct-read-ahead");  // named in top and per-thread figures
}

EventReadAhead::~EventReadAhead() { stop_all(); }

void EventReadAhead::stop_all() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  emptied_.notify_all();
  turn_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

namespace {
std::atomic<int> g_forced{-1};  // -1: the machine decides; else 0 or 1
std::atomic<size_t> g_decoders{0};  // 0: the machine decides
}  // namespace

bool EventReadAhead::worth_it() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? forced == 1 : std::thread::hardware_concurrency() >= 4;
}

void EventReadAhead::force_worth_it(std::optional<bool> forced) { g_forced = forced ? int(*forced) : -1; }

size_t EventReadAhead::decoders_worth_it() {
  const size_t forced = g_decoders.load(std::memory_order_relaxed);
  return forced ? forced : std::clamp<size_t>(std::thread::hardware_concurrency() / 4, 1, 4);
}

void EventReadAhead::force_decoders(std::optional<size_t> forced) { g_decoders = forced ? std::max<size_t>(*forced, 1) : 0; }

struct EventReadAhead::Part : StoreFrames::Part {};

EventReadAhead::FrameMemory EventReadAhead::FrameMemory::for_machine(size_t decoders) {
  const uint64_t share = available_memory_bytes() / 16 / std::max<size_t>(decoders, 1);
  if (!share) return {size_t(8) << 20, 23};  // the memory unknown: what a ledger needs, with room
  int window_log = 21;  // what the store's writers ask (zstd levels 1 to 3)
  while (window_log < 27 && (uint64_t(1) << (window_log + 1)) <= share / 2) ++window_log;
  return {size_t(std::clamp<uint64_t>(share / 4, uint64_t(1) << 20, uint64_t(256) << 20)), window_log};
}

// A decoder: takes the next frame (or the rest of the file), decodes it into batches of its
// own, and hands them out in its turn; the one that finds the end hands out the last, empty,
// batch once every part before is out.
void EventReadAhead::decode_frames(const std::filesystem::path& path, const StoreLimits& limits, const OnRead& on_read) {
  std::vector<Batch> held(kHeld);
  for (Batch& b : held) b.events.resize(batch_size_), b.packed.resize(batch_size_);
  for (;;) {
    {  // a reader dropped, or past its last batch (an error), decodes nothing more
      std::lock_guard lk(mu_);
      if (stop_ || over_) return;
    }
    Part part;
    StoreFrames::Got got;
    {
      std::lock_guard lk(split_mu_);
      got = frames_->next(part);
    }
    if (got == StoreFrames::Got::kNothing) return;
    if (got == StoreFrames::Got::kEnd) {
      if (!wait_turn(part.index)) return;
      held[0].n = 0, held[0].last = true, held[0].error = nullptr;
      hand_out(held[0], on_read);
      return;
    }
    decode_part(part, held, path, limits, on_read);
    if (part.last) return;
  }
}

// One part's records, decoded ahead of its turn into `held` (a frame's worth at most), then
// handed out in its turn; a larger part is handed out as it is decoded, once its turn came.
void EventReadAhead::decode_part(Part& part, std::vector<Batch>& held, const std::filesystem::path& path,
                                 const StoreLimits& limits, const OnRead& on_read) {
  size_t used = 0;
  bool in_turn = false;
  std::exception_ptr error = part.error;
  const auto batch_at = [&](size_t i) -> Batch& {
    Batch& b = held[i];
    b.n = 0, b.last = false, b.error = nullptr;
    return b;
  };
  Batch* b = &batch_at(0);
  uint64_t counted = 0;  // of this part's inflated bytes, those added to inflated_
  if (!error) try {
      std::unique_ptr<EventReader> in;
      size_t at = 0;
      if (part.plain) {
        in = std::make_unique<EventReader>(path, limits);
      } else {
        const auto read = [&](char* into, size_t most) -> size_t {
          if (at < part.bytes.size()) {
            const size_t n = std::min(most, part.bytes.size() - at);
            std::copy_n(part.bytes.data() + at, n, into);
            at += n;
            return n;
          }
          return part.rest ? frames_->read_rest(into, most) : 0;
        };
        const std::string named = part.index == 0 ? path.string() : path.string() + " (zstd frame " + std::to_string(part.index + 1) + ")";
        // A frame's window is held by each decoder at once; the rest is read by one, as
        // EventReader reads a whole file (2^27).
        in = std::make_unique<EventReader>(read, named, limits, part.index == 0, 0,
                                           part.rest ? 27 : frame_memory_.window_log);
      }
      // The bound on what the file inflates to holds for all the decoders together: each
      // adds what its part inflated as it goes (zstd's output comes 128 KiB at a time).
      const auto count_inflated = [&] {
        const uint64_t now = in->inflated();
        if (now == counted) return;
        const uint64_t total = inflated_.fetch_add(now - counted) + (now - counted);
        counted = now;
        if (total > limits.max_inflated_bytes)
          throw EventFormatError(path.string() + ": inflates past the " + std::to_string(limits.max_inflated_bytes) +
                                 " bytes it may have: not read further");
      };
      for (;;) {
        if (b->n == batch_size_) {
          if (in_turn) {
            if (!hand_out(*b, on_read)) return;
          } else if (++used == held.size()) {
            if (!wait_turn(part.index)) return;
            in_turn = true;
            for (size_t i = 0; i < used; ++i)
              if (!hand_out(held[i], on_read)) return;
            used = 0;
          }
          b = &batch_at(in_turn ? 0 : used);
        }
        const bool got = in->next(b->events[b->n], &b->packed[b->n]);
        count_inflated();
        if (!got) break;
        ++b->n;
      }
    } catch (...) {
      error = std::current_exception();
    }
  if (!in_turn && !wait_turn(part.index)) return;
  const size_t filled = in_turn ? 1 : used + 1;
  for (size_t i = 0; i < filled; ++i) {
    Batch& out = held[i];
    if (i + 1 == filled) out.last = part.last || error, out.error = error;
    if (!hand_out(out, on_read)) return;
  }
  pass_turn();
}

// Whether it is `index`'s turn: false when the reading stops first.
bool EventReadAhead::wait_turn(uint64_t index) {
  std::unique_lock lk(mu_);
  turn_cv_.wait(lk, [&] { return stop_ || over_ || turn_ == index; });
  if (stop_ || over_) return false;
  part_base_ = base_ts_;  // the part's records follow the last one handed out
  return true;
}

void EventReadAhead::pass_turn() {
  {
    std::lock_guard lk(mu_);
    ++turn_;
  }
  turn_cv_.notify_all();
}

// In its turn: the batch's timestamps made whole, `on_read` shown each record, and the batch
// swapped into the ring (its storage coming back for the next) once there is room.
bool EventReadAhead::hand_out(Batch& b, const OnRead& on_read) {
  for (size_t i = 0; i < b.n; ++i) {
    Event& e = b.events[i];
    e.ts = int64_t(uint64_t(e.ts) + uint64_t(part_base_));  // wraps as the writer's deltas do
    // The records before a reader's error are shown too, as read() shows them; an error of
    // on_read's own ends the batch at its record, as read() counts it.
    if (on_read) try {
        on_read(e, b.packed[i]);
      } catch (...) {
        b.error = std::current_exception(), b.n = i, b.last = true;
        break;
      }
  }
  if (b.n) base_ts_ = b.events[b.n - 1].ts;
  {
    std::unique_lock lk(mu_);
    emptied_.wait(lk, [&] { return stop_ || tail_ - head_ < ring_.size(); });
    if (stop_) return false;
    Batch& slot = ring_[tail_ % ring_.size()];
    std::swap(slot.events, b.events), std::swap(slot.packed, b.packed);
    slot.n = b.n, slot.last = b.last, slot.error = b.error;
    over_ = b.last;  // nothing after it goes out
    ++tail_;
  }
  filled_.notify_one();
  if (b.last) turn_cv_.notify_all();
  return !b.last;
}

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
