#include "tracers/torchprof/torchprof_method.h"

#include <stdexcept>

#include "common/event.h"
#include "tracers/pyhook/python_hook.h"
#include "tracers/torchprof/torchprof_tracer.h"

namespace cudatrace {

std::vector<Method> torchprof_methods() {
  // The tracer most ML engineers already run, held to the same truth as ours.
  Method m{.name = "torchprof",
           .summary = "PyTorch profiler (torch.profiler, Kineto on CUPTI) around a whole Python program, its Chrome "
                      "trace converted",
           .kind = MethodKind::kMethod,
           .built = true,
           .issue = 54,
           .needs_gpu = true,
           .options = {{"python", "the interpreter asked whether torch is there (default python3 on PATH); the "
                                  "program's own python is what runs the hook"}},
           .layers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity}};
  m.not_for_workloads = "it profiles Python programs that import torch, and the workloads are C++ programs";
  m.limits = {
      {layer::kRuntime, "Kineto leaves out the calls on its blocklist (cudaGetDevice, cudaSetDevice, cudaGetLastError, "
                        "cudaEventCreate, cudaEventCreateWithFlags, cudaEventDestroy in 2026; the list varies by "
                        "version), and every call a process made before its first CUDA initialization through torch"},
      {layer::kDriver, "Kineto keeps only the driver calls it tracks (cuLaunchKernel(Ex), and the virtual memory calls "
                       "in recent versions), and none made before the process's first CUDA initialization through torch"},
      {layer::kGpuActivity, "kernels of a process that did not start CUDA through torch, or was forked from one that "
                            "profiled, are not traced"}};
  const std::string joined = "a launch, copy or set takes the device of its GPU record, joined by correlation id "
                             "within 65,536 calls; other calls name none: the trace does not say which context was "
                             "current for them";
  m.devices = {{layer::kRuntime, {true, joined}},
               {layer::kDriver, {true, joined}},
               {layer::kGpuActivity, {true, "the kernel record's device (CUPTI's deviceId), its bus id where the "
                                            "process could tell torch's device properties at exit"}}};
  m.unavailable_with = [](const MethodOptions& o) { return torchprof_python_problem(python_option(o)); };
  m.make = [](const HostFacts& host, const MethodOptions& o) -> std::unique_ptr<Tracer> {
    for (const auto& [key, value] : o)
      if (key != "python") throw std::invalid_argument("torchprof takes python=PATH, not '" + key + "'");
    return std::make_unique<TorchprofTracer>(torchprof_hook_dir(host.prefix), host.max_trace_bytes);
  };
  return {std::move(m)};
}

}  // namespace cudatrace
