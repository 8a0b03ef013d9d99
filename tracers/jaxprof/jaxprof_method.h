#pragma once
// Method `jaxprof`, JAX's own profiler, described from its own folder (listed in
// tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> jaxprof_methods();

}  // namespace cudatrace
