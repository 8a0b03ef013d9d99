#pragma once
// The event store: how a run's events are kept on disk, written once and read in order
// without ever holding them all (a real job makes 10^7 to 10^8 calls).
//
// Format (schema/README.md, "events.msgpack.zst"): a zstd stream of MessagePack values,
// both formats with well-kept libraries in Debian (libzstd, python3-zstandard,
// python3-msgpack), so that any script can read it without this project's code:
//   1. a header map {"format": "cudatrace-events", "v": 1, "fields": [...]};
//   2. one array per event, its fields by position:
//      [layer, name, ts_delta, dur, pid, tid, ret, args, corr, device, device_id]
//      layer: a small integer (kStoreLayers' index) or, for any other layer, its name;
//      ts_delta: ts minus the previous event's ts (the first: minus 0), so that the
//      nanosecond clock costs a byte or two rather than nine; dur, ret, corr, device: nil
//      when absent; args: a map (empty for none); device_id: "" when unknown.
// What the writer is given is written as it is (bytes, not necessarily UTF-8); the reader
// takes nothing on trust: nesting, string and container sizes and the bytes it inflates
// are all bounded, and a damaged record is an error naming the record, never a crash.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "common/event.h"
#include "common/event_io.h"
#include "common/packed_args.h"

namespace cudatrace {

// The file every tracer writes in its run folder, and the one every reader opens.
inline constexpr const char* kEventsFile = "events.msgpack.zst";

// What sees every event written to one store file as it is written: the harness scores a
// run in the same pass that stores it, instead of reading the store back (a real job's
// 10^8 events, decompressed and decoded a second time, cost more than writing them).
class EventTap {
 public:
  virtual ~EventTap() = default;
  // Whether on_event() needs this event's args: a writer given args already packed
  // (PackedArgs) builds them as JSON only for an event whose args the tap reads.
  virtual bool wants_args(const Event& e) const {
    (void)e;
    return true;
  }
  virtual void on_event(const Event& e) = 0;
  // A tap that takes each event's args as the store holds them (packed_args.h) instead:
  // on_packed() is called in place of on_event(), `args_in_event` saying whether e.args
  // holds them too (written whole) or is empty (written packed).
  virtual bool wants_packed() const { return false; }
  virtual void on_packed(const Event& e, std::string_view packed_args, bool args_in_event) {
    (void)e, (void)packed_args, (void)args_in_event;
  }
  // The writer closed the file whole, `written` events in it. Not called when the writer
  // failed or was dropped unclosed: then the file, if any, is the truth, not the tap.
  virtual void on_closed(uint64_t written) = 0;
};

// While it lives, a writer that opens `path` hands its events to `tap` too (one tap at a time).
class ScopedEventTap {
 public:
  ScopedEventTap(const std::filesystem::path& path, EventTap& tap);
  ~ScopedEventTap();
  ScopedEventTap(const ScopedEventTap&) = delete;
  ScopedEventTap& operator=(const ScopedEventTap&) = delete;
};

// Appends events to a new store file; the same contract as EventWriter (exclusive create,
// never through a link, a failed write or close removes the partial file and throws).
class EventStoreWriter {
 public:
  // kSynced: close() returns once the file is on the disk (what a run keeps); kScratch: a
  // file that is read back and removed within the run (a sort's chunks) is not synced.
  enum class Durability { kSynced, kScratch };
  // Creates `path` exclusively, never through a link.
  explicit EventStoreWriter(const std::filesystem::path& path, int level = 1, Durability d = Durability::kSynced);
  // Writes to an fd the caller opened (so), named `path` in errors.
  EventStoreWriter(int fd, const std::filesystem::path& path, int level = 1, Durability d = Durability::kSynced);
  ~EventStoreWriter();
  EventStoreWriter(const EventStoreWriter&) = delete;
  EventStoreWriter& operator=(const EventStoreWriter&) = delete;
  void write(const Event& e);
  // The same, its args given packed (e.args is not read).
  void write(const Event& e, const PackedArgs& args);
  void close();
  // Ends the zstd frame after every `records` events (0: one frame for the whole file), so
  // that a reader can inflate and decode the frames on several threads (EventReadAhead).
  // The file stays one stream to any zstd reader, and each ts_delta still follows the event
  // before it, across frames: frames cost compression (each starts its window anew), so
  // only files read at volume (a workload's ledger) are cut.
  void end_frame_every(uint64_t records) { frame_records_ = records; }
  size_t written() const { return written_; }
  uint64_t bytes_out() const { return bytes_out_; }  // compressed bytes written so far

