#include "tracers/nsys/nsys_tracer.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "common/clock.h"
#include "common/event_io.h"
#include "common/event_store.h"
#include "tracers/nsys/nsys_capture.h"

namespace cudatrace {

namespace fs = std::filesystem;

namespace {

bool executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

// The numbers in a version folder's name: "2025.3.1" -> {2025, 3, 1}.
std::vector<long> version_of(const std::string& name) {
  std::vector<long> v;
  for (size_t i = 0; i < name.size();) {
    if (!std::isdigit(uint8_t(name[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < name.size() && std::isdigit(uint8_t(name[end]))) ++end;
    v.push_back(std::strtol(name.substr(i, end - i).c_str(), nullptr, 10));
    i = end;
  }
  return v;
}

// Every `parent/<prefix>*/suffix` that is an executable file, the newest version first
// (2025.3.1 before 2024.6.2: compared as numbers).
std::vector<fs::path> versioned(const fs::path& parent, const std::string& prefix, const fs::path& suffix) {
  std::vector<std::pair<std::vector<long>, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    if (fs::path candidate = entry.path() / suffix; executable_file(candidate))
      found.push_back({version_of(name), candidate});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

const char* const kGetIt = "install Nsight Systems (developer.nvidia.com/nsight-systems) or set NSYS to its nsys";

}  // namespace

NsysLocation locate_nsys() {
  if (const char* env = std::getenv("NSYS"); env && *env) {
    if (executable_file(env)) return {env, "NSYS"};
    return {{}, std::string("NSYS=") + env + " is not an executable file"};
  }
  if (fs::path on_path = find_on_path("nsys"); !on_path.empty()) return {on_path, "PATH"};
  std::vector<fs::path> candidates;
  for (const char* family : {"nsight-systems-cli", "nsight-systems"})
    for (auto& p : versioned("/opt/nvidia", family, "bin/nsys")) candidates.push_back(p);
  if (executable_file("/usr/local/cuda/bin/nsys")) candidates.push_back("/usr/local/cuda/bin/nsys");
  // Nsight Compute carries an nsys CLI of its own (capture only: see nsys_tracer.h).
  for (auto& p : versioned("/opt/nvidia/nsight-compute", "", "host/target-linux-x64/nsys")) candidates.push_back(p);
  if (!candidates.empty()) return {candidates.front(), candidates.front().parent_path().string()};
  return {{}, std::string("nsys not found (NSYS unset, none on PATH, none under /opt/nvidia or /usr/local/cuda/bin): ") +
                  kGetIt};
}

std::vector<std::string> NsysTracer::profile_args(const fs::path& nsys, const fs::path& output_base, bool all_apis) {
  std::vector<std::string> args = {nsys.string(),
                                   "profile",
                                   "--trace=cuda",                   // runtime and driver API calls, kernels, copies
                                   "--sample=none",                  // no CPU sampling: the cost measured is tracing's
                                   "--cpuctxsw=none",
                                   "--trace-fork-before-exec=true",  // forked workers (multiproc) too
                                   "--output=" + output_base.string()};
  if (all_apis) args.insert(args.end() - 1, "--cuda-trace-all-apis=true");
  return args;
}

std::vector<std::string> NsysTracer::export_args(const fs::path& nsys, const fs::path& output_base) {
  return {nsys.string(), "export", "--type=sqlite", "--output=" + output_base.string() + ".sqlite",
          output_base.string() + ".nsys-rep"};
}

NsysTracer::NsysTracer(fs::path nsys, bool all_apis) : nsys_(std::move(nsys)), all_apis_(all_apis) {
  std::error_code ec;
  const fs::path real = fs::canonical(nsys_, ec);
  if (!ec) install_ = real.parent_path().parent_path();
}

std::optional<std::string> NsysTracer::owns_leftover(const std::string& name, const std::string& exe) const {
  // comm is cut to 15 characters: CudaGpuInfoDumper reads CudaGpuInfoDump.
  static const std::set<std::string> names = {"nsys", "nsys-launcher", "nsys-tee", "QdstrmImporter", "CudaGpuInfoDump"};
  static const std::set<std::string> programs = {"nsys", "nsys-launcher", "QdstrmImporter", "CudaGpuInfoDumper"};
  bool ours = names.count(name) > 0;
  if (!ours && !exe.empty() && !install_.empty()) {
    const fs::path p(exe);
    const bool below = std::mismatch(install_.begin(), install_.end(), p.begin(), p.end()).first == install_.end();
    ours = below && programs.count(p.filename().string()) > 0;
  }
  if (!ours) return std::nullopt;
  return "nsys's own helper (the tracer's, not the program's): Nsight Systems' agent, launcher or tools can outlive "
         "nsys profile";
}

void NsysTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  base_ = (target.writable_dir.empty() ? run_dir : target.writable_dir) / "nsys";
  clock_ = realtime_minus_monotonic();
  std::vector<std::string> argv = profile_args(nsys_, base_, all_apis_);
  argv.insert(argv.end(), launch.argv.begin(), launch.argv.end());
  launch.argv = std::move(argv);
  // Not a wrapper in the runner's sense: nsys waits for the program's processes itself and
  // then writes its report, which must not be cut short when the program has ended.
}

std::vector<std::string> NsysTracer::conversion(const fs::path&) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(base_.string() + ".nsys-rep", ec))) return {};
  return export_args(nsys_, base_);
}

void NsysTracer::converted(bool ok, const std::string& detail) {
  if (!ok) conversion_failed_ = detail;
}

TracerReport NsysTracer::finish(const fs::path& run_dir) {
  TracerReport report;
  report.notes["nsys"] = nsys_.string();
  const std::vector<std::string> layers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity};
  auto unobserved_all = [&](const std::string& why) {
    for (const auto& l : layers) report.unobserved[l] = why;
  };
  std::error_code ec;
  const bool report_file = fs::is_regular_file(fs::symlink_status(base_.string() + ".nsys-rep", ec));
  const bool qdstrm = fs::is_regular_file(fs::symlink_status(base_.string() + ".qdstrm", ec));
  if (!report_file) {
    if (qdstrm)
      unobserved_all("this nsys (" + nsys_.string() + ") left only a .qdstrm capture: it has no importer to make a "
                     "report of it (a capture-only CLI, e.g. the one inside Nsight Compute); per-call cost is "
                     "measured, events need a full Nsight Systems install");
    else
      report.error = "nsys wrote no capture (" + base_.string() + ".nsys-rep): see stderr.txt";
    return report;
  }
  if (conversion_failed_) {
    unobserved_all("nsys export --type=sqlite failed: " + *conversion_failed_);
    return report;
  }
  // Each event goes to the store as it is read; a capture that fails part way leaves no
  // store behind (its events are not usable, and the layers say why).
  NsysCapture capture;
  {
    EventStoreWriter out(run_dir / kEventsFile);
    capture = read_nsys_capture(base_.string() + ".sqlite", clock_.realtime_minus_monotonic_ns,
                                [&out](Event&& e) { out.write(e); });
    out.close();
  }
  if (!capture.error.empty()) {
    std::error_code ec;
    fs::remove(run_dir / kEventsFile, ec);
    unobserved_all("the capture's SQLite export could not be read: " + capture.error);
    return report;
  }
  report.layers = layers;
  if (!capture.return_codes)
    for (const char* l : {layer::kRuntime, layer::kDriver})
      report.partly_unobserved[l] = "this Nsight Systems' export has no returnValue column: no return codes";
  // Nsight Systems exports no loss count: kernels whose launch is not in the capture are
  // the gap the events themselves show, and its warnings that speak of dropped or lost
  // data are its own word on it (their texts in the notes).
  report.loss = {{"kernels_without_launch", capture.kernels - capture.kernels_joined},
                 {"nsys_warnings_of_loss", capture.warnings_of_loss}};
  report.notes["nsys_warnings"] = capture.warnings;
  report.notes["nsys_warning_examples"] = capture.warning_examples;
  report.notes["runtime_calls"] = capture.runtime_calls;
  report.notes["driver_calls"] = capture.driver_calls;
  report.notes["kernels"] = capture.kernels;
  report.notes["tables_absent"] = capture.missing_tables;  // nsys creates tables only for what it saw
  report.notes["device_bus_ids"] = capture.device_ids;  // false: kernels carry ordinals only
  report.notes["realtime_minus_monotonic_ns"] = clock_.realtime_minus_monotonic_ns;
  // The session-relative times are placed through the session's UTC start; how exactly
  // nsys stamps that start is its own: the matcher allows 1 ms on top of our offset read.
  report.notes["clock"] = "session start (TARGET_INFO_SESSION_START_TIME.utcEpochNs) + CLOCK_MONOTONIC offset, +-1 ms";
  report.match_slack_ns = clock_.uncertainty_ns + 1000000;
  return report;
}

void NsysTracer::abandon(const fs::path&) {
  for (const char* ext : {".nsys-rep", ".qdstrm", ".sqlite"}) {
    std::error_code ec;
    fs::remove(base_.string() + ext, ec);
  }
}

}  // namespace cudatrace
