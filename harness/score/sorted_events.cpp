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

// A record, after its length: the key's fields first (so that a merge reads them without
// the rest), then a byte of flags; a key alone ends there. Then the event's other fields
// (dur, ret and device only where present), its layer, name and bus id by number
// (SortedEvents::Names), and its packed args after their length. Numbers are varints
// (signed ones zigzagged): every byte of a record is a byte to compress, and a call's
// fields are mostly small; the length before a record is 4 bytes, native order (the files
// are read back by the process that wrote them).
enum : uint8_t { kHasDur = 1, kHasRet = 2, kHasDevice = 4, kKeyOnly = 8 };
constexpr uint64_t kInline = 0;  // a string past the table's bound, in the record; else its number + 1
constexpr size_t kMostFixed = 10 * 10 + 1;  // a record's bytes before its strings and args, at most

char* put_varint(char* w, uint64_t v) {
  while (v >= 0x80) *w++ = char(uint8_t(v) | 0x80), v >>= 7;
  *w++ = char(v);
  return w;
}
char* put_signed(char* w, int64_t v) { return put_varint(w, (uint64_t(v) << 1) ^ uint64_t(v >> 63)); }

struct RecordReader {
  const char* p;
  const char* end;
  [[noreturn]] static void cut() { throw std::runtime_error("a sort record cut short"); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) cut();
      const uint8_t b = uint8_t(*p++);
      v |= uint64_t(b & 0x7f) << shift;
      if (b < 0x80) return v;
    }
    throw std::runtime_error("a sort record's number is too long");
  }
  int64_t signed_varint() {
    const uint64_t z = varint();
    return int64_t(z >> 1) ^ -int64_t(z & 1);
  }
  uint8_t byte() {
    if (p >= end) cut();
    return uint8_t(*p++);
  }
  std::string_view text() {
    const uint64_t n = varint();
    if (uint64_t(end - p) < n) cut();
    const std::string_view v(p, size_t(n));
    p += n;
    return v;
  }
};

SortedEvents::Key key_of(std::string_view record) {
  RecordReader r{record.data(), record.data() + record.size()};
  SortedEvents::Key k{};
  k.tid = r.signed_varint();
  k.ts = r.signed_varint();
  k.seq = r.varint();
  k.family = uint32_t(r.varint());
  k.size = uint32_t(record.size());
  return k;
}

}  // namespace

struct SortedEvents::Names {
  // Bounds on what is held: a method's store may name each call differently.
  static constexpr size_t kMost = size_t(1) << 12, kMostBytes = size_t(1) << 20;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> list;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids;
  size_t bytes = 0;
  // Per field, the numbers of its last few strings: a compare of a few bytes each, where a
  // hash would read them all and then compare anyway.
  static constexpr size_t kRecent = 4;
  uint32_t recent[3][kRecent] = {{UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX},
                                 {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX},
                                 {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX}};
  uint32_t recent_next[3] = {0, 0, 0};

  // Its number + 1, or kInline where the string is written in the record.
  uint64_t ref(int field, std::string_view s) {
    for (const uint32_t r : recent[field])
      if (r != UINT32_MAX && list[r] == s) return r + 1;
    uint32_t id;
    if (const auto it = ids.find(s); it != ids.end()) {
      id = it->second;
    } else {
      if (list.size() >= kMost || bytes + s.size() > kMostBytes) return kInline;
      bytes += s.size();
      list.emplace_back(s);
      id = uint32_t(list.size() - 1);
      ids.emplace(list.back(), id);
    }
    recent[field][recent_next[field]++ % kRecent] = id;
    return id + 1;
  }
  // `ref` as written; an inline string is read from the record.
  void get(uint64_t ref, RecordReader& r, std::string& out) const {
    if (ref == kInline) {
      const std::string_view v = r.text();
      out.assign(v.data(), v.size());
    } else if (ref <= list.size()) {
      out.assign(list[ref - 1]);
    } else {
      throw std::runtime_error("a sort record names no string it knows");
    }
  }
};

