#include "tracers/ebpf/ring_spool.h"

#include <algorithm>
#include <stdexcept>

namespace cudatrace {

RingSpool::RingSpool(int map_fd, size_t record_size, const std::filesystem::path& file, uint64_t max_bytes,
                     size_t per_sample)
    : file_(std::make_unique<ZstdFileWriter>(file)), record_size_(record_size), max_bytes_(max_bytes) {
  // The BPF side wakes us only when the ring is a quarter full (ring_wakeup.bpf.h): poll
  // often enough that records never wait long, and rarely enough to stay off the CPU.
  reader_ = std::make_unique<RingReader>(
      map_fd, record_size, 10, [this, record_size](const void* r) { keep(r, record_size); }, "the ring buffer",
      per_sample);
}

RingSpool::~RingSpool() { stop(); }

// On the reader's thread only.
void RingSpool::keep(const void* record, size_t size) {
  if (failed_) {
    ++unwritten_;
    return;
  }
  if (file_->bytes_out() + file_->buffered() + size > max_bytes_) {
    ++over_bound_;
    return;
  }
  try {
    file_->write(record, size);
  } catch (const std::exception&) {
    // The batch that was being compressed is lost with this record, and the stream ends.
    failed_ = true;
    unwritten_ += file_->buffered() / size;
  }
}

void RingSpool::stop() {
  if (reader_) reader_->stop();
  if (file_ && !failed_) {
    // Buffered records that cannot reach the disk are lost too.
    try {
      file_->close();
    } catch (const std::exception&) {
      unwritten_ += std::max<uint64_t>(1, file_->buffered() / record_size_);
    }
  }
  file_.reset();
}

}  // namespace cudatrace
