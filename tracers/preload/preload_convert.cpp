// Method `preload`, after the run: the shim's per-thread record files and its per-process
// tables (tracers/preload/preload_format.h) become the event store. In stages, each its own
// function: the tables are read (bounded: the program wrote them), each file's calibration
// points are found, each file's records are converted in slices, and the report says what
// was lost and why. No file is held whole: a real job writes 10^8 records.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "common/bounded_lines.h"
#include "common/device_id.h"
#include "common/event_store.h"
#include "common/outside_text.h"
#include "common/untrusted_file.h"
#include "tracers/call_args.h"
#include "tracers/preload/preload_format.h"
#include "tracers/preload/preload_tracer.h"
#include "tracers/preload/shim/generic_hooks.h"

namespace cudatrace {

namespace fs = std::filesystem;
using namespace cudatrace::preload;

namespace {

using KernelTable = KernelNames;

struct Calibration {
  int64_t tsc = 0, mono = 0;
};

// The point a calibration record or a trailer carries, if it is one.
std::optional<Calibration> calibration_of(const Record& r) {
  if (r.hook == kCalibration) return Calibration{int64_t(r.a[0]), int64_t(r.a[1])};
  if (r.hook == kTrailer && r.a[2] == kMagic && r.a[3]) return Calibration{int64_t(r.a[3]), int64_t(r.a[4])};
  return std::nullopt;
}

// One thread's record file, read in slices of kSlice records: the files of a run hold as
// many records as the program made calls (10^8 in a real job), so none is ever held whole.
class RecordFile {
 public:
  static constexpr size_t kSlice = size_t(1) << 16;
  // At most `records` records of the file are read (the run's bound).
  RecordFile(const fs::path& path, uint64_t records) : in_(open_untrusted(path, nullptr, &bytes_)), left_(records) {}
  bool is_open() const { return bool(in_); }
  uint64_t records_in_file() const { return bytes_ / sizeof(Record); }
  // The next slice (empty at the end of what may be read).
  const std::vector<Record>& next() {
    buf_.resize(size_t(std::min<uint64_t>(kSlice, left_)));
    in_.read(reinterpret_cast<char*>(buf_.data()), std::streamsize(buf_.size() * sizeof(Record)));
    buf_.resize(size_t(in_.gcount()) / sizeof(Record));
    left_ -= buf_.size();
    return buf_;
  }

 private:
  uint64_t bytes_ = 0;
  std::ifstream in_;
  uint64_t left_;
  std::vector<Record> buf_;
};

// The shim's per-process text tables (kernel names, slots, lookups): the program wrote
// them, so each is read with bounds (a run's real ones are kilobytes): this much of one
// file, this much of all of a run's, and this many entries kept in all (what a line costs
// in memory, past its bytes). What lies past a bound is counted, never read.
constexpr uint64_t kMaxTableBytes = uint64_t(16) << 20;
constexpr uint64_t kMaxTablesBytes = uint64_t(32) << 20;
constexpr int64_t kMaxTableEntries = int64_t(1) << 18;

// Reading the tables of one run: the shared bounds, and what went wrong, line by line.
// A name from a table is copied into every record that names it (a kernel's launches): one
// name of 64 KiB times 40,000 launches made gigabytes. Real names, long C++ templates
// included, stay under this; a longer one is cut, the cut said in it and counted.
constexpr size_t kMaxNameBytes = size_t(16) << 10;

std::string capped_name(const std::string& name, int64_t& cut) {
  if (name.size() <= kMaxNameBytes) return name;
  ++cut;
  size_t keep = kMaxNameBytes;
  while (keep > 0 && (uint8_t(name[keep]) & 0xC0) == 0x80) --keep;  // not inside a UTF-8 sequence
  return name.substr(0, keep) + "...[" + std::to_string(name.size() - keep) + " more bytes]";
}

struct TableReading {
  ReadBudget budget{kMaxTablesBytes};
  int64_t entries = 0;
  int64_t malformed = 0, cut_lines = 0, over_bound_bytes = 0, over_bound_entries = 0, refused = 0;
  std::vector<std::string> examples;  // "<file> line N: <why>", the first few

