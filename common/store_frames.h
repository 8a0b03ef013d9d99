#pragma once
// Cuts a store file (event_store.h) into its zstd frames, in file order, so that each can be
// inflated and decoded on a thread of its own (EventReadAhead). A workload's ledger is written
// in frames of 16,384 records (EventStoreWriter::end_frame_every); a store written as one
// frame, a frame past the bytes it may hold or bytes that are no frame come whole, as "the rest":
// one part read on from the file by one thread, as EventReader reads it.
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/event_store.h"

namespace cudatrace {

class StoreFrames {
 public:
  // Nothing is opened yet: the first next() does, and an error opening comes as its part.
  // A frame larger than `max_frame_bytes` (compressed) is not held: the rest of the file is
  // read as a stream instead, nothing lost, only not shared among threads. A ledger's frame
  // was about 100 kB on the burst of 10^8 calls (613.6 MB in 6,104 frames).
  StoreFrames(std::filesystem::path path, const StoreLimits& limits, size_t max_frame_bytes);

  struct Part {
    uint64_t index = 0;  // parts are numbered 0, 1, ... in file order
    std::string bytes;   // whole frames; for the rest, its first bytes
    bool rest = false;   // the rest of the file: `bytes`, then read_rest()
    bool plain = false;  // not a store (JSON lines): read the path with EventReader
    bool last = false;   // no part follows
    std::exception_ptr error;  // the file cannot be read here: this, after the parts before
  };
  enum class Got { kPart, kEnd, kNothing };
  // kPart: `p` filled. kEnd, once: the file ended after the part before (p.index is the
  // number of parts). kNothing: ended already. Never throws: an error is a part's.
  Got next(Part& p);
  // A rest part's bytes after p.bytes: only its reader calls it, once next() has given it.
  size_t read_rest(char* into, size_t most);

 private:
  void open();
  void fill(size_t more);
  std::filesystem::path path_;
  StoreLimits limits_;
  size_t max_frame_bytes_;
  std::ifstream in_;
  bool opened_ = false, store_ = false, eof_ = false, ended_ = false;
  uint64_t file_left_ = 0;
  std::string buf_;
  size_t pos_ = 0;
  uint64_t index_ = 0;
};

}  // namespace cudatrace
