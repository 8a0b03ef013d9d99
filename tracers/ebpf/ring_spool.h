#pragma once
// Drains a BPF ring buffer of fixed-size records into a spool file, on a thread of its own,
// so that the ring never fills while the traced program runs; the records are decoded
// only after the program is gone. The file is bounded (HostFacts::max_trace_bytes): what
// comes past the bound, or fails to be written (a full disk), is counted, never dropped unseen.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "tracers/ebpf/ring_reader.h"

namespace cudatrace {

class RingSpool {
 public:
  // Starts draining the ring buffer map `map_fd` into `file`; throws std::runtime_error.
  // `per_sample`: how many records one sample may hold (RingReader).
  RingSpool(int map_fd, size_t record_size, const std::filesystem::path& file, uint64_t max_bytes,
            size_t per_sample = 1);
  ~RingSpool();
  RingSpool(const RingSpool&) = delete;
  RingSpool& operator=(const RingSpool&) = delete;

  // Stops the thread, drains what is left, closes the file. Call after detaching the
  // probes, so nothing arrives afterwards. Idempotent.
  void stop();
  uint64_t records() const { return reader_ ? reader_->records() : 0; }
  uint64_t short_records() const { return reader_ ? reader_->short_records() : 0; }  // malformed, skipped
  // Records not in the file: past the bound, or refused by the file system. Read after stop().
  uint64_t over_bound_records() const { return over_bound_; }
  uint64_t unwritten_records() const { return unwritten_; }

 private:
  void keep(const void* record, size_t size);
  FILE* file_ = nullptr;
  uint64_t room_;  // bytes the file may still take
  uint64_t over_bound_ = 0, unwritten_ = 0;
  std::unique_ptr<RingReader> reader_;
};

// Reads a spool back a slice at a time, handing each whole record to `fn` in the order the
// ring gave them; returns how many. Memory: one slice, whatever the file's size.
template <class Record, class Fn>
uint64_t for_each_spooled(const std::filesystem::path& file, Fn&& fn) {
  constexpr size_t kSlice = 4096;
  std::vector<Record> slice(kSlice);
  std::ifstream in(file, std::ios::binary);
  uint64_t n = 0;
  while (in) {
    in.read(reinterpret_cast<char*>(slice.data()), std::streamsize(kSlice * sizeof(Record)));
    const size_t got = size_t(in.gcount()) / sizeof(Record);
    for (size_t i = 0; i < got; ++i) fn(slice[i]);
    n += got;
  }
  return n;
}

}  // namespace cudatrace
