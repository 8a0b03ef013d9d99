#pragma once
// The bytes of a trace file as JAX writes it: perfetto_trace.json.gz (gzip, the form
// jax.profiler.trace(create_perfetto_trace=True) leaves), or the same JSON unpacked, told
// apart by gzip's magic bytes (1f 8b), not by the name. The file is the traced program's, so
// it is opened as torchprof's traces are (never through a link, a regular file with one
// link: common/untrusted_file.h), and inflated a slice at a time: at most what the caller
// asks for (UntrustedJsonInput asks 64 KiB) is inflated per call, so a gzip bomb costs no
// more memory than a slice, and the caller's bound on the text (UntrustedJsonInput's
// max_bytes) stops it: past it, nothing more is inflated.
//
// Bounds here: the file's own bytes (compressed, for a gzip'd file) up to max_file_bytes; a
// file that goes on past it is cut there (file_bound_hit()). A gzip stream that ends before
// its end, or is corrupt, ends the bytes with why() saying so (the reader counts the trace
// cut). Concatenated gzip members are read one after the other, as gzip(1) does.
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tracers/torchprof/torchprof_input.h"

namespace cudatrace {

class TraceFileBytes : public RawByteSource {
 public:
  TraceFileBytes(const std::filesystem::path& file, uint64_t max_file_bytes);
  ~TraceFileBytes() override;
  TraceFileBytes(const TraceFileBytes&) = delete;
  TraceFileBytes& operator=(const TraceFileBytes&) = delete;

  // False (and unreadable() says why) when the file may not be read, or zlib would not start.
  bool is_open() const { return fd_ >= 0; }
  const std::string& unreadable() const { return unreadable_; }

  ssize_t read(char* into, size_t n) override;
  const std::string& why() const override { return why_; }

  bool gzip() const { return gzip_; }
  uint64_t file_size() const { return size_; }
  uint64_t file_bytes_read() const { return read_; }
  bool file_bound_hit() const { return bound_hit_; }  // the file went on past max_file_bytes

 private:
  ssize_t read_file(char* into, size_t n);  // the file's own bytes, within the bound
  bool peek_magic();
  ssize_t inflate_some(char* into, size_t n);

  int fd_ = -1;
  std::string unreadable_, why_;
  uint64_t size_ = 0, left_ = 0, read_ = 0;
  bool bound_hit_ = false, started_ = false, gzip_ = false;
  // Bytes read to look for the magic and not handed out yet (a plain file's first bytes).
  std::vector<char> head_;
  size_t head_at_ = 0;
  // Inflating: the compressed slice, the stream, where a member ended.
  std::vector<unsigned char> in_;
  z_stream z_{};
  bool z_started_ = false, member_ended_ = false, ended_ = false;
};

}  // namespace cudatrace
