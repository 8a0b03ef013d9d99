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

namespace {
// One walk over a call's slots, for both forms of its args: `out` takes each (name, value).
template <class Out>
void each_arg(const CallInfo& call, const uint64_t* slots, const KernelNames& kernels, Out& out) {
  char hex_text[24];
  const auto as_hex = [&](uint64_t v) {
    const int n = std::snprintf(hex_text, sizeof hex_text, "0x%llx", static_cast<unsigned long long>(v));
    return std::string_view(hex_text, size_t(n));
  };
  for (size_t i = 0; i < call.slots.size() && i < kMaxArgSlots; ++i) {
    const auto& [name, kind] = call.slots[i];
    const uint64_t v = slots[i];
    switch (kind) {
      case 'i': out.integer(name, int64_t(v)); break;
      case 'p': out.text(name, as_hex(v)); break;
      case 'k': out.text(name, memcpy_kind(v)); break;
      case 'd': out.dim3(name, uint32_t(v), uint32_t(v >> 32 & 0xFFFF), uint32_t(v >> 48)); break;
      case 'n': {
        auto it = kernels.find(v);
        out.text(name, it != kernels.end() ? std::string_view(it->second) : as_hex(v));
        break;
      }
      default: out.none(name); break;
    }
  }
}

struct JsonArgs {
  nlohmann::json j = nlohmann::json::object();
  void integer(const std::string& k, int64_t v) { j[k] = v; }
  void text(const std::string& k, std::string_view v) { j[k] = std::string(v); }
  void dim3(const std::string& k, uint32_t x, uint32_t y, uint32_t z) { j[k] = {x, y, z}; }
  void none(const std::string&) {}
};

struct PackedOut {
  PackedArgs& p;
  void integer(const std::string& k, int64_t v) { p.key(k), p.integer(v); }
  void text(const std::string& k, std::string_view v) { p.key(k), p.text(v); }
  void dim3(const std::string& k, uint32_t x, uint32_t y, uint32_t z) { p.key(k), p.dim3(x, y, z); }
  void none(const std::string&) {}
};

size_t known_slots(const CallInfo& call) {
  size_t n = 0;
  for (size_t i = 0; i < call.slots.size() && i < kMaxArgSlots; ++i) n += std::string_view("ipkdn").find(call.slots[i].second) != std::string_view::npos;
  return n;
}
}  // namespace

nlohmann::json decode_args(const CallInfo& call, const uint64_t* slots, const KernelNames& kernels) {
  JsonArgs out;
  each_arg(call, slots, kernels, out);
  return std::move(out.j);
}

void pack_args(const CallInfo& call, const uint64_t* slots, const KernelNames& kernels, PackedArgs& out) {
  out.start(known_slots(call));
  PackedOut packer{out};
  each_arg(call, slots, kernels, packer);
}

}  // namespace cudatrace
