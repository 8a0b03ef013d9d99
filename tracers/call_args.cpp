#include "tracers/call_args.h"

#include <cstdio>
#include <sstream>

namespace cudatrace {

const std::vector<CallInfo>& call_table() {
  static const std::vector<CallInfo> table = [] {
    std::vector<CallInfo> t;
    auto add = [&](const char* layer, const char* name, const char* spec) {
      CallInfo h{layer, name, {}};
      std::istringstream in(spec);
      std::string slot;
      while (in >> slot) h.slots.emplace_back(slot.substr(0, slot.find(':')), slot.back());
      t.push_back(std::move(h));
    };
#define HOOK(layer, symbol, args) add(#layer, #symbol, args);
#include "tracers/preload/hooks.def"
#undef HOOK
    return t;
  }();
  return table;
}

const CallInfo* find_call(std::string_view symbol) {
  static const std::map<std::string, size_t, std::less<>> by_name = [] {
    std::map<std::string, size_t, std::less<>> m;
    for (size_t i = 0; i < call_table().size(); ++i) m[call_table()[i].name] = i;
    return m;
  }();
  auto it = by_name.find(symbol);
  return it == by_name.end() ? nullptr : &call_table()[it->second];
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

namespace {
const char* memcpy_kind(uint64_t k) {
  static const char* names[] = {"HtoH", "HtoD", "DtoH", "DtoD", "Default"};
  return k < 5 ? names[k] : "invalid";
}
}  // namespace

nlohmann::json decode_args(const CallInfo& call, const uint64_t* slots, const KernelNames& kernels) {
  nlohmann::json args = nlohmann::json::object();
  for (size_t i = 0; i < call.slots.size() && i < kMaxArgSlots; ++i) {
    const auto& [name, kind] = call.slots[i];
    const uint64_t v = slots[i];
    switch (kind) {
      case 'i': args[name] = int64_t(v); break;
      case 'p': args[name] = hex(v); break;
      case 'k': args[name] = memcpy_kind(v); break;
      case 'd': args[name] = {uint32_t(v), uint32_t(v >> 32 & 0xFFFF), uint32_t(v >> 48)}; break;
      case 'n': {
        auto it = kernels.find(v);
        args[name] = it != kernels.end() ? it->second : hex(v);
        break;
      }
    }
  }
  return args;
}

}  // namespace cudatrace
