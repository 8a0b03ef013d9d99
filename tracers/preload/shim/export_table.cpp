// The table of every export of the toolkit's libcudart.so and libcuda (generated at
// configure time, tracers/preload/exports.cmake), each with what the CUDA headers say of
// its signature: how many 8-byte words its parameters take (a generic forwarder copies
// kMaxStackArgWords of stack arguments; a function whose parameters fit in that many
// words cannot need more) and whether it returns an error code.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <type_traits>
#include <unordered_map>

#include "tracers/preload/shim/generic_hooks.h"

// Each name is looked up as ::NAME. Where the headers declare no function of that name
// (an export kept for old binaries, an interop call whose header is not included), the
// lookup falls through to this namespace's integer of the same name: "not declared".
// Macros that rename a function (cuMemAlloc -> cuMemAlloc_v2) are undone first, so that
// every name means itself.
namespace cudatrace_undeclared {
#define PROBE(identifier) [[maybe_unused]] inline constexpr int identifier = 0;
#include "preload_export_probe.inc"
#undef PROBE
}  // namespace cudatrace_undeclared
using namespace cudatrace_undeclared;

namespace cudatrace::preload {

namespace {

struct Signature {
  bool declared = false;
  int words = 0;
  bool returns_code = true;
  uint8_t frame = kFullFrame;
};

// How the System V ABI passes one parameter, conservatively: a struct of 16 bytes or less
// is counted as integer words (it may take registers that integers would) and as possibly
// in xmm registers; anything larger, and long double, goes on the stack.
struct Passing {
  int int_words = 0, sse = 0;
  bool on_stack = false, maybe_xmm = false;
};
template <class T>
constexpr void pass(Passing& p) {
  if constexpr (sizeof(T) > 16 || std::is_same_v<T, long double>) {
    p.on_stack = true;
  } else if constexpr (std::is_floating_point_v<T>) {
    ++p.sse;
  } else {
    p.int_words += int((sizeof(T) + 7) / 8);
    if constexpr (std::is_class_v<T> || std::is_union_v<T>) p.maybe_xmm = true;
  }
}
// A result: in rax alone (void, an integer, an enum, a pointer, a struct over 16 bytes,
// which comes back through memory whose address rax returns, and for which the caller
// passes that address as a hidden first integer argument), or possibly wider.
template <class R>
constexpr bool in_memory() {
  if constexpr (std::is_class_v<R> || std::is_union_v<R>)
    return sizeof(R) > 16;
  else
    return false;
}
template <class R>
constexpr bool wide() {
  return std::is_floating_point_v<R> || ((std::is_class_v<R> || std::is_union_v<R>) && !in_memory<R>());
}
template <class R, class... A>
constexpr uint8_t frame_of() {
  Passing p;
  p.int_words = in_memory<R>() ? 1 : 0;
  (pass<A>(p), ...);
  return uint8_t((p.on_stack || p.int_words > 6 || p.sse > 8 ? kCopyStack : 0) |
                 (p.sse > 0 || p.maybe_xmm ? kSaveXmm : 0) | (wide<R>() ? kWideReturn : 0));
}

template <class T>
constexpr int words_of() {
  return int((sizeof(T) + 7) / 8);
}

template <class R>
constexpr bool is_code() {
  return std::is_same_v<R, CUresult> || std::is_same_v<R, cudaError_t>;
}

template <class R, class... A>
constexpr Signature signature(R (*)(A...)) {
  return {true, (0 + ... + words_of<A>()), is_code<R>(), frame_of<R, A...>()};
}
template <class R, class... A>
constexpr Signature signature(R (*)(A...) noexcept) {
  return {true, (0 + ... + words_of<A>()), is_code<R>(), frame_of<R, A...>()};
}
constexpr Signature signature(const int*) { return {}; }

constexpr Signature either(Signature own, Signature base) { return own.declared ? own : base; }

constexpr ExportInfo make(const char* name, bool runtime, ExportKind kind, int slot, Signature s) {
  return {name, runtime, kind, slot, s.declared, s.words, s.returns_code, s.frame};
}

constexpr bool kRuntime = true;
constexpr bool kDriver = false;
#define runtime kRuntime
#define driver kDriver
#define LISTED ExportKind::Listed
#define WATCHED ExportKind::Watched
#define PLUMBING ExportKind::Plumbing
#define GENERIC ExportKind::Generic
constexpr ExportInfo kExports[] = {
#define EXPORT(kind, layer, name, base, slot) make(#name, layer, kind, slot, either(signature(&::name), signature(&::base))),
#include "preload_exports.inc"
#undef EXPORT
};
#undef runtime
#undef driver
#undef LISTED
#undef WATCHED
#undef PLUMBING
#undef GENERIC

constexpr int kExportCount = int(sizeof kExports / sizeof kExports[0]);

constexpr int generic_count() {
  int n = 0;
  for (const auto& e : kExports) n += e.kind == ExportKind::Generic;
  return n;
}
static_assert(generic_count() <= kMaxStaticSlots, "more generic exports than static slots");

constexpr GenericFrames static_frames() {
  GenericFrames f{};
  for (auto& b : f.of) b = slot_flags(nullptr);
  for (const auto& e : kExports)
    if (e.kind == ExportKind::Generic) f.of[e.slot] = slot_flags(&e);
  return f;
}

}  // namespace

const ExportInfo* export_table(int* count) {
  *count = kExportCount;
  return kExports;
}

const ExportInfo* find_export(std::string_view name) {
  static const auto* by_name = [] {
    auto* m = new std::unordered_map<std::string_view, const ExportInfo*>;
    for (const auto& e : kExports) m->emplace(e.name, &e);
    return m;
  }();
  auto it = by_name->find(name);
  return it == by_name->end() ? nullptr : it->second;
}

const ExportInfo* export_of_slot(int slot) {
  static const auto by_slot = [] {
    struct Table {
      const ExportInfo* of[kMaxStaticSlots] = {};
    } t;
    for (const auto& e : kExports)
      if (e.kind == ExportKind::Generic) t.of[e.slot] = &e;
    return t;
  }();
  return slot >= 0 && slot < kMaxStaticSlots ? by_slot.of[slot] : nullptr;
}

}  // namespace cudatrace::preload

// Constant-initialized: right before any constructor runs, as a forwarder may be called
// from another library's constructor before the shim's own.
extern "C" {
__attribute__((visibility("hidden"))) constinit cudatrace::preload::GenericFrames cudatrace_generic_frames =
    cudatrace::preload::static_frames();
}
