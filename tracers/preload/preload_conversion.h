#pragma once
// Method `preload`: the shim's output (preload_format.h) converted into the run's event
// store while the program runs, so that at its end only what the shim had not yet flushed
// is left to convert (a job of 10^8 calls took minutes after the program otherwise).
// poll() picks up new thread files and table lines and converts every record whose
// calibration point after it and table lines are known; finish(), once the program has
// ended, reads the tables and the rest of every file as the after-run conversion did and
// converts what is left. Run without poll(), it is that after-run conversion; with it, it
// makes the same events, counts and notes (tests/unit/preload_live_test.cpp), except where
// the program changed its output under the reader: a record file that shrank, was replaced
// or removed (loss: changed_files), a table entry that changed after it may have been used
// (notes.table_entries_changed_while_converting), records past the run's bound (the same
// number counted in over_bound_records; live, the first written are the ones kept).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/event_store.h"
#include "tracers/preload/preload_records.h"
#include "tracers/preload/preload_tables.h"
#include "tracers/tracer.h"

namespace cudatrace::preload {

// What the conversion counted besides the records' own counts (the report's inputs).
struct ConversionLoss {
  int64_t over_bound = 0, unreadable = 0, changed_files = 0, changed_entries = 0;
};

class PreloadConversion {
 public:
  // Reads `dir` (the shim's folder), at most `max_bytes` of record files in all; creates
  // `events_file` now (the harness's tap counts what is written to it).
  PreloadConversion(std::filesystem::path dir, const std::filesystem::path& events_file, uint64_t max_bytes);
  ~PreloadConversion();
  PreloadConversion(const PreloadConversion&) = delete;
  PreloadConversion& operator=(const PreloadConversion&) = delete;

  // The program runs: what it has written since the last poll, converted as far as it can be.
  void poll();
  // The program has ended: the rest, then the store closed and the report made.
  TracerReport finish();

  // Thread files followed while the program runs, at most (each holds a descriptor and a window).
  static constexpr size_t kMaxLiveFiles = 4096;

 private:
  void list_live();
  void refresh_table(const std::string& ext, const std::filesystem::path& path, int64_t pid);
  void read_live(ThreadFile& f);
  void settle_files(const ShimOutput& shim);

  std::filesystem::path dir_;
  uint64_t max_bytes_;
  uint64_t budget_;  // records that may still be read
  EventStoreWriter out_;
  RecordConverter convert_;
  std::map<ThreadKey, std::unique_ptr<ThreadFile>> files_;
  std::set<std::string> refused_;  // names not tried again while the program runs
  ShimOutput live_tables_;         // the tables as far as the program has written them
  std::map<std::filesystem::path, uint64_t> table_sizes_;
  std::map<int64_t, Span> spans_;
  ConversionLoss loss_;
};

// The report of a finished conversion: loss, notes, linkage (preload_convert.cpp).
TracerReport preload_report(ShimOutput& shim, const ConvertCounts& n, const ConversionLoss& c, uint64_t max_bytes);

}  // namespace cudatrace::preload
