// Linked to newer_libcuda: calls cuFutureCall by name, as a program built against a newer
// toolkit would. The shim does not export it, so the call binds past the shim.
#include <cstdio>

extern "C" int cuInit(unsigned);
extern "C" int cuFutureCall(int);

int main() {
  std::printf("%d %d\n", cuInit(0), cuFutureCall(41));
  return 0;
}
