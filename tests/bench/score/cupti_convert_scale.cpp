// The cupti method's conversion at volume, without a GPU: N batched calls as the collector
// spools them (8 threads, CUPTI_BATCH calls a batch, TSC-stamped; each cudaGetDevice with the
// cuCtxGetDevice it makes inside, as the burst workload's calls under `cupti`), decoded into
// the store with the harness's tally as its tap, as CuptiTracer::finish() does. Prints events
// per second and peak RSS; fails where an event is missing. tests/bench/score/CMakeLists.txt
// runs it (label bench).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/event_store.h"
#include "common/zstd_file.h"
#include "harness/score/event_tally.h"
#include "tracers/cupti/cupti_decode.h"
#include "tracers/ebpf/ring_spool.h"

using namespace cudatrace;
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kGetDeviceCbid = 17;  // CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020
constexpr uint32_t kCtxGetDeviceCbid = 16;  // CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice

cupti_record batch_head(uint32_t tid, uint64_t ticks, int64_t ns) {
  cupti_record h{};
  h.kind = CUPTI_REC_BATCH;
  h.pid = 100;
  h.tid = tid;
  h.t0 = ticks;
  h.t1 = ticks + 3 * CUPTI_BATCH * 1000;
  h.v[0] = uint64_t(ns);
  h.v[1] = uint64_t(ns) + CUPTI_BATCH * 1000;  // 3 ticks a ns
  h.v[2] = 30;
  h.v[3] = CUPTI_BATCH;
  return h;
}

cupti_record call(bool runtime, uint64_t ticks, uint64_t corr) {
  cupti_record c{};
  c.flags = CUPTI_F_TICKS | CUPTI_F_DEVICE;  // device 0
  c.id = runtime ? (uint64_t(kCuptiRuntimeDomain) << 32 | kGetDeviceCbid) : (uint64_t(kCuptiDriverDomain) << 32 | kCtxGetDeviceCbid);
  c.corr = corr;
  c.t0 = ticks;
  c.t1 = ticks + (runtime ? 1200 : 300);
  c.v[0] = 0x7ffd12345670;  // the int* cudaGetDevice writes to
  return c;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: cupti_convert_scale DIR CALLS\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const int64_t calls = std::atoll(argv[2]);
  const uint32_t threads = 8;
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The spool as the collector leaves it (during the run, so not timed): each batch's head,
  // then its slots, copied as the library wrote them.
  {
    ZstdFileWriter spool(dir / "cupti.bin.zst");
    cupti_record status{};
    status.kind = CUPTI_REC_STATUS;
    status.pid = 100;
    status.t0 = 1;
    spool.write(&status, sizeof status);
    uint64_t corr = 0;
    const int64_t batches = (calls + CUPTI_BATCH / 2 - 1) / (CUPTI_BATCH / 2);  // two records a call
    for (int64_t b = 0; b < batches; ++b) {
      const uint32_t tid = 1000 + uint32_t(b % threads);
      const uint64_t ticks = 3'000'000 + uint64_t(b / threads) * 3 * CUPTI_BATCH * 1000;
      const cupti_record head = batch_head(tid, ticks, 1'000'000 + (b / threads) * CUPTI_BATCH * 1000);
      spool.write(&head, sizeof head);
      for (uint32_t i = 0; i < CUPTI_BATCH; i += 2) {
        const uint64_t at = ticks + 10 + i * 3000;
        ++corr;
        const cupti_record driver = call(false, at + 100, corr), runtime = call(true, at, corr);
        spool.write(&driver, sizeof driver);  // the driver call returns first
        spool.write(&runtime, sizeof runtime);
      }
    }
    spool.close();
  }
  CuptiDecodeStats stats;
  EventTally tally(false, false, nullptr);  // a workload's run, as the harness taps it
  const auto t0 = std::chrono::steady_clock::now();
  {
    ScopedEventTap tap(dir / kEventsFile, tally);
    EventStoreWriter out(dir / kEventsFile);
    CuptiRecordDecoder decoder(
        stats, [&out](Event&& e) { out.write(e); }, size_t(1) << 20, size_t(1) << 16,
        [&out](const Event& e, const PackedArgs& args) { out.write(e, args); });
    std::string cut;
    for_each_spooled<cupti_record>(dir / "cupti.bin.zst", [&](const cupti_record& r) { decoder.add(r); }, cut);
    decoder.finish();
    out.close();
    if (!cut.empty()) std::printf("FAIL: the spool was cut: %s\n", cut.c_str());
  }
  const double took = seconds_since(t0);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const int64_t events = int64_t(tally.records());
  std::printf("converted %lld events in %.1f s: %.0f events/s; %.2f bytes an event; peak RSS %ld MiB\n",
              (long long)events, took, double(events) / took, double(fs::file_size(dir / kEventsFile)) / double(events),
              ru.ru_maxrss / 1024);
  const bool whole = tally.whole() && stats.api_calls == events && tally.per_layer["runtime"] == events / 2 &&
                     stats.calls_untimed == 0;
  if (!whole)
    std::printf("FAIL: %lld calls decoded, %lld runtime events tallied, %lld untimed\n", (long long)stats.api_calls,
                (long long)tally.per_layer["runtime"], (long long)stats.calls_untimed);
  fs::remove_all(dir);
  return whole ? 0 : 1;
}
