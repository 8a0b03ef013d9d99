#pragma once
// Method `none`: the baseline. Runs the target untouched; observes nothing. Every other
// method's overhead is a difference to this one.
#include "tracers/tracer.h"

namespace cudatrace {

class NoneTracer final : public Tracer {
 public:
  void prepare(Launch&, const Target&, const std::filesystem::path&) override {}
  TracerReport finish(const std::filesystem::path&) override { return {}; }
};

}  // namespace cudatrace
