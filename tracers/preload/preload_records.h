#pragma once
// Method `preload`: one thread's record file (preload_format.h) read and converted record by
// record, in the order the shim wrote it, by the same code whether the program still runs
// or has ended (preload_conversion.h). A record's time needs the calibration points around
// it (TSC ticks interpolated between them) and its name perhaps a table line: while the
// program runs, a record that lacks either waits (and the records after it, so each
// thread's events keep their order); once it has ended, what is still missing is settled
// as the after-run conversion always did (the process's average rate, a handle in hex).
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/event_store.h"
#include "tracers/call_args.h"
#include "tracers/preload/preload_format.h"
#include "tracers/preload/preload_tables.h"

namespace cudatrace::preload {

struct Calibration {
  int64_t tsc = 0, mono = 0;
};
using Span = std::pair<Calibration, Calibration>;  // a process's first and last calibration point

// The point a calibration record or a trailer carries, if it is one.
std::optional<Calibration> calibration_of(const Record& r);

// One thread's file: opened once (never through a link, a regular file of one link), read
// at offsets from that descriptor only, so a name the program points elsewhere later is
// not followed; what was read of it and what of that was converted.
class ThreadFile {
 public:
  static constexpr size_t kSlice = size_t(1) << 16;  // records read at once
  // Records read but not yet converted that a running program's file may hold in memory:
  // the shim writes a calibration point every 8192 records, so a window this long means a
  // record waits for a name; the file is then read no further until the program has ended.
  static constexpr size_t kMaxWindow = size_t(1) << 17;

  ThreadFile(ThreadKey key, std::filesystem::path path) : key(key), path(std::move(path)) {}
  ~ThreadFile();
  ThreadFile(const ThreadFile&) = delete;
  ThreadFile& operator=(const ThreadFile&) = delete;

  bool open();  // false: not readable (a link, not a regular file, a second hard link, gone)
  // Whether `path` still names the file opened (not replaced, removed or made a link).
  bool still_at_path() const;
  // Whole records in the file now; a file smaller than what was read is marked changed.
  uint64_t records_now();
  // Reads up to `n` records past those read, noting their calibration points (and widening
  // their process's span); held in the window when `hold`. Returns how many were read.
  uint64_t read(uint64_t n, bool hold, std::map<int64_t, Span>& spans);
  // Up to kSlice records from record `from` (never past `to`) into `out`.
  void read_at(uint64_t from, uint64_t to, std::vector<Record>& out);

  const ThreadKey key;
  const std::filesystem::path path;
  uint64_t read_count = 0;  // records read (their points noted)
  uint64_t done = 0;        // records converted or counted
  std::deque<Record> window;  // records [done, done + window.size()), held while the program runs
  std::vector<std::pair<uint64_t, Calibration>> points;  // (record index, point), in file order
  size_t next_point = 0;  // the first point after the record converted next
  bool changed = false;   // shrank, or its name no longer names it: counted, read no further
  // Per file: a file cut short cannot vouch for its count, nor hide another's shortfall.
  int64_t in_file = 0, announced = 0, dropped = 0;
  bool terminated = false;

 private:
  int fd_ = -1;
  uint64_t dev_ = 0, ino_ = 0;
};

struct ConvertCounts {
  int64_t records = 0, driver_records = 0, runtime_generic = 0, dropped = 0, missing = 0, unterminated = 0, bad = 0,
          untimed = 0;
};

// Records to events. One event is reused for every record, the table's layers and names are
// strings made once, and a process's tables are looked up once per batch: at 10^8 records,
// a strlen, an allocation or a map lookup per record is most of the conversion's time.
class RecordConverter {
 public:
  explicit RecordConverter(EventStoreWriter& out);
  // The tables records are named from (live: as far as the program has written them) and
  // each process's span; both must outlive the calls that use them.
  void use(const ShimOutput* tables, const std::map<int64_t, Span>* spans) {
    tables_ = tables;
    spans_ = spans;
  }
  // While the program runs: converts the file's window in order, up to the first record
  // that must wait (for the calibration point after it, or a table line).
  void convert_window(ThreadFile& f);
  // The program has ended: everything read of the file, nothing waits.
  void convert_rest(ThreadFile& f);
  // The file's loss, once it is converted.
  void close_file(const ThreadFile& f);
  ConvertCounts counts;

 private:
  // The tables of the process whose file is converted.
  struct Process {
    const KernelNames* kernels = nullptr;
    const std::map<int64_t, std::string>* bus_ids = nullptr;
    const GenericNames* generic_names = nullptr;
    const Span* span = nullptr;
  };
  void select(int64_t pid);
  bool ready(const Record& r, const ThreadFile& f) const;  // live: nothing it needs is missing
  bool one(const Record& r, uint64_t at, ThreadFile& f, bool live);  // false: it waits
  bool name_and_args(const Record& r);  // false: not a call record
  void time(const Record& r, const ThreadFile& f);

  EventStoreWriter& out_;
  const ShimOutput* tables_ = nullptr;
  const std::map<int64_t, Span>* spans_ = nullptr;
  const std::vector<CallInfo>& table_;
  std::vector<std::pair<std::string, std::string>> table_names_;
  std::vector<uint8_t> kernel_slots_;  // per hook: which argument slots name a kernel (bits)
  const KernelNames no_kernels_;
  Process process_;
  Event e_;
  PackedArgs packed_;  // a decoded call's args, packed without a JSON object
  bool with_packed_ = false;
  std::vector<Record> slice_;
};

}  // namespace cudatrace::preload
