#include "tracers/cupti/cupti_tracer.h"

#include <cstdlib>

#include "common/clock.h"
#include "common/event_io.h"
#include "common/event_store.h"
#include "tracers/cupti/cupti_decode.h"
#include "tracers/cupti/cupti_session.h"
#include "tracers/ebpf/ring_option.h"
#include "tracers/ebpf/ring_spool.h"
#include "tracers/ebpf/live_store.h"

namespace cudatrace {

namespace fs = std::filesystem;

struct CuptiLiveDecode : LiveStore<cupti_record, CuptiRecordDecoder, CuptiDecodeStats> {
  explicit CuptiLiveDecode(const fs::path& run_dir)
      : LiveStore(run_dir, run_dir / "cupti.bin.zst", [](CuptiDecodeStats& stats, WholeSink whole, CallSink calls) {
          return CuptiRecordDecoder(stats, std::move(whole), size_t(1) << 20, size_t(1) << 16, std::move(calls));
        }) {}
};

CuptiOptions cupti_options(const std::map<std::string, std::string>& options) {
  std::map<std::string, std::string> ring;
  bool per_call = false;
  for (const auto& [key, value] : options) {
    if (key == "ring_mb") {
      ring.insert({key, value});
    } else if (key == "per_call") {
      if (value != "0" && value != "1") throw std::invalid_argument("cupti.per_call wants 0 or 1, got '" + value + "'");
      per_call = value == "1";
    } else {
      throw std::invalid_argument("unknown cupti option '" + key + "' (valid: ring_mb, per_call)");
    }
  }
  return {ring_bytes_option(ring, "cupti"), per_call};
}

CuptiTracer::CuptiTracer(fs::path library, uint64_t ring_bytes, bool per_call, uint64_t max_spool_bytes)
    : CuptiInjectionTracer(std::move(library), false),
      ring_bytes_(ring_bytes),
      per_call_(per_call),
      max_spool_bytes_(max_spool_bytes) {}
CuptiTracer::~CuptiTracer() = default;

void CuptiTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  CuptiInjectionTracer::prepare(launch, target, run_dir);
  run_dir_ = run_dir;
}

void CuptiTracer::attach(pid_t child) {
  const int64_t t0 = monotonic_ns();
  session_ = std::make_unique<CuptiSession>(ring_bytes_);
  session_->attach(library_, per_call_);
  session_->trace_process(child);
  session_->start(run_dir_ / "cupti.bin.zst", max_spool_bytes_);
  live_ = std::make_unique<CuptiLiveDecode>(run_dir_);
  probes_ = session_->probes();
  attach_ms_ = double(monotonic_ns() - t0) / 1e6;
}

TracerReport CuptiTracer::finish(const fs::path& run_dir) {
  TracerReport report;
  if (!session_ || !live_) {
    report.error = "the cupti collector never started";
    return report;
  }
  session_->stop();
  const auto lost = session_->losses();
  const uint64_t malformed = session_->short_records();
  const uint64_t over_bound = session_->spool_over_bound(), unwritten = session_->spool_unwritten();
  const uint64_t accepted = session_->spool_accepted();
  const std::string write_error = session_->spool_write_error();
  session_.reset();

  // The rest of the spool, decoded in the ring's order as the run's first part was
  // (memory: the decoder's two windows).
  const auto [stats, read, cut] = live_->finish();
  live_.reset();
  // CUDATRACE_KEEP_SPOOL=1 keeps the raw records (struct cupti_record, a zstd stream) for debugging a decode.
  if (!std::getenv("CUDATRACE_KEEP_SPOOL")) fs::remove(run_dir / "cupti.bin.zst");

  report.loss = cupti_loss_counters({lost, malformed, over_bound, unwritten}, stats);
  report.notes = {{"library", library_.string()},
                  {"usdt_probes_attached", probes_},
                  {"attach_ms", attach_ms_},
                  {"ring_bytes", ring_bytes_},
                  {"calls_handed_over", per_call_ ? "per call (api_exit)" : "per thread batch (api_batch)"},
                  {"records", stats.records},
                  {"api_calls", stats.api_calls},
                  {"kernel_records", stats.kernels},
                  {"kernels_joined_to_launch", stats.kernels_joined},
                  {"kernels_without_their_launch", stats.kernels_unjoined_past_window},
                  {"spool_bound_bytes", max_spool_bytes_},
                  {"unknown_callback_ids", stats.unknown_callbacks},
                  {"devices_named", stats.devices_named},
                  {"cupti_version", stats.cupti_version},
                  // The driver loads the library at cuInit: calls that began before are not seen.
                  {"library_loaded_ns", stats.loaded_ns},
                  {"library_summary", stats.summary ? "received" : "missing: the process did not exit normally"},
                  {"call_clock", stats.calls_in_ticks > 0
                                     ? "TSC ticks, mapped to CLOCK_MONOTONIC with the two clock points each batch "
                                       "carries (within clock_spread_ns_max)"
                                     : "CLOCK_MONOTONIC"},
                  {"calls_in_ticks", stats.calls_in_ticks},
                  // A batch whose clock record was unusable: its calls keep their order, not their time.
                  {"calls_untimed", stats.calls_untimed},
                  // A live thread's last batch, sent at exit by the exiting thread.
                  {"calls_handed_over_at_exit", stats.calls_handed_over_at_exit},
                  {"calls_extrapolated", stats.calls_extrapolated},
                  {"clock_spread_ns_max", stats.clock_spread_ns_max}};
  // Never recorded, by design: the library's summary counts them.
  if (stats.summary) {
    report.notes["library_api_calls"] = stats.library_api_exits;
    report.notes["driver_calls_left_out"] = {
        {"cuKernelGetName inside a runtime call", stats.library_left_out},
        {"why", "cudart asks it for each launch only while CUPTI is attached; the runtime launch's record carries "
                "the name it returns, and no verdict counts it (the command reference leaves it out)"}};
  }
  if (!stats.problems.empty()) {
    report.error = stats.problems.front();
    report.notes["problems"] = stats.problems;
  } else if (!stats.loaded) {
    report.error = "the injection library never reported in: the CUDA driver did not load it (no GPU, or the "
                   "program made no CUDA call)";
  } else {
    report.layers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity};
  }
  account_spool(report, accepted, read, write_error, cut);
  return report;
}

void CuptiTracer::abandon(const fs::path& run_dir) {
  if (session_) session_->stop();
  session_.reset();
  live_.reset();  // the partial store goes with the unclosed writer
  fs::remove(run_dir / "cupti.bin.zst");
}

}  // namespace cudatrace
