#pragma once
// Kineto's events, once the trace reader has built one (torchprof_trace.cpp), as the
// harness's records; and the join by correlation id that gives an API call the device of
// its GPU record. Kineto writes API calls and GPU records from separate CUPTI buffers, so
// either may come first; both wait, in bounded windows, for the other.
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/event.h"
#include "common/packed_args.h"
#include "tracers/torchprof/torchprof_trace.h"

namespace cudatrace {

using Dims = std::array<int64_t, 3>;

// What the reader keeps of one traceEvents element: the fields a conversion reads, the
// last of each where a key comes twice (as a JSON object would keep it); an integer field
// is set only where its value is an integer that fits int64_t.
struct KinetoEvent {
  std::string ph, cat, name;
  bool ph_text = false, cat_text = false, name_text = false;  // the value was a string
  std::optional<int64_t> pid, tid;
  struct Args {
    std::optional<int64_t> correlation, cbid, external_id, device, in_device, stream, bytes;
    std::optional<Dims> grid, block;  // [x, y, z] of integers
    // Field by field: assigning {} was a rep stos of the whole struct, a sixth of the walk.
    void clear() {
      correlation.reset(), cbid.reset(), external_id.reset(), device.reset(), in_device.reset();
      stream.reset(), bytes.reset(), grid.reset(), block.reset();
    }
  } args;
};

class KinetoEvents {
 public:
  KinetoEvents(int64_t pid, const std::map<int64_t, std::string>& bus_ids, size_t window, TraceReading& reading,
               const TraceSink& sink)
      : pid_(pid), bus_ids_(bus_ids), window_(window), reading_(reading), sink_(sink) {}
  // One traceEvents element with ph "X": ts and dur on the harness's clock, in ns (0 and
  // nullopt when absent).
  void add(const KinetoEvent& ev, int64_t ts, std::optional<int64_t> dur);
  // An event that is none of the above (a CPU op, a flow, metadata): counted by its "cat"
  // where it has one.
  void other(const std::string& cat);
  // The end of the trace: the calls still waiting for a GPU record are written as they are.
  void finish();

 private:
  // What an API call takes from its GPU record.
  struct GpuSide {
    char what = 'k';  // kernel, copy ('c'), set ('s')
    std::optional<int64_t> device;
    std::optional<Dims> grid, block;
    std::optional<int64_t> bytes;
    std::string kind;
  };
  // An API call's args: its own, and what its GPU record gives it.
  struct CallArgs {
    std::optional<int64_t> cbid, external_id, bytes;
    std::optional<Dims> grid, block;
    std::string kind;
  };
  struct Call {
    Event e;
    CallArgs args;
  };
  void api_call(const KinetoEvent& ev, bool runtime, int64_t ts, std::optional<int64_t> dur);
  void gpu_record(const KinetoEvent& ev, char what, int64_t ts, std::optional<int64_t> dur);
  void give(Call& call, const GpuSide& gpu);
  void place(Event& e, std::optional<int64_t> device) const;
  void write_call(const Call& call);

  int64_t pid_;
  const std::map<int64_t, std::string>& bus_ids_;
  size_t window_;
  TraceReading& reading_;
  const TraceSink& sink_;
  // Reused for each event, so that one event costs no allocation of its own.
  Call call_;
  Event record_;
  PackedArgs packed_;
  std::string last_other_;  // the category last counted, and its count
  int64_t* last_other_count_ = nullptr;
  std::unordered_map<uint64_t, Call> waiting_calls_;
  std::deque<uint64_t> waiting_order_;
  std::unordered_map<uint64_t, GpuSide> recent_gpu_;
  std::deque<uint64_t> recent_order_;
};


}  // namespace cudatrace
