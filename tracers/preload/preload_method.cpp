#include "tracers/preload/preload_method.h"

#include "common/event.h"
#include "tracers/preload/preload_tracer.h"

namespace cudatrace {

std::vector<Method> preload_methods() {
  return {{.name = "preload",
           .summary = "LD_PRELOAD shim on the CUDA runtime and driver APIs",
           .kind = MethodKind::kMethod,
           .built = true,
           .issue = 3,
           .layers = {layer::kRuntime, layer::kDriver},
           .limits = {{layer::kRuntime,
                       "calls into a cudart linked statically (into the executable or a library) never reach the "
                       "libcudart.so exports the shim replaces"},
                      {layer::kDriver,
                       "driver calls through entry points resolved before the shim was loaded, or kept in a table of "
                       "the caller's own (neither the dynamic linker nor cuGetProcAddress), bypass the shim"}},
           .make = [](const HostFacts& host, const MethodOptions&) {
             return std::make_unique<PreloadTracer>(preload_shim_path(host.prefix));
           }}};
}

}  // namespace cudatrace