  void example(const std::string& what) {
    if (examples.size() < 8) examples.push_back(escape_invalid_utf8(what));
  }

  // Calls `parse` on each line of `path` (its name, its text); `parse` returns "" when the
  // line was taken, else why it was not: that line is counted and the rest still read.
  template <typename Parse>
  void each_line(const fs::path& path, Parse parse) {
    const std::string file = path.filename().string();
    BoundedLines in(path, kMaxTableBytes, &budget);
    if (!in.is_open()) {
      ++refused;
      example(file + ": not read: " + in.why());
      return;
    }
    std::string line;
    while (in.next(line)) {
      if (in.line_cut()) {
        ++cut_lines;
        example(file + " line " + std::to_string(in.line_number()) + ": longer than " +
                std::to_string(BoundedLines::kDefaultMaxLine) + " bytes: not read");
        continue;
      }
      if (line.empty()) continue;
      if (entries >= kMaxTableEntries) {
        ++over_bound_entries;
        continue;
      }
      const std::string why = parse(line);
      if (why.empty()) {
        ++entries;
      } else {
        ++malformed;
        example(file + " line " + std::to_string(in.line_number()) + ": " + why);
      }
    }
    if (const uint64_t unread = in.unread_bytes()) {
      over_bound_bytes += int64_t(unread);
      example(file + ": " + std::to_string(unread) + " bytes past the " + in.bound_hit() + " bound (" +
              std::to_string((std::string(in.bound_hit()) == "per file" ? kMaxTableBytes : kMaxTablesBytes) >> 20) +
              " MiB): not read");
    }
  }
};

// "word word rest of line": the first `n` space-separated words, then the rest (may hold spaces).
bool split_words(const std::string& line, size_t n, std::vector<std::string>& words, std::string* rest = nullptr) {
  words.clear();
  size_t pos = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t b = line.find_first_not_of(" \t", pos);
    if (b == std::string::npos) return false;
    size_t e = line.find_first_of(" \t", b);
    if (e == std::string::npos) e = line.size();
    words.push_back(line.substr(b, e - b));
    pos = e;
  }
  if (rest) {
    const size_t b = line.find_first_not_of(" \t", pos);
    if (b == std::string::npos) return false;
    *rest = line.substr(b);
  } else if (line.find_first_not_of(" \t", pos) != std::string::npos) {
    return false;
  }
  return true;
}

std::string shown_word(const std::string& s) { return "'" + shown(s, 64) + "'"; }


using ThreadKey = std::pair<int64_t, int64_t>;  // (pid, tid)

// What the shim left in the folder: each thread's record file, and what its tables say.
struct ShimOutput {
  std::map<ThreadKey, fs::path> files;
  std::map<int64_t, KernelTable> kernels;
  std::map<int64_t, std::map<int64_t, std::string>> bus_ids;  // pid -> device ordinal -> PCI bus id
  std::map<int64_t, std::map<uint64_t, std::pair<std::string, std::string>>> generic_names;  // pid -> slot -> (layer, name)
  int64_t decoded = 0, generic = 0, unhooked = 0;
  std::vector<std::string> unhooked_names;
  std::map<std::string, int64_t> own_lookups;                      // object calling cuGetProcAddress -> entry points asked
  std::map<std::string, std::set<std::string>> uncovered;          // library -> exports the shim does not cover
  std::map<std::string, std::set<std::string>> uncovered_imports;  // object -> those of them it links to
  TableReading tables;
  int64_t bad_names = 0, cut_names = 0;
};

// The tables keyed by a process: .kernels, .devices, .generic.
void read_process_table(ShimOutput& o, const std::string& ext, const fs::path& path, int64_t pid) {
  std::vector<std::string> w;
  if (ext == ".kernels") {
    KernelTable& t = o.kernels[pid];
    o.tables.each_line(path, [&](const std::string& line) -> std::string {
      if (!split_words(line, 2, w)) return "not 'HANDLE NAME'";
      const auto handle = parse_uint64(w[0], 16);
      if (!handle) return "handle " + shown_word(w[0]) + " is not a hex number";
      t[*handle] = capped_name(w[1], o.cut_names);
      return "";
    });
  } else if (ext == ".devices") {
    auto& ids = o.bus_ids[pid];
    o.tables.each_line(path, [&](const std::string& line) -> std::string {
      if (!split_words(line, 2, w)) return "not 'ORDINAL PCI_BUS_ID'";
      const auto device = parse_int64(w[0]);
      if (!device || *device < 0 || *device >= kRecordDevice) return "device " + shown_word(w[0]) + " is not an ordinal";
      const std::string id = normalize_pci_bus_id(w[1]);
      if (id.empty()) return "bus id " + shown_word(w[1]) + " is not domain:bus:device.function";
      ids[*device] = id;
      return "";
    });
  } else if (ext == ".generic") {
    auto& names = o.generic_names[pid];
    o.tables.each_line(path, [&](const std::string& line) -> std::string {
      if (!split_words(line, 3, w)) return "not 'SLOT LAYER NAME'";
      const auto slot = parse_uint64(w[0]);
      if (!slot) return "slot " + shown_word(w[0]) + " is not a number";
      names[*slot] = {w[1] == "runtime" ? layer::kRuntime : layer::kDriver, capped_name(w[2], o.cut_names)};
      return "";
    });
  }
}

// The tables of the whole run: .callers, .uncovered, .resolved.
void read_run_table(ShimOutput& o, const std::string& ext, const fs::path& path) {
  std::vector<std::string> w;
  std::string rest;
  if (ext == ".callers") {
    o.tables.each_line(path, [&](const std::string& line) -> std::string {
      if (!split_words(line, 1, w, &rest)) return "not 'COUNT OBJECT'";
      const auto n = parse_int64(w[0]);
      if (!n || *n < 0) return "count " + shown_word(w[0]) + " is not a number";
      o.own_lookups[rest] += *n;
      return "";
    });
  } else if (ext == ".uncovered") {
    o.tables.each_line(path, [&](const std::string& line) -> std::string {
      if (split_words(line, 3, w, &rest) && w[0] == "export") {
        o.uncovered[rest].insert(w[2]);
      } else if (split_words(line, 2, w, &rest) && w[0] == "import") {
        o.uncovered_imports[rest].insert(w[1]);
      } else {
        return "not 'export LAYER NAME LIBRARY' nor 'import NAME OBJECT'";
      }
      return "";
    });
  } else if (ext == ".resolved") {
    o.tables.each_line(path, [&](const std::string& line) -> std::string {
      // 0 not hooked, 1 hooked with arguments, 2 hooked generically (no arguments)
      if (!split_words(line, 2, w)) return "not 'HOW NAME'";
      if (w[0] == "1") ++o.decoded;
      else if (w[0] == "2") ++o.generic;
      else if (w[0] == "0") {
        ++o.unhooked;
        o.unhooked_names.push_back(w[1]);
      } else {
        return "'" + shown(w[0], 64) + "' is not 0, 1 or 2";
      }
      return "";
    });
  }
}

ShimOutput read_shim_output(const fs::path& dir) {
  static const std::regex bin_name(R"(preload\.(\d+)\.(\d+)\.bin)");
  ShimOutput o;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("preload.", 0) != 0) continue;
    const std::string ext = entry.path().extension().string();
    std::smatch m;
    if (std::regex_match(name, m, bin_name)) {
      const auto pid = parse_int64(m[1].str()), tid = parse_int64(m[2].str());
      if (!pid || !tid) {
        ++o.bad_names;
        o.tables.example(name + ": the pid or thread id in the file name is out of range: not read");
        continue;
      }
      o.files[{*pid, *tid}] = entry.path();
    } else if (ext == ".kernels" || ext == ".devices" || ext == ".generic") {
      // The pid in a table's name "preload.<pid>.<kind>": a name the program made up whose
      // number does not parse is that file's loss, not the run's.
      const size_t dot = name.find('.', 8);
      const auto pid = dot == std::string::npos ? std::nullopt : parse_int64(std::string_view(name).substr(8, dot - 8));
      if (!pid) {
        ++o.bad_names;
        o.tables.example(name + ": the pid in the file name is not a number: not read");
        continue;
      }
      read_process_table(o, ext, entry.path(), *pid);
    } else {
      read_run_table(o, ext, entry.path());
    }
  }
  return o;
}

