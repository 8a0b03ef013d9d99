#include "tracers/sanitizer/sanitizer_tracer.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "common/event_store.h"
#include "tracers/sanitizer/sanitizer_decode.h"
#include "tracers/sanitizer/sanitizer_format.h"

namespace cudatrace {

namespace fs = std::filesystem;
using namespace cudatrace::sanitizer;

const std::map<std::string, std::string> kSanitizerOptionHelp = {
    {"lib", "path of libsanitizer-public.so (default: the CUDA toolkit's compute-sanitizer folder, "
            "looked for under CUDA_HOME, CUDA_PATH, the toolkit this was built with and /usr/local/cuda)"},
    {"threads", "on: count the threads that entered each block too (one atomic per warp); off (default)"},
    {"slots", "launches counted per CUDA context before further launches run uncounted, counted as such (1 to " +
                  std::to_string(kMaxSlots) + ", default " + std::to_string(kDefaultSlots) +
                  "; 16 bytes of device memory each)"}};

SanitizerOptions sanitizer_options(const MethodOptions& options) {
  SanitizerOptions o;
  for (const auto& [key, value] : options) {
    if (key == "lib") {
      if (value.empty()) throw std::invalid_argument("sanitizer.lib wants the path of libsanitizer-public.so");
      o.library = value;
    } else if (key == "threads") {
      if (value != "on" && value != "off") throw std::invalid_argument("sanitizer.threads wants on or off, got '" + value + "'");
      o.threads = value == "on";
    } else if (key == "slots") {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || value[0] == '-' || *end || n == 0 || n > kMaxSlots)
        throw std::invalid_argument("sanitizer.slots wants 1 to " + std::to_string(kMaxSlots) + ", got '" + value + "'");
      o.slots = n;
    } else {
      throw std::invalid_argument("unknown sanitizer option '" + key + "' (valid: lib, threads, slots)");
    }
  }
  return o;
}

fs::path find_sanitizer_library(const fs::path& given, std::string& looked) {
  const char* name = "libsanitizer-public.so";
  if (!given.empty()) {
    looked = given.string();
    return access(given.c_str(), R_OK) == 0 && fs::is_regular_file(given) ? given : fs::path();
  }
  std::vector<fs::path> roots;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env); v && *v) roots.push_back(fs::path(v) / "compute-sanitizer");
#ifdef CUDATRACE_SANITIZER_BUILD_ROOT
  if (*CUDATRACE_SANITIZER_BUILD_ROOT) roots.push_back(CUDATRACE_SANITIZER_BUILD_ROOT);
#endif
  roots.push_back("/usr/local/cuda/compute-sanitizer");
  looked.clear();
  for (const auto& root : roots) {
    const fs::path candidate = root / name;
    looked += (looked.empty() ? "" : ", ") + candidate.string();
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return {};
}

fs::path sanitizer_injection_path(const fs::path& prefix) {
  return prefix / CUDATRACE_LIB_SUBDIR / "libcudatrace_sanitizer.so";
}

void SanitizerTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  if (!fs::exists(injection_)) throw std::runtime_error("sanitizer injection library not found at " + injection_.string());
  // The driver loads one injection library; a user's own would be silently replaced.
  if (const char* existing = std::getenv("CUDA_INJECTION64_PATH"); existing && *existing && injection_ != existing)
    throw std::runtime_error(std::string("CUDA_INJECTION64_PATH is already set (") + existing +
                             "): unset it to trace with the sanitizer method");
  out_ = target.writable_dir.empty() ? run_dir : target.writable_dir;
  launch.env["CUDA_INJECTION64_PATH"] = injection_.string();
  launch.env[kOutDirEnv] = out_.string();
  launch.env[kLibraryEnv] = library_.string();
  launch.env[kThreadsEnv] = options_.threads ? "on" : "off";
  if (options_.slots) launch.env[kSlotsEnv] = std::to_string(options_.slots);
}

TracerReport SanitizerTracer::finish(const fs::path& run_dir) {
  return convert_sanitizer_output(out_, run_dir / kEventsFile, child_, SanitizerBounds::for_run(max_bytes_));
}

void SanitizerTracer::abandon(const fs::path&) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_, ec))
    if (entry.path().filename().string().rfind("sanitizer.", 0) == 0) fs::remove(entry.path(), ec);
}

}  // namespace cudatrace
