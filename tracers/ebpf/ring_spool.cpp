#include "tracers/ebpf/ring_spool.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cudatrace {

RingSpool::RingSpool(int map_fd, size_t record_size, const std::filesystem::path& file, size_t per_sample) {
  file_ = fopen(file.c_str(), "wb");
  if (!file_) throw std::runtime_error("cannot write " + file.string() + ": " + std::strerror(errno));
  try {
    // The BPF side wakes us only when the ring is a quarter full (ring_wakeup.bpf.h): poll
    // often enough that records never wait long, and rarely enough to stay off the CPU.
    reader_ = std::make_unique<RingReader>(
        map_fd, record_size, 10, [this, record_size](const void* r) { fwrite(r, record_size, 1, file_); },
        "the ring buffer", per_sample);
  } catch (...) {
    fclose(file_);
    file_ = nullptr;
    throw;
  }
}

RingSpool::~RingSpool() { stop(); }

void RingSpool::stop() {
  if (reader_) reader_->stop();
  if (file_) {
    fclose(file_);
    file_ = nullptr;
  }
}

}  // namespace cudatrace