// Pass 1: each file's calibration points (one per 8192 records the shim buffers) and each
// process's average TSC rate (for a file cut short, whose last records have no calibration
// point after them). The traced program wrote these files: read never through a link,
// regular files only, and no more than the run's bound in all (a sparse or runaway file
// cannot exhaust the harness's disk or time); what lies past the bound is counted as loss,
// never read.
struct Calibrations {
  std::map<ThreadKey, std::vector<std::pair<uint64_t, Calibration>>> points_of;
  std::map<ThreadKey, uint64_t> take_of;                                // records read of each file
  std::map<int64_t, std::pair<Calibration, Calibration>> process_span;  // pid -> (first, last)
  int64_t over_bound = 0, unreadable = 0;
};

Calibrations calibrate(const std::map<ThreadKey, fs::path>& files, uint64_t max_bytes) {
  Calibrations c;
  uint64_t budget = max_bytes / sizeof(Record);
  for (const auto& [key, path] : files) {
    RecordFile file(path, budget);
    if (!file.is_open()) {
      ++c.unreadable;
      continue;
    }
    const uint64_t take = std::min(file.records_in_file(), budget);
    c.over_bound += int64_t(file.records_in_file() - take);
    budget -= take;
    c.take_of[key] = take;
    auto& points = c.points_of[key];
    uint64_t index = 0;
    for (const std::vector<Record>* slice = &file.next(); !slice->empty(); slice = &file.next())
      for (const Record& r : *slice) {
        if (const auto p = calibration_of(r)) {
          points.push_back({index, *p});
          auto [it, fresh] = c.process_span.try_emplace(key.first, *p, *p);
          if (p->tsc < it->second.first.tsc) it->second.first = *p;
          if (p->tsc > it->second.second.tsc) it->second.second = *p;
        }
        ++index;
      }
  }
  return c;
}

