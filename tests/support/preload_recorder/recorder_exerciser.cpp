// Drives the preload shim's recorder (linked in, as the shim has it) through every way a
// record can reach disk: a buffer filling up several times, several threads, a record
// made from a thread-local destructor after the recorder's own exit hook ran, a forked
// child, and the main thread recording from an atexit handler after its thread-local
// exit hook. Calls alternate between the generic forwarder's two live paths around a fake
// driver function, the hot paths a real driver call takes: even calls the slim one (under a
// declared name, cuCtxGetDevice, whose frame needs nothing saved), odd calls the full frame
// (an undeclared name). Prints how many calls each part made; the
// test compares that with what the converter reads back. With argument `nomap` it
// records with no buffer at all instead (see without_a_buffer()).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "tracers/preload/shim/generic_hooks.h"
#include "tracers/preload/shim/recorder.h"

namespace {

constexpr int kMainCalls = 3 * int(cudatrace::preload::kBufferRecords) + 100;  // three flushes
constexpr int kThreads = 4, kThreadCalls = 10000, kLateCalls = 3, kChildCalls = 500, kAtexitCalls = 7;
constexpr int kNoMapCalls = 100;

// Two functions: a forwarder is handed out once per real function.
int fake_driver_call(uint64_t a) { return int(a % 3); }
int other_fake_driver_call(uint64_t a) { return int(a % 3); }
int (*g_slim)(uint64_t);
int (*g_full)(uint64_t);

void calls(int n) {
  for (int i = 0; i < n; ++i) (i % 2 ? g_full : g_slim)(uint64_t(i));
}

// Constructed before a thread's first record, so destroyed after the recorder's exit hook.
struct LateRecorder {
  bool armed = false;
  ~LateRecorder() {
    if (armed) calls(kLateCalls);
  }
};
thread_local LateRecorder t_late;

}  // namespace

// `nomap`: the thread's buffer cannot be mapped (the address space is capped just above
// what the process uses): every record must still reach disk, each on its own.
int without_a_buffer() {
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  if (pages <= 0) return 5;
  rlimit saved{};
  getrlimit(RLIMIT_AS, &saved);
  rlimit capped = saved;
  capped.rlim_cur = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (128 << 10);
  if (setrlimit(RLIMIT_AS, &capped) != 0) return 6;
  calls(kNoMapCalls);
  setrlimit(RLIMIT_AS, &saved);
  std::printf("%d\n", kNoMapCalls);
  return 0;
}

int main(int argc, char** argv) {
  using namespace cudatrace::preload;
  if (!recording()) {
    std::fprintf(stderr, "recorder_exerciser: set %s\n", kDirEnv);
    return 2;
  }
  auto forwarder = [](const char* name, int (*real)(uint64_t)) {
    return reinterpret_cast<int (*)(uint64_t)>(generic_wrapper_for(name, false, reinterpret_cast<void*>(real)));
  };
  g_slim = forwarder("cuCtxGetDevice", &fake_driver_call);
  g_full = forwarder("cuFakeCall", &other_fake_driver_call);
  if (!g_slim || !g_full) return 3;
  if (argc > 1 && std::strcmp(argv[1], "nomap") == 0) return without_a_buffer();
  std::atexit([] { calls(kAtexitCalls); });
  calls(kMainCalls);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([] {
      t_late.armed = true;
      calls(kThreadCalls);
    });
  for (auto& t : threads) t.join();
  const pid_t child = fork();
  if (child == 0) {
    calls(kChildCalls);
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
  std::printf("%d %d %d %d %d\n", kMainCalls, kAtexitCalls, kThreadCalls, kLateCalls, kChildCalls);
  return 0;
}
