#include "tracers/preload/shim/recorder.h"

#include "tracers/preload/shim/generic_hooks.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace cudatrace::preload {

namespace {

constexpr uint32_t kCapacity = 1 << 15;  // records per thread buffer (2 MiB)

struct ThreadBuffer {
  Record* records = nullptr;
  std::atomic<uint32_t> count{0};
  int fd = -1;
  int64_t tid = 0;
  uint64_t emitted = 0;
  uint64_t dropped = 0;
  uint32_t generation = 0;
  std::atomic<bool> closed{false};
};

char g_dir[4096];
bool g_recording = false;
std::atomic<uint32_t> g_generation{1};  // bumped in a forked child: the parent's buffers are not ours
std::mutex g_registry_mu;
std::vector<ThreadBuffer*>* g_buffers;  // never freed: threads may outlive static destructors

std::mutex g_kernels_mu;
std::unordered_map<uint64_t, std::string>* g_kernels;      // handle -> name
std::unordered_map<uint64_t, std::string>* g_stub_names;   // host stub -> name

// initial-exec: a preloaded library gets static TLS, and %fs-relative access avoids a
// __tls_get_addr call on every record.
__attribute__((tls_model("initial-exec"))) thread_local ThreadBuffer* t_buffer = nullptr;

// A (TSC, CLOCK_MONOTONIC) pair. The clock read is bracketed by two TSC reads and the
// midpoint kept; of three tries, the tightest bracket wins (a first clock_gettime in a
// thread can take microseconds, which would shift every converted timestamp by as much).
Record calibration() {
  Record c{};
  c.hook = kCalibration;
  int64_t best_span = INT64_MAX;
  for (int i = 0; i < 3; ++i) {
    const int64_t t0 = now_ns();
    const int64_t mono = monotonic_ns();
    const int64_t t1 = now_ns();
    if (t1 - t0 < best_span) {
      best_span = t1 - t0;
      c.a[0] = uint64_t(t0 + (t1 - t0) / 2);
      c.a[1] = uint64_t(mono);
    }
  }
  return c;
}

void write_all(ThreadBuffer* b, const void* data, size_t bytes) {
  if (b->fd < 0) {
    char path[4200];
    std::snprintf(path, sizeof path, "%s/preload.%d.%lld.bin", g_dir, int(getpid()), (long long)b->tid);
    b->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  const char* p = static_cast<const char*>(data);
  while (bytes > 0 && b->fd >= 0) {
    ssize_t n = write(b->fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    bytes -= size_t(n);
  }
  if (bytes > 0) b->dropped += bytes / sizeof(Record);
}

// The buffer keeps one slot spare for the calibration point that ends each flush.
void flush(ThreadBuffer* b) {
  const uint32_t n = b->count.load(std::memory_order_acquire);
  if (n) {
    b->records[n] = calibration();
    write_all(b, b->records, (n + 1) * sizeof(Record));
  }
  b->count.store(0, std::memory_order_release);
}

void close_buffer(ThreadBuffer* b) {
  if (b->closed.exchange(true)) return;
  const int saved = errno;
  flush(b);
  Record trailer{};
  trailer.hook = kTrailer;
  trailer.ts = b->tid;
  trailer.a[0] = b->emitted;
  trailer.a[1] = b->dropped;
  trailer.a[2] = kMagic;
  const Record c = calibration();
  trailer.a[3] = c.a[0];
  trailer.a[4] = c.a[1];
  write_all(b, &trailer, sizeof trailer);
  if (b->fd >= 0) close(b->fd);
  b->fd = -1;
  errno = saved;
}

// Ends with the thread: its records are written and its trailer closes its file.
struct ThreadExit {
  ~ThreadExit() {
    if (t_buffer && t_buffer->generation == g_generation.load(std::memory_order_relaxed)) close_buffer(t_buffer);
  }
};
thread_local ThreadExit t_exit;

ThreadBuffer* attach_thread() {
  auto* b = new ThreadBuffer;
  b->records = static_cast<Record*>(std::malloc((kCapacity + 1) * sizeof(Record)));
  b->records[0] = calibration();  // every segment of the file starts from a known point
  b->count.store(1, std::memory_order_relaxed);
  b->tid = int64_t(syscall(SYS_gettid));
  b->generation = g_generation.load(std::memory_order_relaxed);
  (void)&t_exit;  // instantiate the thread's exit hook
  {
    std::lock_guard lk(g_registry_mu);
    g_buffers->push_back(b);
  }
  t_buffer = b;
  return b;
}

void write_kernel_table() {
  std::lock_guard lk(g_kernels_mu);
  if (g_kernels->empty()) return;
  char path[4200];
  std::snprintf(path, sizeof path, "%s/preload.%d.kernels", g_dir, int(getpid()));
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  for (const auto& [handle, name] : *g_kernels) std::fprintf(f, "0x%llx %s\n", (unsigned long long)handle, name.c_str());
  std::fclose(f);
}

void on_fatal_signal(int sig) {
  // Best effort: write what we have (write/close are async-signal-safe), then die as the
  // signal meant, with the default action.
  if (g_buffers)
    for (ThreadBuffer* b : *g_buffers) close_buffer(b);
  signal(sig, SIG_DFL);
  raise(sig);
}

void after_fork_in_child() {
  // The parent still owns its buffers and will write them; this process starts afresh.
  g_generation.fetch_add(1);
  new (&g_registry_mu) std::mutex;
  new (&g_kernels_mu) std::mutex;
  g_buffers = new std::vector<ThreadBuffer*>;
  t_buffer = nullptr;
}

__attribute__((constructor)) void start() {
  const char* dir = std::getenv(kDirEnv);
  if (!dir || !*dir || std::strlen(dir) >= sizeof g_dir) return;
  std::strcpy(g_dir, dir);
  g_buffers = new std::vector<ThreadBuffer*>;
  g_kernels = new std::unordered_map<uint64_t, std::string>;
  g_stub_names = new std::unordered_map<uint64_t, std::string>;
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  std::atexit(flush_all);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {  // never replace the program's own
      struct sigaction sa {};
      sa.sa_handler = on_fatal_signal;
      sigemptyset(&sa.sa_mask);
      sigaction(sig, &sa, nullptr);
    }
  }
  g_recording = true;
  g_hooks_live = true;
}

}  // namespace

bool recording() { return g_recording; }

}  // namespace cudatrace::preload

