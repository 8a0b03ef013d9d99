#pragma once
// Kineto's events, once the trace reader has built one (torchprof_trace.cpp), as the
// harness's records; and the join by correlation id that gives an API call the device of
// its GPU record. Kineto writes API calls and GPU records from separate CUPTI buffers, so
// either may come first; both wait, in bounded windows, for the other.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/event.h"
#include "tracers/torchprof/torchprof_trace.h"

namespace cudatrace {

class KinetoEvents {
 public:
  KinetoEvents(int64_t pid, const std::map<int64_t, std::string>& bus_ids, size_t window, TraceReading& reading,
               const std::function<void(const Event&)>& sink)
      : pid_(pid), bus_ids_(bus_ids), window_(window), reading_(reading), sink_(sink) {}
  // One traceEvents element with ph "X": `ev` as built (ts and dur taken out, already on
  // the harness's clock and in ns; 0 and nullopt when absent).
  void add(const nlohmann::json& ev, int64_t ts, std::optional<int64_t> dur);
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
    nlohmann::json grid, block;
    std::optional<int64_t> bytes;
    std::string kind;
  };
  void api_call(const nlohmann::json& ev, const std::string& cat, int64_t ts, std::optional<int64_t> dur);
  void gpu_record(const nlohmann::json& ev, const std::string& cat, int64_t ts, std::optional<int64_t> dur);
  void give(Event& call, const GpuSide& gpu);
  void place(Event& e, std::optional<int64_t> device) const;

  int64_t pid_;
  const std::map<int64_t, std::string>& bus_ids_;
  size_t window_;
  TraceReading& reading_;
  const std::function<void(const Event&)>& sink_;
  std::unordered_map<uint64_t, Event> waiting_calls_;
  std::deque<uint64_t> waiting_order_;
  std::unordered_map<uint64_t, GpuSide> recent_gpu_;
  std::deque<uint64_t> recent_order_;
};

}  // namespace cudatrace
