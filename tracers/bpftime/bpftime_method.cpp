#include "tracers/bpftime/bpftime_method.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

namespace cudatrace {

std::vector<Method> bpftime_methods() {
  // Real bpftime beside devhook, when a user has it: it has no package to install from, so
  // the entry's job is to say where to get it and that running it is not implemented yet.
  Method bpftime{.name = "bpftime",
                 .summary = "eunomia-bpf's bpftime with a kernel-entry probe, beside devhook (when installed)",
                 .kind = MethodKind::kPlaceholder,
                 .built = true,
                 .issue = 55,
                 .needs_gpu = true};
  bpftime.unavailable_because = [] {
    const char* root = std::getenv("BPFTIME_ROOT");
    const std::filesystem::path found =
        root && *root ? std::filesystem::path(root) / "bin" / "bpftime" : find_on_path("bpftime");
    if (found.empty() || access(found.c_str(), X_OK) != 0)
      return std::string("bpftime is not installed (BPFTIME_ROOT unset or without bin/bpftime, none on PATH); it has ") +
             "no Debian package: build it from github.com/eunomia-bpf/bpftime (its installation.md)";
    return "bpftime found at " + found.string() + ", but running it is not implemented yet (issue #55; what its own "
           "CUDA examples did on an H200 is in tracers/bpftime/README.md): use devhook";
  };
  bpftime.make = [](const HostFacts&, const MethodOptions&) -> std::unique_ptr<Tracer> {
    throw std::runtime_error("the bpftime method is not implemented yet (issue #55)");
  };
  return {std::move(bpftime)};
}

}  // namespace cudatrace
