#pragma once
// Turns strace's output into syscall events. Expects the format the strace method asks
// for: `strace -f -y -X raw --absolute-timestamps=unix,ns --syscall-times=ns`, i.e.
//   TID  SECONDS.NANOS name(args) = ret <SECONDS.NANOS>
// with <unfinished ...> / <... name resumed> pairs interleaved across threads, signal
// lines (--- SIG... ---) and exit lines (+++ ... +++).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/event.h"

namespace cudatrace {

struct StraceStats {
  int64_t lines = 0;
  int64_t syscalls = 0;
  int64_t signals = 0;
  int64_t unparsed = 0;           // lines in no known shape (kept count, and the first few)
  int64_t unfinished_at_end = 0;  // entered, never returned (killed, or still blocked at exit)
  int64_t orphan_resumed = 0;     // a "resumed" with no matching start
  std::vector<std::string> unparsed_examples;
};

class StraceParser {
 public:
  // `realtime_minus_monotonic_ns`: strace stamps CLOCK_REALTIME; events carry CLOCK_MONOTONIC.
  explicit StraceParser(int64_t realtime_minus_monotonic_ns) : offset_(realtime_minus_monotonic_ns) {}

  void feed(const std::string& line);
  // Flushes calls that never returned (without ret/dur) and returns every event, in the
  // order strace printed their entries.
  std::vector<Event> finish();
  const StraceStats& stats() const { return stats_; }

 private:
  struct Pending {
    size_t index;  // into events_
    std::string args_head;
  };
  void complete(Event& e, const std::string& args, const std::string& tail);
  int64_t tgid_of(int64_t tid);
  void note_clone(int64_t parent_tid, const Event& e, const std::string& args);

  int64_t offset_;
  std::vector<Event> events_;
  std::map<int64_t, Pending> pending_;  // by tid
  std::map<int64_t, int64_t> tgid_;     // tid -> thread group
  StraceStats stats_;
};

}  // namespace cudatrace
