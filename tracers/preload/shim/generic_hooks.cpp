#include "tracers/preload/shim/generic_hooks.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "tracers/preload/shim/recorder.h"

#if !defined(__x86_64__)
#error "the generic driver forwarders rely on the x86-64 System V calling convention"
#endif

namespace cudatrace::preload {

namespace {

using Word = uint64_t;
using Forward = int (*)(Word, Word, Word, Word, Word, Word, Word, Word, Word, Word, Word, Word, Word, Word, Word, Word);

// The real pointers the forwarders read are packed apart from the names only the table
// writer reads: eight to a cache line, not one.
std::atomic<void*> g_real[kGenericSlots];
char g_names[kGenericSlots][64];
int g_used = 0;
std::mutex g_mu;
std::unordered_map<void*, int>* g_slot_of = new std::unordered_map<void*, int>;

template <int I>
int forwarder(Word a0, Word a1, Word a2, Word a3, Word a4, Word a5, Word a6, Word a7, Word a8, Word a9, Word a10,
              Word a11, Word a12, Word a13, Word a14, Word a15) {
  const auto real = reinterpret_cast<Forward>(g_real[I].load(std::memory_order_acquire));
  if (!hooks_live()) return real(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
  const int64_t t0 = now_ns();
  const int r = real(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
  emit(HookId(kGenericBase + I), r, t0, now_ns());
  return r;
}

template <size_t... I>
constexpr std::array<void*, sizeof...(I)> forwarders(std::index_sequence<I...>) {
  return {reinterpret_cast<void*>(&forwarder<int(I)>)...};
}
const std::array<void*, kGenericSlots> kForwarders = forwarders(std::make_index_sequence<kGenericSlots>{});

bool takes_floats(const char* name) {
  return std::strstr(name, "TexRef") || std::strstr(name, "SurfRef");
}

}  // namespace

void* generic_wrapper_for(const char* name, void* real) {
  if (!real || !name || takes_floats(name) || std::strncmp(name, "cuGetProcAddress", 16) == 0) return nullptr;
  std::lock_guard lk(g_mu);
  if (auto it = g_slot_of->find(real); it != g_slot_of->end()) return kForwarders[size_t(it->second)];
  if (g_used == kGenericSlots) return nullptr;
  const int i = g_used++;
  std::strncpy(g_names[i], name, sizeof g_names[i] - 1);
  g_real[i].store(real, std::memory_order_release);
  (*g_slot_of)[real] = i;
  return kForwarders[size_t(i)];
}

void write_generic_table() {
  std::lock_guard lk(g_mu);
  if (!g_used) return;
  const char* dir = std::getenv(kDirEnv);
  if (!dir) return;
  std::string path = std::string(dir) + "/preload." + std::to_string(getpid()) + ".generic";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    for (int i = 0; i < g_used; ++i) std::fprintf(f, "%d %s\n", i, g_names[i]);
    std::fclose(f);
  }
}

}  // namespace cudatrace::preload
