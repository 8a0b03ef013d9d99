#pragma once
// The `bpftime` placeholder, described from its own folder (listed in tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> bpftime_methods();

}  // namespace cudatrace
