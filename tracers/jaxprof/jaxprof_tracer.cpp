#include "tracers/jaxprof/jaxprof_tracer.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "common/event_store.h"
#include "common/outside_text.h"
#include "tracers/jaxprof/jaxprof_spool.h"
#include "tracers/jaxprof/jaxprof_trace.h"
#include "tracers/pyhook/python_hook.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr size_t kProcessesInNotes = 16;

// What every trace of a run added up to, and what it says of its processes.
struct RunTally {
  int64_t traces = 0, missing = 0;
  json loss = {{"traces_missing", 0}, {"traces_cut", 0}, {"traces_refused", 0}, {"over_bound_bytes", 0},
               {"events_unread", 0}};
  int64_t kernels = 0, driver = 0, launches_named_by_kernel = 0, host_spans = 0, gpu_other = 0;
  int64_t kernels_without_dims = 0, strings_cut = 0, invalid_utf8 = 0;
  int64_t python_processes = 0, without_jax = 0, without_backend = 0, profiled = 0, forked = 0, yielded = 0;
  double export_s = 0;
  json processes = json::array();
  std::string start_error, jax_not_profiled;
};

void add_reading(RunTally& t, const JaxTraceReading& r) {
  t.kernels += r.kernels;
  t.driver += r.driver_calls;
  t.launches_named_by_kernel += r.launches_named_by_kernel;
  t.host_spans += r.host_spans;
  t.gpu_other += r.gpu_other_events;
  t.kernels_without_dims += r.kernels_without_dims;
  t.strings_cut += r.strings_cut;
  t.invalid_utf8 += r.invalid_utf8_bytes;
  const json lost = jax_trace_loss(r);  // held: items() of a temporary would outlive it
  for (const auto& [counter, n] : lost.items()) t.loss[counter] = t.loss[counter].get<int64_t>() + n.get<int64_t>();
}

void tally_status(RunTally& t, const SpooledProcess& p) {
  if (!p.has_status) return;
  ++t.python_processes;
  if (p.phase == "ended_without_jax" || p.phase == "python") ++t.without_jax;
  if (p.phase == "jax_without_backend" || p.phase == "armed") ++t.without_backend;
  if (p.phase == "forked") ++t.forked;
  if (p.phase == "yielded_to_program") ++t.yielded;
  if (p.phase == "start_failed" && t.start_error.empty())
    t.start_error = shown(p.status.value("error", std::string("?")), 300);
  if (p.phase == "jax_not_profiled") t.jax_not_profiled = "pid " + std::to_string(p.pid);
}

// A run's traces read into one store, process by process, within one byte budget.
struct Conversion {
  uint64_t budget;
  const fs::path& events_file;
  std::unique_ptr<EventStoreWriter> out;
  RunTally t;

  void process(const HeldFolder& spool, JaxProcess& p);
  void trace(const JaxProcess& p, size_t i, json& note);
};

void Conversion::process(const HeldFolder& spool, JaxProcess& p) {
  const SpooledProcess& s = p.status;
  json note = {{"pid", s.pid}, {"phase", s.has_status ? (s.phase.empty() ? "unreadable" : s.phase) : "no status"}};
  tally_status(t, s);
  if (!s.status_error.empty()) note["status_error"] = s.status_error;
  if (const auto e = s.status.find("error"); e != s.status.end() && e->is_string()) note["error"] = shown(e->get<std::string>(), 300);
  if (const auto x = s.status.find("export_s"); x != s.status.end() && x->is_number()) t.export_s += x->get<double>();
  // The hook's start, unix ns, once start_trace had returned: said, not used as the trace's
  // start, which XLA does not write and which came before it.
  if (const auto since = s.status.find("profiling_since_ns"); since != s.status.end() && since->is_number_integer())
    note["hook_started_unix_ns"] = *since;
  std::vector<std::unique_ptr<HeldFolder>> held;  // the run folders the trace paths go through
  if (p.has_folder) find_jax_traces(spool, p, held);
  if (!p.folder_problem.empty()) note["folder"] = shown(p.folder_problem, 300);
  if (jax_phase_profiled(s.phase) || !p.traces.empty()) ++t.profiled;
  for (size_t i = 0; i < p.traces.size(); ++i) trace(p, i, note);
  // Run folders past the bound, or without a trace file: a trace that was not read.
  t.loss["traces_refused"] = t.loss["traces_refused"].get<int64_t>() + p.runs_unread;
  if (p.traces.empty() && jax_phase_profiled(s.phase)) {
    // Traced and wrote nothing readable: killed, os._exit, or the export failed.
    ++t.missing;
    note["trace"] = "missing";
  }
  if (t.processes.size() < kProcessesInNotes) t.processes.push_back(std::move(note));
}

