#pragma once
// Method `preload`, described from its own folder (listed in tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> preload_methods();

}  // namespace cudatrace
