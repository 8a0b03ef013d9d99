#include "tracers/cupti/cupti_injection.h"

#include <cstdlib>
#include <stdexcept>

namespace cudatrace {

namespace fs = std::filesystem;

fs::path cupti_injection_path(const fs::path& prefix) {
  return prefix / CUDATRACE_LIB_SUBDIR / "libcudatrace_cupti.so";
}

void CuptiInjectionTracer::prepare(Launch& launch, const Target&, const fs::path&) {
  if (!fs::exists(library_)) throw std::runtime_error("CUPTI injection library not found at " + library_.string());
  // The driver loads one injection library; a user's own would be silently replaced.
  if (const char* existing = std::getenv("CUDA_INJECTION64_PATH"); existing && *existing && library_ != existing)
    throw std::runtime_error(std::string("CUDA_INJECTION64_PATH is already set (") + existing +
                             "): unset it to trace with CUPTI");
  launch.env["CUDA_INJECTION64_PATH"] = library_.string();
  launch.env["CUDATRACE_CUPTI_MODE"] = bare_ ? "bare" : "full";
}

TracerReport CuptiInjectionTracer::finish(const fs::path&) {
  TracerReport report;  // no layers: a cost reference sees nothing
  report.notes["library"] = library_.string();
  report.notes["mode"] = bare_ ? "bare subscriber: an empty callback on every runtime and driver call, no activity"
                               : "injected with no collector attached: the probes' semaphores stay 0";
  return report;
}

}  // namespace cudatrace
