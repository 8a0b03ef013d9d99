#pragma once
// What every workload shares: --flag=value parsing with defaults and --help, the ledger
// session, and one set of exit codes the harness understands.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "ledger/recorded_cuda.h"
#include "workloads/exit_codes.h"

#ifndef CUDATRACE_CUDART
#define CUDATRACE_CUDART "unknown"
#endif

namespace workload {

struct Flag {
  const char* help;
  long long value;
};

// Parses --name=N / --name N for the flags given; --help prints them and exits.
class Flags {
 public:
  Flags(const char* name, const char* summary, std::map<std::string, Flag> flags)
      : name_(name), summary_(summary), flags_(std::move(flags)) {}

  void parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--help" || a == "-h") usage(stdout, kOk);
      if (a.rfind("--", 0) != 0) fail("unexpected argument '" + a + "'");
      std::string key = a.substr(2), val;
      if (auto eq = key.find('='); eq != std::string::npos) {
        val = key.substr(eq + 1);
        key.resize(eq);
      } else if (i + 1 < argc) {
        val = argv[++i];
      } else {
        fail("--" + key + " needs a value");
      }
      auto it = flags_.find(key);
      if (it == flags_.end()) fail("unknown flag --" + key);
      char* end = nullptr;
      long long v = std::strtoll(val.c_str(), &end, 10);
      if (val.empty() || *end || v < 0) fail("--" + key + " wants a non-negative integer, got '" + val + "'");
      it->second.value = v;
    }
  }
  long long operator[](const std::string& key) const { return flags_.at(key).value; }

 private:
  [[noreturn]] void fail(const std::string& why) {
    std::fprintf(stderr, "%s: %s (see --help)\n", name_, why.c_str());
    std::exit(kUsage);
  }
  [[noreturn]] void usage(FILE* f, int code) {
    std::fprintf(f, "usage: %s [--flag=N ...]\n%s\n\nflags:\n", name_, summary_);
    for (auto& [k, v] : flags_) std::fprintf(f, "  --%-10s %s (default %lld)\n", k.c_str(), v.help, v.value);
    std::fprintf(f, "\nSet %s=FILE to record every CUDA call made (the ledger).\n", ledger::kEnvVar);
    std::exit(code);
  }
  const char* name_;
  const char* summary_;
  std::map<std::string, Flag> flags_;
};

// A call that must succeed: on failure, say which and stop with kCudaFailed.
#define MUST(call)                                                                          \
  do {                                                                                      \
    cudaError_t must_err_ = (call);                                                         \
    if (must_err_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s failed with CUDA error %d\n", __FILE__, __LINE__, #call, \
                   int(must_err_));                                                         \
      ledger::finish();                                                                     \
      std::exit(workload::kCudaFailed);                                                     \
    }                                                                                       \
  } while (0)

// Every GPU workload opens the same way: start the ledger, find a device, record the
// runtime version. Both calls are counted as intended.
inline void open_session(const char* name, int argc, char** argv) {
  ledger::start(name, CUDATRACE_CUDART, argc, argv);
  int version = 0, count = 0;
  MUST(rt::RuntimeGetVersion(&version));
  ledger::info("cuda_runtime_version", version);
  MUST(rt::GetDeviceCount(&count));
  if (count < 1) {
    std::fprintf(stderr, "%s: no CUDA device\n", name);
    ledger::finish();
    std::exit(kCudaFailed);
  }
  ledger::intend("cudaRuntimeGetVersion", 1);
  ledger::intend("cudaGetDeviceCount", 1);
}

inline int close_session(bool results_ok) {
  if (!ledger::finish()) return kCudaFailed;
  return results_ok ? kOk : kWrongResult;
}

}  // namespace workload
