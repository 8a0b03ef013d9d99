#pragma once
// Method `strace`, described from its own folder (listed in tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> strace_methods();

}  // namespace cudatrace
