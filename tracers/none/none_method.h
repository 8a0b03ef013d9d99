#pragma once
// Method `none`, described from its own folder (listed in tracers/registry.cpp).
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> none_methods();

}  // namespace cudatrace
