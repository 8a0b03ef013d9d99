#pragma once
// Drains a BPF ring buffer of fixed-size records into a spool file, on a thread of its own,
// so that the ring never fills while the traced program runs; the records are decoded
// only after the program is gone. The file is a zstd stream (common/zstd_file.h): raw, a
// uprobe record is 184 bytes, and 10^8 calls of a real job filled half a 64 GiB disk; the
// drain compresses several times faster than a program makes calls. The file is bounded
// (HostFacts::max_trace_bytes, counted in bytes on the disk, and a batch not yet compressed
// as if it took its full size): what comes past the bound, or fails to be written (a full
// disk), is counted, never dropped unseen.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/zstd_file.h"
#include "tracers/tracer.h"
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
  // Records not in the file: past the bound, or refused after a write failed. Read after stop().
  uint64_t over_bound_records() const { return over_bound_; }
  uint64_t unwritten_records() const { return unwritten_; }
  // Records handed to the file. Where a write failed, those of them not read back (the batch
  // it was compressing, the end of the stream) are lost too: accepted() minus what
  // for_each_spooled reads. write_error(): why, or "".
  uint64_t accepted() const { return accepted_; }
  const std::string& write_error() const { return write_error_; }

 private:
  void keep(const void* record, size_t size);
  std::unique_ptr<ZstdFileWriter> file_;
  uint64_t max_bytes_;
  bool failed_ = false;  // a write failed: the stream ends there
  std::string write_error_;
  uint64_t over_bound_ = 0, unwritten_ = 0, accepted_ = 0;
  std::unique_ptr<RingReader> reader_;
};

// Reads a spool back a record at a time, handing each to `fn` in the order the ring gave
// them; returns how many. Memory: one batch, whatever the file's size. A file cut within a
// record, or damaged, ends the reading there: `cut` says why (else it is left empty), and
// what was read before it is kept.
template <class Record, class Fn>
uint64_t for_each_spooled(const std::filesystem::path& file, Fn&& fn, std::string& cut) {
  uint64_t n = 0;
  try {
    ZstdFileReader in(file);
    std::string_view bytes;
    Record r;
    while (in.take(sizeof(Record), bytes)) {
      std::memcpy(&r, bytes.data(), sizeof r);
      fn(const_cast<const Record&>(r));
      ++n;
    }
  } catch (const std::runtime_error& e) {
    cut = e.what();
  }
  return n;
}

// After the spool is read back: records it accepted but the reader did not get (a write
// failed, the file was cut) are added to loss's records_the_disk_refused; the write error
// becomes the report's error (the run fails with it), and the reason for a cut its note.
void account_spool(TracerReport& report, uint64_t accepted, uint64_t read, const std::string& write_error,
                   const std::string& cut);

}  // namespace cudatrace
