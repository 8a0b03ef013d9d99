#pragma once
// Where the shim finds the functions it wraps. It replaces dlsym (to hand out its driver
// wrappers), so it reaches the real dlsym through dlvsym.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace cudatrace::preload {

using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym();

// The file name of a loaded object's path ("libcuda.so.1" of "/usr/lib/x86_64-linux-gnu/libcuda.so.1").
inline const char* file_name_of(const char* path) {
  const char* slash = __builtin_strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// libcuda.so.1 (loaded if the program has not loaded it yet), and one of its functions by
// name; null when there is no libcuda or no such function.
void* libcuda();
void* driver_symbol(const char* name);

// The definition the shim stands in front of: the next one after the shim in the global
// scope (libcudart.so, libc), or, when the caller was loaded with RTLD_LOCAL and its cudart
// with it (a Python extension module: the shim, global, still comes first for it), the
// one in the caller's own scope. Aborts with a message when there is none, which would
// otherwise be a crash.
void* next_definition(const char* name, const void* caller);

template <class Fn>
Fn next_symbol(const char* name, const void* caller = nullptr) {
  return reinterpret_cast<Fn>(next_definition(name, caller));
}

// next_symbol(), asked once: the hot path then reads one plain pointer (no function-local
// static, whose guard would be one more cache line to touch on every call).
[[gnu::noinline, gnu::cold]] void* resolve_next_symbol(std::atomic<void*>& slot, const char* name, const void* caller);

template <class Fn>
[[gnu::always_inline]] inline Fn next_symbol_once(std::atomic<void*>& slot, const char* name,
                                                  const void* caller = nullptr) {
  void* p = slot.load(std::memory_order_relaxed);
  if (__builtin_expect(!p, 0)) p = resolve_next_symbol(slot, name, caller);
  return reinterpret_cast<Fn>(p);
}

// driver_symbol(), asked once and kept in `slot`; aborts with a message when libcuda lacks
// the function (a wrapper was called, so the program expected it there).
[[gnu::noinline, gnu::cold]] void* resolve_driver_symbol(std::atomic<void*>& slot, const char* name);

template <class Fn>
[[gnu::always_inline]] inline Fn real_driver(std::atomic<void*>& slot, const char* name) {
  void* p = slot.load(std::memory_order_acquire);
  if (__builtin_expect(!p, 0)) p = resolve_driver_symbol(slot, name);
  return reinterpret_cast<Fn>(p);
}

}  // namespace cudatrace::preload
