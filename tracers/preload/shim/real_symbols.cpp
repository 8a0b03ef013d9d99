#include "tracers/preload/shim/real_symbols.h"

#include "tracers/preload/shim/recorder.h"

namespace cudatrace::preload {

DlsymFn real_dlsym() {
  static const DlsymFn fn = [] {
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return reinterpret_cast<DlsymFn>(p);
  }();
  return fn;
}

void* next_definition(const char* name, const void* caller) {
  void* p = real_dlsym()(RTLD_NEXT, name);
  Dl_info info{};
  if (!p && caller && dladdr(caller, &info) && info.dli_fname) {
    // A handle's lookup searches that object and its dependencies only: never the shim.
    if (void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
      p = real_dlsym()(h, name);
      dlclose(h);
    }
  }
  if (!p) {
    std::fprintf(stderr, "cudatrace preload: no definition of %s behind the shim\n", name);
    std::abort();
  }
  return p;
}

void* resolve_next_symbol(std::atomic<void*>& slot, const char* name, const void* caller) {
  void* p = next_definition(name, caller);
  slot.store(p, std::memory_order_relaxed);
  return p;
}

void* libcuda() {
  static void* handle = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    h = h ? h : dlopen("libcuda.so.1", RTLD_NOW);
    note_libcuda_loaded(h);  // from now on records say which device they are on
    return h;
  }();
  return handle;
}

void* driver_symbol(const char* name) {
  void* h = libcuda();
  return h ? real_dlsym()(h, name) : nullptr;
}

void* resolve_driver_symbol(std::atomic<void*>& slot, const char* name) {
  void* p = driver_symbol(name);
  if (!p) {
    std::fprintf(stderr, "cudatrace preload: libcuda.so.1 has no %s\n", name);
    std::abort();
  }
  slot.store(p, std::memory_order_release);
  return p;
}

}  // namespace cudatrace::preload
