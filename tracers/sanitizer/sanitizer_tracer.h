#pragma once
// Method `sanitizer`: a block counter inserted into the SASS of every kernel through the
// Compute Sanitizer patching API. The program runs with the method's injection library in
// CUDA_INJECTION64_PATH; the library writes what it counted into the program's folder
// (sanitizer_format.h) and sanitizer_decode.h turns that into device-layer events, one
// per launch with the blocks counted on the GPU.
#include <filesystem>
#include <string>

#include "tracers/tracer.h"

namespace cudatrace {

struct SanitizerOptions {
  std::filesystem::path library;  // libsanitizer-public.so; empty: looked for where toolkits keep it
  bool threads = false;           // count the threads that entered each block too
  uint64_t slots = 0;             // launch slots per context; 0: the library's default
};

// Throws std::invalid_argument naming the bad option.
SanitizerOptions sanitizer_options(const MethodOptions& options);
extern const std::map<std::string, std::string> kSanitizerOptionHelp;

// The sanitizer library to use: `given` when set, else the first found of the places a
// CUDA toolkit keeps it. Empty, with `looked` listing where it looked, when none.
std::filesystem::path find_sanitizer_library(const std::filesystem::path& given, std::string& looked);

std::filesystem::path sanitizer_injection_path(const std::filesystem::path& prefix);

class SanitizerTracer final : public Tracer {
 public:
  SanitizerTracer(std::filesystem::path injection, std::filesystem::path library, SanitizerOptions options,
                  uint64_t max_bytes)
      : injection_(std::move(injection)), library_(std::move(library)), options_(options), max_bytes_(max_bytes) {}
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  void attach(pid_t child) override { child_ = child; }
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;

 private:
  std::filesystem::path injection_, library_;
  SanitizerOptions options_;
  uint64_t max_bytes_ = 0;  // the run's --max-trace-bytes
  std::filesystem::path out_;
  pid_t child_ = 0;
};

}  // namespace cudatrace
