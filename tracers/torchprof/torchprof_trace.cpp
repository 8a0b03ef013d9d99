#include "tracers/torchprof/torchprof_trace.h"

#include <cstring>
#include <optional>
#include <string_view>

#include "common/packed_args.h"
#include "tracers/torchprof/torchprof_events.h"
#include "tracers/torchprof/torchprof_input.h"
#include "tracers/torchprof/torchprof_json.h"

namespace cudatrace {

namespace {

// Below this many ns, a "ts" counts from the base, not from the epoch: relative times stay
// under three months (7.9e15 ns), unix times of this century are above 9.4e17 ns.
constexpr int64_t kRelativeBelowNs = int64_t(100'000'000'000'000'000);
constexpr int64_t kThreeMonthsNs = int64_t(7'889'238) * 1'000'000'000;

// A key against a literal, without a call to memcmp: an event's keys are compared many times.
template <size_t N>
bool is(std::string_view s, const char (&literal)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), literal, N - 1) == 0;
}

// The keys a conversion reads: of an event, of its args.
enum class Field {
  kOther, kPh, kCat, kName, kTs, kDur, kPid, kTid, kArgs,
  kCorrelation, kCbid, kExternalId, kDevice, kInDevice, kStream, kBytes, kGrid, kBlock
};

Field event_field(std::string_view k) {
  switch (k.size()) {
    case 2: return is(k, "ph") ? Field::kPh : is(k, "ts") ? Field::kTs : Field::kOther;
    case 3:
      return is(k, "cat") ? Field::kCat : is(k, "dur") ? Field::kDur : is(k, "pid") ? Field::kPid
             : is(k, "tid") ? Field::kTid : Field::kOther;
    case 4: return is(k, "name") ? Field::kName : is(k, "args") ? Field::kArgs : Field::kOther;
    default: return Field::kOther;
  }
}

Field args_field(std::string_view k) {
  switch (k.size()) {
    case 4: return is(k, "cbid") ? Field::kCbid : is(k, "grid") ? Field::kGrid : Field::kOther;
    case 5: return is(k, "bytes") ? Field::kBytes : is(k, "block") ? Field::kBlock : Field::kOther;
    case 6: return is(k, "device") ? Field::kDevice : is(k, "stream") ? Field::kStream : Field::kOther;
    case 8: return is(k, "inDevice") ? Field::kInDevice : Field::kOther;
    case 11: return is(k, "correlation") ? Field::kCorrelation : is(k, "External id") ? Field::kExternalId : Field::kOther;
    default: return Field::kOther;
  }
}


bool ours(const std::string& cat) {
  return is(cat, "cuda_runtime") || is(cat, "cuda_driver") || is(cat, "kernel") || is(cat, "gpu_memcpy") ||
         is(cat, "gpu_memset");
}

// The document's walk: the top-level object's members, traceEvents' elements, each event's
// fields; what none of them needs is passed over by the cursor.
class TraceReader {
 public:
  TraceReader(JsonCursor& json, const TraceClock& clock, const TraceLimits& limits, TraceReading& r,
              KinetoEvents& events)
      : j_(json), limits_(limits), r_(r), events_(events), base_(clock.base_ns), offset_(clock.realtime_minus_monotonic_ns) {}

  // Reads the top-level value; closed() once it ended.
  void document() {
    if (j_.peek() != '{') {
      // Not Kineto's object: an array is read to its end (it holds no events), a scalar
      // or anything else is not a trace.
      closed_ = j_.peek() == '[' && j_.skip();
      if (!closed_ && !j_.failed()) j_.fail("the top-level value is not an object");
      return;
    }
    j_.eat('{');
    if (j_.eat('}')) {
      closed_ = true;
      return;
    }
    for (bool more = true; more;) {
      if (!j_.key(top_key_) || !top_member() || !j_.next('}', more)) return;
    }
    closed_ = true;
  }
  bool closed() const { return closed_; }

 private:
  bool top_member() {
    const int c = j_.peek();
    if (c == '[' && is(top_key_, "traceEvents")) return events_array();
    if (c == '[' && (is(top_key_, "WARNING") || is(top_key_, "ERROR"))) return log_array();
    if (JsonCursor::starts_number(c) && is(top_key_, "baseTimeNanoseconds")) {
      JsonNumber n;
      if (!j_.number(n)) return false;
      if (n.kind == JsonNumber::Kind::kInt) base_in_file(n.integer);
      return true;
    }
    return j_.skip();
  }

  bool events_array() {
    j_.eat('[');
    r_.has_events = true;
    if (j_.eat(']')) return true;
    for (bool more = true; more;) {
      if (j_.peek() == '{') {
        if (!event()) return false;
      } else {
        // Not an event: an entry that is one value of another kind is a malformed event;
        // what is no value at all (a trailing comma, the file's end) is the cut, not an event.
        if (!j_.skip()) return false;
        ++r_.events_malformed;
        any_event_ = true;
      }
      if (!j_.next(']', more)) return false;
    }
    return true;
  }

