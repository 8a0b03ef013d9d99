#pragma once
// Method `preload`: a thread of the harness that converts the shim's output while the
// program runs (preload_conversion.h), as cupti and uprobe decode their spools
// (tracers/ebpf/spool_follower.h): it polls the shim's folder, since the shim writes plain
// files, a thread's records a buffer at a time, with no drain to wait on.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "tracers/preload/preload_conversion.h"

namespace cudatrace::preload {

class PreloadFollower {
 public:
  // How often the folder is looked at: the shim flushes a thread's buffer every 8192
  // records, so a poll finds a few buffers' worth, and an idle program costs a listing.
  static constexpr int kPollMs = 100;

  PreloadFollower(std::filesystem::path dir, const std::filesystem::path& events_file, uint64_t max_bytes);
  ~PreloadFollower();  // stops at once if finish() was not called: the store is left unclosed
  PreloadFollower(const PreloadFollower&) = delete;
  PreloadFollower& operator=(const PreloadFollower&) = delete;

  // The program has ended: stops polling, converts the rest, closes the store. What a poll
  // threw (the store's write failed) is thrown here.
  TracerReport finish();

 private:
  void follow();
  void stop();

  PreloadConversion conversion_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::exception_ptr failed_;
  std::thread thread_;
};

}  // namespace cudatrace::preload
