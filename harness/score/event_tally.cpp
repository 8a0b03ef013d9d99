#include "harness/score/event_tally.h"

namespace cudatrace {

NameCounter::LayerSlots& NameCounter::slots_of(const std::string& layer) {
  for (auto& l : layers_)
    if (l->layer == layer) return *l;
  layers_.push_back(std::make_unique<LayerSlots>(LayerSlots{layer, &by_layer_[layer], {}}));
  return *layers_.back();
}

void NameCounter::add(const Event& e) {
  LayerSlots& l = slots_of(e.layer);
  ++*l.count;
  if (auto it = l.names.find(e.name); it != l.names.end()) {
    ++*it->second;
    return;
  }
  int64_t* slot = &by_name_[e.layer][e.name];
  if (l.names.size() < 4096) l.names.emplace(e.name, slot);
  ++*slot;
}

EventTally::EventTally(bool keep_events, bool per_process, const std::map<int, HostDevice>* host_devices)
    : names(host_devices), keep_(keep_events), per_process_(per_process) {}

void EventTally::count(const Event& e, const std::string_view* packed_args) {
  ++records_;
  whole_ = false;  // an event after the close: the store no longer says all of it
  if (e.is_meta()) return;
  name_counter_.add(e);
  if (packed_args) family_counter_.add(e, *packed_args);
  else family_counter_.add(e);
  names.learn(e);
  if (per_process_ && packed_args) processes.add(e, *packed_args);
  else if (per_process_) processes.add(e);
}

void EventTally::on_packed(const Event& e, std::string_view packed_args, bool args_in_event) {
  if (args_in_event || e.is_meta() || !FamilyCounter::reads_args(e)) return add(e);
  count(e, &packed_args);
}

void EventTally::add(const Event& e) {
  count(e);
  if (!keep_) return;
  (e.is_meta() ? events.meta : events.events).push_back(e);
}

void EventTally::add(Event&& e) {
  count(e);
  if (!keep_) return;
  (e.is_meta() ? events.meta : events.events).push_back(std::move(e));
}

void add_counts(std::map<std::string, std::map<std::string, int64_t>>& into,
                const std::map<std::string, std::map<std::string, int64_t>>& from) {
  for (const auto& [outer, inner] : from)
    for (const auto& [name, n] : inner) into[outer][name] += n;
}

}  // namespace cudatrace
