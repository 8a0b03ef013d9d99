#pragma once
// What every workload shares that needs no CUDA header (dlopen links no CUDA library):
// --flag=value parsing with defaults and --help, and the host-side path taken when there
// is no usable GPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "ledger/ledger.h"
#include "workloads/exit_codes.h"

namespace workload {

struct Flag {
  const char* help;
  long long value;
};

inline constexpr const char* kHostPathHelp =
    "1: with no usable GPU, run the host-side path (calls up to the driver's refusal), exit 0";
// --host_path, which every workload takes: open_session() reads it.
inline bool g_host_path = false;

// Parses --name=N / --name N for the flags given; --help prints them and exits.
class Flags {
 public:
  Flags(const char* name, const char* summary, std::map<std::string, Flag> flags)
      : name_(name), summary_(summary), flags_(std::move(flags)) {
    flags_.emplace("host_path", Flag{kHostPathHelp, 0});  // a workload may default it to 1
  }

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
    g_host_path = flags_.at("host_path").value != 0;
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

// Times a call the workload makes through a looked-up pointer or the driver API, and
// records it in the ledger (layer "driver" or "runtime"); the rt:: wrappers do this for
// the runtime calls made by name.
template <class Call>
auto recorded_call(bool driver, const char* name, Call&& call, std::initializer_list<ledger::Arg> args) {
  const int64_t t0 = ledger::now();
  const auto r = call();
  if (driver)
    ledger::record_driver(name, t0, ledger::now(), int(r), args);
  else
    ledger::record(name, t0, ledger::now(), int(r), args);
  return r;
}

// A recorded call that must succeed: on failure, say which and stop with kCudaFailed.
#define MUST_CALL(DRIVER, WORKLOAD, NAME, CALL, ...)                                                         \
  do {                                                                                                       \
    const auto must_call_r_ = workload::recorded_call(DRIVER, NAME, [&] { return CALL; }, {__VA_ARGS__});   \
    if (int(must_call_r_) != 0) {                                                                            \
      std::fprintf(stderr, "%s: %s failed with CUDA error %d\n", WORKLOAD, NAME, int(must_call_r_));         \
      ledger::finish();                                                                                      \
      std::exit(workload::kCudaFailed);                                                                      \
    }                                                                                                        \
  } while (0)

// Codes (runtime and driver alike) with which CUDA says there is no GPU to use here: the
// toolkit's stub libcuda (34), no driver or too old a driver (35), no device (100).
inline bool means_no_gpu(int code) { return code == 34 || code == 35 || code == 100; }

// The driver refused at the first call that needs it: the calls made so far are the
// program's host-side path, which tracers must still see. The ledger says so, with the
// calls it holds as the intended ones, and the workload ends with success.
[[noreturn]] inline void host_path_only(const char* name, int code) {
  ledger::info("host_path_only", "no usable GPU: CUDA error " + std::to_string(code));
  std::fprintf(stderr, "%s: no usable GPU (CUDA error %d): ran the host-side path only\n", name, code);
  std::exit(ledger::finish() ? kOk : kCudaFailed);
}

inline int close_session(bool results_ok) {
  if (!ledger::finish()) return kCudaFailed;
  return results_ok ? kOk : kWrongResult;
}

}  // namespace workload
