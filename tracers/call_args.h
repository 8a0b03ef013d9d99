#pragma once
// The CUDA calls whose arguments the tracers decode, and how: tracers/preload/hooks.def
// names each call's argument slots and their kinds. The preload shim fills the slots from
// C arguments; the uprobe method fills them from registers and the stack. Both then turn
// slots into the same JSON here, so the matcher compares like with like.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/dim3_pack.h"
#include "common/event_store.h"

namespace cudatrace {

inline constexpr size_t kMaxArgSlots = 5;

struct CallInfo {
  const char* layer;
  const char* name;
  std::vector<std::pair<std::string, char>> slots;  // (argument name, kind), hooks.def order
};

// hooks.def in order: index = the preload record's hook number.
const std::vector<CallInfo>& call_table();
// The entry for `symbol`, or nullptr.
const CallInfo* find_call(std::string_view symbol);

using KernelNames = std::map<uint64_t, std::string>;  // handle or host stub -> kernel name

// Kinds: i integer, p pointer (hex string), k cudaMemcpyKind name, d dim3 [x,y,z],
// n kernel (name from `kernels`, else the handle in hex).
nlohmann::json decode_args(const CallInfo& call, const uint64_t* slots, const KernelNames& kernels);
// The same args straight into the store's form (a converter's hot path: no JSON object).
void pack_args(const CallInfo& call, const uint64_t* slots, const KernelNames& kernels, PackedArgs& out);

std::string hex(uint64_t v);

}  // namespace cudatrace
