#include "tracers/jaxprof/jaxprof_trace.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "common/device_id.h"
#include "common/packed_args.h"
#include "tracers/jaxprof/jaxprof_gzip.h"
#include "tracers/torchprof/torchprof_input.h"
#include "tracers/torchprof/torchprof_json.h"

namespace cudatrace {

namespace {

template <size_t N>
bool is(std::string_view s, const char (&literal)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), literal, N - 1) == 0;
}

// "grid:128,1,1" among kernel_details' space-separated fields: three integers that fit
// uint32_t (a dim3), or nothing.
bool dims_in(std::string_view details, std::string_view label, uint32_t out[3]) {
  for (size_t at = 0; at < details.size();) {
    size_t end = details.find(' ', at);
    if (end == std::string_view::npos) end = details.size();
    std::string_view field = details.substr(at, end - at);
    at = end + 1;
    if (field.size() <= label.size() || field.substr(0, label.size()) != label || field[label.size()] != ':') continue;
    field.remove_prefix(label.size() + 1);
    size_t n = 0;
    uint64_t v = 0;
    bool digit = false;
    for (const char c : field) {
      if (c == ',') {
        if (!digit || n >= 2) return false;
        out[n++] = uint32_t(v);
        v = 0;
        digit = false;
      } else if (c >= '0' && c <= '9') {
        v = v * 10 + uint64_t(c - '0');
        if (v > UINT32_MAX) return false;
        digit = true;
      } else {
        return false;
      }
    }
    if (!digit || n != 2) return false;
    out[2] = uint32_t(v);
    return true;
  }
  return false;
}

// A driver function's name: cu, then a capital (cuLaunchHostFunc). XLA's own spans
// ("CommonPjRt...", "Thunks::...", "$profiler.py...") never look like it.
bool driver_name(std::string_view s) { return s.size() > 2 && s[0] == 'c' && s[1] == 'u' && s[2] >= 'A' && s[2] <= 'Z'; }

// "/device:GPU:3" -> 3; a suffix after a space is allowed (other XLA versions add one).
std::optional<int64_t> gpu_ordinal(std::string_view name) {
  constexpr std::string_view prefix = "/device:GPU:";
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  int64_t n = 0;
  size_t digits = 0;
  for (; digits < name.size() && name[digits] >= '0' && name[digits] <= '9'; ++digits) {
    if (digits == 9) return std::nullopt;
    n = n * 10 + (name[digits] - '0');
  }
  if (digits == 0 || (digits < name.size() && name[digits] != ' ')) return std::nullopt;
  return n;
}

// "123" -> 123, as XLA writes a correlation id (a string); an integer is taken too.
std::optional<uint64_t> id_text(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + uint64_t(c - '0');
  }
  return v;
}

struct Process {
  char kind = 'o';  // 'g' a GPU, 'h' the host, 'o' another
  int64_t device = 0;
  std::string name;
};

// What the reader keeps of one traceEvents element (the last of a key given twice).
struct JaxEvent {
  std::string ph, name, arg_name, details;
  bool ph_text = false, name_text = false, arg_name_text = false, details_text = false;
  std::optional<int64_t> pid, tid, ts, dur;
  std::optional<uint64_t> corr;
  void clear() {
    ph_text = name_text = arg_name_text = details_text = false;
    pid.reset(), tid.reset(), ts.reset(), dur.reset(), corr.reset();
  }
};

class JaxReader {
 public:
  JaxReader(JsonCursor& json, int64_t pid, const JaxTraceClock& clock, const std::map<int64_t, std::string>& bus_ids,
            const JaxTraceLimits& limits, JaxTraceReading& r, const TraceSink& sink)
      : j_(json), pid_(pid), base_(clock.base_ns), bus_ids_(bus_ids), limits_(limits), r_(r), sink_(sink) {}

