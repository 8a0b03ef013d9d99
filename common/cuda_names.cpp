#include "common/cuda_names.h"

#include <cxxabi.h>

#include <array>
#include <cstdlib>
#include <cctype>
#include <cstdint>

namespace cudatrace {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Strips one version or stream-semantics suffix; returns true if it did.
bool strip_suffix(std::string& s) {
  for (std::string_view suffix : {"_ptsz", "_ptds"}) {
    if (ends_with(s, suffix)) {
      s.resize(s.size() - suffix.size());
      return true;
    }
  }
  // _v2 .. _v9 (the driver API's ABI revisions)
  if (s.size() > 3 && s[s.size() - 3] == '_' && s[s.size() - 2] == 'v' && std::isdigit(uint8_t(s.back()))) {
    s.resize(s.size() - 3);
    return true;
  }
  return false;
}

}  // namespace

std::string canonical_name(std::string_view name) {
  std::string s(name);
  while (strip_suffix(s)) {
  }
  if (s == "__cudaLaunchKernel") return "cudaLaunchKernel";  // after the suffix: _ptsz too
  return s;
}

std::string without_runtime_version(std::string name) {
  const size_t v = name.rfind("_v");
  if (v == std::string::npos || name.size() - v - 2 < 4) return name;
  for (size_t i = v + 2; i < name.size(); ++i)
    if (!std::isdigit(uint8_t(name[i]))) return name;
  name.resize(v);
  return name;
}

bool is_runtime_internal(std::string_view name) {
  return name.starts_with("__cuda") && canonical_name(name) != "cudaLaunchKernel";
}

bool is_runtime_launch(std::string_view c) {
  return c == "cudaLaunchKernel" || c == "cudaLaunchKernelExC" || c == "cudaLaunchCooperativeKernel";
}

bool is_driver_launch(std::string_view c) {
  return c == "cuLaunchKernel" || c == "cuLaunchKernelEx" || c == "cuLaunchCooperativeKernel";
}

std::string kernel_display_name(const std::string& device_function) {
  if (device_function.rfind("_Z", 0) != 0) return device_function;
  int status = 0;
  char* d = abi::__cxa_demangle(device_function.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) return device_function;
  std::string name = d;
  std::free(d);
  const size_t paren = name.find('(');
  return paren == std::string::npos ? name : name.substr(0, paren);
}

}  // namespace cudatrace
