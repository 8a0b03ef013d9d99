#include "harness/out/otlp_export.h"

#include "common/event_store.h"
#include "harness/out/results_io.h"
#include "harness/score/loss_units.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>

#include "common/clock.h"
#include "common/cuda_names.h"
#include "common/event_io.h"
#include "common/outside_text.h"
#include "common/untrusted_file.h"
#include "harness/out/cuda_error_names.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Bounds on what is read (a run folder may have been handed to the user, who can rewrite it).
constexpr uint64_t kMaxJsonBytes = 64ull << 20;     // run.json, manifest.json
constexpr uint64_t kMaxEventBytes = 16ull << 30;    // the store (a per-thread devhook run is large)
constexpr uint64_t kHeldEventBytes = 400;            // an event held in memory, args included

constexpr int kSpanKindInternal = 1;  // OTLP enums are numbers in its JSON encoding
constexpr int kStatusError = 2;

json read_json_file(const fs::path& path) {
  std::string why;
  uint64_t size = 0;
  std::ifstream in = open_untrusted(path, &why, &size);
  if (!in.is_open()) throw std::runtime_error("cannot read " + path.string() + ": " + why);
  if (size > kMaxJsonBytes)
    throw std::runtime_error(path.string() + " is " + std::to_string(size) + " bytes, over the " +
                             std::to_string(kMaxJsonBytes) + " read");
  json j;
  try {
    j = parse_outside_json(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(path.string() + " is not a JSON object we read (" + e.what() + ")");
  }
  if (!j.is_object()) throw std::runtime_error(path.string() + " is not a JSON object");
  return j;
}

// FNV-1a, then a finalizer that spreads it (splitmix64): stable across builds and hosts.
uint64_t hash64(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  h += 0x9e3779b97f4a7c15ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

json kv(const std::string& key, const json& value) { return {{"key", key}, {"value", otlp_any_value(value)}}; }

// Integers go as decimal strings: OTLP's JSON encoding of 64-bit fields.
std::string unix_ns(int64_t monotonic, int64_t offset) { return std::to_string(monotonic + offset); }

// Loss counters, flattened: {"ring_full": 3, "per_cpu": {"a": 1}} -> loss.ring_full, loss.per_cpu.a;
// returns the sum of the integer ones.
int64_t flatten_counters(const json& j, const std::string& prefix, json& attributes) {
  int64_t total = 0;
  for (const auto& [k, v] : j.items()) {
    if (v.is_object()) {
      total += flatten_counters(v, prefix + k + ".", attributes);
    } else if (v.is_number() || v.is_boolean() || v.is_string()) {
      attributes.push_back(kv(prefix + k, v));
      if (v.is_number_integer()) total += v.get<int64_t>();
    }
  }
  return total;
}

json strings_of(const json& rows) {  // [{"layer": l, "reason": r}] -> ["l: r"]
  json out = json::array();
  if (rows.is_array())
    for (const auto& r : rows)
      if (r.is_object()) out.push_back(r.value("layer", std::string()) + ": " + r.value("reason", std::string()));
  return out;
}

bool on_gpu_track(const Event& e) { return e.layer == layer::kGpuActivity || e.layer == layer::kDevice; }

// What each resource (traced process) of a run shares: everything but its pid.
struct RunFacts {
  std::string key;     // run id / folder: seeds every id of the run
  std::string method;
  json attributes = json::array();
  int64_t clock_offset = 0;
};

RunFacts run_facts(const std::string& folder_name, const json& run, const json& manifest) {
  RunFacts f;
  const std::string run_id = manifest.value("run_id", std::string());
  f.key = (run_id.empty() ? std::string() : run_id + "/") + folder_name;
  f.method = run.value("method", std::string("unknown"));
  json& a = f.attributes;
  a.push_back(kv("service.name", "cudatrace"));
  if (run.contains("argv") && run["argv"].is_array()) {
    std::string line;
    for (const auto& arg : run["argv"]) line += (line.empty() ? "" : " ") + (arg.is_string() ? arg.get<std::string>() : dump_safe(arg));
    a.push_back(kv("process.command_line", line));
  }
  a.push_back(kv("cudatrace.method", f.method));
  a.push_back(kv("cudatrace.run", f.key));
  for (const char* k : {"workload", "linkage", "rep", "cudart"})
    if (run.contains(k) && !run[k].is_null()) a.push_back(kv(std::string("cudatrace.") + k, run[k]));
  a.push_back(kv("cudatrace.run.ok", run.value("ok", false)));
  if (run.contains("failures") && run["failures"].is_array() && !run["failures"].empty())
    a.push_back(kv("cudatrace.run.failures", run["failures"]));
  const json env = manifest.value("environment", json::object());
  const json host = env.value("host", json::object()), gpu = env.value("gpu", json::object());
  if (host.contains("hostname")) a.push_back(kv("host.name", host["hostname"]));
  if (host.contains("arch")) a.push_back(kv("host.arch", host["arch"]));
  a.push_back(kv("cudatrace.gpu.available", gpu.value("available", false)));
  if (gpu.contains("devices") && gpu["devices"].is_array() && !gpu["devices"].empty() && gpu["devices"][0].is_object())
    a.push_back(kv("cudatrace.gpu.name", gpu["devices"][0].value("name", std::string())));
  for (const char* k : {"driver_version", "driver_cuda_version"})
    if (gpu.contains(k) && gpu[k].is_string()) a.push_back(kv(std::string("cudatrace.gpu.") + k, gpu[k]));
  if (env.contains("harness")) {
    const json h = env["harness"];
    if (h.contains("revision")) a.push_back(kv("cudatrace.harness.revision", h["revision"]));
  }
  // What the method lost and could not see: a trace read alone must still say so.
  const json tracer = run.value("tracer", json::object());
  flatten_counters(tracer.value("loss", json::object()), "cudatrace.loss.", a);
  // The events lost, and apart from them what the counters of other units counted (bytes,
  // files, ...): never one sum of both (harness/score/loss_units.h).
  const LossTotals lost = loss_totals(tracer.value("loss", json::object()), run.value("method", ""));
  a.push_back(kv("cudatrace.loss.total", lost.events));
  for (const auto& [unit, n] : lost.other) a.push_back(kv("cudatrace.loss.other." + unit, n));
  if (const json u = strings_of(run.value("unobserved", json::array())); !u.empty())
    a.push_back(kv("cudatrace.layers_not_observed", u));
  if (const json p = strings_of(run.value("partly_observed", json::array())); !p.empty())
    a.push_back(kv("cudatrace.layers_partly_observed", p));
  if (!tracer.value("error", std::string()).empty()) a.push_back(kv("cudatrace.tracer.error", tracer["error"]));
  // Event times are CLOCK_MONOTONIC: Unix time needs the offset of the run's host and boot.
  if (run.contains("clock") && run["clock"].is_object() && run["clock"].contains("realtime_minus_monotonic_ns")) {
    f.clock_offset = run["clock"]["realtime_minus_monotonic_ns"].get<int64_t>();
    a.push_back(kv("cudatrace.clock_offset", "recorded when the run started"));
  } else {
    f.clock_offset = realtime_minus_monotonic().realtime_minus_monotonic_ns;
    a.push_back(kv("cudatrace.clock_offset",
                   "taken at export: the run did not record one; its times are off if the host rebooted, slept or "
                   "had its clock set since"));
  }
  return f;
}

json span_of(const Event& e, const std::string& trace_id, const std::string& span_id, int64_t offset) {
  json attributes = json::array();
  attributes.push_back(kv("cudatrace.layer", e.layer));
  attributes.push_back(kv("thread.id", e.tid));
  if (e.ret) attributes.push_back(kv("cuda.return_code", *e.ret));
  if (e.corr) attributes.push_back(kv("cudatrace.correlation_id", *e.corr));
  if (!e.dur) attributes.push_back(kv("cudatrace.exit_seen", false));
  const std::string prefix = on_gpu_track(e) ? "cuda.gpu." : "cuda.arg.";
  if (e.args.is_object())
    for (const auto& [k, v] : e.args.items()) attributes.push_back(kv(prefix + k, v));
  json span = {{"traceId", trace_id},
               {"spanId", span_id},
               {"name", e.name},
               {"kind", kSpanKindInternal},
               {"startTimeUnixNano", unix_ns(e.ts, offset)},
               {"endTimeUnixNano", unix_ns(e.ts + e.dur.value_or(0), offset)},
               {"attributes", std::move(attributes)}};
  if (e.ret)
    if (std::string error = otlp_error_of(e.layer, *e.ret, e.args); !error.empty())
      span["status"] = {{"code", kStatusError}, {"message", error}};
  return span;
}

}  // namespace

void OtlpStats::add(const OtlpStats& o) {
  runs += o.runs;
  lines += o.lines;
  spans += o.spans;
  linked_spans += o.linked_spans;
  events_without_time += o.events_without_time;
}

json otlp_any_value(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return {{"stringValue", v.get<std::string>()}};
    case json::value_t::boolean:
      return {{"boolValue", v.get<bool>()}};
    case json::value_t::number_integer:
      return {{"intValue", std::to_string(v.get<int64_t>())}};
    case json::value_t::number_unsigned:  // past int64: kept exact, as text
      return v.get<uint64_t>() <= uint64_t(INT64_MAX) ? json{{"intValue", std::to_string(v.get<uint64_t>())}}
                                                      : json{{"stringValue", std::to_string(v.get<uint64_t>())}};
    case json::value_t::number_float:
      return {{"doubleValue", v.get<double>()}};
    case json::value_t::array: {
      json values = json::array();
      for (const auto& x : v) values.push_back(otlp_any_value(x));
      return {{"arrayValue", {{"values", values}}}};
    }
    case json::value_t::object: {
      json values = json::array();
      for (const auto& [k, x] : v.items()) values.push_back(kv(k, x));
      return {{"kvlistValue", {{"values", values}}}};
    }
    default:  // null: an AnyValue with nothing set
      return json::object();
  }
}

