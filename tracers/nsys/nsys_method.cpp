#include "tracers/nsys/nsys_method.h"

#include <stdexcept>

#include "common/event.h"
#ifdef CUDATRACE_HAVE_NSYS
#include "tracers/nsys/nsys_tracer.h"
#endif

namespace cudatrace {

std::vector<Method> nsys_methods() {
  // Nsight Systems beside our methods: the tool users already have, found where it is
  // usually installed; its events when its install can export them (nsys_tracer.h).
  Method nsys{.name = "nsys",
              .summary = "NVIDIA Nsight Systems (nsys profile --trace=cuda), when installed: the reference",
              .kind = MethodKind::kReference,
              .issue = 19,
              .needs_gpu = true,
              .layers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity}};
  for (const auto& l : nsys.layers)
    nsys.limits[l] = "what this Nsight Systems' capture or its SQLite export leaves out is not seen";
  const std::string no_context = "the export does not say which context was current for a call; a kernel launch "
                                 "takes the device of the kernel it launched, other calls name none";
  nsys.devices = {{layer::kRuntime, {true, no_context}},
                  {layer::kDriver, {true, no_context}},
                  {layer::kGpuActivity, {true, "the kernel's deviceId, and its bus id where the export maps the "
                                               "process's devices (TARGET_INFO_CUDA_DEVICE, TARGET_INFO_GPU)"}}};
#ifdef CUDATRACE_HAVE_NSYS
  nsys.built = true;
  nsys.unavailable_because = [] {
    const NsysLocation where = locate_nsys();
    return where.nsys.empty() ? where.how : std::string();
  };
  nsys.make = [](const HostFacts&, const MethodOptions&) -> std::unique_ptr<Tracer> {
    const NsysLocation where = locate_nsys();
    if (where.nsys.empty()) throw std::runtime_error(where.how);
    return std::make_unique<NsysTracer>(where.nsys);
  };
#else
  nsys.not_built_reason = "built without libsqlite3.a (apt-get install libsqlite3-dev; rebuild)";
#endif
  return {std::move(nsys)};
}

}  // namespace cudatrace
