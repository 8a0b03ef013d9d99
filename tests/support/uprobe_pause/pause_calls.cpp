// A program that asks its tracer to pause, as bench/percall does under uprobe: 10 calls to
// cudaGetDevice, a pause, 10 calls, a resume, 10 calls. Without a GPU every call fails,
// which does not matter: the uprobe on libcudart sees it all the same. Prints
// "pause <rc> resume <rc>": what each returned, the state before (0 live, 1 paused), or
// -1 when the tracer refused.
#include <cuda_runtime.h>

#include <cstdio>

#include "bench/pause_client.h"

int main() {
  int device = -1;
  for (int i = 0; i < 10; ++i) (void)cudaGetDevice(&device);
  const int paused = cudatrace::pause_through_channel(1);
  for (int i = 0; i < 10; ++i) (void)cudaGetDevice(&device);
  const int resumed = cudatrace::pause_through_channel(0);
  for (int i = 0; i < 10; ++i) (void)cudaGetDevice(&device);
  std::printf("pause %d resume %d\n", paused, resumed);
  return 0;
}
