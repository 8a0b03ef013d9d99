#pragma once
// Where the shim finds the functions it wraps. It replaces dlsym (to hand out its driver
// wrappers), so it reaches the real dlsym through dlvsym.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace cudatrace::preload {

using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym();

// The next definition after the shim (libcudart.so, libc); aborts with a message when a
// wrapper is called but nothing stands behind it, which would otherwise be a crash.
template <class Fn>
Fn next_symbol(const char* name) {
  void* p = real_dlsym()(RTLD_NEXT, name);
  if (!p) {
    std::fprintf(stderr, "cudatrace preload: no definition of %s behind the shim\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}

}  // namespace cudatrace::preload
