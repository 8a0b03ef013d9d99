#pragma once
// One pass over a method's events, counting them as they stream past: per layer and name,
// per call family, per process and device, and the GPU each record is on. A command's
// events are never held; a workload's are kept for the matcher (and OTLP). Fed while the
// tracer writes its store (an EventTap: no second read of 10^8 events), or, where that
// pass did not end with the store whole, from the store afterwards.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/event_io.h"
#include "common/event_store.h"
#include "harness/score/per_device.h"
#include "harness/score/verdict.h"

namespace cudatrace {

// Events per layer and name: each (layer, name) is looked up in the ordered maps once,
// then through a bounded hash of slots.
class NameCounter {
 public:
  NameCounter(std::map<std::string, std::map<std::string, int64_t>>& by_name, std::map<std::string, int64_t>& by_layer)
      : by_name_(by_name), by_layer_(by_layer) {}
  void add(const Event& e);

 private:
  std::map<std::string, std::map<std::string, int64_t>>& by_name_;
  std::map<std::string, int64_t>& by_layer_;
  // A run's few layers, each with its count and its names' slots: found by a short scan,
  // since a CUPTI run alternates runtime and driver records and a one-entry cache misses.
  struct LayerSlots {
    std::string layer;
    int64_t* count;
    std::unordered_map<std::string, int64_t*> names;
  };
  LayerSlots& slots_of(const std::string& layer);
  std::vector<std::unique_ptr<LayerSlots>> layers_;
};

class EventTally final : public EventTap {
 public:
  // `keep_events`: hold the events (a workload's matcher, OTLP). `per_process`: count per
  // process and device (a command's verdict; a workload's comes from its ledger).
  EventTally(bool keep_events, bool per_process, const std::map<int, HostDevice>* host_devices);
  EventTally(const EventTally&) = delete;
  EventTally& operator=(const EventTally&) = delete;

  void add(const Event& e);
  void add(Event&& e);
  // Counting a call needs no args; counting a kernel does, and so do held events (the
  // matcher's) and meta records (a process's name).
  bool wants_args(const Event& e) const override {
    return keep_ || e.is_meta() || FamilyCounter::reads_args(e);
  }
  void on_event(const Event& e) override { add(e); }
  // A kernel written with its args packed is counted from them in place (a call needs none,
  // a meta record comes whole): unpacked into JSON for each of a sanitizer run's millions of
  // launches, they were most of its count. Held events need their JSON: not then.
  bool wants_packed() const override { return !keep_; }
  void on_packed(const Event& e, std::string_view packed_args, bool args_in_event) override;
  void on_closed(uint64_t written) override { whole_ = written == records_; }
  // Every event of the closed store went through add(), and nothing else did.
  bool whole() const { return whole_; }
  uint64_t records() const { return records_; }  // meta records included

  std::map<std::string, int64_t> per_layer;
  std::map<std::string, std::map<std::string, int64_t>> by_name;
  FamilyCounts families;
  ProcessCounter processes;
  DeviceNames names;
  EventStream events;  // only with keep_events

 private:
  void count(const Event& e, const std::string_view* packed_args = nullptr);
  NameCounter name_counter_{by_name, per_layer};
  FamilyCounter family_counter_{families};
  bool keep_, per_process_;
  uint64_t records_ = 0;
  bool whole_ = false;
};

// Adds one count table into another: a run's into its method's, over repetitions.
void add_counts(std::map<std::string, std::map<std::string, int64_t>>& into,
                const std::map<std::string, std::map<std::string, int64_t>>& from);

}  // namespace cudatrace
