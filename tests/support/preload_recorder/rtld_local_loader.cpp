// Links no CUDA library: dlopens rtld_local_lib (given as argv[1]) with RTLD_LOCAL and calls
// into it, the way Python imports an extension module.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "rtld_local_loader: %s\n", dlerror());
    return 3;
  }
  auto calls = reinterpret_cast<int (*)()>(dlsym(h, "rtld_local_calls"));
  return calls ? calls() : 4;
}
