#include "tracers/torchprof/torchprof_tracer.h"

#include <algorithm>
#include <stdexcept>

#include "common/event_store.h"
#include "common/outside_text.h"
#include "tracers/pyhook/python_hook.h"
#include "tracers/torchprof/torchprof_spool.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kLayers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity};
constexpr size_t kProcessesInNotes = 16;

// What every trace of a run added up to, and what it says of its processes.
struct RunTally {
  int64_t traces = 0, missing = 0, cut = 0, refused = 0, over_bound_bytes = 0, events_unread = 0;
  int64_t runtime = 0, driver = 0, kernels = 0, memcpys = 0, memsets = 0, other = 0;
  int64_t given_device = 0, other_pid = 0, strings_cut = 0, invalid_utf8 = 0, kineto_log_lines = 0;
  int64_t kineto_stopped_in_traces = 0, kineto_log_lines_unread = 0, named_from_cbid = 0;
  int64_t python_processes = 0, without_torch = 0, without_cuda = 0, profiled = 0, forked = 0;
  bool base_in_file = false, base_computed = false, base_disagrees = false;
  double export_s = 0;
  json processes = json::array(), kineto_log_examples = json::array(), other_categories = json::object();
  std::string start_error, torch_not_profiled;
};

void add_reading(RunTally& t, const TraceReading& r) {
  t.runtime += r.runtime_calls;
  t.driver += r.driver_calls;
  t.kernels += r.kernels;
  t.memcpys += r.memcpys;
  t.memsets += r.memsets;
  t.other += r.other_events;
  t.given_device += r.calls_given_device;
  t.other_pid += r.calls_of_other_pid;
  t.named_from_cbid += r.runtime_named_from_cbid;
  t.strings_cut += r.strings_cut;
  t.invalid_utf8 += r.invalid_utf8_bytes;
  t.kineto_log_lines += r.kineto_log_lines;
  t.kineto_stopped_in_traces += r.kineto_stopped_tracing;
  t.kineto_log_lines_unread += r.kineto_log_lines_unread;
  t.events_unread += r.events_malformed + r.events_too_large;
  for (const auto& line : r.kineto_log_examples)
    if (t.kineto_log_examples.size() < 5) t.kineto_log_examples.push_back(line);
  for (const auto& [cat, n] : r.other_categories)
    if (t.other_categories.size() < 32 || t.other_categories.contains(cat))
      t.other_categories[cat] = t.other_categories.value(cat, int64_t(0)) + n;
  (r.base_in_file ? t.base_in_file : t.base_computed) = true;
  t.base_disagrees = t.base_disagrees || r.base_disagrees;
}

// A run's traces read into one store, process by process, within one byte budget.
struct Conversion {
  const fs::path& dir;
  const TraceClock& clock;
  uint64_t budget;
  const fs::path& events_file;
  std::unique_ptr<EventStoreWriter> out;
  RunTally t;

  void process(const SpooledProcess& p);
  void status(const SpooledProcess& p, json& note);
  void trace(const SpooledProcess& p, json& note);
};

void Conversion::process(const SpooledProcess& p) {
  json note = {{"pid", p.pid}, {"phase", p.has_status ? (p.phase.empty() ? "unreadable" : p.phase) : "no status"}};
  if (p.has_status) status(p, note);
  if (phase_profiled(p.phase) || !p.trace.empty()) ++t.profiled;
  if (!p.trace.empty()) {
    trace(p, note);
  } else if (phase_profiled(p.phase)) {
    // A process that profiled and wrote no trace: killed, os._exit, or its export failed.
    ++t.missing;
    note["trace"] = "missing";
  }
  if (t.processes.size() < kProcessesInNotes) t.processes.push_back(std::move(note));
}

