#pragma once
// Method `devhook`: bpftime-style device hooks. The program runs with the devhook agent in
// LD_PRELOAD; the agent launches instrumented copies of its kernels, whose probes write
// into a ring in device memory that a thread of the agent drains into a file. Shared cudart only.
#include "tracers/tracer.h"
#include "tracers/devhook/devhook_decode.h"
#include "tracers/devhook/device_record.h"

namespace cudatrace {

struct DevhookOptions {
  devhook::ProbeMode mode = devhook::ProbeMode::kBlock;
  uint64_t ring_records = devhook::kDefaultRingRecords;
  uint32_t subrings = devhook::kDefaultSubrings;
  bool drain = true;
};

// Throws std::invalid_argument naming the bad option.
DevhookOptions devhook_options(const MethodOptions& options);
extern const std::map<std::string, std::string> kDevhookOptionHelp;

class DevhookTracer final : public Tracer {
 public:
  DevhookTracer(std::filesystem::path agent, DevhookOptions options) : agent_(std::move(agent)), options_(options) {}
  void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) override;
  void attach(pid_t child) override { child_ = child; }
  TracerReport finish(const std::filesystem::path& run_dir) override;
  void abandon(const std::filesystem::path& run_dir) override;
  std::optional<std::map<std::string, int64_t>> loss_without_events(const std::filesystem::path&) override {
    return devhook_loss_counters(out_);
  }

 private:
  std::filesystem::path agent_;
  std::filesystem::path out_;  // where the agent writes (the program's own folder)
  DevhookOptions options_;
  std::string cudart_;
  pid_t child_ = 0;
};

std::filesystem::path devhook_agent_path(const std::filesystem::path& prefix);

}  // namespace cudatrace
