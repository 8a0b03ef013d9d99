#include "tracers/torchprof/torchprof_trace.h"

#include <cmath>
#include <istream>
#include <limits>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/outside_text.h"
#include "tracers/torchprof/torchprof_events.h"
#include "tracers/torchprof/torchprof_input.h"

namespace cudatrace {

namespace {

using json = nlohmann::json;

// Below this many ns, a "ts" counts from the base, not from the epoch: relative times stay
// under three months (7.9e15 ns), unix times of this century are above 9.4e17 ns.
constexpr int64_t kRelativeBelowNs = int64_t(100'000'000'000'000'000);
constexpr int64_t kThreeMonthsNs = int64_t(7'889'238) * 1'000'000'000;

// "123456.789" microseconds -> 123456789 ns, from the text: a double holds 15 to 16 digits,
// and a unix time in us with three decimals has 19. Nothing for text of another shape.
std::optional<int64_t> us_text_to_ns(std::string_view s) {
  bool negative = false;
  if (!s.empty() && s.front() == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  if (s.empty() || s.find_first_of("eE") != std::string_view::npos) return std::nullopt;
  const size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  int64_t ns = 0;
  for (char c : whole) {
    if (c < '0' || c > '9' || ns > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
    ns = ns * 10 + (c - '0');
  }
  if (ns > std::numeric_limits<int64_t>::max() / 1000) return std::nullopt;
  ns *= 1000;
  int64_t scale = 100;
  for (char c : frac) {
    if (c < '0' || c > '9') return std::nullopt;
    ns += (c - '0') * scale;  // digits past the third (below 1 ns) are dropped
    scale /= 10;
  }
  return negative ? -ns : ns;
}

// The SAX handler: where the parser is in the document, and the one value being built.
class TraceSax {
 public:
  TraceSax(const TraceClock& clock, const TraceLimits& limits, TraceReading& r, KinetoEvents& events)
      : limits_(limits), r_(r), events_(events), base_(clock.base_ns), offset_(clock.realtime_minus_monotonic_ns) {}

  bool null() { return scalar(nullptr); }
  bool boolean(bool v) { return scalar(v); }
  bool number_integer(json::number_integer_t v) {
    if (wants_time()) return time(v <= std::numeric_limits<int64_t>::max() / 1000 && v >= -9'000'000'000'000'000
                                      ? std::optional<int64_t>(v * 1000)
                                      : std::nullopt);
    return scalar(v);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (wants_time())
      return time(v <= uint64_t(std::numeric_limits<int64_t>::max() / 1000) ? std::optional<int64_t>(int64_t(v) * 1000)
                                                                             : std::nullopt);
    return scalar(v);
  }
  bool number_float(json::number_float_t v, const std::string& text) {
    if (wants_time()) {
      std::optional<int64_t> ns = us_text_to_ns(text);
      if (!ns && std::isfinite(v) && std::fabs(v) < 9e15) ns = int64_t(std::llround(v * 1000));
      return time(ns);
    }
    return scalar(v);
  }
  bool string(std::string& v) {
    bytes_ += v.size();
    return scalar(std::move(v));
  }
  bool binary(json::binary_t&) { return scalar(nullptr); }
  bool key(std::string& k) {
    if (building_) {
      bytes_ += k.size();
      key_ = std::move(k);
    } else if (depth_ == 1) {
      top_key_ = std::move(k);
    }
    return true;
  }
  bool start_object(size_t) { return open(json::object()); }
  bool start_array(size_t) {
    if (!building_ && depth_ == 1 && top_key_ == "traceEvents") {
      ++depth_;
      in_events_ = true;
      r_.has_events = true;
      return true;
    }
    return open(json::array());
  }
  bool end_object() { return close(); }
  bool end_array() {
    if (!building_ && in_events_ && depth_ == 2) {
      in_events_ = false;
      --depth_;
      return true;
    }
    return close();
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_ = "not JSON near byte " + std::to_string(position) + " of what was read: " + shown(e.what(), 160);
    return false;
  }

  bool closed() const { return closed_; }
  const std::string& error() const { return error_; }

 private:
  // Inside an event, directly: its "ts" or "dur", read to the nanosecond.
  bool wants_time() const { return building_ && building_event_ && depth_ == start_depth_ && (key_ == "ts" || key_ == "dur"); }
  bool time(std::optional<int64_t> ns) {
    (key_ == "ts" ? ts_ : dur_) = ns;
    return true;
  }

  // A value in the one being built, within the bounds; past them the rest is not kept.
  json* put(json&& v) {
    if (overflow_ || skipping_) return nullptr;
    if (++values_ > limits_.max_event_values || bytes_ > limits_.max_event_bytes) {
      overflow_ = true;
      return nullptr;
    }
    json* parent = stack_.back();
    if (parent->is_object()) {
      json& slot = (*parent)[key_];
      slot = std::move(v);
      return &slot;
    }
    parent->push_back(std::move(v));
    return &parent->back();
  }

  bool scalar(json&& v) {
    if (building_) {
      if (building_event_ && depth_ == start_depth_ && v.is_string()) skip_unless_ours(v.get_ref<const std::string&>());
      put(std::move(v));
      return true;
    }
    if (in_events_ && depth_ == 2) {  // an element of traceEvents that is not an object
      ++r_.events_malformed;
      any_event_ = true;
    } else if (depth_ == 1 && top_key_ == "baseTimeNanoseconds" && v.is_number_integer()) {
      base_in_file(v.get<int64_t>());
    }
    return true;
  }

  bool open(json&& container) {
    ++depth_;
    if (building_) {
      if (json* p = put(std::move(container))) stack_.push_back(p);
      else ++lost_depth_;
      return true;
    }
    const bool event = in_events_ && depth_ == 3 && container.is_object();
    const bool log = depth_ == 2 && container.is_array() && (top_key_ == "WARNING" || top_key_ == "ERROR");
    if (depth_ == 3 && in_events_ && !event) {
      ++r_.events_malformed;
      any_event_ = true;
    }
    if (!event && !log) return true;
    building_ = true;
    building_event_ = event;
    start_depth_ = depth_;
    root_ = std::move(container);
    stack_.assign(1, &root_);
    key_.clear();
    values_ = bytes_ = 0;
    lost_depth_ = 0;
    overflow_ = skipping_ = false;
    ts_.reset();
    dur_.reset();
    return true;
  }

  bool close() {
    --depth_;
    if (!building_) {
      if (depth_ == 0) closed_ = true;
      return true;
    }
    if (depth_ + 1 > start_depth_) {  // a container inside the value closes
      if (lost_depth_ > 0) --lost_depth_;
      else stack_.pop_back();
      return true;
    }
    building_ = false;
    if (building_event_) finish_event();
    else finish_log();
    return true;
  }

  // Most of a trace is CPU ops with their shapes and stacks: an event whose "ph" or "cat"
  // (written before its args) says it is none of ours is counted, not built.
  void skip_unless_ours(const std::string& value) {
    if (key_ == "ph" && value != "X") {
      skipping_ = true;
      skipped_cat_.clear();
    } else if (key_ == "cat" && value != "cuda_runtime" && value != "cuda_driver" && value != "kernel" &&
               value != "gpu_memcpy" && value != "gpu_memset") {
      skipping_ = true;
      skipped_cat_ = value;
    }
  }

  void finish_event() {
    any_event_ = true;
    if (skipping_) {
      events_.other(skipped_cat_);
      return;
    }
    if (overflow_) {
      ++r_.events_too_large;
      return;
    }
    const auto ph = root_.find("ph");
    if (ph == root_.end() || !ph->is_string() || *ph != "X") {
      events_.other("");
      return;
    }
    events_.add(root_, ts_ ? to_monotonic(*ts_) : 0, dur_ && *dur_ >= 0 ? dur_ : std::nullopt);
  }

  void finish_log() {
    for (const auto& line : root_) {
      ++r_.kineto_log_lines;
      if (line.is_string() && line.get_ref<const std::string&>().find("Exceeded max GPU buffer") != std::string::npos)
        ++r_.kineto_stopped_tracing;
      if (line.is_string() && r_.kineto_log_examples.size() < 5)
        r_.kineto_log_examples.push_back(top_key_ + ": " + line.get<std::string>().substr(0, 300));
    }
  }

  void base_in_file(int64_t base) {
    if (!any_event_) {
      base_ = base;
      r_.base_in_file = true;
    } else if (base != base_) {
      r_.base_disagrees = true;
    }
  }

  int64_t to_monotonic(int64_t ts) const {
    const int64_t real = ts < kRelativeBelowNs ? base_ + ts : ts;
    const int64_t monotonic = real - offset_;
    return monotonic > 0 ? monotonic : 0;
  }

  const TraceLimits& limits_;
  TraceReading& r_;
  KinetoEvents& events_;
  int64_t base_, offset_;
  int depth_ = 0;
  std::string top_key_;
  bool in_events_ = false, any_event_ = false, closed_ = false;
  std::string error_;
  // The value being built (an event, or Kineto's log lines).
  bool building_ = false, building_event_ = false, overflow_ = false, skipping_ = false;
  std::string skipped_cat_;
  int start_depth_ = 0, lost_depth_ = 0;
  json root_;
  std::vector<json*> stack_;
  std::string key_;
  size_t values_ = 0, bytes_ = 0;
  std::optional<int64_t> ts_, dur_;
};

}  // namespace

int64_t kineto_base_for(int64_t realtime_ns) { return realtime_ns / kThreeMonthsNs * kThreeMonthsNs; }

TraceReading read_torch_trace(const std::filesystem::path& file, int64_t pid, const TraceClock& clock,
                              const std::map<int64_t, std::string>& bus_ids, const TraceLimits& limits,
                              const std::function<void(const Event&)>& sink) {
  TraceReading r;
  UntrustedJsonInput input(file, limits.max_bytes, limits.max_string);
  if (!input.is_open()) {
    r.unreadable = input.why();
    return r;
  }
  r.file_bytes = input.file_size();
  KinetoEvents events(pid, bus_ids, limits.join_window, r, sink);
  TraceSax sax(clock, limits, r, events);
  std::istream in(&input);
  // Not strict: what follows the top-level object is not read (Kineto writes nothing there).
  json::sax_parse(in, &sax, json::input_format_t::json, false);
  events.finish();
  r.bytes_read = input.bytes_read();
  r.over_bound = input.bound_hit();
  r.strings_cut = input.strings_cut();
  r.invalid_utf8_bytes = input.invalid_utf8_bytes();
  r.complete = sax.closed() && !r.over_bound && input.stopped().empty();
  if (!r.complete) {
    if (r.over_bound)
      r.cut = "cut at the bound of " + std::to_string(limits.max_bytes) + " bytes (" +
              std::to_string(r.file_bytes) + " in the file)";
    else if (!input.stopped().empty())
      r.cut = input.stopped() + ", after " + std::to_string(r.bytes_read) + " bytes";
    else if (!sax.error().empty())
      r.cut = sax.error();
    else
      r.cut = "the trace ends before its top-level object does, after " + std::to_string(r.bytes_read) + " bytes";
  }
  return r;
}

}  // namespace cudatrace