struct ConvertCounts {
  int64_t records = 0, driver_records = 0, runtime_generic = 0, dropped = 0, missing = 0, unterminated = 0, bad = 0,
          untimed = 0;
};

// Pass 2: records to events, one thread file at a time, in slices. One event is reused for
// every record, the table's layers and names are strings made once, and a process's tables
// are looked up once per file: at 10^8 records, a strlen, an allocation or a map lookup per
// record is most of the conversion's time.
class RecordConverter {
 public:
  RecordConverter(const ShimOutput& shim, const Calibrations& cal, EventStoreWriter& out)
      : shim_(shim), cal_(cal), out_(out), table_(call_table()) {
    for (const auto& h : table_) table_names_.emplace_back(h.layer, h.name);
  }
  void convert_file(const ThreadKey& key, const fs::path& path);
  ConvertCounts counts;

 private:
  using Points = std::vector<std::pair<uint64_t, Calibration>>;
  // The tables of the process whose file is converted.
  struct Process {
    const KernelTable* kernels = nullptr;
    const std::map<int64_t, std::string>* bus_ids = nullptr;
    const std::map<uint64_t, std::pair<std::string, std::string>>* generic_names = nullptr;
    const std::pair<Calibration, Calibration>* span = nullptr;  // its first and last calibration
  };
  template <class Map>
  static const typename Map::mapped_type* in(const Map& m, int64_t pid) {
    const auto it = m.find(pid);
    return it == m.end() ? nullptr : &it->second;
  }
  bool name_and_args(const Record& r);  // false: not a call record
  void time(const Record& r, const Points& points, size_t next_point);

