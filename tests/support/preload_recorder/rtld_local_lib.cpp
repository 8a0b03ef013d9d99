// A library linked with shared cudart, as a Python extension module is: rtld_local_loader
// dlopens it with RTLD_LOCAL, so its cudart is in no global scope and the shim, preloaded
// and global, must find cudart's definitions through the calling library.
#include <cuda_runtime_api.h>

#include <cstdio>

extern "C" int rtld_local_calls() {
  int n = 0, v = 0;
  // A listed hook and a generic forwarder, each resolved for the first time here.
  std::printf("cudaGetDeviceCount %d\n", int(cudaGetDeviceCount(&n)));
  std::printf("cudaDeviceGetAttribute %d\n", int(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 0)));
  return 0;
}
