#include "tracers/ebpf/spool_follower.h"

#include <stdexcept>
#include <utility>

#include "common/zstd_file.h"

namespace cudatrace {

SpoolFollower::SpoolFollower(std::filesystem::path file, size_t record_size, Fn fn) : fn_(std::move(fn)) {
  thread_ = std::thread([this, file = std::move(file), record_size] { follow(file, record_size); });
}

SpoolFollower::~SpoolFollower() {
  abandon_ = true;
  writer_done_ = true;
  if (thread_.joinable()) thread_.join();
}

void SpoolFollower::follow(const std::filesystem::path& file, size_t record_size) {
  try {
    // Abandoned: the reader sees the file's current end as its end and stops there.
    ZstdFileReader in(file, [this] { return writer_done_.load(); });
    std::string_view bytes;
    while (!abandon_ && in.take(record_size, bytes)) {
      try {
        fn_(bytes);
      } catch (...) {
        failed_ = std::current_exception();  // the decoder's or the store's: finish() throws it
        return;
      }
      read_.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (const std::runtime_error& e) {
    // The spool itself (cut, damaged, unreadable): what was read is kept, as for_each_spooled does.
    cut_ = e.what();
  }
}

void SpoolFollower::finish() {
  writer_done_ = true;
  if (thread_.joinable()) thread_.join();
  if (failed_) std::rethrow_exception(std::exchange(failed_, nullptr));
}

}  // namespace cudatrace