// For the per-call benchmark's in-process A/B: with recording paused the hooks only
// forward, so alternating paused and live batches in one process isolates what recording
// costs from everything a separate process run would vary. Returns the previous state.
extern "C" __attribute__((visibility("default"))) int cudatrace_preload_pause(int paused) {
  using namespace cudatrace::preload;
  const bool was_live = g_hooks_live.exchange(!paused && g_recording);
  return was_live ? 0 : 1;
}

namespace cudatrace::preload {

void emit(HookId hook, int32_t ret, int64_t t0, int64_t t1, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
          uint64_t a4) {
  if (!g_recording) return;
  ThreadBuffer* b = t_buffer;
  if (!b || b->generation != g_generation.load(std::memory_order_relaxed)) b = attach_thread();
  if (b->closed.load(std::memory_order_relaxed)) {  // after the exit flush: nowhere to go
    ++b->dropped;
    return;
  }
  uint32_t i = b->count.load(std::memory_order_relaxed);
  if (i == kCapacity) {
    const int saved = errno;  // the program must not see our write()'s errno
    flush(b);
    errno = saved;
    i = 0;
  }
  Record& r = b->records[i];
  r.hook = hook;
  r.flags = 0;
  r.ret = ret;
  r.ts = t0;
  r.dur = t1 - t0;
  r.a[0] = a0;
  r.a[1] = a1;
  r.a[2] = a2;
  r.a[3] = a3;
  r.a[4] = a4;
  ++b->emitted;
  b->count.store(i + 1, std::memory_order_release);
}

void note_kernel(uint64_t handle, const char* name) {
  if (!g_recording || !name) return;
  std::lock_guard lk(g_kernels_mu);
  (*g_kernels)[handle] = name;
}

const char* kernel_name_of_stub(uint64_t host_stub) {
  if (!g_recording) return nullptr;
  std::lock_guard lk(g_kernels_mu);
  auto it = g_stub_names->find(host_stub);
  return it == g_stub_names->end() ? nullptr : it->second.c_str();
}

void note_stub(uint64_t host_stub, const char* name) {
  if (!g_recording || !name) return;
  std::lock_guard lk(g_kernels_mu);
  (*g_stub_names)[host_stub] = name;
  (*g_kernels)[host_stub] = name;
}

void flush_all() {
  if (!g_recording) return;
  std::vector<ThreadBuffer*> buffers;
  {
    std::lock_guard lk(g_registry_mu);
    buffers = *g_buffers;
  }
  for (ThreadBuffer* b : buffers) close_buffer(b);
  write_kernel_table();
  write_generic_table();
  // Any thread that calls CUDA after this starts a new segment of its file.
  g_generation.fetch_add(1);
}

}  // namespace cudatrace::preload
