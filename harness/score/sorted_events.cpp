#include "harness/score/sorted_events.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <tuple>

#include "common/event_store.h"

namespace cudatrace {

namespace fs = std::filesystem;

namespace {

auto key_of(const Event& e, const std::string& family) {
  return std::tie(e.tid, family, e.ts, *e.corr);
}

// Its own files hold what it was given, which was read within its source's bounds already.
StoreLimits own_files() {
  StoreLimits l;
  l.max_depth = 1024;
  l.max_string = UINT32_MAX;
  l.max_items = UINT32_MAX;
  return l;
}

}  // namespace

struct SortedEvents::Source {
  std::unique_ptr<EventReader> in;
  Item head;
  bool advance(const Family& family) {
    if (!in->next(head.e)) return false;
    if (!head.e.corr) head.e.corr = 0;
    head.family = family(head.e);
    return true;
  }
};

namespace {

// A min-heap's order: std::*_heap keep the greatest first, so "greater" puts the least there.
bool later(const std::unique_ptr<SortedEvents::Source>& a, const std::unique_ptr<SortedEvents::Source>& b) {
  return key_of(b->head.e, b->head.family) < key_of(a->head.e, a->head.family);
}

}  // namespace

SortedEvents::SortedEvents(fs::path spill_dir, std::string tag, Family family, size_t chunk)
    : dir_(std::move(spill_dir)), tag_(std::move(tag)), family_(std::move(family)), chunk_(std::max<size_t>(chunk, 1)) {}

SortedEvents::~SortedEvents() {
  heap_.clear();  // closes the files before they go
  std::error_code ec;
  for (const auto& f : runs_) fs::remove(f, ec);
}

void SortedEvents::add(Event e) {
  if (reading_) throw std::logic_error("SortedEvents::add after reading began");
  if (!e.corr) e.corr = 0;
  std::string family = family_(e);
  held_.push_back({std::move(family), std::move(e)});
  ++added_;
  if (held_.size() >= chunk_) spill();
}

fs::path SortedEvents::new_file() {
  if (files_made_ == 0 && ::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot make " + dir_.string() + " for sorting events: " + std::strerror(errno));
  return dir_ / (tag_ + "." + std::to_string(files_made_++) + ".msgpack.zst");
}

void SortedEvents::sort_held() {
  std::sort(held_.begin(), held_.end(),
            [](const Item& a, const Item& b) { return key_of(a.e, a.family) < key_of(b.e, b.family); });
}

void SortedEvents::spill() {
  sort_held();
  const fs::path file = new_file();
  runs_.push_back(file);  // removed by the destructor even if the write fails
  EventStoreWriter out(file, 1, EventStoreWriter::Durability::kScratch);
  for (const auto& item : held_) out.write(item.e);
  out.close();
  held_.clear();
}

fs::path SortedEvents::merge(const std::vector<fs::path>& files) {
  std::vector<std::unique_ptr<Source>> heap;
  for (const auto& f : files) {
    auto s = std::make_unique<Source>();
    s->in = std::make_unique<EventReader>(f, own_files());
    if (s->advance(family_)) heap.push_back(std::move(s));
  }
  std::make_heap(heap.begin(), heap.end(), later);
  const fs::path file = new_file();
  runs_.push_back(file);  // removed with the others, whatever happens below
  EventStoreWriter out(file, 1, EventStoreWriter::Durability::kScratch);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    out.write(heap.back()->head.e);
    if (heap.back()->advance(family_)) {
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
    }
  }
  out.close();
  std::error_code ec;
  for (const auto& f : files) fs::remove(f, ec);
  runs_.pop_back();
  return file;
}

void SortedEvents::start_reading() {
  reading_ = true;
  if (runs_.empty()) {  // it all fitted: sorted in memory, no file
    sort_held();
    return;
  }
  if (!held_.empty()) spill();
  // Merged kFanIn at a time until one stream of all of them can be read.
  while (runs_.size() > kFanIn) {
    std::vector<fs::path> group(runs_.begin(), runs_.begin() + kFanIn);
    const fs::path merged = merge(group);  // on a throw, every file is still in runs_
    runs_.erase(runs_.begin(), runs_.begin() + kFanIn);
    runs_.push_back(merged);
  }
  for (const auto& f : runs_) {
    auto s = std::make_unique<Source>();
    s->in = std::make_unique<EventReader>(f, own_files());
    if (s->advance(family_)) heap_.push_back(std::move(s));
  }
  std::make_heap(heap_.begin(), heap_.end(), later);
}

bool SortedEvents::next(Event& e, std::string& family) {
  if (!reading_) start_reading();
  if (runs_.empty()) {
    if (next_held_ >= held_.size()) {
      held_.clear();
      held_.shrink_to_fit();
      return false;
    }
    Item& item = held_[next_held_++];
    e = std::move(item.e);
    family = std::move(item.family);
    return true;
  }
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Source& s = *heap_.back();
  e = std::move(s.head.e);
  family = std::move(s.head.family);
  if (s.advance(family_)) {
    std::push_heap(heap_.begin(), heap_.end(), later);
  } else {
    heap_.pop_back();
  }
  return true;
}

}  // namespace cudatrace
