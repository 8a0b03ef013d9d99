#include "tracers/strace/strace_method.h"

#include "common/event.h"
#include "tracers/strace/strace_tracer.h"

namespace cudatrace {

std::vector<Method> strace_methods() {
  return {{.name = "strace",
           .summary = "the system's strace: syscalls (NVIDIA ioctls decoded) during each call",
           .kind = MethodKind::kMethod,
           .built = true,
           .issue = 7,
           .tools = {"strace"},
           .tool_packages = {{"strace", "strace"}},
           .layers = {layer::kSyscall},
           .limits = {{layer::kSyscall,
                       "a call during which its thread made no syscall (a kernel launch makes none) leaves no trace"}},
           .devices = {{layer::kSyscall,
                        {false, "an ioctl names a file descriptor, not a CUDA device: most go to /dev/nvidiactl and "
                                "/dev/nvidia-uvm, which serve every GPU"}}},
           .make = [](const HostFacts& host, const MethodOptions&) {
             return std::make_unique<StraceTracer>(find_on_path("strace"), host.max_trace_bytes);
           }}};
}

}  // namespace cudatrace
