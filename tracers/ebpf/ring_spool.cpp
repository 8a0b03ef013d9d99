#include "tracers/ebpf/ring_spool.h"

#include <stdexcept>

namespace cudatrace {

RingSpool::RingSpool(int map_fd, size_t record_size, const std::filesystem::path& file, uint64_t max_bytes,
                     size_t per_sample)
    : file_(std::make_unique<ZstdFileWriter>(file)), max_bytes_(max_bytes) {
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
  ++accepted_;
  try {
    file_->write(record, size);
  } catch (const std::exception& e) {
    // The stream ends here: what of it can be read back is counted by the reader.
    failed_ = true;
    write_error_ = e.what();
  }
}

void RingSpool::stop() {
  if (reader_) reader_->stop();
  if (file_ && !failed_) {
    try {
      file_->close();
    } catch (const std::exception& e) {
      failed_ = true;  // the records it held are not in the file: the reader counts them
      write_error_ = e.what();
    }
  }
  file_.reset();
}

void account_spool(TracerReport& report, uint64_t accepted, uint64_t read, const std::string& write_error,
                   const std::string& cut) {
  if (read < accepted) {
    const auto had = report.loss.value("records_the_disk_refused", uint64_t(0));
    report.loss["records_the_disk_refused"] = had + (accepted - read);
  }
  if (!cut.empty()) report.notes["spool_cut"] = cut;
  if (!write_error.empty() && report.error.empty()) report.error = "the spool: " + write_error;
}

}  // namespace cudatrace
