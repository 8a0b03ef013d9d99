#include "tracers/ebpf/ring_reader.h"

#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cudatrace {

RingReader::RingReader(int map_fd, size_t record_size, int poll_ms, OnRecord on_record, const char* what,
                       size_t per_sample)
    : record_size_(record_size), per_sample_(per_sample), on_record_(std::move(on_record)) {
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
  // One record per sample, unless the BPF side batches: then as many whole records as the
  // sample holds, up to per_sample, and a torn tail counted as short.
  size_t n = 1;
  if (r->per_sample_ > 1) {
    n = std::min(size / r->record_size_, r->per_sample_);
    if (size != n * r->record_size_) r->short_records_.fetch_add(1, std::memory_order_relaxed);
  }
  for (size_t i = 0; i < n; ++i) r->on_record_(static_cast<const char*>(data) + i * r->record_size_);
  r->records_.fetch_add(n, std::memory_order_relaxed);
  return 0;
}

void RingReader::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  ring_buffer__consume(ring_);
}

}  // namespace cudatrace