namespace {

void decode(std::string_view record, const SortedEvents::Names& names, SortedCall& out) {
  RecordReader r{record.data(), record.data() + record.size()};
  Event& e = out.e;
  e.tid = r.signed_varint();
  e.ts = r.signed_varint();
  out.seq = r.varint();
  out.family = uint32_t(r.varint());
  const uint8_t has = r.byte();
  if (has & kKeyOnly) return;
  e.pid = r.signed_varint();
  if (has & kHasDur) e.dur = r.signed_varint();
  else e.dur.reset();
  if (has & kHasRet) e.ret = r.signed_varint();
  else e.ret.reset();
  if (has & kHasDevice) e.device = r.signed_varint();
  else e.device.reset();
  e.corr.reset();
  const uint64_t refs[3] = {r.varint(), r.varint(), r.varint()};
  const uint64_t args_size = r.varint();
  names.get(refs[0], r, e.layer);
  names.get(refs[1], r, e.name);
  names.get(refs[2], r, e.device_id);
  if (uint64_t(r.end - r.p) != args_size) RecordReader::cut();
  const std::string_view args(r.p, size_t(args_size));
  out.args.assign(args.data(), args.size());
}

bool before(const SortedEvents::Key& a, const SortedEvents::Key& b) {
  return std::tie(a.tid, a.family, a.ts, a.seq) < std::tie(b.tid, b.family, b.ts, b.seq);
}

// Keys that came as a few stretches already in order (the matcher's pairs: a thread's
// families one after another, each in ledger order) are merged stretch by stretch, in
// n log(stretches); keys in no order at all, sorted.
void merge_runs(std::vector<SortedEvents::Key>& keys) {
  std::vector<size_t> runs{0};  // where each stretch begins
  for (size_t i = 1; i < keys.size(); ++i)
    if (before(keys[i], keys[i - 1])) runs.push_back(i);
  if (runs.size() > 1 + keys.size() / 16) {
    std::sort(keys.begin(), keys.end(), before);
    return;
  }
  runs.push_back(keys.size());
  std::vector<SortedEvents::Key> other(keys.size());
  while (runs.size() > 2) {  // stretches merged two by two into `other`, then swapped back
    std::vector<size_t> merged{0};
    for (size_t r = 0; r + 1 < runs.size(); r += 2) {
      const auto b = keys.begin();
      const size_t end = r + 2 < runs.size() ? runs[r + 2] : runs[r + 1];
      std::merge(b + std::ptrdiff_t(runs[r]), b + std::ptrdiff_t(runs[r + 1]), b + std::ptrdiff_t(runs[r + 1]),
                 b + std::ptrdiff_t(end), other.begin() + std::ptrdiff_t(runs[r]), before);
      merged.push_back(end);
    }
    keys.swap(other);
    runs.swap(merged);
  }
}

// A chunk in (tid, family, ts, seq) order. Where each lane's keys came in order, that is
// the lanes in order, each lane's keys as they came (a stable partition); else a sort.
void put_in_order(SortedEvents::Chunk& c) {
  if (!c.in_lane_order) {
    merge_runs(c.keys);
    return;
  }
  std::vector<uint32_t> lanes(c.lanes.size());
  for (uint32_t i = 0; i < lanes.size(); ++i) lanes[i] = i;
  std::sort(lanes.begin(), lanes.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(c.lanes[a].tid, c.lanes[a].family) < std::tie(c.lanes[b].tid, c.lanes[b].family);
  });
  std::vector<size_t> next(c.lanes.size());
  size_t at = 0;
  for (const uint32_t l : lanes) next[l] = at, at += c.lanes[l].count;
  std::vector<SortedEvents::Key> out(c.keys.size());
  for (const auto& k : c.keys) out[next[k.lane]++] = k;
  c.keys.swap(out);
}

// A sorted file is read beside up to kFanIn others, each reader holding its window: 128 KiB,
// not the 512 KiB zstd takes at level 1 (records a chunk apart compress no better).
constexpr int kSortWindowLog = 17;
constexpr int kSortLevel = -1;

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

}  // namespace

