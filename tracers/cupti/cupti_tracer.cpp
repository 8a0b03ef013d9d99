#include "tracers/cupti/cupti_tracer.h"

#include <cstdlib>
#include <fstream>

#include "common/clock.h"
#include "common/event_io.h"
#include "tracers/cupti/cupti_decode.h"
#include "tracers/cupti/cupti_session.h"

namespace cudatrace {

namespace fs = std::filesystem;

CuptiTracer::CuptiTracer(fs::path library, uint64_t ring_bytes)
    : CuptiInjectionTracer(std::move(library), false), ring_bytes_(ring_bytes) {}
CuptiTracer::~CuptiTracer() = default;

void CuptiTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  CuptiInjectionTracer::prepare(launch, target, run_dir);
  run_dir_ = run_dir;
}

void CuptiTracer::attach(pid_t child) {
  const int64_t t0 = monotonic_ns();
  session_ = std::make_unique<CuptiSession>(ring_bytes_);
  session_->attach(library_);
  session_->trace_process(child);
  session_->start(run_dir_ / "cupti.bin");
  probes_ = session_->probes();
  attach_ms_ = double(monotonic_ns() - t0) / 1e6;
}

TracerReport CuptiTracer::finish(const fs::path& run_dir) {
  TracerReport report;
  if (!session_) {
    report.error = "the cupti collector never started";
    return report;
  }
  session_->stop();
  const auto lost = session_->losses();
  const uint64_t malformed = session_->short_records();
  session_.reset();

  std::vector<cupti_record> records;
  {
    std::ifstream in(run_dir / "cupti.bin", std::ios::binary);
    cupti_record r;
    while (in.read(reinterpret_cast<char*>(&r), sizeof r)) records.push_back(r);
  }
  // CUDATRACE_KEEP_SPOOL=1 keeps the raw records (struct cupti_record) for debugging a decode.
  if (!std::getenv("CUDATRACE_KEEP_SPOOL")) fs::remove(run_dir / "cupti.bin");
  CuptiDecodeStats stats;
  std::vector<Event> events = decode_cupti_records(records, stats);
  EventWriter out(run_dir / "events.jsonl");
  for (const auto& e : events) out.write(e);
  out.close();

  report.loss = {{"ring_full", lost[CUPTI_LOST_RING_FULL]},
                 {"activity_dropped_by_cupti", stats.activity_dropped},
                 {"malformed_records", malformed}};
  // The library counts what it emitted: any shortfall at the collector is loss too.
  if (stats.summary) {
    report.loss["api_calls_not_received"] = std::max<int64_t>(0, int64_t(stats.library_api_exits) - stats.api_calls);
    report.loss["kernels_not_received"] = std::max<int64_t>(0, int64_t(stats.library_kernels) - stats.kernels);
  }
  report.notes = {{"library", library_.string()},
                  {"usdt_probes_attached", probes_},
                  {"attach_ms", attach_ms_},
                  {"ring_bytes", ring_bytes_},
                  {"records", stats.records},
                  {"api_calls", stats.api_calls},
                  {"kernel_records", stats.kernels},
                  {"kernels_joined_to_launch", stats.kernels_joined},
                  {"unknown_callback_ids", stats.unknown_callbacks},
                  {"cupti_version", stats.cupti_version},
                  {"library_summary", stats.summary ? "received" : "missing: the process did not exit normally"}};
  if (!stats.problems.empty()) {
    report.error = stats.problems.front();
    report.notes["problems"] = stats.problems;
  } else if (!stats.loaded) {
    report.error = "the injection library never reported in: the CUDA driver did not load it (no GPU, or the "
                   "program made no CUDA call)";
  } else {
    report.layers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity};
  }
  return report;
}

void CuptiTracer::abandon(const fs::path& run_dir) {
  if (session_) session_->stop();
  session_.reset();
  fs::remove(run_dir / "cupti.bin");
}

}  // namespace cudatrace
