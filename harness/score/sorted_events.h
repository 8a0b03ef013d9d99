#pragma once
// Events put in (thread, family, time) order without holding them all. The matcher pairs a
// ledger's calls with a method's per thread and call family, and a real job's 10^7 to 10^8
// calls do not fit in memory: up to a chunk is sorted in memory; past it, each sorted chunk
// is written as a store file (common/event_store.h) under a spill folder the caller owns,
// and the chunks are merged back as a stream, at most kFanIn files open at once.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/event.h"

namespace cudatrace {

class SortedEvents {
 public:
  // The family an event is grouped under within its thread ("" for none).
  using Family = std::function<std::string(const Event&)>;
  static constexpr size_t kDefaultChunk = size_t(1) << 16;  // events held before a spill
  static constexpr size_t kFanIn = 64;                      // files merged at once

  // `spill_dir` is made (0700) at the first spill; `tag` names this sorter's files in it.
  SortedEvents(std::filesystem::path spill_dir, std::string tag, Family family, size_t chunk = kDefaultChunk);
  ~SortedEvents();  // removes its spill files
  SortedEvents(const SortedEvents&) = delete;
  SortedEvents& operator=(const SortedEvents&) = delete;

  // e.corr is its sequence number: it orders events of the same thread, family and time,
  // and comes back as given. Throws where a spill file cannot be written.
  void add(Event e);
  // After the last add(): the next event in (tid, family, ts, corr) order, and its family.
  bool next(Event& e, std::string& family);
  uint64_t size() const { return added_; }
  size_t spill_files() const { return files_made_; }  // sorted chunks written, merges included

  struct Item {
    std::string family;
    Event e;
  };
  struct Source;  // one sorted file being merged, and its next event

 private:
  void spill();
  void sort_held();
  std::filesystem::path new_file();
  std::filesystem::path merge(const std::vector<std::filesystem::path>& files);
  void start_reading();

  std::filesystem::path dir_;
  std::string tag_;
  Family family_;
  size_t chunk_;
  std::vector<Item> held_;
  std::vector<std::filesystem::path> runs_;
  std::vector<std::unique_ptr<Source>> heap_;  // merge sources, a min-heap by their head
  size_t next_held_ = 0;
  bool reading_ = false;
  uint64_t added_ = 0;
  size_t files_made_ = 0;
};

}  // namespace cudatrace
