#include "tracers/ebpf/ring_spool.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cudatrace {

RingSpool::RingSpool(int map_fd, size_t record_size, const std::filesystem::path& file) : record_size_(record_size) {
  file_ = fopen(file.c_str(), "wb");
  if (!file_) throw std::runtime_error("cannot write " + file.string() + ": " + std::strerror(errno));
  ring_ = ring_buffer__new(map_fd, on_record, this, nullptr);
  if (!ring_) {
    const int err = errno;
    fclose(file_);
    file_ = nullptr;
    throw std::runtime_error(std::string("cannot open the ring buffer: ") + std::strerror(err));
  }
  drainer_ = std::thread([this] {
    // The BPF side wakes us only when the ring is a quarter full (ring_wakeup.bpf.h): poll
    // often enough that records never wait long, and rarely enough to stay off the CPU.
    while (!stopping_.load(std::memory_order_relaxed)) ring_buffer__poll(ring_, 10);
  });
}

RingSpool::~RingSpool() {
  stop();
  if (ring_) ring_buffer__free(ring_);
}

int RingSpool::on_record(void* self, void* data, size_t size) {
  auto* s = static_cast<RingSpool*>(self);
  if (size < s->record_size_) {
    ++s->short_records_;
    return 0;
  }
  fwrite(data, s->record_size_, 1, s->file_);
  ++s->records_;
  return 0;
}

void RingSpool::stop() {
  stopping_ = true;
  if (drainer_.joinable()) drainer_.join();
  if (ring_ && file_) ring_buffer__consume(ring_);
  if (file_) {
    fclose(file_);
    file_ = nullptr;
  }
}

}  // namespace cudatrace
