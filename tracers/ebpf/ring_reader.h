#pragma once
// Reads a BPF ring buffer of fixed-size records on a thread of its own and hands each to a
// callback: what RingSpool (every call record, to a file) and the uprobe method's
// LoadFollower (loader notifications) share. A sample holds one record, or, where the
// BPF side batches (`per_sample` > 1), up to that many back to back. A record shorter than
// the size is counted, never handed on.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>

struct ring_buffer;

namespace cudatrace {

class RingReader {
 public:
  using OnRecord = std::function<void(const void* record)>;
  // Starts reading `map_fd`; `poll_ms` bounds how long a record can wait when the BPF side
  // does not wake the reader, and how long stop() waits. Throws std::runtime_error naming
  // `what` when the ring cannot be opened.
  RingReader(int map_fd, size_t record_size, int poll_ms, OnRecord on_record, const char* what,
             size_t per_sample = 1);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Stops the thread, then hands on what is left in the ring. Idempotent.
  void stop();
  uint64_t records() const { return records_; }
  uint64_t short_records() const { return short_records_; }

 private:
  static int on_sample(void* self, void* data, size_t size);
  size_t record_size_;
  size_t per_sample_;
  OnRecord on_record_;
  ring_buffer* ring_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> records_{0}, short_records_{0};
};

}  // namespace cudatrace
