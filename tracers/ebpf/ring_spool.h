#pragma once
// Drains a BPF ring buffer of fixed-size records into a spool file, on a thread of its own,
// so that the ring never fills while the traced program runs; the records are decoded
// only after the program is gone.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <thread>

struct ring_buffer;

namespace cudatrace {

class RingSpool {
 public:
  // Starts draining the ring buffer map `map_fd` into `file`; throws std::runtime_error.
  RingSpool(int map_fd, size_t record_size, const std::filesystem::path& file);
  ~RingSpool();
  RingSpool(const RingSpool&) = delete;
  RingSpool& operator=(const RingSpool&) = delete;

  // Stops the thread, drains what is left, closes the file. Call after detaching the
  // probes, so nothing arrives afterwards. Idempotent.
  void stop();
  uint64_t records() const { return records_; }
  uint64_t short_records() const { return short_records_; }  // malformed ring records, skipped

 private:
  static int on_record(void* self, void* data, size_t size);
  size_t record_size_;
  ring_buffer* ring_ = nullptr;
  FILE* file_ = nullptr;
  std::thread drainer_;
  std::atomic<bool> stopping_{false};
  uint64_t records_ = 0;
  uint64_t short_records_ = 0;
};

}  // namespace cudatrace
