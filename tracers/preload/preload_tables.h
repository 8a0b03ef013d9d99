#pragma once
// Method `preload`: the shim's per-process text tables (kernel names, devices, run-time
// slots, who looks up driver entry points, what the shim does not cover), read with bounds:
// the traced program wrote them. Read once at the end of a run for the report, and again as
// they grow while the run is converted live (preload_conversion.h).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/bounded_lines.h"
#include "tracers/call_args.h"

namespace cudatrace::preload {

using ThreadKey = std::pair<int64_t, int64_t>;  // (pid, tid)

// Bounds of the shim's per-process text tables: the program wrote them, so each is read
// with bounds (a run's real ones are kilobytes; the kernel table is appended to as a long
// job names new kernels): this much of one file, this much of all of a run's, and this many
// entries kept in all (what a line costs in memory, past its bytes). The byte bounds grow
// with the run's own bound (which comes from the free space under --out): a 64th of it per
// file, twice that in all, never less than these. What lies past a bound is counted as loss
// (over_bound_table_bytes), never read.
inline constexpr uint64_t kMaxTableBytes = uint64_t(16) << 20;
inline constexpr uint64_t kMaxTablesBytes = uint64_t(32) << 20;
inline uint64_t table_bytes_bound(uint64_t run_bytes) { return std::max(kMaxTableBytes, run_bytes / 64); }
inline constexpr int64_t kMaxTableEntries = int64_t(1) << 18;
// A name from a table is copied into every record that names it (a kernel's launches): one
// name of 64 KiB times 40,000 launches made gigabytes. Real names, long C++ templates
// included, stay under this; a longer one is cut, the cut said in it and counted.
inline constexpr size_t kMaxNameBytes = size_t(16) << 10;

// Reading the tables of one run: the shared bounds, and what went wrong, line by line.
struct TableReading {
  // `run_bytes`: the run's bound on what the program wrote (0: the fixed floors alone).
  explicit TableReading(uint64_t run_bytes = 0)
      : per_file(table_bytes_bound(run_bytes)), budget(std::max(kMaxTablesBytes, 2 * per_file)) {}
  uint64_t per_file;
  ReadBudget budget;
  int64_t entries = 0;
  int64_t malformed = 0, cut_lines = 0, over_bound_bytes = 0, over_bound_entries = 0, refused = 0;
  std::vector<std::string> examples;  // "<file> line N: <why>", the first few

  void example(const std::string& what);
  // Calls `parse` on each line of `path` (its name, its text); `parse` returns "" when the
  // line was taken, else why it was not: that line is counted and the rest still read.
  template <typename Parse>
  void each_line(const std::filesystem::path& path, Parse parse);
};

using GenericNames = std::map<uint64_t, std::pair<std::string, std::string>>;  // slot -> (layer, name)

// What the shim left in the folder: each thread's record file, and what its tables say.
struct ShimOutput {
  std::map<ThreadKey, std::filesystem::path> files;
  std::map<int64_t, KernelNames> kernels;
  std::map<int64_t, std::map<int64_t, std::string>> bus_ids;  // pid -> device ordinal -> PCI bus id
  std::map<int64_t, GenericNames> generic_names;              // pid -> slot -> (layer, name)
  int64_t decoded = 0, generic = 0, unhooked = 0;
  std::vector<std::string> unhooked_names;
  std::map<std::string, int64_t> own_lookups;                      // object calling cuGetProcAddress -> entry points asked
  std::map<std::string, std::set<std::string>> uncovered;          // library -> exports the shim does not cover
  std::map<std::string, std::set<std::string>> uncovered_imports;  // object -> those of them it links to
  TableReading tables;
  int64_t bad_names = 0, cut_names = 0;
};

// Every preload.* file of `dir`: the record files listed, the tables read.
ShimOutput read_shim_output(const std::filesystem::path& dir, uint64_t run_bytes = 0);  // run_bytes: TableReading's
// One table keyed by a process (`ext`: .kernels, .devices or .generic) into `o`.
void read_process_table(ShimOutput& o, const std::string& ext, const std::filesystem::path& path, int64_t pid);
// "preload.<pid>.<tid>.bin": the thread it names, or false.
bool record_file_key(const std::string& name, ThreadKey& key, bool& bad);
// "preload.<pid>.<kind>": the pid a table names, or false.
bool table_pid(const std::string& name, int64_t& pid);

}  // namespace cudatrace::preload