 private:
  void flush(bool end);
  void flush_if_full();
  size_t put_fields(const Event& e, const std::string_view* packed_args);
  std::string_view stored_args(size_t args_at) const;
  [[noreturn]] void fail(int err);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::filesystem::path path_;
  EventTap* tap_ = nullptr;
  bool durable_ = true;
  int64_t last_ts_ = 0;
  size_t args_end_ = 0;  // where the last event's args end in the buffer
  size_t written_ = 0;
  uint64_t bytes_out_ = 0;
  uint64_t frame_records_ = 0, in_frame_ = 0;
};

// Limits a reader of a file it does not trust applies (defaults: what no real record needs).
struct StoreLimits {
  uint64_t max_file_bytes = UINT64_MAX;        // compressed bytes read from the file
  uint64_t max_inflated_bytes = UINT64_MAX;    // bytes the file may inflate to (a zstd bomb)
  uint32_t max_depth = 16;                     // nesting of args
  uint32_t max_string = uint32_t(1) << 20;     // bytes of one string
  uint32_t max_items = uint32_t(1) << 16;      // entries of one array or map
};

// Reads events one at a time, in file order, from a store file or a JSON-lines file
// (events.jsonl, a ledger: told apart by their first bytes). Throws EventFormatError
// "<path>: record N: <why>" for a damaged record and "<path>: ..." for a file it cannot read.
class EventReader {
 public:
  explicit EventReader(const std::filesystem::path& path, const StoreLimits& limits = {});
  // A part of a store, its compressed bytes given through `read` (0: the part has ended):
  // one or more whole frames of a file that EventReadAhead splits. `named` in errors; its
  // first record numbered `records_before` + 1; the header expected only where
  // `with_header` (the file's first part). Each ts comes relative to the last event before
  // the part (its first record's ts_delta as it is): the caller adds that event's ts.
  // limits.max_file_bytes is the caller's to apply.
  using Read = std::function<size_t(char* into, size_t most)>;
  EventReader(Read read, const std::filesystem::path& named, const StoreLimits& limits, bool with_header,
              uint64_t records_before, int window_log_max = 27);
  ~EventReader();
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;
  // The next event (meta records included); false at the end.
  bool next(Event& e);
  // The same, but the args of every record other than meta come as the store holds them
  // (packed_args.h), checked against the bounds, and e.args is left empty: the scoring
  // reads 10^8 records, and building JSON for each was most of its time.
  bool next(Event& e, std::string* packed_args);
  // Events of the layers `of_layer` names come with empty args: a reader that only counts
  // calls steps over them (in a store, still checked against the bounds) instead of
  // building them. A JSON-lines file is parsed whole regardless.
  void skip_args(std::function<bool(const std::string& layer)> of_layer);
  uint64_t records() const { return records_; }
  bool is_store() const { return store_; }
  uint64_t inflated() const;  // bytes a store has inflated to so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::filesystem::path path_;
  bool store_ = false;
  uint64_t records_ = 0;
};

// Whether `path` begins as a store file does (zstd's magic number).
bool is_event_store(const std::filesystem::path& path);

// The run folder's events file: the store where there is one, else an older run's
// events.jsonl; the store's name when neither exists.
std::filesystem::path events_file_of(const std::filesystem::path& run_dir);

}  // namespace cudatrace
