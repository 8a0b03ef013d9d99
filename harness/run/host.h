#pragma once
// What this machine is: GPU and driver (asked of libcuda directly, so the harness itself
// needs no CUDA runtime), privileges, kernel, tools. Feeds method availability and the
// results' environment manifest.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tracers/tracer.h"

namespace cudatrace {

// `prefix`: the install root the harness runs from.
HostFacts probe_host(const std::filesystem::path& prefix);

// GPU, driver, CUDA, kernel, OS, CPU, the versions of the tools `methods` use, the
// harness's revision.
nlohmann::json environment_manifest(const HostFacts& host, const std::vector<std::string>& methods);

// <prefix> of the running harness: the parent of the folder holding the executable.
std::filesystem::path self_prefix();

}  // namespace cudatrace
