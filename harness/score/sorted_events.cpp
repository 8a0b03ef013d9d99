#include "harness/score/sorted_events.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <semaphore>
#include <thread>
#include <tuple>

#include "common/zstd_file.h"

namespace cudatrace {

namespace fs = std::filesystem;

namespace {

// A record: the key's fields first (so that a merge reads them without the rest), then the
// event's other fields, then its strings, each after its length. Native byte order: the
// files are read back by the process that wrote them.
constexpr size_t kKeyBytes = 8 + 8 + 8 + 4;
enum : uint8_t { kHasDur = 1, kHasRet = 2, kHasDevice = 4 };

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_text(std::string& out, std::string_view s) {
  put(out, uint32_t(s.size()));
  out.append(s);
}

struct RecordReader {
  const char* p;
  const char* end;
  template <class T>
  T get() {
    if (size_t(end - p) < sizeof(T)) throw std::runtime_error("a sort record cut short");
    T v;
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  void text(std::string& out) {
    const uint32_t n = get<uint32_t>();
    if (size_t(end - p) < n) throw std::runtime_error("a sort record cut short");
    out.assign(p, n);
    p += n;
  }
};

SortedEvents::Key key_of(std::string_view record) {
  RecordReader r{record.data(), record.data() + record.size()};
  SortedEvents::Key k{};
  k.tid = r.get<int64_t>();
  k.ts = r.get<int64_t>();
  k.seq = r.get<uint64_t>();
  k.family = r.get<uint32_t>();
  k.size = uint32_t(record.size());
  return k;
}

void decode(std::string_view record, SortedCall& out) {
  RecordReader r{record.data(), record.data() + record.size()};
  Event& e = out.e;
  e.tid = r.get<int64_t>();
  e.ts = r.get<int64_t>();
  out.seq = r.get<uint64_t>();
  out.family = r.get<uint32_t>();
  e.pid = r.get<int64_t>();
  const uint8_t has = r.get<uint8_t>();
  const int64_t dur = r.get<int64_t>(), ret = r.get<int64_t>(), device = r.get<int64_t>();
  e.dur = has & kHasDur ? std::optional<int64_t>(dur) : std::nullopt;
  e.ret = has & kHasRet ? std::optional<int64_t>(ret) : std::nullopt;
  e.device = has & kHasDevice ? std::optional<int64_t>(device) : std::nullopt;
  e.corr.reset();
  r.text(e.layer);
  r.text(e.name);
  r.text(e.device_id);
  r.text(out.args);
}

bool before(const SortedEvents::Key& a, const SortedEvents::Key& b) {
  return std::tie(a.tid, a.family, a.ts, a.seq) < std::tie(b.tid, b.family, b.ts, b.seq);
}

// A sorted file is read beside up to kFanIn others, each reader holding its window: 128 KiB,
// not the 512 KiB zstd takes at level 1 (records a chunk apart compress no better).
constexpr int kSortWindowLog = 17;

// A sorted file: each record after its length (native order: the files are read back by
// the process that wrote them).
void put_record(ZstdFileWriter& out, std::string_view record) {
  const uint32_t n = uint32_t(record.size());
  out.write(&n, sizeof n);
  out.write(record);
}

}  // namespace

struct SortedEvents::Source {
  std::unique_ptr<ZstdFileReader> in;
  std::string_view head;  // valid until the next advance
  Key key{};
  bool advance() {
    std::string_view size;
    if (!in->take(sizeof(uint32_t), size)) return false;
    uint32_t n;
    std::memcpy(&n, size.data(), sizeof n);
    if (!in->take(n, head)) throw std::runtime_error("a sort file cut short");
    key = key_of(head);
    return true;
  }
};

namespace {

// A min-heap's order: std::*_heap keep the greatest first, so "greater" puts the least there.
bool later(const std::unique_ptr<SortedEvents::Source>& a, const std::unique_ptr<SortedEvents::Source>& b) {
  return before(b->key, a->key);
}

std::vector<std::unique_ptr<SortedEvents::Source>> open_sources(const std::vector<fs::path>& files) {
  std::vector<std::unique_ptr<SortedEvents::Source>> heap;
  for (const auto& f : files) {
    auto s = std::make_unique<SortedEvents::Source>();
    s->in = std::make_unique<ZstdFileReader>(f);
    if (s->advance()) heap.push_back(std::move(s));
  }
  std::make_heap(heap.begin(), heap.end(), later);
  return heap;
}

}  // namespace

SortedEvents::SortedEvents(fs::path spill_dir, std::string tag, size_t chunk)
    : dir_(std::move(spill_dir)), tag_(std::move(tag)), chunk_(std::max<size_t>(chunk, 1)) {}

SortedEvents::~SortedEvents() {
  heap_.clear();  // closes the files before they go
  // The threads still writing or merging finish first: they write into files listed here.
  // Their errors were the caller's to hear from next(); here they are past mattering.
  if (spilling_.valid()) spilling_.wait();
  if (merging_.valid()) merging_.wait();
  std::error_code ec;
  for (const auto& f : runs_) fs::remove(f, ec);
}

void SortedEvents::add(const Event& e, std::string_view packed_args, uint32_t family, uint64_t seq) {
  if (sealed_) throw std::logic_error("SortedEvents::add after seal or reading began");
  std::string& held = chunk_held_.held;
  const size_t at = held.size();
  put(held, e.tid);
  put(held, e.ts);
  put(held, seq);
  put(held, family);
  put(held, e.pid);
  put(held, uint8_t((e.dur ? kHasDur : 0) | (e.ret ? kHasRet : 0) | (e.device ? kHasDevice : 0)));
  put(held, e.dur.value_or(0));
  put(held, e.ret.value_or(0));
  put(held, e.device.value_or(0));
  put_text(held, e.layer);
  put_text(held, e.name);
  put_text(held, e.device_id);
  put_text(held, packed_args);
  chunk_held_.keys.push_back({e.tid, e.ts, seq, family, uint32_t(held.size() - at), at});
  ++added_;
  if (chunk_held_.keys.size() >= chunk_ || held.size() >= kChunkBytes) spill();
}

fs::path SortedEvents::new_file() {
  if (files_made_ == 0 && ::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot make " + dir_.string() + " for sorting events: " + std::strerror(errno));
  return dir_ / (tag_ + "." + std::to_string(files_made_++) + ".sort.zst");
}

void SortedEvents::wait_for_spill() {
  if (!spilling_.valid()) return;
  Chunk done = spilling_.get();  // rethrows the writer's error
  if (chunk_held_.keys.empty()) {  // its buffers, grown to a chunk's size, are filled next
    done.held.clear();
    done.keys.clear();
    chunk_held_ = std::move(done);
  }
}

void SortedEvents::spill() {
  wait_for_spill();  // one chunk in flight at most
  const fs::path file = new_file();
  runs_.push_back(file);  // removed by the destructor even if the write fails
  spilling_ = std::async(std::launch::async, [file, c = std::move(chunk_held_)]() mutable {
    std::sort(c.keys.begin(), c.keys.end(), before);
    ZstdFileWriter out(file, 1, kSortWindowLog);
    for (const auto& k : c.keys) put_record(out, std::string_view(c.held.data() + k.at, k.size));
    out.close();
    return std::move(c);
  });
  chunk_held_ = Chunk{};
}

namespace {

// Merges `files` into `into` and removes them.
void merge_files(const std::vector<fs::path>& files, const fs::path& into) {
  std::vector<std::unique_ptr<SortedEvents::Source>> heap = open_sources(files);
  ZstdFileWriter out(into, 1, kSortWindowLog);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    put_record(out, heap.back()->head);
    if (heap.back()->advance()) {
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
    }
  }
  out.close();
  heap.clear();
  std::error_code ec;
  for (const auto& f : files) fs::remove(f, ec);
}

// Merges run side by side, this many at most in the whole process (every sorter's merges
// together): each holds kFanIn readers, a zstd window and buffers each, about 1 MiB, so the
// bound is on memory as much as on cores. Measured on an H200 host at 10^7 calls, with four
// per sorter and no bound across sorters: a peak RSS of 621 MiB (121 MiB single-threaded).
constexpr size_t kMergesAtOnce = 4;
std::counting_semaphore<kMergesAtOnce> merge_slots(kMergesAtOnce);

size_t merges_at_once() { return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMergesAtOnce); }

void merge_in_a_slot(const std::vector<fs::path>& files, const fs::path& into) {
  merge_slots.acquire();
  struct Release {
    ~Release() { merge_slots.release(); }
  } release;
  merge_files(files, into);
}

}  // namespace

void SortedEvents::merge_down() {
  // Merged until one stream of all of them can be read, and no more: a merge of k files
  // takes k - 1 away, so a round takes just enough groups (each merge is another pass over
  // its records), and its groups run side by side.
  while (runs_.size() > kFanIn) {
    size_t excess = runs_.size() - kFanIn, taken = 0;
    std::vector<std::pair<std::vector<fs::path>, fs::path>> groups;
    while (excess > 0 && runs_.size() - taken >= 2) {
      const size_t k = std::min({kFanIn, excess + 1, runs_.size() - taken});
      groups.push_back({{runs_.begin() + std::ptrdiff_t(taken), runs_.begin() + std::ptrdiff_t(taken + k)}, new_file()});
      taken += k;
      excess -= k - 1;
    }
    for (const auto& g : groups) runs_.push_back(g.second);  // listed before they exist: removed whatever happens
    std::exception_ptr failed;
    for (size_t i = 0; i < groups.size(); i += merges_at_once()) {
      std::vector<std::future<void>> round;
      for (size_t j = i; j < std::min(groups.size(), i + merges_at_once()); ++j)
        round.push_back(std::async(std::launch::async, merge_in_a_slot, std::cref(groups[j].first), std::cref(groups[j].second)));
      for (auto& f : round) try {
          f.get();
        } catch (...) {
          if (!failed) failed = std::current_exception();
        }
      if (failed) std::rethrow_exception(failed);  // every file is still in runs_
    }
    runs_.erase(runs_.begin(), runs_.begin() + std::ptrdiff_t(taken));
  }
}

void SortedEvents::seal() {
  if (sealed_) return;
  sealed_ = true;
  if (runs_.empty()) {  // it all fitted: sorted in memory, no file
    std::sort(chunk_held_.keys.begin(), chunk_held_.keys.end(), before);
    return;
  }
  if (!chunk_held_.keys.empty()) spill();
  wait_for_spill();
  chunk_held_ = Chunk{};
  merging_ = std::async(std::launch::async, [this] { merge_down(); });
}

void SortedEvents::start_reading() {
  seal();
  reading_ = true;
  if (runs_.empty()) return;
  merging_.get();  // rethrows a merge's error
  heap_ = open_sources(runs_);
}

bool SortedEvents::next(SortedCall& out) {
  if (!reading_) start_reading();
  if (runs_.empty()) {
    if (next_held_ >= chunk_held_.keys.size()) {
      chunk_held_ = Chunk{};
      return false;
    }
    const Key& k = chunk_held_.keys[next_held_++];
    decode(std::string_view(chunk_held_.held.data() + k.at, k.size), out);
    return true;
  }
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Source& s = *heap_.back();
  decode(s.head, out);
  if (s.advance()) {
    std::push_heap(heap_.begin(), heap_.end(), later);
  } else {
    heap_.pop_back();
  }
  return true;
}

}  // namespace cudatrace