  // Reads the top-level value; closed() once it ended.
  void document() {
    if (!j_.eat('{')) {
      if (!j_.failed()) j_.fail("the top-level value is not an object");
      return;
    }
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
    if (c == '"' && is(top_key_, "displayTimeUnit")) return j_.string(&r_.display_time_unit);
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
        if (!j_.skip()) return false;
        ++r_.events_malformed;
      }
      if (!j_.next(']', more)) return false;
    }
    return true;
  }

  bool event() {
    j_.eat('{');
    ev_.clear();
    tally_ = {};
    if (!j_.eat('}')) {
      for (bool more = true; more;) {
        std::string_view k;
        if (!j_.key(k)) return false;
        tally_.bytes += k.size();
        if (!member(k) || !j_.next('}', more)) return false;
      }
    }
    finish_event();
    return true;
  }

  // A string kept within the event's bounds (the filter has cut it at max_string already).
  bool text(std::string& out, bool& is_text) {
    if (j_.peek() != '"') {
      is_text = false;
      return j_.skip(&tally_);
    }
    size_t length = 0;
    if (!j_.string(&out, &length)) return false;
    ++tally_.values;
    tally_.bytes += length;
    is_text = true;
    return true;
  }

  bool member(std::string_view k) {
    if (is(k, "ph")) return text(ev_.ph, ev_.ph_text);
    if (is(k, "name")) return text(ev_.name, ev_.name_text);
    if (is(k, "pid")) return integer(ev_.pid);
    if (is(k, "tid")) return integer(ev_.tid);
    if (is(k, "ts") || is(k, "dur")) return time(is(k, "ts") ? ev_.ts : ev_.dur);
    if (is(k, "args")) {
      // A second "args" replaces the first, as in a JSON object.
      ev_.arg_name_text = ev_.details_text = false;
      ev_.corr.reset();
      return j_.peek() == '{' ? args() : j_.skip(&tally_);
    }
    return j_.skip(&tally_);
  }

  bool args() {
    j_.eat('{');
    ++tally_.values;
    if (j_.eat('}')) return true;
    for (bool more = true; more;) {
      std::string_view k;
      if (!j_.key(k)) return false;
      tally_.bytes += k.size();
      bool ok;
      if (is(k, "name")) ok = text(ev_.arg_name, ev_.arg_name_text);
      else if (is(k, "kernel_details")) ok = text(ev_.details, ev_.details_text);
      else if (is(k, "correlation_id")) ok = correlation();
      else ok = j_.skip(&tally_);
      if (!ok || !j_.next('}', more)) return false;
    }
    return true;
  }

  bool correlation() {
    ev_.corr.reset();
    if (j_.peek() == '"') {
      bool is_text = false;
      if (!text(scratch_, is_text)) return false;
      ev_.corr = id_text(scratch_);
      return true;
    }
    std::optional<int64_t> v;
    if (!integer(v)) return false;
    if (v && *v >= 0) ev_.corr = uint64_t(*v);
    return true;
  }

  bool integer(std::optional<int64_t>& out) { return j_.integer_or_skip(out, tally_); }
  bool time(std::optional<int64_t>& out) { return j_.time_or_skip(out, tally_); }

  void finish_event() {
    if (tally_.values > limits_.max_event_values || tally_.bytes > limits_.max_event_bytes) {
      ++r_.events_too_large;
      return;
    }
    if (ev_.ph_text && is(ev_.ph, "M")) {
      ++r_.metadata_events;
      if (ev_.name_text && is(ev_.name, "process_name")) process_name();
      return;
    }
    if (!ev_.ph_text || !is(ev_.ph, "X")) {
      ++r_.other_events;
      return;
    }
    const auto p = ev_.pid ? processes_.find(*ev_.pid) : processes_.end();
    if (p == processes_.end()) {
      ++r_.events_of_unnamed_process;
      return;
    }
    const Process& process = p->second;
    if (process.kind == 'g') return gpu_event(process);
    if (process.kind == 'h') return host_event();
    ++r_.other_process_events;
    if (auto it = r_.other_processes.find(process.name); it != r_.other_processes.end()) ++it->second;
    else if (r_.other_processes.size() < 32) r_.other_processes.emplace(process.name, 1);
  }

  void process_name() {
    if (!ev_.pid || !ev_.arg_name_text) {
      ++r_.events_malformed;
      return;
    }
    if (processes_.size() >= limits_.max_processes && !processes_.count(*ev_.pid)) {
      ++r_.processes_unkept;
      return;
    }
    Process& p = processes_[*ev_.pid];
    p.name = ev_.arg_name;
    if (const auto gpu = gpu_ordinal(p.name)) {
      p.kind = 'g';
      p.device = *gpu;
    } else {
      p.kind = is(p.name, "/host:CPU") ? 'h' : 'o';
    }
  }

  void gpu_event(const Process& gpu) {
    if (!ev_.details_text) {
      ++r_.gpu_other_events;
      return;
    }
    if (!ev_.name_text || !ev_.ts) {
      ++r_.events_malformed;
      return;
    }
    Event& e = record_;
    start_record(layer::kGpuActivity, 0);
    e.device = gpu.device;
    if (auto it = bus_ids_.find(gpu.device); it != bus_ids_.end()) e.device_id = normalize_pci_bus_id(it->second);
    uint32_t grid[3], block[3];
    const bool has_dims = dims_in(ev_.details, "grid", grid) && dims_in(ev_.details, "block", block);
    if (!has_dims) ++r_.kernels_without_dims;
    // Keys in the order a JSON object keeps them (sorted), as the store expects.
    packed_.start((has_dims ? 4 : 2) + (ev_.tid ? 1 : 0));
    if (has_dims) {
      packed_.key("block");
      packed_.dim3(block[0], block[1], block[2]);
    }
    packed_.key("device");
    packed_.integer(gpu.device);
    if (has_dims) {
      packed_.key("grid");
      packed_.dim3(grid[0], grid[1], grid[2]);
    }
    packed_.key("kernel");
    packed_.text(e.name);
    if (ev_.tid) {  // the stream: XLA's line of a stream is its id
      packed_.key("stream");
      packed_.integer(*ev_.tid);
    }
    ++r_.kernels;
    sink_(e, &packed_);
  }

  void host_event() {
    if (!ev_.name_text || !driver_name(ev_.name)) {
      ++(ev_.corr ? r_.launches_named_by_kernel : r_.host_spans);
      return;
    }
    if (!ev_.ts) {
      ++r_.events_malformed;
      return;
    }
    start_record(layer::kDriver, ev_.tid.value_or(0));
    record_.device.reset();  // not written: which context was current is not in the trace
    packed_.start(0);
    ++r_.driver_calls;
    sink_(record_, &packed_);
  }

  void start_record(const char* layer, int64_t tid) {
    Event& e = record_;
    e.layer = layer;
    e.name = ev_.name;
    int64_t ts = 0;
    // 0 (unknown) where the caller's base and the file's time would overflow.
    e.ts = __builtin_add_overflow(base_, *ev_.ts, &ts) || ts < 0 ? 0 : ts;
    e.dur = ev_.dur && *ev_.dur >= 0 ? ev_.dur : std::nullopt;
    e.pid = pid_;
    e.tid = tid;
    e.corr = ev_.corr;
    e.device_id.clear();
  }

  JsonCursor& j_;
  int64_t pid_, base_;
  const std::map<int64_t, std::string>& bus_ids_;
  const JaxTraceLimits& limits_;
  JaxTraceReading& r_;
  const TraceSink& sink_;
  std::string top_key_, scratch_;
  bool closed_ = false;
  std::unordered_map<int64_t, Process> processes_;
  JaxEvent ev_;
  JsonTally tally_;
  Event record_;
  PackedArgs packed_;
};

}  // namespace

