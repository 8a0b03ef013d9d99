// The shim's text tables, read with bounds (preload_tables.h says why).
#include "tracers/preload/preload_tables.h"

#include <optional>
#include <regex>

#include "common/device_id.h"
#include "common/event.h"
#include "common/outside_text.h"
#include "tracers/preload/preload_format.h"

namespace cudatrace::preload {

namespace fs = std::filesystem;

void TableReading::example(const std::string& what) {
  if (examples.size() < 8) examples.push_back(escape_invalid_utf8(what));
}

// Calls `parse` on each line of `path` (its name, its text); `parse` returns "" when the
// line was taken, else why it was not: that line is counted and the rest still read.
template <typename Parse>
void TableReading::each_line(const fs::path& path, Parse parse) {
  const std::string file = path.filename().string();
  BoundedLines in(path, per_file, &budget);
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
            std::to_string((std::string(in.bound_hit()) == "per file" ? per_file : budget.total) >> 20) +
            " MiB): not read");
  }
}

namespace {

std::string capped_name(const std::string& name, int64_t& cut) {
  if (name.size() <= kMaxNameBytes) return name;
  ++cut;
  size_t keep = kMaxNameBytes;
  while (keep > 0 && (uint8_t(name[keep]) & 0xC0) == 0x80) --keep;  // not inside a UTF-8 sequence
  return name.substr(0, keep) + "...[" + std::to_string(name.size() - keep) + " more bytes]";
}

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

}  // namespace

// The tables keyed by a process: .kernels, .devices, .generic.
void read_process_table(ShimOutput& o, const std::string& ext, const fs::path& path, int64_t pid) {
  std::vector<std::string> w;
  if (ext == ".kernels") {
    KernelNames& t = o.kernels[pid];
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

bool record_file_key(const std::string& name, ThreadKey& key, bool& bad) {
  static const std::regex bin_name(R"(preload\.(\d+)\.(\d+)\.bin)");
  std::smatch m;
  bad = false;
  if (!std::regex_match(name, m, bin_name)) return false;
  const auto pid = parse_int64(m[1].str()), tid = parse_int64(m[2].str());
  bad = !pid || !tid;
  if (bad) return false;
  key = {*pid, *tid};
  return true;
}

bool table_pid(const std::string& name, int64_t& pid) {
  // The pid in a table's name "preload.<pid>.<kind>": a name the program made up whose
  // number does not parse is that file's loss, not the run's.
  const size_t dot = name.find('.', 8);
  const auto p = dot == std::string::npos ? std::nullopt : parse_int64(std::string_view(name).substr(8, dot - 8));
  if (p) pid = *p;
  return bool(p);
}

ShimOutput read_shim_output(const fs::path& dir, uint64_t run_bytes) {
  ShimOutput o;
  o.tables = TableReading(run_bytes);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("preload.", 0) != 0) continue;
    const std::string ext = entry.path().extension().string();
    ThreadKey key;
    bool bad = false;
    int64_t pid = 0;
    if (record_file_key(name, key, bad)) {
      o.files[key] = entry.path();
    } else if (bad) {
      ++o.bad_names;
      o.tables.example(name + ": the pid or thread id in the file name is out of range: not read");
    } else if (ext == ".kernels" || ext == ".devices" || ext == ".generic") {
      if (!table_pid(name, pid)) {
        ++o.bad_names;
        o.tables.example(name + ": the pid in the file name is not a number: not read");
        continue;
      }
      read_process_table(o, ext, entry.path(), pid);
    } else {
      read_run_table(o, ext, entry.path());
    }
  }
  return o;
}

}  // namespace cudatrace::preload