  bool event() {
    j_.eat('{');
    ev_.ph_text = ev_.cat_text = ev_.name_text = false;
    ev_.pid.reset();
    ev_.tid.reset();
    ev_.args.clear();
    tally_ = {};
    skipping_ = false;
    skipped_cat_.clear();
    ts_.reset();
    dur_.reset();
    if (!j_.eat('}')) {
      for (bool more = true; more;) {
        std::string_view k;
        if (!j_.key(k)) return false;
        tally_.bytes += k.size();
        if (!member(event_field(k)) || !j_.next('}', more)) return false;
      }
    }
    finish_event();
    return true;
  }

  // One field of an event: kept where the conversion reads it, passed over (and counted
  // for the event's bounds) where not. Once the event is known to be none of ours, only
  // its "ph" and "cat" are looked at: they name what it is counted as.
  bool member(Field f) {
    const int c = j_.peek();
    const bool ph = f == Field::kPh, cat = f == Field::kCat, name = f == Field::kName;
    if ((ph || cat || (name && !skipping_)) && c == '"') {
      std::string& field = ph ? ev_.ph : cat ? ev_.cat : ev_.name;
      size_t length = 0;
      if (!j_.string(&field, &length)) return false;
      (ph ? ev_.ph_text : cat ? ev_.cat_text : ev_.name_text) = true;
      ++tally_.values;
      tally_.bytes += length;
      if (ph && !is(field, "X")) {
        skipping_ = true;
        skipped_cat_.clear();
      } else if (cat && !ours(field)) {
        skipping_ = true;
        skipped_cat_ = field;
      }
      return true;
    }
    if (skipping_) return j_.skip();
    switch (f) {
      case Field::kPh: case Field::kCat: case Field::kName:
        (ph ? ev_.ph_text : cat ? ev_.cat_text : ev_.name_text) = false;
        return j_.skip(&tally_);
      case Field::kTs: case Field::kDur:
        if (!JsonCursor::starts_number(c)) return j_.skip(&tally_);
        return time(f == Field::kTs ? ts_ : dur_);
      case Field::kPid: return integer(ev_.pid);
      case Field::kTid: return integer(ev_.tid);
      case Field::kArgs:
        ev_.args.clear();  // a second "args" replaces the first, as in a JSON object
        return c == '{' ? args() : j_.skip(&tally_);
      default: return j_.skip(&tally_);
    }
  }

  bool args() {
    j_.eat('{');
    ++tally_.values;
    if (j_.eat('}')) return true;
    KinetoEvent::Args& a = ev_.args;
    for (bool more = true; more;) {
      std::string_view k;
      if (!j_.key(k)) return false;
      tally_.bytes += k.size();
      bool ok;
      switch (args_field(k)) {
        case Field::kCorrelation: ok = integer(a.correlation); break;
        case Field::kCbid: ok = integer(a.cbid); break;
        case Field::kExternalId: ok = integer(a.external_id); break;
        case Field::kDevice: ok = integer(a.device); break;
        case Field::kInDevice: ok = integer(a.in_device); break;
        case Field::kStream: ok = integer(a.stream); break;
        case Field::kBytes: ok = integer(a.bytes); break;
        case Field::kGrid: ok = dims(a.grid); break;
        case Field::kBlock: ok = dims(a.block); break;
        default: ok = j_.skip(&tally_);
      }
      if (!ok || !j_.next('}', more)) return false;
    }
    return true;
  }

  // An integer that fits int64_t, or nothing (as the converter's integer_at() read it).
  bool integer(std::optional<int64_t>& out) { return j_.integer_or_skip(out, tally_); }

  // [x, y, z] of integers, as Kineto writes a grid or a block; nothing otherwise.
  bool dims(std::optional<Dims>& out) {
    out.reset();
    if (j_.peek() != '[') return j_.skip(&tally_);
    j_.eat('[');
    ++tally_.values;
    if (j_.eat(']')) return true;
    Dims d{};
    size_t count = 0;
    bool ok = true;
    for (bool more = true; more; ++count) {
      if (JsonCursor::starts_number(j_.peek())) {
        JsonNumber n;
        if (!j_.number(n)) return false;
        ++tally_.values;
        if (n.kind == JsonNumber::Kind::kInt && count < 3) d[count] = n.integer;
        else ok = false;
      } else {
        if (!j_.skip(&tally_)) return false;
        ok = false;
      }
      if (!j_.next(']', more)) return false;
    }
    if (ok && count == 3) out = d;
    return true;
  }

  // "ts" or "dur", read to the nanosecond.
  bool time(std::optional<int64_t>& out) {
    JsonNumber n;
    if (!j_.number(n)) return false;
    out = microseconds_to_ns(n);
    return true;
  }