// Sorted files merged a record at a time. The source that gave the last record stays out
// of the heap while its next one is still the least: one comparison per record rather than
// the heap's two per level, since a lane's records come in long stretches from one file (a
// chunk holds a stretch of a ledger's thread, or a window of a store's time).
struct SortedEvents::Merge {
  std::vector<std::unique_ptr<Source>> heap;
  std::unique_ptr<Source> current;

  explicit Merge(const std::vector<fs::path>& files) {
    for (const auto& f : files) {
      auto s = std::make_unique<Source>();
      s->in = std::make_unique<ZstdFileReader>(f);
      if (s->advance()) heap.push_back(std::move(s));
    }
    std::make_heap(heap.begin(), heap.end(), later);
  }
  // The source whose head is the least of all, nullptr once all are done; its head is the
  // next record until advance().
  Source* least() {
    if (current) {
      if (heap.empty() || !before(heap.front()->key, current->key)) return current.get();
      heap.push_back(std::move(current));
      std::push_heap(heap.begin(), heap.end(), later);
    }
    if (heap.empty()) return nullptr;
    std::pop_heap(heap.begin(), heap.end(), later);
    current = std::move(heap.back());
    heap.pop_back();
    return current.get();
  }
  void advance() {
    if (!current->advance()) current.reset();
  }
};

namespace {

}  // namespace

SortedEvents::SortedEvents(fs::path spill_dir, std::string tag, size_t chunk)
    : dir_(std::move(spill_dir)), tag_(std::move(tag)), chunk_(std::max<size_t>(chunk, 1)), names_(std::make_unique<Names>()) {}

SortedEvents::~SortedEvents() {
  merge_.reset();  // closes the files before they go
  // The threads still writing or merging finish first: they write into files listed here.
  // Their errors were the caller's to hear from next(); here they are past mattering.
  if (spilling_.valid()) spilling_.wait();
  if (merging_.valid()) merging_.wait();
  std::error_code ec;
  for (const auto& f : runs_) fs::remove(f, ec);
}

uint32_t SortedEvents::lane_of(int64_t tid, uint32_t family, int64_t ts, uint64_t seq) {
  Chunk& c = chunk_held_;
  if (!c.in_lane_order) return 0;
  uint32_t i = UINT32_MAX;
  for (const uint32_t r : recent_lanes_)  // a thread's few families take turns
    if (r < c.lanes.size() && c.lanes[r].tid == tid && c.lanes[r].family == family) i = r;
  if (i == UINT32_MAX) {
    const auto [it, fresh] = lane_ids_.try_emplace(LaneId{tid, family}, uint32_t(c.lanes.size()));
    if (fresh) c.lanes.push_back({tid, family, 0, ts, seq});
    i = recent_lanes_[recent_lane_next_++ % recent_lanes_.size()] = it->second;
  }
  Lane& l = c.lanes[i];
  if (l.count > 0 && (ts < l.last_ts || (ts == l.last_ts && seq < l.last_seq))) c.in_lane_order = false;
  l.last_ts = ts, l.last_seq = seq;
  ++l.count;
  return i;
}

namespace {
char* put_key(char* w, int64_t tid, int64_t ts, uint64_t seq, uint32_t family) {
  w = put_signed(w, tid);
  w = put_signed(w, ts);
  w = put_varint(w, seq);
  return put_varint(w, family);
}
}  // namespace

