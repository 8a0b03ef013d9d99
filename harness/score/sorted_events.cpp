#include "harness/score/sorted_events.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
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

SortedEvents::SortedEvents(fs::path spill_dir, std::string tag, size_t chunk)
    : dir_(std::move(spill_dir)), tag_(std::move(tag)), chunk_(std::max<size_t>(chunk, 1)) {}

SortedEvents::~SortedEvents() {
  heap_.clear();  // closes the files before they go
  std::error_code ec;
  for (const auto& f : runs_) fs::remove(f, ec);
}

void SortedEvents::add(const Event& e, std::string_view packed_args, uint32_t family, uint64_t seq) {
  if (reading_) throw std::logic_error("SortedEvents::add after reading began");
  const size_t at = held_.size();
  put(held_, e.tid);
  put(held_, e.ts);
  put(held_, seq);
  put(held_, family);
  put(held_, e.pid);
  put(held_, uint8_t((e.dur ? kHasDur : 0) | (e.ret ? kHasRet : 0) | (e.device ? kHasDevice : 0)));
  put(held_, e.dur.value_or(0));
  put(held_, e.ret.value_or(0));
  put(held_, e.device.value_or(0));
  put_text(held_, e.layer);
  put_text(held_, e.name);
  put_text(held_, e.device_id);
  put_text(held_, packed_args);
  keys_.push_back({e.tid, e.ts, seq, family, uint32_t(held_.size() - at), at});
  ++added_;
  if (keys_.size() >= chunk_ || held_.size() >= kChunkBytes) spill();
}

fs::path SortedEvents::new_file() {
  if (files_made_ == 0 && ::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot make " + dir_.string() + " for sorting events: " + std::strerror(errno));
  return dir_ / (tag_ + "." + std::to_string(files_made_++) + ".sort.zst");
}

void SortedEvents::sort_held() { std::sort(keys_.begin(), keys_.end(), before); }

void SortedEvents::spill() {
  sort_held();
  const fs::path file = new_file();
  runs_.push_back(file);  // removed by the destructor even if the write fails
  ZstdFileWriter out(file);
  for (const auto& k : keys_) put_record(out, std::string_view(held_.data() + k.at, k.size));
  out.close();
  held_.clear();
  keys_.clear();
}

std::vector<std::unique_ptr<SortedEvents::Source>> SortedEvents::open_all(const std::vector<fs::path>& files) const {
  std::vector<std::unique_ptr<Source>> heap;
  for (const auto& f : files) {
    auto s = std::make_unique<Source>();
    s->in = std::make_unique<ZstdFileReader>(f);
    if (s->advance()) heap.push_back(std::move(s));
  }
  std::make_heap(heap.begin(), heap.end(), later);
  return heap;
}

fs::path SortedEvents::merge(const std::vector<fs::path>& files) {
  auto heap = open_all(files);
  const fs::path file = new_file();
  runs_.push_back(file);  // removed with the others, whatever happens below
  ZstdFileWriter out(file);
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
  if (!keys_.empty()) spill();
  // Merged until one stream of all of them can be read, and no more: a merge of k files
  // takes k - 1 away, so the first takes just enough (each merge is another pass over its
  // records).
  while (runs_.size() > kFanIn) {
    const size_t k = std::min(kFanIn, runs_.size() - kFanIn + 1);
    std::vector<fs::path> group(runs_.begin(), runs_.begin() + std::ptrdiff_t(k));
    const fs::path merged = merge(group);  // on a throw, every file is still in runs_
    runs_.erase(runs_.begin(), runs_.begin() + std::ptrdiff_t(k));
    runs_.push_back(merged);
  }
  heap_ = open_all(runs_);
}

bool SortedEvents::next(SortedCall& out) {
  if (!reading_) start_reading();
  if (runs_.empty()) {
    if (next_held_ >= keys_.size()) {
      std::string().swap(held_);
      std::vector<Key>().swap(keys_);
      return false;
    }
    const Key& k = keys_[next_held_++];
    decode(std::string_view(held_.data() + k.at, k.size), out);
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
