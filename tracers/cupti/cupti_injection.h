#pragma once
// The injection half of the cupti methods: the child gets CUDA_INJECTION64_PATH naming
// libcudatrace_cupti.so, which the CUDA driver loads at cuInit. Alone (no collector) this
// is a cost reference for the per-call benchmark, in two forms:
//   cupti-inject  the library as `cupti` runs it, with no collector attached to its probes
//   cupti-bare    a CUPTI subscriber whose callback does nothing, and no activity records
// Neither observes anything. CuptiTracer (cupti_tracer.h) adds the collector.
#include "tracers/tracer.h"

namespace cudatrace {

std::filesystem::path cupti_injection_path(const std::filesystem::path& prefix);

class CuptiInjectionTracer : public Tracer {
 public:
  CuptiInjectionTracer(std::filesystem::path library, bool bare) : library_(std::move(library)), bare_(bare) {}
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  TracerReport finish(const std::filesystem::path& run_dir) override;

 protected:
  std::filesystem::path library_;
  bool bare_;
};

}  // namespace cudatrace
