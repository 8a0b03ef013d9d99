#pragma once
// A zstd stream written to, or read back from, a file of the harness's own, with no format
// on top: what is written comes back byte for byte. A sort's scratch files (harness/score/
// scratch_file.h) and the eBPF methods' spools (tracers/ebpf/ring_spool.h) are such files:
// at 10^8 records, written raw they would fill the disk several times over.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

typedef struct ZSTD_CCtx_s ZSTD_CCtx;
typedef struct ZSTD_DCtx_s ZSTD_DCtx;

namespace cudatrace {

class ZstdFileWriter {
 public:
  // Creates `path` exclusively (0600), never through a link. Errors: "cannot write PATH: why".
  // `window_log`: the window a reader must hold (2^window_log bytes; 0: zstd's own for the
  // level), for files read many at once.
  explicit ZstdFileWriter(const std::filesystem::path& path, int level = 1, int window_log = 0);
  ~ZstdFileWriter();
  ZstdFileWriter(const ZstdFileWriter&) = delete;
  ZstdFileWriter& operator=(const ZstdFileWriter&) = delete;
  // Buffered, and compressed a batch (kBatch bytes) at a time.
  void write(const void* bytes, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void close();                                      // ends the stream; throws as write() does
  uint64_t bytes_out() const { return bytes_out_; }  // compressed bytes in the file so far
  size_t buffered() const { return pending_.size(); }  // given, not yet compressed
  static constexpr size_t kBatch = size_t(1) << 20;

 private:
  void flush(bool end);
  std::filesystem::path path_;
  int fd_ = -1;
  ZSTD_CCtx* cctx_ = nullptr;
  std::string pending_, out_;
  uint64_t bytes_out_ = 0;
};

// A zstd stream, cut or damaged: the bare reason ("cut short (...)", "damaged (...)"); the
// caller names the file.
struct ZstdStreamError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Inflates a zstd stream onto the end of a buffer, its compressed bytes read through `read`
// as needed: the one loop the event store's reader and ZstdFileReader share.
class ZstdInflater {
 public:
  using Read = std::function<size_t(char* into, size_t most)>;  // 0: the input has ended
  // `window_log_max`: the largest window a frame may ask for (0: zstd's default).
  explicit ZstdInflater(Read read, int window_log_max = 0);
  ~ZstdInflater();
  ZstdInflater(const ZstdInflater&) = delete;
  ZstdInflater& operator=(const ZstdInflater&) = delete;
  // Appends at least one inflated byte to `plain`; false at the end of the stream (the last
  // frame whole). Throws ZstdStreamError; what `read` throws passes through.
  bool more(std::string& plain);
  uint64_t inflated() const { return inflated_; }  // bytes appended so far

 private:
  Read read_;
  ZSTD_DCtx* dctx_ = nullptr;
  std::string raw_;
  size_t raw_pos_ = 0;
  uint64_t inflated_ = 0;
  bool eof_ = false;
  bool pending_ = false;   // the last call filled its output: zstd may hold more
  size_t frame_left_ = 0;  // zstd's last hint: 0 when every frame so far ended whole
};

class ZstdFileReader {
 public:
  // Opens `path` without following a link. Errors: "cannot read PATH: why".
  explicit ZstdFileReader(const std::filesystem::path& path);
  // Reads a file another thread is still writing: at its current end the reader waits for
  // more until `writer_done()` says the writer has closed it, then reads to the end.
  ZstdFileReader(const std::filesystem::path& path, std::function<bool()> writer_done);
  ~ZstdFileReader();
  ZstdFileReader(const ZstdFileReader&) = delete;
  ZstdFileReader& operator=(const ZstdFileReader&) = delete;
  // The next n bytes, in place: valid until the next call. False at the end of the stream
  // (nothing is left); a stream that ends within the n bytes, or damaged, throws.
  bool take(size_t n, std::string_view& out);

 private:
  size_t read_some(char* into, size_t most);
  std::filesystem::path path_;
  int fd_ = -1;
  std::function<bool()> writer_done_;  // empty: the file is whole when opened
  ZstdInflater inflater_;
  std::string plain_;
  size_t pos_ = 0;
};

}  // namespace cudatrace