void Conversion::status(const SpooledProcess& p, json& note) {
  ++t.python_processes;
  if (!p.status_error.empty()) note["status_error"] = p.status_error;
  if (p.phase == "ended_without_torch" || p.phase == "python") ++t.without_torch;
  if (p.phase == "torch_without_cuda" || p.phase == "armed") ++t.without_cuda;
  if (p.phase == "forked") ++t.forked;
  if (p.phase == "start_failed" && t.start_error.empty())
    t.start_error = shown(p.status.value("error", std::string("?")), 300);
  if (p.phase == "torch_not_profiled") t.torch_not_profiled = "pid " + std::to_string(p.pid);
  if (const auto s = p.status.find("export_s"); s != p.status.end() && s->is_number()) t.export_s += s->get<double>();
  if (const auto e = p.status.find("error"); e != p.status.end() && e->is_string())
    note["error"] = shown(e->get<std::string>(), 300);
}

void Conversion::trace(const SpooledProcess& p, json& note) {
  if (!out) out = std::make_unique<EventStoreWriter>(events_file);
  TraceLimits limits;
  limits.max_bytes = budget;
  EventStoreWriter& store = *out;
  const TraceSink sink = [&store](const Event& e, const PackedArgs* args) {
    if (args) store.write(e, *args);
    else store.write(e);
  };
  const TraceReading r = read_torch_trace(dir / p.trace, p.pid, clock, p.bus_ids, limits, sink);
  ++t.traces;
  budget -= std::min(budget, r.bytes_read);
  add_reading(t, r);
  note["trace"] = p.trace;
  note["events"] = r.events();
  if (!r.unreadable.empty()) {
    ++t.refused;
    note["refused"] = r.unreadable;
  } else if (!r.complete || p.trace_tmp || p.phase == "export_failed") {
    ++t.cut;
    note["cut"] = p.trace_tmp               ? "Kineto's temporary file, never renamed: the export did not finish"
                  : !r.complete             ? r.cut
                                            : "the export said it failed";
  }
  if (r.over_bound) t.over_bound_bytes += int64_t(r.file_bytes - r.bytes_read);
}

// Which layers the run observed, from what its processes reached.
void judge_layers(const RunTally& t, size_t files, TracerReport& report) {
  const auto unobserved_all = [&](const std::string& why) {
    for (const auto& l : kLayers) report.unobserved[l] = why;
  };
  if (files == 0) {
    unobserved_all("no Python process loaded the profiler hook: the program is not Python, or runs python with -I, -E "
                   "or -S, or sets PYTHONPATH itself");
    return;
  }
  if (t.profiled == 0) {
    if (!t.start_error.empty())
      unobserved_all("torch.profiler could not start: " + t.start_error);
    else if (t.without_cuda > 0)
      unobserved_all(std::to_string(t.without_cuda) + " process(es) imported torch and none started CUDA through it: "
                     "the profiler starts at a process's first CUDA initialization, and there was none");
    else if (!t.torch_not_profiled.empty())
      unobserved_all("torch was imported in " + t.torch_not_profiled + " through a loader the hook could not wrap: "
                     "the profiler never started");
    else
      unobserved_all(std::to_string(t.python_processes) + " Python process(es) ran and none imported torch: nothing "
                     "for torch.profiler to trace");
    return;
  }
  report.layers = kLayers;
  // What explains a shortfall comes first: the verdict's "why" is this text. On an H100 with
  // torch 2.11, cudaGetDevice (961 calls), cudaGetLastError (121) and cudaEventCreateWithFlags
  // (36) of torch_train_step.py were all absent, and nothing else.
  std::string forked;
  if (t.forked > 0)
    forked = "; " + std::to_string(t.forked) + " forked child process(es) not traced (the profiler does not survive "
             "fork; a spawned child is traced)";
  report.partly_unobserved[layer::kRuntime] =
      "Kineto leaves out the runtime calls on its blocklist (cudaGetDevice, cudaGetLastError, cudaEventCreateWithFlags "
      "and others; the list varies by version) and those a process made before its first CUDA initialization through "
      "torch; it keeps no return codes" + forked;
  report.partly_unobserved[layer::kDriver] =
      "Kineto keeps only the driver calls it tracks (cuLaunchKernel, cuLaunchKernelEx, and cuMemCreate, cuMemMap, "
      "cuMemUnmap, cuMemRelease and the shareable-handle calls in recent versions); it keeps no return codes" + forked;
  if (t.forked > 0) report.partly_unobserved[layer::kGpuActivity] = forked.substr(2);
}

