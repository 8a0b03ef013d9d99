#include "tracers/none/none_method.h"

#include "tracers/none/none_tracer.h"

namespace cudatrace {

std::vector<Method> none_methods() {
  // The untraced run: what every cost is a difference to, and what a traced program's exit
  // is checked against. It observes nothing, so nothing of its can be missing.
  return {{.name = "none",
           .summary = "no tracing: the baseline every overhead is measured against",
           .kind = MethodKind::kReference,
           .built = true,
           .make = [](const HostFacts&, const MethodOptions&) { return std::make_unique<NoneTracer>(); }}};
}

}  // namespace cudatrace
