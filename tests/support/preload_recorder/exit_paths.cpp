// A program linked with the shared cudart that makes a few runtime calls and then leaves
// without returning from main, the ways a traced program can: it replaces itself with
// exec, or it dies of a fatal signal. Under the preload shim, the records of those calls
// must still reach disk, closed by their trailer. (Without a GPU or driver the calls fail
// with a code, which the shim records all the same.)
//
//   preload_exit_paths execl|execlp|execle|abort|segv|vfork CALLS
//
// The exec modes exit 0 only when the new image got its arguments (and, for execle, its
// environment) intact. vfork is how Python's subprocess starts a command: a child that
// shares the parent's memory execs /bin/true, then the parent makes CALLS more calls and
// returns; every call is the parent's.
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: preload_exit_paths execl|execlp|execle|abort|segv|vfork CALLS\n");
    return 2;
  }
  const int calls = std::atoi(argv[2]);
  for (int i = 0; i < calls; ++i) {
    int n = 0;
    (void)cudaGetDeviceCount(&n);
  }
  const char* check = "test \"$1\" = two";
  if (std::strcmp(argv[1], "execl") == 0) execl("/bin/sh", "sh", "-c", check, "sh", "two", static_cast<char*>(nullptr));
  if (std::strcmp(argv[1], "execlp") == 0) execlp("sh", "sh", "-c", check, "sh", "two", static_cast<char*>(nullptr));
  if (std::strcmp(argv[1], "execle") == 0) {
    char* const env[] = {const_cast<char*>("X=y"), nullptr};
    execle("/bin/sh", "sh", "-c", "test \"$1\" = two && test \"$X\" = y", "sh", "two", static_cast<char*>(nullptr), env);
  }
  if (std::strncmp(argv[1], "exec", 4) == 0) return 3;  // the exec failed
  if (std::strcmp(argv[1], "vfork") == 0) {
    const pid_t child = vfork();
    if (child == 0) {
      execl("/bin/true", "true", static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
    for (int i = 0; i < calls; ++i) {
      int n = 0;
      (void)cudaGetDeviceCount(&n);
    }
    return 0;
  }
  if (std::strcmp(argv[1], "abort") == 0) std::abort();
  if (std::strcmp(argv[1], "segv") == 0) std::raise(SIGSEGV);
  return 2;
}
