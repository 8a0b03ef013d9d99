#include "tracers/ebpf/ring_reader.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cudatrace {

RingReader::RingReader(int map_fd, size_t record_size, int poll_ms, OnRecord on_record, const char* what)
    : record_size_(record_size), on_record_(std::move(on_record)) {
  ring_ = ring_buffer__new(map_fd, on_sample, this, nullptr);
  if (!ring_) throw std::runtime_error(std::string("cannot open ") + what + ": " + std::strerror(errno));
  thread_ = std::thread([this, poll_ms] {
    while (!stopping_.load(std::memory_order_relaxed)) ring_buffer__poll(ring_, poll_ms);
  });
}

RingReader::~RingReader() {
  stop();
  ring_buffer__free(ring_);
}

int RingReader::on_sample(void* self, void* data, size_t size) {
  auto* r = static_cast<RingReader*>(self);
  if (size < r->record_size_) {
    r->short_records_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  r->on_record_(data);
  r->records_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

void RingReader::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  ring_buffer__consume(ring_);
}

}  // namespace cudatrace
