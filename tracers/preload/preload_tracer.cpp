#include "tracers/preload/preload_tracer.h"

#include "common/device_id.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <optional>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <tuple>
#include <sstream>

#include "common/bounded_lines.h"
#include "common/event_io.h"
#include "common/event_store.h"
#include "common/outside_text.h"
#include "common/untrusted_file.h"
#include "tracers/call_args.h"
#include "tracers/preload/preload_format.h"
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

}  // namespace

fs::path preload_shim_path(const fs::path& prefix) {
  return prefix / CUDATRACE_LIB_SUBDIR / "libcudatrace_preload.so";
}

void PreloadTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  preload_first(launch, shim_, "preload shim");
  cudart_ = target.cudart;
  spool_ = target.writable_dir.empty() ? run_dir : target.writable_dir;
  launch.env[kDirEnv] = spool_.string();
  if (!devices_) launch.env[kDevicesEnv] = "off";
}

TracerReport convert_preload_output(const fs::path& dir, const fs::path& events_file, uint64_t max_bytes) {
  TracerReport report;
  static const std::regex bin_name(R"(preload\.(\d+)\.(\d+)\.bin)");
  std::map<std::pair<int64_t, int64_t>, fs::path> files;  // (pid, tid) -> file
  std::map<int64_t, KernelTable> kernels;
  std::map<int64_t, std::map<int64_t, std::string>> bus_ids;  // pid -> device ordinal -> PCI bus id
  std::map<int64_t, std::map<uint64_t, std::pair<std::string, std::string>>> generic_names;  // pid -> slot -> (layer, name)
  int64_t decoded = 0, generic = 0, unhooked = 0, unreadable_tables = 0;
  std::vector<std::string> unhooked_names;
  std::map<std::string, int64_t> own_lookups;           // object calling cuGetProcAddress -> entry points asked
  std::map<std::string, std::set<std::string>> uncovered;  // library -> exports the shim does not cover
  std::map<std::string, std::set<std::string>> uncovered_imports;  // object -> those of them it links to
  TableReading tables;
  int64_t bad_names = 0, cut_names = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("preload.", 0) != 0) continue;
    std::smatch m;
    // The pid in a table's name "preload.<pid>.<kind>": a name the program made up whose
    // number does not parse is that file's loss, not the run's.
    const auto table_pid = [&]() -> std::optional<int64_t> {
      const size_t dot = name.find('.', 8);
      auto pid = dot == std::string::npos ? std::nullopt : parse_int64(std::string_view(name).substr(8, dot - 8));
      if (!pid) {
        ++bad_names;
        tables.example(name + ": the pid in the file name is not a number: not read");
      }
      return pid;
    };
    const std::string ext = entry.path().extension().string();
    if (std::regex_match(name, m, bin_name)) {
      const auto pid = parse_int64(m[1].str()), tid = parse_int64(m[2].str());
      if (!pid || !tid) {
        ++bad_names;
        tables.example(name + ": the pid or thread id in the file name is out of range: not read");
        continue;
      }
      files[{*pid, *tid}] = entry.path();
    } else if (ext == ".kernels") {
      const auto pid = table_pid();
      if (!pid) continue;
      KernelTable& t = kernels[*pid];
      std::vector<std::string> w;
      tables.each_line(entry.path(), [&](const std::string& line) -> std::string {
        if (!split_words(line, 2, w)) return "not 'HANDLE NAME'";
        const auto handle = parse_uint64(w[0], 16);
        if (!handle) return "handle " + shown_word(w[0]) + " is not a hex number";
        t[*handle] = capped_name(w[1], cut_names);
        return "";
      });
    } else if (ext == ".devices") {
      const auto pid = table_pid();
      if (!pid) continue;
      auto& ids = bus_ids[*pid];
      std::vector<std::string> w;
      tables.each_line(entry.path(), [&](const std::string& line) -> std::string {
        if (!split_words(line, 2, w)) return "not 'ORDINAL PCI_BUS_ID'";
        const auto device = parse_int64(w[0]);
        if (!device || *device < 0 || *device >= kRecordDevice) return "device " + shown_word(w[0]) + " is not an ordinal";
        const std::string id = normalize_pci_bus_id(w[1]);
        if (id.empty()) return "bus id " + shown_word(w[1]) + " is not domain:bus:device.function";
        ids[*device] = id;
        return "";
      });
    } else if (ext == ".generic") {
      const auto pid = table_pid();
      if (!pid) continue;
      auto& names = generic_names[*pid];
      std::vector<std::string> w;
      tables.each_line(entry.path(), [&](const std::string& line) -> std::string {
        if (!split_words(line, 3, w)) return "not 'SLOT LAYER NAME'";
        const auto slot = parse_uint64(w[0]);
        if (!slot) return "slot " + shown_word(w[0]) + " is not a number";
        names[*slot] = {w[1] == "runtime" ? layer::kRuntime : layer::kDriver, capped_name(w[2], cut_names)};
        return "";
      });
    } else if (ext == ".callers") {
      std::vector<std::string> w;
      std::string object;
      tables.each_line(entry.path(), [&](const std::string& line) -> std::string {
        if (!split_words(line, 1, w, &object)) return "not 'COUNT OBJECT'";
        const auto n = parse_int64(w[0]);
        if (!n || *n < 0) return "count " + shown_word(w[0]) + " is not a number";
        own_lookups[object] += *n;
        return "";
      });
    } else if (ext == ".uncovered") {
      std::vector<std::string> w;
      std::string rest;
      tables.each_line(entry.path(), [&](const std::string& line) -> std::string {
        if (split_words(line, 3, w, &rest) && w[0] == "export") {
          uncovered[rest].insert(w[2]);
        } else if (split_words(line, 2, w, &rest) && w[0] == "import") {
          uncovered_imports[rest].insert(w[1]);
        } else {
          return "not 'export LAYER NAME LIBRARY' nor 'import NAME OBJECT'";
        }
        return "";
      });
    } else if (ext == ".resolved") {
      std::vector<std::string> w;
      tables.each_line(entry.path(), [&](const std::string& line) -> std::string {
        // 0 not hooked, 1 hooked with arguments, 2 hooked generically (no arguments)
        if (!split_words(line, 2, w)) return "not 'HOW NAME'";
        if (w[0] == "1") ++decoded;
        else if (w[0] == "2") ++generic;
        else if (w[0] == "0") {
          ++unhooked;
          unhooked_names.push_back(w[1]);
        } else {
          return "'" + shown(w[0], 64) + "' is not 0, 1 or 2";
        }
        return "";
      });
    }
  }
  unreadable_tables = tables.refused + bad_names;

  // Pass 1: each file's calibration points (one per 8192 records the shim buffers) and each
  // process's average TSC rate (for a file cut short, whose last records have no
  // calibration point after them). Pass 2 converts, slice by slice: no file is held whole.
  // The traced program wrote these files: read never through a link, regular files only,
  // and no more than the run's bound in all (a sparse or runaway file cannot exhaust the
  // harness's disk or time); what lies past the bound is counted as loss, never read.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<uint64_t, Calibration>>> points_of;
  std::map<std::pair<int64_t, int64_t>, uint64_t> take_of;  // records read of each file
  std::map<int64_t, std::pair<Calibration, Calibration>> process_span;  // pid -> (first, last)
  int64_t over_bound = 0, unreadable = 0;
  uint64_t budget = max_bytes / sizeof(Record);
  for (const auto& [key, path] : files) {
    RecordFile file(path, budget);
    if (!file.is_open()) {
      ++unreadable;
      continue;
    }
    const uint64_t take = std::min(file.records_in_file(), budget);
    over_bound += int64_t(file.records_in_file() - take);
    budget -= take;
    take_of[key] = take;
    auto& points = points_of[key];
    uint64_t index = 0;
    for (const std::vector<Record>* slice = &file.next(); !slice->empty(); slice = &file.next())
      for (const Record& r : *slice) {
        if (const auto c = calibration_of(r)) {
          points.push_back({index, *c});
          auto [it, fresh] = process_span.try_emplace(key.first, *c, *c);
          if (c->tsc < it->second.first.tsc) it->second.first = *c;
          if (c->tsc > it->second.second.tsc) it->second.second = *c;
        }
        ++index;
      }
  }

  EventStoreWriter out(events_file);
  int64_t records = 0, driver_records = 0, runtime_generic = 0, dropped = 0, missing = 0, unterminated = 0, bad = 0, untimed = 0;
  const auto& table = call_table();
  // The table's layers and names as strings, and one event reused for every record: at 10^8
  // records, a strlen and an allocation per field are most of the conversion's time.
  std::vector<std::pair<std::string, std::string>> table_names;
  for (const auto& h : table) table_names.emplace_back(h.layer, h.name);
  Event e;
  PackedArgs packed;  // a decoded call's args, packed without a JSON object
  bool with_packed = false;
  for (const auto& [key, path] : files) {
    if (!take_of.count(key)) continue;  // unreadable: counted above
    const auto [pid, tid] = key;
    const auto& points = points_of[key];
    const auto span = process_span.find(pid);
    size_t next_point = 0;  // first calibration point after the current record
    bool terminated = false;
    int64_t in_file = 0, announced_here = 0, dropped_here = 0;
    RecordFile file(path, take_of[key]);
    uint64_t index = 0;
    for (const std::vector<Record>* slice = &file.next(); !slice->empty(); slice = &file.next())
    for (const Record& r : *slice) {
      const uint64_t at = index++;
      while (next_point < points.size() && points[next_point].first <= at) ++next_point;
      if (r.hook == kCalibration) continue;
      if (r.hook == 0 && r.ts == 0 && r.dur == 0) {  // a hole (a sparse or zeroed file): no record has ts 0
        ++bad;
        continue;
      }
      if (r.hook == kTrailer) {
        if (r.a[2] != kMagic) {
          ++bad;
          continue;
        }
        announced_here += int64_t(r.a[0]);
        dropped_here += int64_t(r.a[1]);
        terminated = true;
        continue;
      }
      terminated = false;  // a later segment (after an exec that failed, or a flush) must close again
      with_packed = false;
      e.ret = r.ret;
      e.ts = 0;
      e.dur.reset();
      e.device.reset();
      e.device_id.clear();
      if (!e.args.is_null()) e.args = nullptr;
      if (r.flags & kRecordDevice) {
        e.device = int64_t(r.flags & ~kRecordDevice);
        if (auto p = bus_ids.find(pid); p != bus_ids.end())
          if (auto id = p->second.find(*e.device); id != p->second.end()) e.device_id = id->second;
      }
      if (r.hook >= kGenericBase) {  // an entry point recorded without its arguments
        const int slot = r.hook - kGenericBase;
        const ExportInfo* x = export_of_slot(slot);
        if (x) {
          e.layer = x->runtime ? layer::kRuntime : layer::kDriver;
          e.name = x->name;
        } else if (auto it = generic_names[pid].find(uint64_t(slot)); it != generic_names[pid].end()) {
          std::tie(e.layer, e.name) = it->second;
          x = find_export(e.name);
        } else {  // a slot no table names: still a record, never dropped
          e.layer = layer::kDriver;
          e.name = "cu?generic" + std::to_string(slot);
        }
        // The forwarder records rax whatever the function returns: only a code is a result.
        if (!(slot_flags(x) & kReturnsCode)) e.ret = 0;
        runtime_generic += e.layer == layer::kRuntime;
      } else if (r.hook < table.size()) {
        const CallInfo& h = table[r.hook];
        e.layer = table_names[r.hook].first;
        e.name = table_names[r.hook].second;
        pack_args(h, r.a, kernels[pid], packed);
        with_packed = true;
      } else {
        ++bad;
        continue;
      }
      // Ticks to CLOCK_MONOTONIC: between the calibration points around the record, or
      // (file cut short) from the last one at the process's average rate.
      const Calibration* before = next_point > 0 ? &points[next_point - 1].second : nullptr;
      const Calibration* after = next_point < points.size() ? &points[next_point].second : nullptr;
      std::optional<double> rate;
      if (before && after && after->tsc > before->tsc)
        rate = double(after->mono - before->mono) / double(after->tsc - before->tsc);
      else if (span != process_span.end() && span->second.second.tsc > span->second.first.tsc)
        rate = double(span->second.second.mono - span->second.first.mono) /
               double(span->second.second.tsc - span->second.first.tsc);
      const Calibration* anchor = before ? before : after;
      if (rate && anchor) {
        e.ts = anchor->mono + int64_t(std::llround(double(r.ts - anchor->tsc) * *rate));
        e.dur = int64_t(std::llround(double(r.dur) * *rate));
      } else {
        ++untimed;  // no calibration at all: order is still known, time is not
      }
      e.pid = pid;
      e.tid = tid;
      if (with_packed) out.write(e, packed);
      else out.write(e);
      ++in_file;
      driver_records += e.layer == layer::kDriver;
    }
    records += in_file;
    dropped += dropped_here;
    // Per file: a file cut short cannot vouch for its count, nor hide another's shortfall.
    if (terminated)
      missing += std::max<int64_t>(0, announced_here - dropped_here - in_file);
    else
      ++unterminated;
  }
  out.close();

  // Every record the shim made is either here or counted as dropped; anything else is
  // loss we can only detect: a shortfall against the trailers, or a file with no trailer.
  report.loss = {{"dropped", dropped},
                 {"missing", missing},
                 {"unterminated_files", unterminated},
                 {"corrupt_records", bad},
                 {"over_bound_records", over_bound},
                 {"unreadable_files", unreadable + unreadable_tables},
                 {"malformed_table_lines", tables.malformed + tables.cut_lines},
                 {"over_bound_table_bytes", tables.over_bound_bytes},
                 {"over_bound_table_entries", tables.over_bound_entries},
                 {"names_cut", cut_names}};
  std::sort(unhooked_names.begin(), unhooked_names.end());
  report.notes = {{"records", records},
                  {"driver_records", driver_records},
                  {"thread_files", files.size()},
                  {"driver_entry_points_resolved", decoded + generic + unhooked},
                  {"driver_entry_points_hooked", decoded + generic},
                  {"driver_entry_points_with_arguments", decoded},
                  {"driver_entry_points_not_hooked", unhooked_names},
                  {"runtime_records_without_arguments", runtime_generic},
                  {"untimed_records", untimed}};
  // Set after the notes above (which replace the object): the bound and the reason, said.
  if (over_bound)
    report.notes["over_bound"] = "the shim's files held more than the run's bound of " + std::to_string(max_bytes >> 20) +
                                 " MiB (--max-trace-bytes): the records past that were not read (counted in "
                                 "over_bound_records)";
  if (tables.over_bound_entries)
    report.notes["over_bound_table_entries"] = "the shim's tables held more than " +
                                               std::to_string(kMaxTableEntries) +
                                               " entries: the lines past that were not read";
  if (cut_names)
    report.notes["names_cut"] = std::to_string(cut_names) + " kernel or function name(s) in the shim's tables were longer than " +
                                std::to_string(kMaxNameBytes) + " bytes: cut there, with the cut said in the name";
  if (!tables.examples.empty()) report.notes["table_problems"] = tables.examples;
  // An object other than libcudart.so that asks cuGetProcAddress for driver entry points
  // carries a cudart of its own (static, or hidden inside a library as cuBLAS does): its
  // runtime calls never pass through an export the shim can replace. Its driver calls do.
  nlohmann::json own_runtime = nlohmann::json::array();
  for (const auto& [object, n] : own_lookups) {
    const std::string file = fs::path(object).filename().string();
    if (file.rfind("libcudart.so", 0) == 0) continue;
    own_runtime.push_back({{"object", object}, {"driver_entry_points_resolved", n}});
  }
  if (!own_runtime.empty()) report.notes["runtime_linked_into"] = own_runtime;
  if (!uncovered.empty()) {
    nlohmann::json u = nlohmann::json::object();
    for (const auto& [library, names] : uncovered) u[library] = names;
    report.notes["exports_not_covered"] = u;  // a newer cudart or driver than the shim was built against
  }
  if (!uncovered_imports.empty()) {
    nlohmann::json u = nlohmann::json::object();
    for (const auto& [object, names] : uncovered_imports) u[object] = names;
    report.notes["uncovered_calls_linked_by"] = u;  // calls that bind past the shim, unrecorded
  }
  return report;
}

