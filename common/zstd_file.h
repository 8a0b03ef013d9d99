#pragma once
// A zstd stream written to, or read back from, a file of the harness's own, with no format
// on top: what is written comes back byte for byte. A sort's scratch files (harness/score/
// scratch_file.h) and the eBPF methods' spools (tracers/ebpf/ring_spool.h) are such files:
// at 10^8 records, written raw they would fill the disk several times over.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

typedef struct ZSTD_CCtx_s ZSTD_CCtx;
typedef struct ZSTD_DCtx_s ZSTD_DCtx;

namespace cudatrace {

class ZstdFileWriter {
 public:
  // Creates `path` exclusively (0600), never through a link. Errors: "cannot write PATH: why".
  explicit ZstdFileWriter(const std::filesystem::path& path, int level = 1);
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

class ZstdFileReader {
 public:
  // Opens `path` without following a link. Errors: "cannot read PATH: why".
  explicit ZstdFileReader(const std::filesystem::path& path);
  ~ZstdFileReader();
  ZstdFileReader(const ZstdFileReader&) = delete;
  ZstdFileReader& operator=(const ZstdFileReader&) = delete;
  // The next n bytes, in place: valid until the next call. False at the end of the stream
  // (nothing is left); a stream that ends within the n bytes, or damaged, throws.
  bool take(size_t n, std::string_view& out);

 private:
  bool more();
  std::filesystem::path path_;
  int fd_ = -1;
  ZSTD_DCtx* dctx_ = nullptr;
  std::string raw_, plain_;
  size_t raw_pos_ = 0, pos_ = 0;
  size_t frame_left_ = 0;  // zstd's last hint: 0 when the frames so far ended whole
  bool eof_ = false;
};

}  // namespace cudatrace
