// A program that opens libcuda.so.1 itself and looks its functions up with dlsym, as
// some programs and frameworks do (no cudart involved). It prints every return code, one
// of them an error on purpose (device 999), so that a run under a tracer can be compared
// line by line with a plain run. Exits 77 when there is no driver to open.
#include <dlfcn.h>

#include <cstdio>

int main() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    std::fprintf(stderr, "dlopen_libcuda: %s\n", dlerror());
    return 77;
  }
  auto cu_init = reinterpret_cast<int (*)(unsigned)>(dlsym(cuda, "cuInit"));
  auto cu_device_get_count = reinterpret_cast<int (*)(int*)>(dlsym(cuda, "cuDeviceGetCount"));
  auto cu_device_get = reinterpret_cast<int (*)(int*, int)>(dlsym(cuda, "cuDeviceGet"));
  auto cu_device_get_name = reinterpret_cast<int (*)(char*, int, int)>(dlsym(cuda, "cuDeviceGetName"));
  if (!cu_init || !cu_device_get_count || !cu_device_get || !cu_device_get_name) {
    std::fprintf(stderr, "dlopen_libcuda: a driver function is missing\n");
    return 1;
  }
  int count = 0, device = -1, bad_device = -1;
  char name[256] = {};
  std::printf("cuInit %d\n", cu_init(0));
  std::printf("cuDeviceGetCount %d count %d\n", cu_device_get_count(&count), count);
  std::printf("cuDeviceGet(0) %d device %d\n", cu_device_get(&device, 0), device);
  std::printf("cuDeviceGet(999) %d\n", cu_device_get(&bad_device, 999));
  std::printf("cuDeviceGetName %d %s\n", cu_device_get_name(name, int(sizeof name), device), name);
  return 0;
}
