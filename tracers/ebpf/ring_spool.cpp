#include "tracers/ebpf/ring_spool.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cudatrace {

RingSpool::RingSpool(int map_fd, size_t record_size, const std::filesystem::path& file, uint64_t max_bytes,
                     size_t per_sample)
    : room_(max_bytes) {
  file_ = fopen(file.c_str(), "wb");
  if (!file_) throw std::runtime_error("cannot write " + file.string() + ": " + std::strerror(errno));
  try {
    // The BPF side wakes us only when the ring is a quarter full (ring_wakeup.bpf.h): poll
    // often enough that records never wait long, and rarely enough to stay off the CPU.
    reader_ = std::make_unique<RingReader>(
        map_fd, record_size, 10, [this, record_size](const void* r) { keep(r, record_size); },
        "the ring buffer", per_sample);
  } catch (...) {
    fclose(file_);
    file_ = nullptr;
    throw;
  }
}

RingSpool::~RingSpool() { stop(); }

// On the reader's thread only.
void RingSpool::keep(const void* record, size_t size) {
  if (room_ < size) {
    ++over_bound_;
    return;
  }
  if (fwrite(record, size, 1, file_) != 1) {
    ++unwritten_;
    return;
  }
  room_ -= size;
}

void RingSpool::stop() {
  if (reader_) reader_->stop();
  if (file_) {
    // Buffered records that cannot reach the disk are lost too; which ones is unknown, so
    // a failed flush counts every record still in the buffer as unwritten.
    if (fflush(file_) != 0) unwritten_ += 1;
    fclose(file_);
    file_ = nullptr;
  }
}

}  // namespace cudatrace
