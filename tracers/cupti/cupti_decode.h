#pragma once
// The cupti method's records (tracers/cupti/cupti_event.h) -> the common event record: API calls on
// the runtime and driver layers, kernel activity on the gpu-activity layer, each kernel
// joined to the call that launched it by CUPTI's correlation id.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracers/cupti/cupti_event.h"
#include "common/event.h"
#include "common/packed_args.h"
#include "tracers/call_args.h"

namespace cudatrace {

// CUPTI's callback domains (CUpti_CallbackDomain) that the library subscribes to.
inline constexpr uint32_t kCuptiDriverDomain = 1;
inline constexpr uint32_t kCuptiRuntimeDomain = 2;

// The function CUPTI reports as (domain, cbid): "cudaMemcpyAsync_ptsz", "cuMemAlloc_v2".
// The runtime ids' ABI suffix (_v3020, _v7000, ...) is dropped; it is CUPTI's, not the
// symbol's. Unknown ids give "cbid:<domain>:<id>".
std::string cupti_callback_name(uint32_t domain, uint32_t cbid);

struct CuptiDecodeStats {
  int64_t records = 0;
  int64_t api_calls = 0;
  int64_t kernels = 0;
  int64_t kernels_joined = 0;       // kernel records whose correlation id named a traced launch
  int64_t unknown_callbacks = 0;    // API records of an id this build has no name for
  int64_t activity_dropped = 0;     // what CUPTI said it dropped
  bool loaded = false;              // the library reported in (status LOADED)
  int64_t loaded_ns = 0;            // when: calls that began earlier cannot be seen
  std::string mode;                 // "full" or "bare", as the library said
  uint64_t cupti_version = 0;
  std::vector<std::string> problems;  // subscriber taken, CUPTI errors: one line each
  bool summary = false;             // the library's exit summary arrived
  uint64_t library_api_exits = 0, library_kernels = 0;  // what the library said it emitted
  uint64_t library_left_out = 0;    // nested driver calls it left out (CUPTI_LEFT_OUT_CBID), by its summary
  // Calls stamped in TSC ticks and mapped to CLOCK_MONOTONIC with their batch's clock record,
  // and those whose batch had no usable one (ts 0: order kept, time unknown).
  int64_t calls_in_ticks = 0, calls_untimed = 0;
  // Calls of threads still alive at exit, whose last batch the exiting thread handed over
  // (CUPTI_F_HANDED_OVER): their thread is the library's word.
  int64_t calls_handed_over_at_exit = 0;
  // Of those in ticks, calls stamped outside their batch's two points: mapped by extending the
  // line, not between its points. The library picks the points so that none is.
  int64_t calls_extrapolated = 0;
  double clock_spread_ns_max = 0;   // the widest half-bracket of a clock point used: their error bound
  int64_t devices_named = 0;        // (process, device) pairs whose bus id the library sent
  // Kernels that went out with no launch to join (it never came, or not within the window)
  // and so carry CUPTI's thread rather than the launching one.
  int64_t kernels_unjoined_past_window = 0;
};

// What the spool and the ring counted on their way (the session's and the spool's counters).
struct CuptiCollectorLoss {
  std::vector<uint64_t> lost;  // indexed by enum cupti_loss (the BPF side's counters)
  uint64_t malformed = 0, over_bound = 0, unwritten = 0;
};

// The run's loss counters (the card's "Loss counters"), each a count of what its name says,
// and nothing counted under two names: of the calls the library emitted and the collector
// never received, those the ring refused or could not read are counted there, and
// api_calls_not_received is the rest (a live thread's last batch at exit). The harness adds
// the counters up into the events a run lost.
nlohmann::json cupti_loss_counters(const CuptiCollectorLoss& c, const CuptiDecodeStats& stats);

// Records -> events as they are read, in the ring's order. API calls go out at once (a
// thread's batch is in the order its calls returned). Each kernel joins the call that
// launched it (same process, same correlation id; the runtime launch preferred to the
// driver launch inside it): the launches seen last are remembered, at most `max_launches`,
// and a kernel whose launch has not come yet (its thread's batch not handed over) waits,
// at most `max_waiting` of them. Memory: those two windows, whatever the run's length.
// API calls, the bulk of a run (10^8 of them), go to `calls` with their args packed as the
// store keeps them, from one event the decoder reuses: no JSON object and no allocation per
// call. Kernels, and the calls where `calls` is not given, go to `sink` whole.
class CuptiRecordDecoder {
 public:
  using Sink = std::function<void(Event&&)>;
  using CallSink = std::function<void(const Event&, const PackedArgs&)>;
  CuptiRecordDecoder(CuptiDecodeStats& stats, Sink sink, size_t max_launches = size_t(1) << 20,
                     size_t max_waiting = size_t(1) << 16, CallSink calls = nullptr);
  void add(const cupti_record& r);
  void finish();  // the kernels still waiting go out unjoined

 private:
  using Key = std::pair<uint32_t, uint64_t>;  // (pid, correlation id)
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.second * 0x9E3779B97F4A7C15ull ^ k.first); }
  };
  // What a (domain, cbid) stands for, looked up once per id rather than by name per call.
  struct CallKind {
    std::string name;
    const CallInfo* call = nullptr;  // its argument layout, where hooks.def has one
    bool runtime = false, launch = false, unknown = false;  // unknown: no name for its id
  };
  struct Launch {
    uint32_t tid;
    uint64_t id;  // domain << 32 | cbid: its name, looked up when a kernel joins
    bool runtime;
  };
  // The batch being read: the CUPTI_BATCH records after its head are its slots, the first
  // `calls` of them calls of its thread; and its clock.
  struct Batch {
    uint32_t pid = 0, tid = 0;
    uint64_t slots = 0, calls = 0;
  };
  struct TickClock {
    uint32_t pid = 0, tid = 0;
    uint64_t ticks = 0, last_ticks = 0;  // the first point's and the second's
    int64_t ns = 0;                      // the first point's
    double ns_per_tick = 0;
    bool usable = false;
  };
  void set_clock(const cupti_record& r);
  void add_call(cupti_record call);
  const CallKind& kind_of(uint64_t id);
  void pack_call_args(const cupti_record& r, const CallKind& kind);
  void set_device_id(Event& e) const;
  void add_batched(const cupti_record& r);
  void to_ns(cupti_record& call);
  const Launch* known_launch(const Key& key) const;
  void remember_launch(uint32_t pid, uint32_t tid, uint64_t corr, uint64_t id, bool runtime);
  void emit(Event&& e);
  void drop_oldest_waiting();
  void emit_kernel(Event&& e, const Launch* by);

  CuptiDecodeStats& stats_;
  Sink sink_;
  CallSink calls_;
  std::unordered_map<uint64_t, CallKind> kinds_;
  Event call_;          // the call being decoded: reused, so its strings keep their capacity
  PackedArgs packed_;   // and its args
  KernelNames kernel_names_;
  Batch batch_;
  TickClock clock_;
  size_t max_launches_, max_waiting_;
  std::map<std::pair<int64_t, int64_t>, std::string> bus_id_of_;  // (pid, ordinal) -> bus id
  std::unordered_map<Key, Launch, KeyHash> launches_;
  std::deque<Key> launch_order_;
  std::unordered_map<Key, std::vector<Event>, KeyHash> waiting_;
  std::deque<Key> waiting_order_;  // a key per waiting kernel, oldest first
  size_t waiting_total_ = 0;
};

// The same over a vector (the unit tests' form); the events come back in entry order.
std::vector<Event> decode_cupti_records(const std::vector<cupti_record>& records, CuptiDecodeStats& stats);

}  // namespace cudatrace
