#pragma once
// Drains a BPF ring buffer of fixed-size records into a spool file, on a thread of its own,
// so that the ring never fills while the traced program runs; the records are decoded
// only after the program is gone.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "tracers/ebpf/ring_reader.h"

namespace cudatrace {

class RingSpool {
 public:
  // Starts draining the ring buffer map `map_fd` into `file`; throws std::runtime_error.
  // `per_sample`: how many records one sample may hold (RingReader).
  RingSpool(int map_fd, size_t record_size, const std::filesystem::path& file, size_t per_sample = 1);
  ~RingSpool();
  RingSpool(const RingSpool&) = delete;
  RingSpool& operator=(const RingSpool&) = delete;

  // Stops the thread, drains what is left, closes the file. Call after detaching the
  // probes, so nothing arrives afterwards. Idempotent.
  void stop();
  uint64_t records() const { return reader_ ? reader_->records() : 0; }
  uint64_t short_records() const { return reader_ ? reader_->short_records() : 0; }  // malformed, skipped

 private:
  FILE* file_ = nullptr;
  std::unique_ptr<RingReader> reader_;
};

}  // namespace cudatrace