  const ShimOutput& shim_;
  const Calibrations& cal_;
  EventStoreWriter& out_;
  const std::vector<CallInfo>& table_;
  std::vector<std::pair<std::string, std::string>> table_names_;
  const KernelTable no_kernels_;
  Process process_;
  Event e_;
  PackedArgs packed_;  // a decoded call's args, packed without a JSON object
  bool with_packed_ = false;
};

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
void RecordConverter::time(const Record& r, const Points& points, size_t next_point) {
  const Calibration* before = next_point > 0 ? &points[next_point - 1].second : nullptr;
  const Calibration* after = next_point < points.size() ? &points[next_point].second : nullptr;
  const auto* span = process_.span;
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

void RecordConverter::convert_file(const ThreadKey& key, const fs::path& path) {
  const auto take = cal_.take_of.find(key);
  if (take == cal_.take_of.end()) return;  // unreadable: counted by calibrate()
  const auto [pid, tid] = key;
  process_ = {in(shim_.kernels, pid), in(shim_.bus_ids, pid), in(shim_.generic_names, pid), in(cal_.process_span, pid)};
  static const Points none;
  const auto p = cal_.points_of.find(key);
  const Points& points = p != cal_.points_of.end() ? p->second : none;
  size_t next_point = 0;  // first calibration point after the current record
  bool terminated = false;
  int64_t in_file = 0, announced_here = 0, dropped_here = 0;
  RecordFile file(path, take->second);
  uint64_t index = 0;
  for (const std::vector<Record>* slice = &file.next(); !slice->empty(); slice = &file.next())
    for (const Record& r : *slice) {
      const uint64_t at = index++;
      while (next_point < points.size() && points[next_point].first <= at) ++next_point;
      if (r.hook == kCalibration) continue;
      if (r.hook == 0 && r.ts == 0 && r.dur == 0) {  // a hole (a sparse or zeroed file): no record has ts 0
        ++counts.bad;
        continue;
      }
      if (r.hook == kTrailer) {
        if (r.a[2] != kMagic) {
          ++counts.bad;
          continue;
        }
        announced_here += int64_t(r.a[0]);
        dropped_here += int64_t(r.a[1]);
        terminated = true;
        continue;
      }
      terminated = false;  // a later segment (after an exec that failed, or a flush) must close again
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
        continue;
      }
      time(r, points, next_point);
      e_.pid = pid;
      e_.tid = tid;
      if (with_packed_) out_.write(e_, packed_);
      else out_.write(e_);
      ++in_file;
      counts.driver_records += e_.layer == layer::kDriver;
    }
  counts.records += in_file;
  counts.dropped += dropped_here;
  // Per file: a file cut short cannot vouch for its count, nor hide another's shortfall.
  if (terminated)
    counts.missing += std::max<int64_t>(0, announced_here - dropped_here - in_file);
  else
    ++counts.unterminated;
}

