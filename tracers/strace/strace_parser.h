#pragma once
// Turns strace's output into syscall events. Expects the format the strace method asks
// for: `strace -f -y -X raw --absolute-timestamps=unix,ns --syscall-times=ns`, i.e.
//   TID  SECONDS.NANOS name(args) = ret <SECONDS.NANOS>
// with <unfinished ...> / <... name resumed> pairs interleaved across threads, signal
// lines (--- SIG... ---) and exit lines (+++ ... +++).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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
  int64_t process_unknown = 0;    // events of a thread whose clone never returned in time: pid = tid
  std::vector<std::string> unparsed_examples;
};

// Events go out as calls complete, each thread's in the order it made them (a thread has
// one call open at a time). A thread's process is known once the clone that made it
// returned, which strace may print after the thread's own first calls: those wait, at most
// `max_waiting` events, and past that go out as a process of their own (counted).
class StraceParser {
 public:
  using Sink = std::function<void(Event&&)>;
  // `realtime_minus_monotonic_ns`: strace stamps CLOCK_REALTIME; events carry CLOCK_MONOTONIC.
  StraceParser(int64_t realtime_minus_monotonic_ns, Sink sink, size_t max_waiting = size_t(1) << 16)
      : offset_(realtime_minus_monotonic_ns), sink_(std::move(sink)), max_waiting_(max_waiting) {}

  void feed(const std::string& line);
  // Sends calls that never returned (without ret/dur) and the events still waiting.
  void finish();
  const StraceStats& stats() const { return stats_; }

 private:
  struct Pending {
    Event event;
    std::string args_head;
  };
  void complete(Event& e, const std::string& args, const std::string& tail);
  int64_t tgid_of(int64_t tid);
  void complete_and_emit(Event&& e, const std::string& args, const std::string& tail);
  void note_clone(int64_t parent_tid, const std::string& name, std::optional<int64_t> ret, const std::string& args);
  void emit(Event&& e);
  void release(int64_t tid);

  int64_t offset_;
  Sink sink_;
  size_t max_waiting_;
  int64_t first_tid_ = 0;                 // the program's first process: made by no clone we see
  std::map<int64_t, Pending> pending_;    // by tid
  std::map<int64_t, int64_t> tgid_;       // tid -> thread group
  std::map<int64_t, std::vector<Event>> waiting_;  // by tid: its clone has not returned yet
  size_t waiting_total_ = 0;
  StraceStats stats_;
};

}  // namespace cudatrace
