// Loads copies of libcudart as frameworks and their workers do, for the uprobe method's
// load-following tests (tests/correctness/uprobe_test.cpp):
//
//   load_cudarts [--fork] LIB...
//
// dlopens each LIB in turn (RTLD_LOCAL; the same path twice gives the same handle) and
// calls cudaGetDeviceCount through it, then prints "calls N" (N: the calls made) and each
// call's code as "code LIB CODE". With --fork, a child forked first does all of it and the
// parent only waits. Exits 0 when every library loaded.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

int load_and_call(int n, char** libs) {
  int calls = 0;
  for (int i = 0; i < n; ++i) {
    void* h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "load_cudarts: %s\n", dlerror());
      return 1;
    }
    auto count = reinterpret_cast<int (*)(int*)>(dlsym(h, "cudaGetDeviceCount"));
    if (!count) {
      std::fprintf(stderr, "load_cudarts: no cudaGetDeviceCount in %s\n", libs[i]);
      return 1;
    }
    int devices = 0;
    std::printf("code %s %d\n", libs[i], count(&devices));
    ++calls;
  }
  std::printf("calls %d pid %d\n", calls, int(getpid()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  const bool fork_first = argc > 1 && std::strcmp(argv[1], "--fork") == 0;
  if (fork_first) ++first;
  if (first >= argc) {
    std::fprintf(stderr, "usage: load_cudarts [--fork] LIB...\n");
    return 2;
  }
  if (!fork_first) return load_and_call(argc - first, argv + first);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    const int rc = load_and_call(argc - first, argv + first);
    std::fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
