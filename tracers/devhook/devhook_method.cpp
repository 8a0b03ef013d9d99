#include "tracers/devhook/devhook_method.h"

#include <stdexcept>

#include "common/event.h"
#ifdef CUDATRACE_HAVE_DEVHOOK
#include "tracers/devhook/devhook_tracer.h"
#endif

namespace cudatrace {

std::vector<Method> devhook_methods() {
  // The devhook method, and the same with a probe in every thread (its heavy end), so that
  // both modes can be compared with `none` in one run; the benchmark prices the second.
  std::vector<Method> out;
  for (const bool per_thread : {false, true}) {
    Method devhook{.name = per_thread ? "devhook-thread" : "devhook",
                   .summary = per_thread ? "the devhook method with mode=thread: a record per thread, not per block"
                                         : "bpftime-style device hooks: probes injected into kernel PTX, a ring in "
                                           "device memory drained while kernels run",
                   .kind = per_thread ? MethodKind::kCostReference : MethodKind::kMethod,
                   .issue = 6,
                   .needs_gpu = true,
                   .layers = {layer::kDevice},
                   .limits = {{layer::kDevice,
                               "kernels loaded without PTX (machine code only) cannot be rewritten, and launches the "
                               "agent did not see being loaded run unprobed"}}};
    devhook.devices[layer::kDevice] = {true, "the device of the context the kernel was launched in, and its bus id, "
                                             "as the agent asked the driver when it set that context up"};
#ifdef CUDATRACE_HAVE_DEVHOOK
    devhook.built = true;
    devhook.options = kDevhookOptionHelp;
    if (per_thread) devhook.options.erase("mode");
    devhook.make = [per_thread](const HostFacts& host, const MethodOptions& o) {
      DevhookOptions options = devhook_options(o);
      if (per_thread) {
        if (o.count("mode")) throw std::invalid_argument("devhook-thread is mode=thread; it takes no mode option");
        options.mode = devhook::ProbeMode::kThread;
      }
      return std::make_unique<DevhookTracer>(devhook_agent_path(host.prefix), options);
    };
#else
    devhook.not_built_reason = "built without libzstd.a (apt-get install libzstd-dev; rebuild)";
#endif
    out.push_back(std::move(devhook));
  }
  return out;
}

}  // namespace cudatrace
