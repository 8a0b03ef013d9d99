#pragma once
// Method `nsys`, the reference, described from its own folder (listed in tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> nsys_methods();

}  // namespace cudatrace
