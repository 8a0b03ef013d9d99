// exec: what is buffered must reach disk before the process image is replaced, or it is
// gone without a trace (no file, so not even counted as cut short). Every libc entry that
// replaces the image is hooked. The list forms (execl, execlp, execle) are rebuilt on the
// vector forms: glibc implements them with its internal execve, which no preloaded
// library can interpose. A vfork child execs through the same hooks: it leaves the parent's
// buffers alone (flush_before_exec).
#include <unistd.h>

#include <cstdarg>

#include "tracers/preload/shim/real_symbols.h"
#include "tracers/preload/shim/recorder.h"

using namespace cudatrace::preload;

extern "C" int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags);

#define EXEC_HOOK(NAME, PARAMS, ARGS)                                               \
  static std::atomic<void*> real_##NAME{nullptr};                                  \
  extern "C" int NAME PARAMS {                                                     \
    const auto real = next_symbol_once<int(*) PARAMS>(real_##NAME, #NAME);         \
    flush_before_exec();                                                            \
    return real ARGS;                                                               \
  }
EXEC_HOOK(execve, (const char* path, char* const argv[], char* const envp[]), (path, argv, envp))
EXEC_HOOK(execv, (const char* path, char* const argv[]), (path, argv))
EXEC_HOOK(execvp, (const char* file, char* const argv[]), (file, argv))
EXEC_HOOK(execvpe, (const char* file, char* const argv[], char* const envp[]), (file, argv, envp))
EXEC_HOOK(fexecve, (int fd, char* const argv[], char* const envp[]), (fd, argv, envp))
EXEC_HOOK(execveat, (int dirfd, const char* path, char* const argv[], char* const envp[], int flags),
          (dirfd, path, argv, envp, flags))

// The argument list of an execl-family call, as the vector the other forms take. On the
// stack (alloca): exec may be called in a vfork child, where malloc is not safe. `ap` is
// left just past the terminating null pointer (where execle's environment is).
#define ARGUMENT_VECTOR(argv, arg0, ap)                                             \
  size_t argc_ = 0;                                                                 \
  if (arg0) {                                                                       \
    va_list count_;                                                                 \
    va_copy(count_, ap);                                                            \
    for (argc_ = 1; va_arg(count_, const char*); ++argc_) {                         \
    }                                                                               \
    va_end(count_);                                                                 \
  }                                                                                 \
  char** argv = static_cast<char**>(__builtin_alloca((argc_ + 1) * sizeof(char*))); \
  argv[0] = const_cast<char*>(arg0);                                                \
  for (size_t i_ = 1; i_ <= argc_; ++i_) argv[i_] = va_arg(ap, char*);

#define EXEC_LIST_FORM(NAME, VECTOR_FORM)                   \
  extern "C" int NAME(const char* file, const char* arg0, ...) { \
    va_list ap;                                                  \
    va_start(ap, arg0);                                          \
    ARGUMENT_VECTOR(argv, arg0, ap)                              \
    va_end(ap);                                                  \
    return VECTOR_FORM(file, argv);                              \
  }
EXEC_LIST_FORM(execl, execv)
EXEC_LIST_FORM(execlp, execvp)

extern "C" int execle(const char* path, const char* arg0, ...) {
  va_list ap;
  va_start(ap, arg0);
  ARGUMENT_VECTOR(argv, arg0, ap)
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, argv, envp);
}