JaxTraceReading read_jax_trace(const std::filesystem::path& file, int64_t pid, const JaxTraceClock& clock,
                               const std::map<int64_t, std::string>& bus_ids, const JaxTraceLimits& limits,
                               const TraceSink& sink) {
  JaxTraceReading r;
  TraceFileBytes bytes(file, limits.max_file_bytes);
  if (!bytes.is_open()) {
    r.unreadable = bytes.unreadable();
    return r;
  }
  r.file_bytes = bytes.file_size();
  UntrustedJsonInput input(bytes, limits.max_text_bytes, limits.max_string);
  JsonCursor json(input);
  JaxReader reader(json, pid, clock, bus_ids, limits, r, sink);
  // What follows the top-level object is not read (XLA writes nothing there).
  reader.document();
  r.gzip = bytes.gzip();
  r.file_bytes_read = bytes.file_bytes_read();
  r.text_bytes_read = input.bytes_read();
  r.file_over_bound = bytes.file_bound_hit();
  r.text_over_bound = r.gzip && input.bound_hit();
  // A plain file's text is the file: past the text bound, it is the file that goes on.
  if (!r.gzip && input.bound_hit()) r.file_over_bound = true;
  r.strings_cut = input.strings_cut();
  r.invalid_utf8_bytes = input.invalid_utf8_bytes();
  r.complete = reader.closed() && !r.file_over_bound && !r.text_over_bound && input.stopped().empty();
  if (!r.complete) {
    if (r.text_over_bound)
      r.cut = "refused past " + std::to_string(limits.max_text_bytes) + " bytes of inflated text (from " +
              std::to_string(r.file_bytes_read) + " of the file's " + std::to_string(r.file_bytes) +
              " bytes): a gzip bomb, or a trace larger than the bound";
    else if (r.file_over_bound)
      r.cut = "cut at the bound of " + std::to_string(std::min(limits.max_file_bytes, limits.max_text_bytes)) +
              " bytes (" + std::to_string(r.file_bytes) + " in the file)";
    else if (!input.stopped().empty())
      r.cut = input.stopped();
    else if (json.failed())
      r.cut = json.error();
    else
      r.cut = "the trace ends before its top-level object does, after " + std::to_string(r.text_bytes_read) +
              " bytes of text";
  }
  return r;
}

JaxTraceReading read_jax_trace(const std::filesystem::path& file, int64_t pid, const JaxTraceClock& clock,
                               const std::map<int64_t, std::string>& bus_ids, const JaxTraceLimits& limits,
                               const std::function<void(const Event&)>& sink) {
  const TraceSink unpacked = [&sink](const Event& e, const PackedArgs* args) {
    if (!args) return sink(e);
    Event copy = e;
    copy.args = unpack_args(args->bytes());
    sink(copy);
  };
  return read_jax_trace(file, pid, clock, bus_ids, limits, unpacked);
}

JaxTraceLimits JaxTraceLimits::for_run(uint64_t run_bytes) {
  JaxTraceLimits l;
  l.max_file_bytes = run_bytes;
  l.max_text_bytes = run_bytes > UINT64_MAX / 64 ? UINT64_MAX : run_bytes * 64;
  return l;
}

nlohmann::json jax_trace_loss(const JaxTraceReading& r) {
  const bool refused = r.text_over_bound || !r.unreadable.empty();
  return {{"traces_cut", !r.complete && !refused ? 1 : 0},
          {"traces_refused", refused ? 1 : 0},
          {"over_bound_bytes", r.file_over_bound ? r.file_bytes_unread() : 0},
          {"events_unread", r.events_of_unnamed_process + r.events_malformed + r.events_too_large}};
}

}  // namespace cudatrace
