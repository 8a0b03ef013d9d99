#pragma once
// The matcher's numbers for call families: every sorter of a run numbers them the same way,
// so that the ledger's lanes and the method's sort in one order (sorted_events.h).
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/cuda_names.h"

namespace cudatrace {

// Numbers for call families ("" and "launch" among them), shared by every sorter so that
// the ledger's lanes and the method's come in one order. A call's name is looked up as it
// is: canonical_name() runs once per distinct name, not once per call.
class Families {
 public:
  uint32_t of(std::string_view family) {
    if (auto it = ids_.find(family); it != ids_.end()) return it->second;
    names_.emplace_back(family);
    return ids_.emplace(names_.back(), uint32_t(names_.size() - 1)).first->second;
  }
  // The last few names' families are looked at first: a ledger or a store repeats a
  // handful of names, and a string compare is cheaper than a hash.
  uint32_t of_call(std::string_view name) {
    for (const auto& r : recent_)
      if (r.known && r.name == name) return r.family;
    uint32_t id;
    if (auto it = by_call_.find(name); it != by_call_.end()) {
      id = it->second;
    } else {
      id = of(canonical_name(name));
      by_call_.emplace(std::string(name), id);
    }
    Recent& r = recent_[recent_next_++ % recent_.size()];
    r.name.assign(name), r.family = id, r.known = true;
    return id;
  }
  const std::string& name(uint32_t id) const { return names_.at(id); }
  size_t size() const { return names_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_, by_call_;
  std::deque<std::string> names_;  // a deque: the map's keys stay where they are
  struct Recent {
    std::string name;
    uint32_t family = 0;
    bool known = false;
  };
  std::array<Recent, 4> recent_;
  size_t recent_next_ = 0;
};

}  // namespace cudatrace
