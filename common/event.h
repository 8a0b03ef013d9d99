#pragma once
// The event record every tracer writes and the ledger uses too (schema/event.v1.schema.json).
// One JSON object per line; "v" first. Layers: runtime, driver, device, gpu-activity,
// syscall, plus "meta" for records that describe the stream rather than a call.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cudatrace {

inline constexpr int kEventVersion = 1;

namespace layer {
inline constexpr const char* kRuntime = "runtime";
inline constexpr const char* kDriver = "driver";
inline constexpr const char* kDevice = "device";
inline constexpr const char* kGpuActivity = "gpu-activity";
inline constexpr const char* kSyscall = "syscall";
inline constexpr const char* kMeta = "meta";
// Ledgers only: kernel executions no launch call stands for one to one (graph replays).
inline constexpr const char* kExecution = "execution";
}  // namespace layer

struct Event {
  std::string layer;
  std::string name;
  int64_t ts = 0;                   // CLOCK_MONOTONIC ns at entry; 0 = unknown
  std::optional<int64_t> dur;       // ns from entry to exit; absent = exit not seen
  int64_t pid = 0;
  int64_t tid = 0;
  std::optional<int64_t> ret;       // return code; absent = not known (e.g. <<<>>>)
  nlohmann::json args = nlohmann::json::object();
  std::optional<uint64_t> corr;     // correlation id (CUPTI), when the tracer has one
  // The GPU the record belongs to, where the method can know it (schema/README.md says
  // which can, and why the others cannot): the ordinal as the process numbers its devices
  // (after CUDA_VISIBLE_DEVICES), and an identity that is the same in every process of
  // the host, the PCI bus id ("0000:18:00.0", common/device_id.h), so that two processes'
  // device 0 are not taken for one GPU. Not arguments: a call's own device argument
  // (cudaSetDevice's) stays in args.
  std::optional<int64_t> device;
  std::string device_id;            // empty: not known

  // Asked of every record at every stage: sizes compared first, no strlen of the literal.
  bool is_meta() const { return std::string_view(layer) == std::string_view(layer::kMeta); }
};

}  // namespace cudatrace
