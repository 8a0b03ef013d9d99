#pragma once
// Method `devhook` and its per-thread mode, described from their folder (listed in tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> devhook_methods();

}  // namespace cudatrace
