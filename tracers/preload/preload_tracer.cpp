#include "tracers/preload/preload_tracer.h"

#include <map>
#include <string>

#include "common/event_store.h"
#include "tracers/preload/preload_follower.h"
#include "tracers/preload/preload_format.h"

namespace cudatrace {

namespace fs = std::filesystem;
using namespace cudatrace::preload;

fs::path preload_shim_path(const fs::path& prefix) {
  return prefix / CUDATRACE_LIB_SUBDIR / "libcudatrace_preload.so";
}

PreloadTracer::PreloadTracer(fs::path shim, bool devices, uint64_t max_bytes)
    : shim_(std::move(shim)), devices_(devices), max_bytes_(max_bytes) {}
PreloadTracer::~PreloadTracer() = default;

void PreloadTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  preload_first(launch, shim_, "preload shim");
  run_dir_ = run_dir;
  cudart_ = target.cudart;
  spool_ = target.writable_dir.empty() ? run_dir : target.writable_dir;
  launch.env[kDirEnv] = spool_.string();
  if (!devices_) launch.env[kDevicesEnv] = "off";
}

// Before the program execs: the store is opened by the harness now (its tap counts what is
// written), and the shim's files are converted as they grow.
void PreloadTracer::attach(pid_t) { live_ = std::make_unique<preload::PreloadFollower>(spool_, run_dir_ / kEventsFile, max_bytes_); }

TracerReport PreloadTracer::finish(const fs::path& run_dir) {
  TracerReport report = live_ ? live_->finish() : convert_preload_output(spool_, run_dir / kEventsFile, max_bytes_);
  live_.reset();
  // The runtime layer from the linkage, as the benchmark is told it; the rest from the records.
  const TracerReport by_linkage = layers_without_events();
  report.layers = by_linkage.layers;
  report.unobserved.insert(by_linkage.unobserved.begin(), by_linkage.unobserved.end());
  // Without a driver, cudart never loads libcuda: no driver call can happen, so there is
  // nothing to score the driver layer on (rather than a 0% the tracer did not earn).
  if (report.notes["driver_entry_points_resolved"].get<int64_t>() > 0 || report.notes["driver_records"].get<int64_t>() > 0)
    report.layers.push_back(layer::kDriver);
  else
    report.unobserved[layer::kDriver] = "the program never reached libcuda.so.1 (no driver, or no driver call made)";
  if (report.unobserved.count(layer::kRuntime) == 0 && report.notes.contains("runtime_linked_into")) {
    std::string objects;
    for (const auto& o : report.notes["runtime_linked_into"])
      objects += (objects.empty() ? "" : ", ") + o["object"].get<std::string>();
    report.partly_unobserved[layer::kRuntime] =
        "runtime calls from " + objects + " not observable: a cudart linked into it asks cuGetProcAddress for its "
        "own driver entry points, so its calls never reach the libcudart.so exports the shim replaces (its driver "
        "calls are recorded)";
  }
  // Exports the shim lacks matter where an object is linked to call one of them: such a
  // call binds past the shim. (Looked up by dlsym or cuGetProcAddress, it is recorded.)
  if (report.notes.contains("uncovered_calls_linked_by")) {
    std::map<std::string, std::string> which;  // layer -> "object: names", ...
    for (const auto& [object, names] : report.notes["uncovered_calls_linked_by"].items())
      for (const auto& n : names) {
        const std::string name = n.get<std::string>();
        std::string& w = which[name.rfind("cuda", 0) == 0 ? layer::kRuntime : layer::kDriver];
        w += (w.empty() ? "" : ", ") + name + " (" + fs::path(object).filename().string() + ")";
      }
    for (const auto& [l, calls] : which)
      if (report.unobserved.count(l) == 0 && report.partly_unobserved.count(l) == 0)
        report.partly_unobserved[l] = "calls to " + calls +
                                      " are not recorded: the program links them, and the shim's CUDA toolkit is "
                                      "older than the library that exports them";
  }
  report.notes["shim"] = shim_.string();
  return report;
}

// Only the linkage is known without the records: the driver layer and the cudart copies
// inside libraries are judged from what the shim wrote.
TracerReport PreloadTracer::layers_without_events() {
  TracerReport report;
  if (cudart_ == "static")
    report.unobserved[layer::kRuntime] =
        "cudart is linked statically into the executable: its calls never reach the libcudart.so exports the shim "
        "replaces";
  else
    report.layers.push_back(layer::kRuntime);
  return report;
}

void PreloadTracer::abandon(const fs::path&) {
  live_.reset();  // the partial store goes with the unclosed writer
  for (const auto& entry : fs::directory_iterator(spool_))
    if (entry.path().filename().string().rfind("preload.", 0) == 0) fs::remove(entry.path());
}

}  // namespace cudatrace
