#include "tracers/devhook/devhook_tracer.h"

#include <cstdlib>
#include <stdexcept>

#include "common/event_store.h"
#include "tracers/devhook/devhook_decode.h"

namespace cudatrace {

namespace fs = std::filesystem;
using namespace cudatrace::devhook;

const std::map<std::string, std::string> kDevhookOptionHelp = {
    {"mode", "block (default): one record at entry and exit of each block, from its thread 0; "
             "thread: one per thread"},
    {"ring_records", "ring slots of 32 bytes in device memory (and as many pinned on the host for the drain), "
                     "rounded up to a power of two (default " +
                         std::to_string(kDefaultRingRecords) +
                         "); a thread drains it while kernels run, and a probe that finds it full waits for room"},
    {"subrings", "the ring's parts, a power of two from 1 to " + std::to_string(kMaxSubrings) + " (default " +
                     std::to_string(kDefaultSubrings) +
                     "): a probe claims its slot in the part of its SM, so SMs do not queue on one counter"},
    {"drain", "on (default): the agent takes records while kernels run; off: only when the context goes, so a "
              "full ring makes probes wait 1 s once and then drop, counted (for tests of that path)"}};

DevhookOptions devhook_options(const MethodOptions& options) {
  DevhookOptions o;
  for (const auto& [key, value] : options) {
    if (key == "mode") {
      if (value != "block" && value != "thread")
        throw std::invalid_argument("devhook.mode wants block or thread, got '" + value + "'");
      o.mode = value == "thread" ? ProbeMode::kThread : ProbeMode::kBlock;
    } else if (key == "ring_records") {
      char* end = nullptr;
      o.ring_records = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end || o.ring_records == 0 || o.ring_records > (uint64_t(1) << 27))
        throw std::invalid_argument("devhook.ring_records wants 1 to " + std::to_string(uint64_t(1) << 27) +
                                    " (4 GiB of device memory), got '" + value + "'");
    } else if (key == "subrings") {
      char* end = nullptr;
      const unsigned long k = std::strtoul(value.c_str(), &end, 10);
      if (value.empty() || *end || k == 0 || k > kMaxSubrings || (k & (k - 1)) != 0)
        throw std::invalid_argument("devhook.subrings wants a power of two from 1 to " + std::to_string(kMaxSubrings) +
                                    ", got '" + value + "'");
      o.subrings = uint32_t(k);
    } else if (key == "drain") {
      if (value != "on" && value != "off") throw std::invalid_argument("devhook.drain wants on or off, got '" + value + "'");
      o.drain = value == "on";
    } else {
      throw std::invalid_argument("unknown devhook option '" + key + "' (valid: mode, ring_records, subrings, drain)");
    }
  }
  return o;
}

fs::path devhook_agent_path(const fs::path& prefix) {
  return prefix / CUDATRACE_LIB_SUBDIR / "libcudatrace_devhook.so";
}

void DevhookTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  preload_first(launch, agent_, "devhook agent");
  cudart_ = target.cudart;
  out_ = target.writable_dir.empty() ? run_dir : target.writable_dir;
  launch.env[kOutDirEnv] = out_.string();
  launch.env[kModeEnv] = options_.mode == ProbeMode::kThread ? "thread" : "block";
  launch.env[kRingRecordsEnv] = std::to_string(options_.ring_records);
  launch.env[kSubringsEnv] = std::to_string(options_.subrings);
  launch.env[kDrainEnv] = options_.drain ? "on" : "off";
}

TracerReport DevhookTracer::finish(const fs::path& run_dir) {
  return convert_devhook_output(out_, run_dir / kEventsFile, cudart_, child_);
}

void DevhookTracer::abandon(const fs::path&) {
  for (const auto& entry : fs::directory_iterator(out_))
    if (entry.path().filename().string().rfind("devhook.", 0) == 0) fs::remove(entry.path());
}

}  // namespace cudatrace
