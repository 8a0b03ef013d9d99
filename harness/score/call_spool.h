#pragma once
// A method's calls kept per thread in the order they came, for the streaming join
// (stream_join.h). A method hands its calls over thread by thread in time order (each
// thread's calls end one after another), so grouping them by thread is all the sorting the
// join needs: no comparison sort and no merge of sorted files, which were most of the
// scoring's time at 10^8 calls (the sort-based Matcher stays for inputs that are not so).
//
// Each thread's calls are appended, varint-encoded, to a buffer of its own; a full buffer
// (kFrameBytes) is compressed as one zstd frame and appended to one scratch file, and read
// back frame by frame. Memory: a buffer per thread being filled, one frame per reader.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cudatrace {

// A call as the join needs it: its name and bus id as numbers into the spool's tables.
struct SpooledCall {
  int64_t ts = 0, pid = 0, tid = 0;
  std::optional<int64_t> dur, ret, device;
  uint64_t seq = 0;
  uint32_t family = 0, name = 0, device_id = 0;
  std::string_view args;  // packed; valid until the reader's next call
};

class CallSpool {
 public:
  static constexpr size_t kFrameBytes = size_t(256) << 10;
  static constexpr size_t kMaxThreads = 256;         // past it: not streamable
  static constexpr size_t kMaxStrings = size_t(1) << 16;  // distinct names or bus ids

  // The scratch file is made (0600, exclusively) under `dir` at the first full frame.
  CallSpool(std::filesystem::path dir, std::string tag);
  ~CallSpool();  // removes the scratch file
  CallSpool(const CallSpool&) = delete;
  CallSpool& operator=(const CallSpool&) = delete;

  // False where the call cannot be held (too many threads or strings): the caller scores
  // another way. Throws where the scratch file cannot be written.
  bool add(const SpooledCall& c, std::string_view name, std::string_view device_id);
  const std::string& name(uint32_t id) const { return strings_[id]; }
  const std::string& device_id(uint32_t id) const { return strings_[id]; }
  std::vector<int64_t> threads() const;  // in the order they first came

  // A thread's calls, in the order they were added; several readers may read one thread.
  class Reader {
   public:
    bool next(SpooledCall& out);

   private:
    friend class CallSpool;
    Reader(const CallSpool& spool, int64_t tid);
    bool load();
    const CallSpool* spool_;
    int64_t tid_;
    size_t frame_ = 0;        // the next frame to read
    bool tail_read_ = false;  // the buffer still held, read last
    std::string plain_;
    std::string_view left_;
    int64_t last_ts_ = 0;
    uint64_t last_seq_ = 0;
  };
  Reader reader(int64_t tid) const { return Reader(*this, tid); }

 private:
  struct Thread {
    std::string held;  // encoded, not yet a frame
    struct Frame {
      uint64_t at;
      uint32_t size, plain;  // compressed, and as written
    };
    std::vector<Frame> frames;
    int64_t last_ts = 0;
    uint64_t last_seq = 0;
  };
  void flush(Thread& t);
  std::optional<uint32_t> string_id(std::string_view s);
  std::filesystem::path dir_, file_;
  std::string tag_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::unordered_map<int64_t, Thread> threads_;
  std::vector<int64_t> order_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> string_ids_;
  uint32_t last_name_ = 0, last_device_id_ = 0;
  std::string compressed_;
};

}  // namespace cudatrace
