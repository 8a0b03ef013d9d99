#pragma once
// A sort's scratch file: length-prefixed byte records in one zstd stream, written once and
// read back once within the run, in a 0700 folder of the harness's own. Not the event store:
// a sorted chunk of 10^7 records is written and read again at every merge, and building
// and parsing MessagePack events for it cost more than the sort itself.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

typedef struct ZSTD_CCtx_s ZSTD_CCtx;
typedef struct ZSTD_DCtx_s ZSTD_DCtx;

namespace cudatrace {

class ScratchWriter {
 public:
  // Creates `path` exclusively, never through a link. Errors: "cannot write PATH: why".
  explicit ScratchWriter(const std::filesystem::path& path);
  ~ScratchWriter();
  ScratchWriter(const ScratchWriter&) = delete;
  ScratchWriter& operator=(const ScratchWriter&) = delete;
  void put(std::string_view record);
  void close();

 private:
  void flush(bool end);
  std::filesystem::path path_;
  int fd_ = -1;
  ZSTD_CCtx* cctx_ = nullptr;
  std::string pending_, out_;
};

class ScratchReader {
 public:
  explicit ScratchReader(const std::filesystem::path& path);
  ~ScratchReader();
  ScratchReader(const ScratchReader&) = delete;
  ScratchReader& operator=(const ScratchReader&) = delete;
  // The next record, valid until the next call; false at the end.
  bool next(std::string_view& record);

 private:
  bool more();
  std::filesystem::path path_;
  int fd_ = -1;
  ZSTD_DCtx* dctx_ = nullptr;
  std::string raw_, plain_;
  size_t raw_pos_ = 0, pos_ = 0;
  bool eof_ = false;
};

}  // namespace cudatrace