std::string otlp_hex_id(const std::string& key, size_t bytes) {
  std::string hex;
  char buf[17];
  for (size_t i = 0; i < bytes / 8; ++i) {
    uint64_t h = hash64(key, i);
    if (h == 0) h = 1;  // an all-zero id is invalid in OTLP
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    hex += buf;
  }
  return hex;
}

std::string otlp_error_of(const std::string& layer, int64_t ret, const json& args) {
  if (layer == layer::kRuntime) {
    if (ret == 0) return "";
    const std::string name = cuda_runtime_error_name(ret);
    return name.empty() ? "cudaError " + std::to_string(ret) : name;
  }
  if (layer == layer::kDriver) {
    if (ret == 0) return "";
    const std::string name = cuda_driver_error_name(ret);
    return name.empty() ? "CUresult " + std::to_string(ret) : name;
  }
  if (layer == layer::kSyscall && ret < 0) {
    if (args.is_object() && args.contains("errno") && args["errno"].is_string()) return args["errno"].get<std::string>();
    return "errno " + std::to_string(-ret);
  }
  return "";
}

OtlpRuns otlp_run_folders(const fs::path& dir) {
  // Root may export a folder the user owns: no link at or below DIR is followed (HeldDir).
  OtlpRuns out{HeldDir::open(dir), std::nullopt, {}};
  if (out.top.has("run.json")) {
    out.names.push_back(out.top.shown_path().filename().string());
    return out;
  }
  int err = 0;
  out.runs = out.top.try_sub("runs", &err);
  if (!out.runs && err == ELOOP)
    throw std::runtime_error(shown(out.top.shown_path("runs").string()) +
                             " is a link: not followed (a results folder's runs/ never is one)");
  if (out.runs)
    for (const std::string& name : out.runs->names())  // a combo that is a link is no run
      if (const std::optional<HeldDir> combo = out.runs->try_sub(name); combo && combo->has("run.json"))
        out.names.push_back(name);
  if (out.names.empty())
    throw std::runtime_error(shown(dir.string()) +
                             " holds no run: give a results folder (results/<run-id>) or one of its runs/<combo>");
  return out;
}

