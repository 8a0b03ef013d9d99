#pragma once
// Method `uprobe` and its cost references, described from their folder (listed in tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> uprobe_methods();

}  // namespace cudatrace