// Every record the shim made is either in the store or counted as dropped; anything else
// is loss we can only detect: a shortfall against the trailers, or a file with no trailer.
void fill_loss_and_notes(TracerReport& report, ShimOutput& shim, const Calibrations& cal, const ConvertCounts& n,
                         uint64_t max_bytes) {
  const TableReading& tables = shim.tables;
  report.loss = {{"dropped", n.dropped},
                 {"missing", n.missing},
                 {"unterminated_files", n.unterminated},
                 {"corrupt_records", n.bad},
                 {"over_bound_records", cal.over_bound},
                 {"unreadable_files", cal.unreadable + tables.refused + shim.bad_names},
                 {"malformed_table_lines", tables.malformed + tables.cut_lines},
                 {"over_bound_table_bytes", tables.over_bound_bytes},
                 {"over_bound_table_entries", tables.over_bound_entries},
                 {"names_cut", shim.cut_names}};
  std::sort(shim.unhooked_names.begin(), shim.unhooked_names.end());
  report.notes = {{"records", n.records},
                  {"driver_records", n.driver_records},
                  {"thread_files", shim.files.size()},
                  {"driver_entry_points_resolved", shim.decoded + shim.generic + shim.unhooked},
                  {"driver_entry_points_hooked", shim.decoded + shim.generic},
                  {"driver_entry_points_with_arguments", shim.decoded},
                  {"driver_entry_points_not_hooked", shim.unhooked_names},
                  {"runtime_records_without_arguments", n.runtime_generic},
                  {"untimed_records", n.untimed}};
  // Set after the notes above (which replace the object): the bound and the reason, said.
  if (cal.over_bound)
    report.notes["over_bound"] = "the shim's files held more than the run's bound of " + std::to_string(max_bytes >> 20) +
                                 " MiB (--max-trace-bytes): the records past that were not read (counted in "
                                 "over_bound_records)";
  if (tables.over_bound_entries)
    report.notes["over_bound_table_entries"] = "the shim's tables held more than " +
                                               std::to_string(kMaxTableEntries) +
                                               " entries: the lines past that were not read";
  if (shim.cut_names)
    report.notes["names_cut"] = std::to_string(shim.cut_names) +
                                " kernel or function name(s) in the shim's tables were longer than " +
                                std::to_string(kMaxNameBytes) + " bytes: cut there, with the cut said in the name";
  if (!tables.examples.empty()) report.notes["table_problems"] = tables.examples;
}

// What the tables say of cudarts inside other objects and of calls that bind past the shim.
void fill_linkage_notes(TracerReport& report, const ShimOutput& shim) {
  // An object other than libcudart.so that asks cuGetProcAddress for driver entry points
  // carries a cudart of its own (static, or hidden inside a library as cuBLAS does): its
  // runtime calls never pass through an export the shim can replace. Its driver calls do.
  nlohmann::json own_runtime = nlohmann::json::array();
  for (const auto& [object, n] : shim.own_lookups) {
    const std::string file = fs::path(object).filename().string();
    if (file.rfind("libcudart.so", 0) == 0) continue;
    own_runtime.push_back({{"object", object}, {"driver_entry_points_resolved", n}});
  }
  if (!own_runtime.empty()) report.notes["runtime_linked_into"] = own_runtime;
  if (!shim.uncovered.empty()) {
    nlohmann::json u = nlohmann::json::object();
    for (const auto& [library, names] : shim.uncovered) u[library] = names;
    report.notes["exports_not_covered"] = u;  // a newer cudart or driver than the shim was built against
  }
  if (!shim.uncovered_imports.empty()) {
    nlohmann::json u = nlohmann::json::object();
    for (const auto& [object, names] : shim.uncovered_imports) u[object] = names;
    report.notes["uncovered_calls_linked_by"] = u;  // calls that bind past the shim, unrecorded
  }
}

}  // namespace

TracerReport convert_preload_output(const fs::path& dir, const fs::path& events_file, uint64_t max_bytes) {
  ShimOutput shim = read_shim_output(dir);
  const Calibrations cal = calibrate(shim.files, max_bytes);
  EventStoreWriter out(events_file);
  RecordConverter convert(shim, cal, out);
  for (const auto& [key, path] : shim.files) convert.convert_file(key, path);
  out.close();
  TracerReport report;
  fill_loss_and_notes(report, shim, cal, convert.counts, max_bytes);
  fill_linkage_notes(report, shim);
  return report;
}

}  // namespace cudatrace
