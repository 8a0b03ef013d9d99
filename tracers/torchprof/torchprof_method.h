#pragma once
// Method `torchprof`, the PyTorch profiler, described from its own folder (listed in
// tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> torchprof_methods();

}  // namespace cudatrace