void fill_notes(const RunTally& t, const KinetoLossLines& kineto, TracerReport& report) {
  report.notes["processes"] = t.processes;
  report.notes["python_processes"] = t.python_processes;
  report.notes["processes_without_torch"] = t.without_torch;
  report.notes["processes_without_cuda"] = t.without_cuda;
  report.notes["processes_profiled"] = t.profiled;
  report.notes["forked_children_untraced"] = t.forked;
  report.notes["traces"] = t.traces;
  report.notes["runtime_calls"] = t.runtime;
  report.notes["driver_calls"] = t.driver;
  report.notes["kernels"] = t.kernels;
  report.notes["gpu_memcpys"] = t.memcpys;
  report.notes["gpu_memsets"] = t.memsets;
  report.notes["other_events"] = t.other;
  report.notes["other_categories"] = t.other_categories;
  report.notes["calls_given_device"] = t.given_device;
  if (t.other_pid > 0) report.notes["calls_naming_another_pid"] = t.other_pid;
  // Kineto wrote "INVALID" for them: named here from their cbid (runtime_cbid_names.cpp).
  if (t.named_from_cbid > 0) report.notes["runtime_calls_named_by_cbid"] = t.named_from_cbid;
  if (t.strings_cut > 0) report.notes["strings_cut_at_64KiB"] = t.strings_cut;
  if (t.invalid_utf8 > 0) report.notes["bytes_not_utf8"] = t.invalid_utf8;
  if (t.kineto_log_lines > 0) {
    report.notes["kineto_log_lines_in_traces"] = t.kineto_log_lines;
    report.notes["kineto_log_examples"] = t.kineto_log_examples;
  }
  if (!kineto.examples.empty()) report.notes["kineto_loss_lines"] = kineto.examples;
  if (!kineto.unread.empty()) report.notes["program_stderr"] = kineto.unread;
  report.notes["export_ms"] = int64_t(t.export_s * 1000);  // at exit, after the program's last step
  report.notes["base_time"] = t.base_disagrees ? "a baseTimeNanoseconds after the events differs from the one used"
                              : t.base_in_file && t.base_computed ? "from the trace where it wrote one, else computed"
                              : t.base_in_file                    ? "baseTimeNanoseconds, from the trace"
                                                                  : "computed: the run's unix time floored to 3 months";
}

}  // namespace

fs::path torchprof_hook_dir(const fs::path& prefix) { return python_hook_dir(prefix, "torchprof"); }

std::string torchprof_python_problem(const std::string& python) {
  return python_module_problem(python, "torch", "torchprof");
}

TracerReport convert_torchprof_output(const fs::path& dir, const fs::path& events_file, const TraceClock& clock,
                                      uint64_t max_bytes, const fs::path& program_stderr) {
  TracerReport report;
  SpoolBounds bounds = SpoolBounds::for_run(max_bytes);
  const std::map<int64_t, SpooledProcess> spool = read_spool(dir, "torchprof", &bounds);
  Conversion c{dir, clock, max_bytes, events_file, nullptr, {}};
  for (const auto& [pid, p] : spool) c.process(p);
  if (c.out) c.out->close();
  const RunTally& t = c.t;
  judge_layers(t, spool.size(), report);
  const KinetoLossLines kineto = read_kineto_loss_lines(program_stderr, max_bytes);
  // Kineto counts no drops in its trace: a trace missing or cut, what the bounds left
  // unread, and its own warnings on stderr stand for them.
  report.loss = {{"traces_missing", t.missing},
                 {"traces_cut", t.cut},
                 {"traces_refused", t.refused},
                 {"over_bound_bytes", t.over_bound_bytes},
                 {"events_unread", t.events_unread},
                 // Kineto writes its log into the trace as well as to stderr (torch 2.11 still
                 // does, after the events): the larger count, not the sum.
                 {"kineto_stopped_tracing", std::max(kineto.stopped_tracing, t.kineto_stopped_in_traces)},
                 {"kineto_dropped_records", kineto.dropped_records},
                 {"kineto_log_unread_bytes", kineto.unread_bytes},
                 {"kineto_log_lines_unread_in_traces", t.kineto_log_lines_unread},
                 // The folder past its bounds: processes whose files were never looked at.
                 {"spool_names_unread", bounds.names_unread},
                 {"statuses_unread", bounds.statuses_unread}};
  fill_notes(t, kineto, report);
  // Kineto stamps unix time through its own TSC clock; the offset to CLOCK_MONOTONIC is ours.
  report.notes["clock"] = "Kineto's unix time (us) + CLOCK_REALTIME - CLOCK_MONOTONIC offset, +-1 ms";
  return report;
}

void TorchprofTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  if (!fs::is_regular_file(hook_dir_ / "sitecustomize.py") || !fs::is_regular_file(hook_dir_ / "cudatrace_torchprof.py"))
    throw std::runtime_error("torchprof hook not found in " + hook_dir_.string() + " (install the harness)");
  spool_ = target.writable_dir.empty() ? run_dir : target.writable_dir;
  clock_ = realtime_minus_monotonic();
  base_ns_ = kineto_base_for(clock_.realtime_minus_monotonic_ns + monotonic_ns());
  put_hook_first_on_pythonpath(launch, hook_dir_);
  launch.env[kTorchprofDirEnv] = spool_.string();
}

TracerReport TorchprofTracer::finish(const fs::path& run_dir) {
  TracerReport report = convert_torchprof_output(spool_, run_dir / kEventsFile, {clock_.realtime_minus_monotonic_ns, base_ns_},
                                                 max_bytes_, run_dir / "stderr.txt");
  report.notes["hook"] = hook_dir_.string();
  report.match_slack_ns = clock_.uncertainty_ns + 1000000;
  return report;
}

std::optional<std::map<std::string, int64_t>> TorchprofTracer::loss_without_events(const fs::path& run_dir) {
  std::map<std::string, int64_t> loss;
  SpoolBounds bounds = SpoolBounds::for_run(max_bytes_);
  for (const auto& [pid, p] : read_spool(spool_, "torchprof", &bounds)) {
    if (p.trace.empty() && phase_profiled(p.phase)) ++loss["traces_missing"];
    if (p.trace_tmp) ++loss["traces_cut"];
  }
  loss["spool_names_unread"] = bounds.names_unread;
  loss["statuses_unread"] = bounds.statuses_unread;
  const KinetoLossLines kineto = read_kineto_loss_lines(run_dir / "stderr.txt", max_bytes_);
  loss["kineto_stopped_tracing"] = kineto.stopped_tracing;
  loss["kineto_dropped_records"] = kineto.dropped_records;
  loss["kineto_log_unread_bytes"] = kineto.unread_bytes;
  return loss;
}

// Only the status files: whether any process got as far as profiling.
TracerReport TorchprofTracer::layers_without_events() {
  TracerReport report;
  RunTally t;
  SpoolBounds own_bounds = SpoolBounds::for_run(max_bytes_);
  const auto spool = read_spool(spool_, "torchprof", &own_bounds);
  for (const auto& [pid, p] : spool) {
    t.python_processes += p.has_status;
    t.profiled += phase_profiled(p.phase) || !p.trace.empty();
    t.forked += p.phase == "forked";
    t.without_cuda += p.phase == "torch_without_cuda" || p.phase == "armed";
    if (p.phase == "start_failed" && t.start_error.empty()) t.start_error = shown(p.status.value("error", std::string("?")), 300);
  }
  judge_layers(t, spool.size(), report);
  return report;
}

void TorchprofTracer::abandon(const fs::path&) {
  SpoolBounds own_bounds = SpoolBounds::for_run(max_bytes_);
  for (const auto& [pid, p] : read_spool(spool_, "torchprof", &own_bounds)) {
    std::error_code ec;
    const std::string stem = "torchprof." + std::to_string(pid);
    for (const char* ext : {".json", ".json.tmp", ".status.json", ".status.json.tmp"}) fs::remove(spool_ / (stem + ext), ec);
  }
}

}  // namespace cudatrace
