#include "tracers/sanitizer/sanitizer_method.h"

#include "common/event.h"
#include "tracers/sanitizer/sanitizer_tracer.h"

namespace cudatrace {

std::vector<Method> sanitizer_methods() {
  Method m{.name = "sanitizer",
           .summary = "Compute Sanitizer patching: a counter at every block's entry in the SASS of every kernel",
           .issue = 41,
           .needs_gpu = true,
           .options = kSanitizerOptionHelp,
           .layers = {layer::kDevice},
           .limits = {{layer::kDevice,
                       "kernels started from the device (device graph launches, dynamic parallelism) reach no launch "
                       "callback and are not counted; a launch's count is read when its context goes or the process "
                       "ends, so a kernel still running then reads short"}}};
  m.devices[layer::kDevice] = {true, "the device of the launch's context, and its bus id from the libcuda the "
                                     "process loaded (empty where a framework hid it: then the ordinal alone)"};
#ifdef CUDATRACE_HAVE_SANITIZER
  m.built = true;
  m.unavailable_with = [](const MethodOptions& o) -> std::string {
    SanitizerOptions options;
    try {
      options = sanitizer_options(o);
    } catch (const std::invalid_argument&) {
      return "";  // the option's own error comes when the method is made
    }
    std::string looked;
    if (find_sanitizer_library(options.library, looked).empty())
      return "the Compute Sanitizer library libsanitizer-public.so is not at " + looked +
             " (it ships in the CUDA toolkit's compute-sanitizer folder; give it with --set sanitizer.lib=PATH)";
    return "";
  };
  m.make = [](const HostFacts& host, const MethodOptions& o) -> std::unique_ptr<Tracer> {
    const SanitizerOptions options = sanitizer_options(o);
    std::string looked;
    const std::filesystem::path library = find_sanitizer_library(options.library, looked);
    if (library.empty()) throw std::runtime_error("libsanitizer-public.so not found at " + looked);
    return std::make_unique<SanitizerTracer>(sanitizer_injection_path(host.prefix), library, options,
                                             host.max_trace_bytes);
  };
#else
  m.not_built_reason =
      "built without the Compute Sanitizer headers (the CUDA toolkit's compute-sanitizer/include; "
      "cmake -DCUDATRACE_SANITIZER_INCLUDE=DIR; rebuild)";
#endif
  return {std::move(m)};
}

}  // namespace cudatrace
