#pragma once
// Method `sanitizer`, described from its own folder: the registry only lists it.
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

std::vector<Method> sanitizer_methods();

}  // namespace cudatrace