void SortedEvents::add(const Event& e, std::string_view packed_args, uint32_t family, uint64_t seq) {
  if (sealed_) throw std::logic_error("SortedEvents::add after seal or reading began");
  std::string& held = chunk_held_.held;
  const size_t at = held.size();
  // The numbers go through a buffer of their own: one append, not one per field.
  char fixed[sizeof(uint32_t) + kMostFixed];
  char* w = put_key(fixed + sizeof(uint32_t), e.tid, e.ts, seq, family);
  *w++ = char((e.dur ? kHasDur : 0) | (e.ret ? kHasRet : 0) | (e.device ? kHasDevice : 0));
  w = put_signed(w, e.pid);
  if (e.dur) w = put_signed(w, *e.dur);
  if (e.ret) w = put_signed(w, *e.ret);
  if (e.device) w = put_signed(w, *e.device);
  const uint64_t refs[3] = {names_->ref(0, e.layer), names_->ref(1, e.name), names_->ref(2, e.device_id)};
  for (const uint64_t r : refs) w = put_varint(w, r);
  w = put_varint(w, packed_args.size());
  held.append(fixed, size_t(w - fixed));
  // Strings past the table's bound, in the order their references came.
  const std::string* texts[3] = {&e.layer, &e.name, &e.device_id};
  for (int i = 0; i < 3; ++i)
    if (refs[i] == kInline) {
      char n[10];
      held.append(n, size_t(put_varint(n, texts[i]->size()) - n));
      held.append(*texts[i]);
    }
  held.append(packed_args);
  finish_record(at, e.tid, e.ts, family, seq);
}

void SortedEvents::add_key(int64_t tid, int64_t ts, uint32_t family, uint64_t seq) {
  if (sealed_) throw std::logic_error("SortedEvents::add after seal or reading began");
  std::string& held = chunk_held_.held;
  const size_t at = held.size();
  char fixed[sizeof(uint32_t) + kMostFixed];
  char* w = put_key(fixed + sizeof(uint32_t), tid, ts, seq, family);
  *w++ = char(kKeyOnly);
  held.append(fixed, size_t(w - fixed));
  finish_record(at, tid, ts, family, seq);
}

void SortedEvents::finish_record(size_t at, int64_t tid, int64_t ts, uint32_t family, uint64_t seq) {
  std::string& held = chunk_held_.held;
  const uint32_t n = uint32_t(held.size() - at - sizeof(uint32_t));
  std::memcpy(held.data() + at, &n, sizeof n);
  chunk_held_.keys.push_back({tid, ts, seq, family, uint32_t(held.size() - at), at, lane_of(tid, family, ts, seq)});
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
    done.lanes.clear();
    done.in_lane_order = true;
    chunk_held_ = std::move(done);
  }
}

void SortedEvents::spill() {
  wait_for_spill();  // one chunk in flight at most
  const fs::path file = new_file();
  runs_.push_back(file);  // removed by the destructor even if the write fails
  spilling_ = std::async(std::launch::async, [file, c = std::move(chunk_held_)]() mutable {
    put_in_order(c);
    ZstdFileWriter out(file, kSortLevel, kSortWindowLog);
    for (const auto& k : c.keys) out.write(c.held.data() + k.at, k.size);  // its length and itself
    out.close();
    return std::move(c);
  });
  chunk_held_ = Chunk{};
  lane_ids_.clear();
  recent_lanes_.fill(UINT32_MAX);
}

namespace {

// Merges `files` into `into` and removes them.
void merge_files(const std::vector<fs::path>& files, const fs::path& into) {
  {  // its files closed before they go
    SortedEvents::Merge merge(files);
    ZstdFileWriter out(into, kSortLevel, kSortWindowLog);
    while (SortedEvents::Source* s = merge.least()) {
      put_record(out, s->head);
      merge.advance();
    }
    out.close();
  }
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
    put_in_order(chunk_held_);
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
  merge_ = std::make_unique<Merge>(runs_);
}

bool SortedEvents::next(SortedCall& out) {
  if (!reading_) start_reading();
  if (runs_.empty()) {
    if (next_held_ >= chunk_held_.keys.size()) {
      chunk_held_ = Chunk{};
      return false;
    }
    const Key& k = chunk_held_.keys[next_held_++];
    decode(std::string_view(chunk_held_.held.data() + k.at + sizeof(uint32_t), k.size - sizeof(uint32_t)), *names_, out);
    return true;
  }
  Source* s = merge_->least();
  if (!s) return false;
  decode(s->head, *names_, out);
  merge_->advance();
  return true;
}

}  // namespace cudatrace