void Conversion::trace(const JaxProcess& p, size_t i, json& note) {
  if (!out) out = std::make_unique<EventStoreWriter>(events_file);
  EventStoreWriter& store = *out;
  const TraceSink sink = [&store](const Event& e, const PackedArgs* args) {
    if (args) store.write(e, *args);
    else store.write(e);
  };
  // No base: the file does not write when its ts 0 was, and none is made up here.
  const JaxTraceReading r =
      read_jax_trace(p.traces[i], p.status.pid, JaxTraceClock{0}, p.status.bus_ids, JaxTraceLimits::for_run(budget), sink);
  ++t.traces;
  budget -= std::min(budget, r.file_bytes_read);
  add_reading(t, r);
  json& traces = note["traces"];
  json one = {{"file", p.trace_names[i]}, {"events", r.events()}};
  if (!r.unreadable.empty()) one["refused"] = r.unreadable;
  else if (!r.complete) one["cut"] = r.cut;
  traces.push_back(std::move(one));
}

const std::vector<std::string> kLayers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity};

const char* const kNoRuntime =
    "XLA's CUPTI tracer follows the driver API and writes no runtime call into its trace, though a JAX process makes "
    "some (CUPTI saw 1073 in a JAX 0.11 run): XLA launches through the driver";

// Which layers the run observed, from what its processes reached.
void judge_layers(const RunTally& t, size_t processes, TracerReport& report) {
  const auto unobserved_all = [&](const std::string& why) {
    for (const auto& l : kLayers) report.unobserved[l] = why;
  };
  if (processes == 0) {
    unobserved_all("no Python process loaded the profiler hook: the program is not Python, or runs python with -I, -E "
                   "or -S, or sets PYTHONPATH itself");
    return;
  }
  if (t.profiled == 0) {
    if (!t.start_error.empty())
      unobserved_all("jax.profiler could not start: " + t.start_error);
    else if (t.without_backend > 0)
      unobserved_all(std::to_string(t.without_backend) + " process(es) imported jax and none initialized a backend: "
                     "the trace starts at a process's first backend initialization, and there was none");
    else if (!t.jax_not_profiled.empty())
      unobserved_all("jax was imported in " + t.jax_not_profiled + " through a loader the hook could not wrap: the "
                     "trace never started");
    else
      unobserved_all(std::to_string(t.python_processes) + " Python process(es) ran and none imported jax: nothing "
                     "for jax.profiler to trace");
    return;
  }
  report.layers = {layer::kDriver, layer::kGpuActivity};
  report.unobserved[layer::kRuntime] = kNoRuntime;
  std::string also;
  if (t.forked > 0)
    also += "; " + std::to_string(t.forked) + " forked child process(es) not traced (the profiler does not survive fork)";
  if (t.yielded > 0)
    also += "; " + std::to_string(t.yielded) + " process(es) started jax.profiler themselves, which runs one trace at "
            "a time: the hook's trace ended there";
  report.partly_unobserved[layer::kDriver] =
      "XLA's CUPTI tracer keeps a few driver calls apart (cuLaunchHostFunc); a kernel launch is in the trace named "
      "after its kernel, not its driver function (counted in notes.launches_named_by_kernel, not converted), and "
      "every other driver call is not there, nor those of a process's backend initialization, before the trace "
      "starts" + also;
  if (!also.empty()) report.partly_unobserved[layer::kGpuActivity] = also.substr(2);
}

void fill_notes(const RunTally& t, TracerReport& report) {
  report.notes["processes"] = t.processes;
  report.notes["python_processes"] = t.python_processes;
  report.notes["processes_without_jax"] = t.without_jax;
  report.notes["processes_without_backend"] = t.without_backend;
  report.notes["processes_profiled"] = t.profiled;
  report.notes["forked_children_untraced"] = t.forked;
  report.notes["traces_yielded_to_the_program"] = t.yielded;
  report.notes["traces"] = t.traces;
  report.notes["kernels"] = t.kernels;
  report.notes["driver_calls"] = t.driver;
  report.notes["launches_named_by_kernel"] = t.launches_named_by_kernel;
  report.notes["host_spans"] = t.host_spans;
  report.notes["gpu_other_events"] = t.gpu_other;
  if (t.kernels_without_dims > 0) report.notes["kernels_without_dims"] = t.kernels_without_dims;
  if (t.strings_cut > 0) report.notes["strings_cut_at_64KiB"] = t.strings_cut;
  if (t.invalid_utf8 > 0) report.notes["bytes_not_utf8"] = t.invalid_utf8;
  report.notes["export_ms"] = int64_t(t.export_s * 1000);  // at exit, after the program's last step
}

}  // namespace

