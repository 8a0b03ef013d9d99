#pragma once
// Reads a spool (ring_spool.h) while the ring's drain is still writing it, on a thread of
// its own, and hands each record to the method's decoder: the run is converted as it runs,
// so that a job of 10^8 calls is not followed by minutes of conversion. The reader trails
// the drain by the batch the drain has not compressed yet (ZstdFileWriter::kBatch).
#include <atomic>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace cudatrace {

class SpoolFollower {
 public:
  using Fn = std::function<void(std::string_view record)>;
  // Starts reading `file` (which must exist) in records of `record_size` bytes.
  SpoolFollower(std::filesystem::path file, size_t record_size, Fn fn);
  ~SpoolFollower();  // stops at once if finish() was not called
  SpoolFollower(const SpoolFollower&) = delete;
  SpoolFollower& operator=(const SpoolFollower&) = delete;

  // The drain has closed the file: reads it to its end, then returns. What `fn` threw is
  // thrown here. Idempotent.
  void finish();
  uint64_t read() const { return read_; }  // records handed to fn
  // Why the reading ended before the file's end (cut or damaged), else "".
  const std::string& cut() const { return cut_; }

 private:
  void follow(const std::filesystem::path& file, size_t record_size);
  Fn fn_;
  std::atomic<bool> writer_done_{false}, abandon_{false};
  std::atomic<uint64_t> read_{0};
  std::string cut_;
  std::exception_ptr failed_;
  std::thread thread_;
};

}  // namespace cudatrace
