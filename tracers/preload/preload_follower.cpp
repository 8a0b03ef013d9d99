#include "tracers/preload/preload_follower.h"

#include <chrono>
#include <utility>

namespace cudatrace::preload {

PreloadFollower::PreloadFollower(std::filesystem::path dir, const std::filesystem::path& events_file,
                                 uint64_t max_bytes)
    : conversion_(std::move(dir), events_file, max_bytes) {
  thread_ = std::thread([this] { follow(); });
}

PreloadFollower::~PreloadFollower() { stop(); }

void PreloadFollower::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PreloadFollower::follow() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    lk.unlock();
    try {
      conversion_.poll();
    } catch (...) {
      failed_ = std::current_exception();  // finish() throws it; polling ends
      return;
    }
    lk.lock();
    wake_.wait_for(lk, std::chrono::milliseconds(kPollMs), [this] { return stop_; });
  }
}

TracerReport PreloadFollower::finish() {
  stop();
  if (failed_) std::rethrow_exception(std::exchange(failed_, nullptr));
  return conversion_.finish();
}

}  // namespace cudatrace::preload
