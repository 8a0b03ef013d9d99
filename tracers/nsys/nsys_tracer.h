#pragma once
// Method `nsys`: the program run under NVIDIA Nsight Systems (`nsys profile --trace=cuda`),
// the tool most users already have, as a reference beside our methods. Its per-call cost
// is measured like any method's; its events come from `nsys export --type sqlite`, run as
// the program's user after the run, and read by nsys_capture. Some installs (the CLI that
// Nsight Compute carries, a target-only copy) cannot turn their capture into a report:
// they leave a .qdstrm only, and the run says so, layer by layer, instead of a zero.
#include <optional>

#include "common/clock.h"
#include "tracers/tracer.h"

namespace cudatrace {

// Where Nsight Systems is, and how it was found (or where it was looked for).
struct NsysLocation {
  std::filesystem::path nsys;  // empty: not found
  std::string how;             // "NSYS", "PATH", "/opt/nvidia/...": or, when not found, why
};
// NSYS (a path to the nsys program) first, then PATH, then the usual install folders:
// /opt/nvidia/nsight-systems*/*/bin, /usr/local/cuda/bin, and the CLI inside
// /opt/nvidia/nsight-compute/*/host/target-linux-x64 (newest version first).
NsysLocation locate_nsys();

class NsysTracer final : public Tracer {
 public:
  // all_apis: --cuda-trace-all-apis=true (method nsys-all): by default Nsight Systems "skips
  // some CUDA APIs that are not critical for performance analysis" (its --help, 2025.3).
  NsysTracer(std::filesystem::path nsys, bool all_apis);
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  std::vector<std::string> conversion(const std::filesystem::path& run_dir) override;
  void converted(bool ok, const std::string& detail) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;
  // nsys's agent (`nsys --start-agent`, a daemon reparented to the harness), its launcher
  // (nsys-launcher, nsys-tee) and the tools it runs (QdstrmImporter, CudaGpuInfoDumper)
  // can outlive `nsys profile`: by name, or by an executable of those names in the folder
  // nsys was found in.
  std::optional<std::string> owns_leftover(const std::string& name, const std::string& exe) const override;

  // nsys's arguments before the program's argv, and the export's (exposed for the tests).
  static std::vector<std::string> profile_args(const std::filesystem::path& nsys, const std::filesystem::path& output_base,
                                               bool all_apis = false);
  static std::vector<std::string> export_args(const std::filesystem::path& nsys, const std::filesystem::path& output_base);

 private:
  std::filesystem::path nsys_;
  bool all_apis_ = false;
  std::filesystem::path install_;  // the folder above nsys's own (its helpers are in its subfolders)
  std::filesystem::path base_;  // <program's folder>/nsys: nsys adds .nsys-rep, .qdstrm; we add .sqlite
  ClockOffset clock_;  // read at prepare(): the tool stamps wall-clock time
  std::optional<std::string> conversion_failed_;
};

}  // namespace cudatrace
