#include "harness/score/event_tally.h"

namespace cudatrace {

void NameCounter::add(const Event& e) {
  if (e.layer != last_layer_) {
    last_layer_ = e.layer;
    layer_slot_ = &by_layer_[e.layer];
    slots_ = &slots_by_layer_[e.layer];
  }
  ++*layer_slot_;
  if (auto it = slots_->find(e.name); it != slots_->end()) {
    ++*it->second;
    return;
  }
  int64_t* slot = &by_name_[e.layer][e.name];
  if (slots_->size() < 4096) slots_->emplace(e.name, slot);
  ++*slot;
}

EventTally::EventTally(bool keep_events, bool per_process, const std::map<int, HostDevice>* host_devices)
    : names(host_devices), keep_(keep_events), per_process_(per_process) {}

void EventTally::count(const Event& e) {
  ++records_;
  whole_ = false;  // an event after the close: the store no longer says all of it
  if (e.is_meta()) return;
  name_counter_.add(e);
  family_counter_.add(e);
  names.learn(e);
  if (per_process_) processes.add(e);
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
