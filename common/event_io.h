#pragma once
// The one reader and writer of event streams (events.jsonl, ledger.jsonl).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/event.h"

namespace cudatrace {

// Throws EventFormatError naming what is wrong (missing field, wrong version, bad type).
Event event_from_json(const nlohmann::json& j);

struct EventFormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// JSON from outside (a file the program or a user could have written), parsed with its
// nesting bounded: past `max_depth` levels it throws EventFormatError ("nested deeper
// than N") before anything that deep is built. A value nested 200,000 levels deep would
// otherwise be copied and destroyed recursively, once per level, and overflow the stack.
// Not JSON: json::parse_error, as json::parse throws it.
inline constexpr int kMaxJsonDepth = 64;
nlohmann::json parse_outside_json(const std::string& text, int max_depth = kMaxJsonDepth);
nlohmann::json parse_outside_json(std::istream& in, int max_depth = kMaxJsonDepth);

// Appends one line per event; the caller owns the FILE* lifetime via the writer.
class EventWriter {
 public:
  // Creates the file exclusively, never through a link (an existing file or a planted link
  // is an error, not a target); throws with the path and the reason.
  explicit EventWriter(const std::filesystem::path& path);
  EventWriter(int fd, const std::filesystem::path& path);  // writes to an fd opened by the caller
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;
  void write(const Event& e);
  // A JSON object already serialised (another JSON-lines format, e.g. OTLP's), newline added.
  void write_line(const std::string& json_line);
  // Flushes and reports a write error (disk full) instead of losing it; a failed write or
  // close removes the partial file.
  void close();
  size_t written() const { return written_; }

 private:
  [[noreturn]] void fail(int err);  // removes the partial file, throws with the reason
  FILE* f_ = nullptr;
  std::filesystem::path path_;
  size_t written_ = 0;
};

struct EventStream {
  std::vector<Event> meta;    // layer "meta" records, in file order
  std::vector<Event> events;  // everything else, in file order
};

// Reads a whole .jsonl file: never through a link, a regular file of at most max_bytes.
// Throws EventFormatError with "<path>:<line>: <reason>".
EventStream read_events(const std::filesystem::path& path, uint64_t max_bytes = UINT64_MAX);

}  // namespace cudatrace
