#pragma once
// Calls put in (thread, family, time) order without holding them all. The matcher pairs a
// ledger's calls with a method's per thread and call family, and a real job's 10^7 to 10^8
// calls do not fit in memory: up to a chunk is sorted in memory; past it, each sorted chunk
// is written to a zstd scratch file (common/zstd_file.h) under a spill folder the caller owns, and
// the chunks are merged back as a stream, at most kFanIn files open at once.
//
// A call is held as one flat record (its fields and its packed args, packed_args.h), and
// sorted by a small key beside it: sorting, spilling and merging Event objects with JSON
// args cost 70% of the scoring, at 0.15 M records/s.
//
// The work past reading is off the caller's thread: a full chunk is sorted and compressed
// by a thread of its own while the next one fills (at most one in flight, so two chunks are
// held at most), and the merges that bring many files down to kFanIn run side by side.
#include <array>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/event.h"

namespace cudatrace {

// A call as it comes back: every field of the event but its args (packed beside it) and
// its corr (the sorter's `seq` takes its place). e.args is not touched.
struct SortedCall {
  Event e;
  std::string args;     // packed
  uint32_t family = 0;  // the caller's number for the call's family
  uint64_t seq = 0;     // orders calls of the same thread, family and time
};

class SortedEvents {
 public:
  static constexpr size_t kDefaultChunk = size_t(1) << 18;  // calls held before a spill
  static constexpr size_t kChunkBytes = size_t(32) << 20;   // or bytes of them held
  static constexpr size_t kFanIn = 64;                      // files merged at once

  // `spill_dir` is made (0700) at the first spill; `tag` names this sorter's files in it.
  SortedEvents(std::filesystem::path spill_dir, std::string tag, size_t chunk = kDefaultChunk);
  ~SortedEvents();  // removes its spill files
  SortedEvents(const SortedEvents&) = delete;
  SortedEvents& operator=(const SortedEvents&) = delete;

  // Sorters whose calls are paired must number the families the same way: the order of
  // families is the order of their numbers. Throws where a spill file cannot be written.
  void add(const Event& e, std::string_view packed_args, uint32_t family, uint64_t seq);
  // A key alone (the matcher's pairs): next() gives back its four fields and nothing else.
  void add_key(int64_t tid, int64_t ts, uint32_t family, uint64_t seq);
  // After the last add(), optional: begins the merges now, in the background, so that they
  // run while the caller does other work (next() begins them otherwise).
  void seal();
  // After the last add(): the next call in (tid, family, ts, seq) order. Throws what a
  // chunk's writer or a merge threw.
  bool next(SortedCall& out);
  uint64_t size() const { return added_; }
  size_t spill_files() const { return files_made_; }  // sorted chunks written, merges included

  struct Key {
    int64_t tid, ts;
    uint64_t seq;
    uint32_t family;
    uint32_t size;  // of its record, its length before it included
    size_t at;      // where its record (its length first) begins in the chunk
    uint32_t lane;  // its (tid, family)'s index in Chunk::lanes, while those are in order
  };
  // A (tid, family) of a chunk, and its last key so far.
  struct Lane {
    int64_t tid;
    uint32_t family;
    uint32_t count;
    int64_t last_ts;
    uint64_t last_seq;
  };
  struct Source;  // one sorted file being merged, and its next record
  struct Merge;   // sorted files merged into one stream
  // A chunk's records, back to back, and one key per record. A ledger's thread and a
  // method's store come in time order: while each lane's keys arrive in order, the chunk is
  // put in order by lane alone, in linear time (no comparison sort).
  struct Chunk {
    std::string held;
    std::vector<Key> keys;
    std::vector<Lane> lanes;
    bool in_lane_order = true;
  };
  // The strings records repeat (layers, names, bus ids), each held once: a record names
  // them by number. Past its bound a string is written in the record itself.
  struct Names;

 private:
  uint32_t lane_of(int64_t tid, uint32_t family, int64_t ts, uint64_t seq);
  void finish_record(size_t at, int64_t tid, int64_t ts, uint32_t family, uint64_t seq);
  void spill();
  void wait_for_spill();  // rethrows what the chunk's writer threw
  std::filesystem::path new_file();
  void merge_down();  // to kFanIn files at most
  void start_reading();

  std::filesystem::path dir_;
  std::string tag_;
  size_t chunk_;
  std::unique_ptr<Names> names_;  // only add() writes it, only next() reads it
  Chunk chunk_held_;           // the chunk being filled
  struct LaneId {
    int64_t tid;
    uint32_t family;
    bool operator==(const LaneId&) const = default;
  };
  struct LaneHash {
    size_t operator()(const LaneId& l) const noexcept { return size_t((uint64_t(l.tid) * 0x9E3779B97F4A7C15ull) ^ l.family); }
  };
  std::unordered_map<LaneId, uint32_t, LaneHash> lane_ids_;  // the chunk's lanes by (tid, family)
  std::array<uint32_t, 4> recent_lanes_{UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX};  // looked at first
  size_t recent_lane_next_ = 0;
  std::future<Chunk> spilling_;  // the chunk being written; its buffers come back for reuse
  std::vector<std::filesystem::path> runs_;  // sorted files; the merges' outputs before they are made
  std::future<void> merging_;                // seal()'s merges
  std::unique_ptr<Merge> merge_;  // of the sorted files, once reading began
  size_t next_held_ = 0;
  bool sealed_ = false, reading_ = false;
  uint64_t added_ = 0;
  size_t files_made_ = 0;
};

}  // namespace cudatrace