  bool log_array() {
    j_.eat('[');
    if (j_.eat(']')) return true;
    JsonTally t;
    for (bool more = true; more;) {
      if (j_.peek() == '"') {
        size_t length = 0;
        if (!j_.string(&line_, &length)) return false;
        ++t.values;
        t.bytes += length;
        if (t.values <= limits_.max_event_values && t.bytes <= limits_.max_event_bytes) log_line(&line_);
        else ++r_.kineto_log_lines_unread;
      } else {
        if (!j_.skip(&t)) return false;
        if (t.values <= limits_.max_event_values && t.bytes <= limits_.max_event_bytes) log_line(nullptr);
        else ++r_.kineto_log_lines_unread;
      }
      if (!j_.next(']', more)) return false;
    }
    return true;
  }

  void log_line(const std::string* line) {
    ++r_.kineto_log_lines;
    if (!line) return;
    if (line->find("Exceeded max GPU buffer") != std::string::npos) ++r_.kineto_stopped_tracing;
    if (r_.kineto_log_examples.size() < 5) r_.kineto_log_examples.push_back(top_key_ + ": " + line->substr(0, 300));
  }

  void finish_event() {
    any_event_ = true;
    if (skipping_) {
      events_.other(skipped_cat_);
      return;
    }
    if (tally_.values > limits_.max_event_values || tally_.bytes > limits_.max_event_bytes) {
      ++r_.events_too_large;
      return;
    }
    if (!ev_.ph_text || ev_.ph != "X") {
      events_.other("");
      return;
    }
    events_.add(ev_, ts_ ? to_monotonic(*ts_) : 0, dur_ && *dur_ >= 0 ? dur_ : std::nullopt);
  }

  void base_in_file(int64_t base) {
    if (!any_event_) {
      base_ = base;
      r_.base_in_file = true;
    } else if (base != base_) {
      r_.base_disagrees = true;
    }
  }

  // 0 (unknown) where the file's base and times would overflow: both are the program's word.
  int64_t to_monotonic(int64_t ts) const {
    int64_t real = ts, monotonic = 0;
    if (ts < kRelativeBelowNs && __builtin_add_overflow(base_, ts, &real)) return 0;
    if (__builtin_sub_overflow(real, offset_, &monotonic)) return 0;
    return monotonic > 0 ? monotonic : 0;
  }

  JsonCursor& j_;
  const TraceLimits& limits_;
  TraceReading& r_;
  KinetoEvents& events_;
  int64_t base_, offset_;
  std::string top_key_, line_;
  bool any_event_ = false, closed_ = false;
  // The event being read.
  KinetoEvent ev_;
  JsonTally tally_;
  bool skipping_ = false;
  std::string skipped_cat_;
  std::optional<int64_t> ts_, dur_;
};

}  // namespace

int64_t kineto_base_for(int64_t realtime_ns) { return realtime_ns / kThreeMonthsNs * kThreeMonthsNs; }

TraceReading read_torch_trace(const std::filesystem::path& file, int64_t pid, const TraceClock& clock,
                              const std::map<int64_t, std::string>& bus_ids, const TraceLimits& limits,
                              const TraceSink& sink) {
  TraceReading r;
  UntrustedJsonInput input(file, limits.max_bytes, limits.max_string);
  if (!input.is_open()) {
    r.unreadable = input.why();
    return r;
  }
  r.file_bytes = input.file_size();
  KinetoEvents events(pid, bus_ids, limits.join_window, r, sink);
  JsonCursor json(input);
  TraceReader reader(json, clock, limits, r, events);
  // What follows the top-level object is not read (Kineto writes nothing there).
  reader.document();
  events.finish();
  r.bytes_read = input.bytes_read();
  r.over_bound = input.bound_hit();
  r.strings_cut = input.strings_cut();
  r.invalid_utf8_bytes = input.invalid_utf8_bytes();
  r.complete = reader.closed() && !r.over_bound && input.stopped().empty();
  if (!r.complete) {
    if (r.over_bound)
      r.cut = "cut at the bound of " + std::to_string(limits.max_bytes) + " bytes (" +
              std::to_string(r.file_bytes) + " in the file)";
    else if (!input.stopped().empty())
      r.cut = input.stopped() + ", after " + std::to_string(r.bytes_read) + " bytes";
    else if (json.failed())
      r.cut = json.error();
    else
      r.cut = "the trace ends before its top-level object does, after " + std::to_string(r.bytes_read) + " bytes";
  }
  return r;
}

TraceReading read_torch_trace(const std::filesystem::path& file, int64_t pid, const TraceClock& clock,
                              const std::map<int64_t, std::string>& bus_ids, const TraceLimits& limits,
                              const std::function<void(const Event&)>& sink) {
  const TraceSink unpacked = [&sink](const Event& e, const PackedArgs* args) {
    if (!args) return sink(e);
    Event copy = e;
    copy.args = unpack_args(args->bytes());
    sink(copy);
  };
  return read_torch_trace(file, pid, clock, bus_ids, limits, unpacked);
}

}  // namespace cudatrace
