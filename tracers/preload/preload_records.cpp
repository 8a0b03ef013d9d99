// One thread's records to events, live or after the run (preload_records.h says how).
#include "tracers/preload/preload_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <tuple>

#include "common/untrusted_file.h"
#include "tracers/preload/shim/generic_hooks.h"

namespace cudatrace::preload {

namespace fs = std::filesystem;

std::optional<Calibration> calibration_of(const Record& r) {
  if (r.hook == kCalibration) return Calibration{int64_t(r.a[0]), int64_t(r.a[1])};
  if (r.hook == kTrailer && r.a[2] == kMagic && r.a[3]) return Calibration{int64_t(r.a[3]), int64_t(r.a[4])};
  return std::nullopt;
}

ThreadFile::~ThreadFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool ThreadFile::open() {
  if (fd_ >= 0) return true;
  fd_ = open_untrusted_fd(path);
  struct stat st {};
  if (fd_ < 0 || fstat(fd_, &st) != 0) return false;
  dev_ = uint64_t(st.st_dev);
  ino_ = uint64_t(st.st_ino);
  return true;
}

bool ThreadFile::still_at_path() const {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return uint64_t(st.st_dev) == dev_ && uint64_t(st.st_ino) == ino_;
}

uint64_t ThreadFile::records_now() {
  struct stat st {};
  if (fd_ < 0 || fstat(fd_, &st) != 0) return read_count;
  const uint64_t n = uint64_t(st.st_size) / sizeof(Record);
  if (n < read_count) changed = true;  // shrank: what was read is kept, nothing more is
  return changed ? read_count : n;
}

void ThreadFile::read_at(uint64_t from, uint64_t to, std::vector<Record>& out) {
  out.resize(size_t(std::min<uint64_t>(kSlice, to > from ? to - from : 0)));
  size_t got = 0;
  const size_t want = out.size() * sizeof(Record);
  while (got < want && !changed) {
    const ssize_t n = pread(fd_, reinterpret_cast<char*>(out.data()) + got, want - got,
                            off_t(from * sizeof(Record) + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) changed = true;  // cut below what its size said: the rest is not read
    else got += size_t(n);
  }
  out.resize(got / sizeof(Record));
}

uint64_t ThreadFile::read(uint64_t n, bool hold, std::map<int64_t, Span>& spans) {
  std::vector<Record> slice;
  const uint64_t to = read_count + n;
  while (read_count < to && !changed) {
    read_at(read_count, to, slice);
    if (slice.empty()) break;
    for (const Record& r : slice) {
      if (const auto p = calibration_of(r)) {
        points.push_back({read_count, *p});
        auto [it, fresh] = spans.try_emplace(key.first, *p, *p);
        if (p->tsc < it->second.first.tsc) it->second.first = *p;
        if (p->tsc > it->second.second.tsc) it->second.second = *p;
      }
      if (hold) window.push_back(r);
      ++read_count;
    }
  }
  return read_count - (to - n);
}

RecordConverter::RecordConverter(EventStoreWriter& out) : out_(out), table_(call_table()) {
  for (const auto& h : table_) {
    table_names_.emplace_back(h.layer, h.name);
    uint8_t bits = 0;
    for (size_t i = 0; i < h.slots.size() && i < kMaxArgSlots; ++i)
      if (h.slots[i].second == 'n') bits |= uint8_t(1u << i);
    kernel_slots_.push_back(bits);
  }
}

void RecordConverter::select(int64_t pid) {
  const auto in = [pid](const auto& m) -> const typename std::decay_t<decltype(m)>::mapped_type* {
    const auto it = m.find(pid);
    return it == m.end() ? nullptr : &it->second;
  };
  process_ = {in(tables_->kernels), in(tables_->bus_ids), in(tables_->generic_names), spans_ ? in(*spans_) : nullptr};
}

// While the program runs, a record is converted only once the tables and calibration
// points it needs are there: what it would get at the end is then what it gets now. (A
// table line that changes an entry afterwards is counted by the conversion.)
bool RecordConverter::ready(const Record& r, const ThreadFile& f) const {
  const size_t np = f.next_point;
  if (np == 0 || np >= f.points.size() || f.points[np].second.tsc <= f.points[np - 1].second.tsc)
    return false;  // timed from the process's span, known only at the end
  if ((r.flags & kRecordDevice) &&
      !(process_.bus_ids && process_.bus_ids->count(int64_t(r.flags & ~kRecordDevice))))
    return false;
  if (r.hook >= kGenericBase) {
    const int slot = r.hook - kGenericBase;
    return export_of_slot(slot) || (process_.generic_names && process_.generic_names->count(uint64_t(slot)));
  }
  if (r.hook >= table_.size() || !kernel_slots_[r.hook]) return true;
  for (size_t i = 0; i < kMaxArgSlots; ++i)
    if ((kernel_slots_[r.hook] >> i & 1) && !(process_.kernels && process_.kernels->count(r.a[i]))) return false;
  return true;
}

bool RecordConverter::name_and_args(const Record& r) {
  with_packed_ = false;
  if (r.hook >= kGenericBase) {  // an entry point recorded without its arguments
    const int slot = r.hook - kGenericBase;
    const ExportInfo* x = export_of_slot(slot);
    const std::pair<std::string, std::string>* named = nullptr;  // the run's table's word on the slot
    if (!x && process_.generic_names)
      if (auto it = process_.generic_names->find(uint64_t(slot)); it != process_.generic_names->end()) named = &it->second;
    if (x) {
      e_.layer = x->runtime ? layer::kRuntime : layer::kDriver;
      e_.name = x->name;
    } else if (named) {
      std::tie(e_.layer, e_.name) = *named;
      x = find_export(e_.name);
    } else {  // a slot no table names: still a record, never dropped
      e_.layer = layer::kDriver;
      e_.name = "cu?generic" + std::to_string(slot);
    }
    // The forwarder records rax whatever the function returns: only a code is a result.
    if (!(slot_flags(x) & kReturnsCode)) e_.ret = 0;
    counts.runtime_generic += e_.layer == layer::kRuntime;
    return true;
  }
  if (r.hook >= table_.size()) return false;
  e_.layer = table_names_[r.hook].first;
  e_.name = table_names_[r.hook].second;
  pack_args(table_[r.hook], r.a, process_.kernels ? *process_.kernels : no_kernels_, packed_);
  with_packed_ = true;
  return true;
}

// Ticks to CLOCK_MONOTONIC: between the calibration points around the record, or (file cut
// short) from the last one at the process's average rate.
void RecordConverter::time(const Record& r, const ThreadFile& f) {
  size_t np = f.next_point;
  // The points around the record by its time, not by its place in the file: a call that
  // began before the point a full buffer closed with is written after that point (its record
  // is made at its exit). Mapped on the next segment's line it could come out earlier than the
  // call before it, by a few ns where the next point is close; on the line of the segment it
  // began in, one thread's calls keep their order.
  for (int back = 0; back < 4 && np >= 2 && int64_t(r.ts) < f.points[np - 1].second.tsc; ++back) --np;
  const Calibration* before = np > 0 ? &f.points[np - 1].second : nullptr;
  const Calibration* after = np < f.points.size() ? &f.points[np].second : nullptr;
  const Span* span = process_.span;
  std::optional<double> rate;
  if (before && after && after->tsc > before->tsc)
    rate = double(after->mono - before->mono) / double(after->tsc - before->tsc);
  else if (span && span->second.tsc > span->first.tsc)
    rate = double(span->second.mono - span->first.mono) / double(span->second.tsc - span->first.tsc);
  const Calibration* anchor = before ? before : after;
  if (rate && anchor) {
    e_.ts = anchor->mono + int64_t(std::llround(double(r.ts - anchor->tsc) * *rate));
    e_.dur = int64_t(std::llround(double(r.dur) * *rate));
  } else {
    ++counts.untimed;  // no calibration at all: order is still known, time is not
  }
}

bool RecordConverter::one(const Record& r, uint64_t at, ThreadFile& f, bool live) {
  while (f.next_point < f.points.size() && f.points[f.next_point].first <= at) ++f.next_point;
  if (r.hook == kCalibration) return true;
  if (r.hook == 0 && r.ts == 0 && r.dur == 0) {  // a hole (a sparse or zeroed file): no record has ts 0
    ++counts.bad;
    return true;
  }
  if (r.hook == kTrailer) {
    if (r.a[2] != kMagic) {
      ++counts.bad;
      return true;
    }
    f.announced += int64_t(r.a[0]);
    f.dropped += int64_t(r.a[1]);
    f.terminated = true;
    return true;
  }
  if (live && !ready(r, f)) return false;
  f.terminated = false;  // a later segment (after an exec that failed, or a flush) must close again
  e_.ret = r.ret;
  e_.ts = 0;
  e_.dur.reset();
  e_.device.reset();
  e_.device_id.clear();
  if (!e_.args.is_null()) e_.args = nullptr;
  if (r.flags & kRecordDevice) {
    e_.device = int64_t(r.flags & ~kRecordDevice);
    if (process_.bus_ids)
      if (auto id = process_.bus_ids->find(*e_.device); id != process_.bus_ids->end()) e_.device_id = id->second;
  }
  if (!name_and_args(r)) {
    ++counts.bad;
    return true;
  }
  time(r, f);
  e_.pid = f.key.first;
  e_.tid = f.key.second;
  if (with_packed_) out_.write(e_, packed_);
  else out_.write(e_);
  ++f.in_file;
  counts.driver_records += e_.layer == layer::kDriver;
  return true;
}

void RecordConverter::convert_window(ThreadFile& f) {
  select(f.key.first);
  while (!f.window.empty() && one(f.window.front(), f.done, f, true)) {
    f.window.pop_front();
    ++f.done;
  }
}

void RecordConverter::convert_rest(ThreadFile& f) {
  select(f.key.first);
  for (; !f.window.empty(); f.window.pop_front()) one(f.window.front(), f.done++, f, false);
  while (f.done < f.read_count) {
    f.read_at(f.done, f.read_count, slice_);
    if (slice_.empty()) break;  // cut since it was read: counted as changed
    for (const Record& r : slice_) one(r, f.done++, f, false);
  }
}

void RecordConverter::close_file(const ThreadFile& f) {
  counts.records += f.in_file;
  counts.dropped += f.dropped;
  if (f.terminated)
    counts.missing += std::max<int64_t>(0, f.announced - f.dropped - f.in_file);
  else
    ++counts.unterminated;
}

}  // namespace cudatrace::preload