// OTLP's spans are assembled from a run's events held together: as many as half the memory
// available now holds (MemAvailable), at least 1 M. A bound from the machine, not a fixed
// count: a real job's 10^7 to 10^8 events fit on a host with the memory for them.
namespace {
size_t otlp_event_bound() {
  return size_t(std::max<uint64_t>(uint64_t(1) << 20, available_memory_bytes() / 2 / kHeldEventBytes));
}
}  // namespace

namespace {

// The run in `folder` (held), its results' manifest in `results` (held, or a path above the
// folder given). Messages name the files by their /proc/self/fd paths: the caller renames.
OtlpStats otlp_of_held_run(const std::string& name, const HeldDir& folder, const fs::path& manifest_path,
                           const OtlpSink& sink) {
  const json run = read_json_file(folder.path_of("run.json"));
  std::error_code ec;
  const json manifest = fs::exists(manifest_path, ec) ? read_json_file(manifest_path) : json::object();
  // OTLP's spans are assembled from a run's events held together: bounded in number, so
  // that a folder the user rewrote cannot make the root harness hold what it likes.
  EventStream stream;
  const size_t max_events = otlp_event_bound();
  if (const fs::path file = events_file_of(folder.path_of()); fs::exists(file, ec)) {
    StoreLimits limits;
    limits.max_file_bytes = kMaxEventBytes;
    limits.max_inflated_bytes = kMaxEventBytes * 64;
    EventReader in(file, limits);
    Event e;
    while (in.next(e)) {
      if (stream.events.size() + stream.meta.size() >= max_events)
        throw std::runtime_error(file.string() + ": more than " + std::to_string(max_events) +
                                 " events, over what one run's export may hold in half this machine's available "
                                 "memory: not exported");
      (e.is_meta() ? stream.meta : stream.events).push_back(std::move(e));
    }
  }
  return otlp_of_run(name, run, manifest, stream.events, sink);
}

}  // namespace