TracerReport PreloadTracer::finish(const fs::path& run_dir) {
  TracerReport report = convert_preload_output(spool_, run_dir / kEventsFile, max_bytes_);
  // The runtime layer from the linkage, as the benchmark is told it; the rest from the records.
  const TracerReport by_linkage = layers_without_events();
  report.layers = by_linkage.layers;
  report.unobserved.insert(by_linkage.unobserved.begin(), by_linkage.unobserved.end());
  // Without a driver, cudart never loads libcuda: no driver call can happen, so there is
  // nothing to score the driver layer on (rather than a 0% the tracer did not earn).
  if (report.notes["driver_entry_points_resolved"].get<int64_t>() > 0 || report.notes["driver_records"].get<int64_t>() > 0)
    report.layers.push_back(layer::kDriver);
  else
    report.unobserved[layer::kDriver] = "the program never reached libcuda.so.1 (no driver, or no driver call made)";
  if (report.unobserved.count(layer::kRuntime) == 0 && report.notes.contains("runtime_linked_into")) {
    std::string objects;
    for (const auto& o : report.notes["runtime_linked_into"])
      objects += (objects.empty() ? "" : ", ") + o["object"].get<std::string>();
    report.partly_unobserved[layer::kRuntime] =
        "runtime calls from " + objects + " not observable: a cudart linked into it asks cuGetProcAddress for its "
        "own driver entry points, so its calls never reach the libcudart.so exports the shim replaces (its driver "
        "calls are recorded)";
  }
  // Exports the shim lacks matter where an object is linked to call one of them: such a
  // call binds past the shim. (Looked up by dlsym or cuGetProcAddress, it is recorded.)
  if (report.notes.contains("uncovered_calls_linked_by")) {
    std::map<std::string, std::string> which;  // layer -> "object: names", ...
    for (const auto& [object, names] : report.notes["uncovered_calls_linked_by"].items())
      for (const auto& n : names) {
        const std::string name = n.get<std::string>();
        std::string& w = which[name.rfind("cuda", 0) == 0 ? layer::kRuntime : layer::kDriver];
        w += (w.empty() ? "" : ", ") + name + " (" + fs::path(object).filename().string() + ")";
      }
    for (const auto& [l, calls] : which)
      if (report.unobserved.count(l) == 0 && report.partly_unobserved.count(l) == 0)
        report.partly_unobserved[l] = "calls to " + calls +
                                      " are not recorded: the program links them, and the shim's CUDA toolkit is "
                                      "older than the library that exports them";
  }
  report.notes["shim"] = shim_.string();
  return report;
}

// Only the linkage is known without the records: the driver layer and the cudart copies
// inside libraries are judged from what the shim wrote.
TracerReport PreloadTracer::layers_without_events() {
  TracerReport report;
  if (cudart_ == "static")
    report.unobserved[layer::kRuntime] =
        "cudart is linked statically into the executable: its calls never reach the libcudart.so exports the shim "
        "replaces";
  else
    report.layers.push_back(layer::kRuntime);
  return report;
}

void PreloadTracer::abandon(const fs::path&) {
  for (const auto& entry : fs::directory_iterator(spool_))
    if (entry.path().filename().string().rfind("preload.", 0) == 0) fs::remove(entry.path());
}

}  // namespace cudatrace
