#include "tracers/jaxprof/jaxprof_method.h"

#include <stdexcept>

#include "common/event.h"
#include "tracers/jaxprof/jaxprof_tracer.h"
#include "tracers/pyhook/python_hook.h"

namespace cudatrace {

std::vector<Method> jaxprof_methods() {
  // The profiler a JAX user already has, held to the same truth as ours.
  Method m{.name = "jaxprof",
           .summary = "JAX's profiler (jax.profiler.start_trace, XLA's CUPTI tracer) around a whole Python program, "
                      "its Perfetto trace converted",
           .kind = MethodKind::kMethod,
           .built = true,
           .issue = 54,
           .needs_gpu = true,
           .options = {{"python", "the interpreter asked whether jax is there (default python3 on PATH); the "
                                  "program's own python is what runs the hook"}},
           .layers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity}};
  m.not_for_workloads = "it profiles Python programs that use jax, and the workloads are C++ programs";
  m.limits = {
      {layer::kRuntime, "XLA's CUPTI tracer writes no runtime call into its trace: XLA launches through the driver, "
                        "and the runtime calls a JAX process makes are not there"},
      {layer::kDriver, "XLA's CUPTI tracer keeps a few driver calls apart (cuLaunchHostFunc); kernel launches are "
                       "named after their kernel, not their function, and the rest are not in the trace, nor any "
                       "made before a process's first backend initialization"},
      {layer::kGpuActivity, "kernels of a process that initialized no JAX backend, was forked from one that traced, "
                            "or ran before its backend's initialization, are not traced"}};
  m.devices = {{layer::kRuntime, {false, "no runtime call is in the trace"}},
               {layer::kDriver, {false, "the trace does not say which context was current for a driver call"}},
               {layer::kGpuActivity, {true, "the kernel's GPU process in the trace (/device:GPU:N), an ordinal as "
                                            "the process numbers its GPUs; the bus id from the host's table"}}};
  m.unavailable_with = [](const MethodOptions& o) { return jaxprof_python_problem(python_option(o)); };
  m.make = [](const HostFacts& host, const MethodOptions& o) -> std::unique_ptr<Tracer> {
    for (const auto& [key, value] : o)
      if (key != "python") throw std::invalid_argument("jaxprof takes python=PATH, not '" + key + "'");
    return std::make_unique<JaxprofTracer>(python_hook_dir(host.prefix, "jaxprof"), host.max_trace_bytes);
  };
  return {std::move(m)};
}

}  // namespace cudatrace