std::string jaxprof_python_problem(const std::string& python) { return python_module_problem(python, "jax", "jaxprof"); }

TracerReport convert_jaxprof_output(const fs::path& dir, const fs::path& events_file, uint64_t max_bytes) {
  TracerReport report;
  SpoolBounds bounds = SpoolBounds::for_run(max_bytes);
  std::map<int64_t, JaxProcess> spool = read_jax_spool(dir, &bounds);
  const HeldFolder held(dir);
  Conversion c{max_bytes, events_file, nullptr, {}};
  for (auto& [pid, p] : spool) c.process(held, p);
  if (c.out) c.out->close();
  RunTally& t = c.t;
  judge_layers(t, spool.size(), report);
  report.loss = t.loss;
  report.loss["traces_missing"] = t.missing;
  report.loss["spool_names_unread"] = bounds.names_unread;  // processes never looked at
  report.loss["statuses_unread"] = bounds.statuses_unread;
  fill_notes(t, report);
  report.notes["clock"] = "unknown: jax.profiler's times count from its trace's start, which the file does not write; "
                          "each process's events keep those relative times (from 0), not the harness's clock";
  return report;
}

void JaxprofTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  if (!fs::is_regular_file(hook_dir_ / "sitecustomize.py") || !fs::is_regular_file(hook_dir_ / "cudatrace_jaxprof.py") ||
      !fs::is_regular_file(hook_dir_ / "cudatrace_hook.py"))
    throw std::runtime_error("jaxprof hook not found in " + hook_dir_.string() + " (install the harness)");
  spool_ = target.writable_dir.empty() ? run_dir : target.writable_dir;
  put_hook_first_on_pythonpath(launch, hook_dir_);
  launch.env[kJaxprofDirEnv] = spool_.string();
}

TracerReport JaxprofTracer::finish(const fs::path& run_dir) {
  TracerReport report = convert_jaxprof_output(spool_, run_dir / kEventsFile, max_bytes_);
  report.notes["hook"] = hook_dir_.string();
  return report;
}

std::optional<std::map<std::string, int64_t>> JaxprofTracer::loss_without_events(const fs::path&) {
  std::map<std::string, int64_t> loss{{"traces_missing", 0}};
  const HeldFolder held(spool_);
  SpoolBounds bounds = SpoolBounds::for_run(max_bytes_);
  for (auto& [pid, p] : read_jax_spool(spool_, &bounds)) {
    std::vector<std::unique_ptr<HeldFolder>> runs;
    if (p.has_folder) find_jax_traces(held, p, runs);
    if (p.traces.empty() && jax_phase_profiled(p.status.phase)) ++loss["traces_missing"];
  }
  loss["spool_names_unread"] = bounds.names_unread;
  loss["statuses_unread"] = bounds.statuses_unread;
  return loss;
}

// Only the status files: whether any process got as far as tracing.
TracerReport JaxprofTracer::layers_without_events() {
  TracerReport report;
  RunTally t;
  SpoolBounds bounds = SpoolBounds::for_run(max_bytes_);
  const auto spool = read_jax_spool(spool_, &bounds);
  for (const auto& [pid, p] : spool) {
    tally_status(t, p.status);
    t.profiled += jax_phase_profiled(p.status.phase) || p.has_folder;
  }
  judge_layers(t, spool.size(), report);
  return report;
}

void JaxprofTracer::abandon(const fs::path&) {
  SpoolBounds bounds = SpoolBounds::for_run(max_bytes_);
  for (const auto& [pid, p] : read_jax_spool(spool_, &bounds)) {
    std::error_code ec;
    const std::string stem = "jaxprof." + std::to_string(pid);
    for (const char* ext : {".status.json", ".status.json.tmp"}) fs::remove(spool_ / (stem + ext), ec);
    // remove_all does not follow links: a planted one is removed, not what it points to.
    if (p.has_folder) fs::remove_all(spool_ / stem, ec);
  }
}

}  // namespace cudatrace
