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
  // The same tool recording every CUDA API: by default it skips some (cudaGetDevice among
  // them: on an H200 its cost there was the empty CUPTI subscriber's, and 40 ns less than
  // with every API, tracers/nsys/README.md). cupti records every call, so the benchmark
  // holds it against this one first (Method::cost_bars); it sees what nsys sees, and more.
  Method all = nsys;
  all.name = "nsys-all";
  all.summary = "Nsight Systems recording every CUDA API (--cuda-trace-all-apis=true; by default it skips some): "
                "what cupti's cost is held against";
  all.kind = MethodKind::kCostReference;
  all.issue = 52;
#ifdef CUDATRACE_HAVE_NSYS
  for (Method* m : {&nsys, &all}) {
    m->built = true;
    m->unavailable_because = [] {
      const NsysLocation where = locate_nsys();
      return where.nsys.empty() ? where.how : std::string();
    };
    m->make = [all_apis = m == &all](const HostFacts&, const MethodOptions&) -> std::unique_ptr<Tracer> {
      const NsysLocation where = locate_nsys();
      if (where.nsys.empty()) throw std::runtime_error(where.how);
      return std::make_unique<NsysTracer>(where.nsys, all_apis);
    };
  }
#else
  nsys.not_built_reason = all.not_built_reason = "built without libsqlite3.a (apt-get install libsqlite3-dev; rebuild)";
#endif
  return {std::move(nsys), std::move(all)};
}

}  // namespace cudatrace