OtlpStats otlp_of_run(const OtlpRuns& runs, size_t i, const OtlpSink& sink) {
  const std::string& name = runs.names.at(i);
  // The combo is entered again, from runs/ held: it may have become a link since it was listed.
  const std::optional<HeldDir> combo = runs.runs ? std::optional<HeldDir>(runs.runs->sub(name)) : std::nullopt;
  const HeldDir& folder = combo ? *combo : runs.top;
  // The manifest is the results folder's: DIR's own, or two up from DIR when DIR is the run
  // (reached through ".." of the folder held, not by the path's names).
  const fs::path manifest = runs.runs ? fs::path(runs.top.path_of("manifest.json"))
                                      : fs::path(runs.top.path_of()) / ".." / ".." / "manifest.json";
  try {
    return otlp_of_held_run(name, folder, manifest, sink);
  } catch (const std::exception& e) {
    throw std::runtime_error(runs.top.named(folder.named(e.what())));
  }
}

OtlpStats otlp_of_run(const std::string& folder_name, const json& run, const json& manifest,
                      const std::vector<Event>& events, const OtlpSink& sink) {
  const RunFacts facts = run_facts(folder_name, run, manifest);

  // Span ids are those of the events' places in events.jsonl; processes in order of appearance.
  std::vector<int64_t> pids;
  std::map<int64_t, std::vector<size_t>> of_pid;
  std::map<std::pair<int64_t, uint64_t>, std::vector<size_t>> calls_of_corr;  // API calls by correlation id
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (!of_pid.count(e.pid)) pids.push_back(e.pid);
    of_pid[e.pid].push_back(i);
    if (e.corr && !on_gpu_track(e)) calls_of_corr[{e.pid, *e.corr}].push_back(i);
  }
  auto span_id = [&](size_t i) { return otlp_hex_id(facts.key + "/span/" + std::to_string(i), 8); };

  OtlpStats stats;
  stats.runs = 1;
  const json scope_host = {{"name", "cudatrace/" + facts.method}, {"version", CUDATRACE_VERSION}};
  const json scope_gpu = {{"name", "cudatrace/" + facts.method + "/gpu"}, {"version", CUDATRACE_VERSION}};
  for (int64_t pid : pids) {
    const std::string trace_id = otlp_hex_id(facts.key + "/process/" + std::to_string(pid), 16);
    const std::vector<size_t>& indices = of_pid[pid];
    size_t untimed = 0;
    for (size_t i : indices) untimed += events[i].ts == 0;
    json resource_attributes = facts.attributes;
    resource_attributes.push_back(kv("process.pid", pid));
    resource_attributes.push_back(kv("cudatrace.export.events_without_time", int64_t(untimed)));
    const json resource = {{"attributes", resource_attributes}};
    stats.events_without_time += untimed;

    json host_spans = json::array(), gpu_spans = json::array();
    auto emit_line = [&] {
      json scopes = json::array();
      if (!host_spans.empty()) scopes.push_back({{"scope", scope_host}, {"spans", std::move(host_spans)}});
      if (!gpu_spans.empty()) scopes.push_back({{"scope", scope_gpu}, {"spans", std::move(gpu_spans)}});
      host_spans = json::array();
      gpu_spans = json::array();
      sink(dump_safe(json{{"resourceSpans", json::array({{{"resource", resource}, {"scopeSpans", std::move(scopes)}}})}}));
      ++stats.lines;
    };
    size_t in_line = 0;
    for (size_t i : indices) {
      const Event& e = events[i];
      if (e.ts == 0) continue;
      json span = span_of(e, trace_id, span_id(i), facts.clock_offset);
      if (on_gpu_track(e) && e.corr) {
        auto it = calls_of_corr.find({e.pid, *e.corr});
        if (it != calls_of_corr.end()) {
          json links = json::array();
          for (size_t call : it->second)
            links.push_back({{"traceId", trace_id},
                             {"spanId", span_id(call)},
                             {"attributes", json::array({kv("cudatrace.link", "launched by")})}});
          ++stats.linked_spans;  // a kernel may link to its runtime and its driver launch: counted once
          span["links"] = std::move(links);
        }
      }
      (on_gpu_track(e) ? gpu_spans : host_spans).push_back(std::move(span));
      ++stats.spans;
      if (++in_line == kOtlpSpansPerLine) {
        emit_line();
        in_line = 0;
      }
    }
    if (in_line > 0 || indices.size() == untimed) emit_line();  // a process of untimed events still says so
  }
  if (pids.empty()) {  // no event at all: the resource alone still carries the losses and the unobserved layers
    sink(dump_safe(
        json{{"resourceSpans", json::array({{{"resource", {{"attributes", facts.attributes}}}, {"scopeSpans", json::array()}}})}}));
    ++stats.lines;
  }
  return stats;
}

}  // namespace cudatrace
