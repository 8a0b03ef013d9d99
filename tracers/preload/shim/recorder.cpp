#include "tracers/preload/shim/recorder.h"

#include "tracers/preload/shim/buffer_writer.h"
#include "tracers/preload/shim/generic_hooks.h"
#include "tracers/preload/shim/real_symbols.h"
#include "tracers/pause_hook.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace cudatrace::preload {

constinit thread_local ThreadBuffer t_buffer __attribute__((tls_model("initial-exec")));
// What device_tag() reads of the thread on every record shares emit()'s line.
static_assert(offsetof(ThreadBuffer, last_device_tag) < 64 && offsetof(ThreadBuffer, device_epoch) + 4 <= 64);

// Returns how many records it could not write (also the writer thread's write).
uint64_t write_records(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0 && fd >= 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    bytes -= size_t(n);
  }
  return bytes / sizeof(Record);
}

namespace {

char g_dir[4096];
bool g_recording = false;
// The process whose memory holds the buffers. A vfork child shares that memory and runs no
// fork handler, so its pid differs from this one (glibc's getpid() asks the kernel each
// time): Python's subprocess vforks and then execs, and flushing there wrote the parent's
// records under the child's pid and closed the parent's descriptors in the child's table.
pid_t g_owner = 0;
// The threads that have recorded, by their thread-local buffer: a thread removes its own
// when it ends (under the lock), so flush_all() never reads a dead thread's TLS.
std::mutex g_registry_mu;
std::vector<ThreadBuffer*>* g_buffers;

std::mutex g_kernels_mu;
std::unordered_map<uint64_t, std::string>* g_kernels;      // handle -> name
std::unordered_map<uint64_t, std::string>* g_stub_names;   // host stub -> name
// The kernel table is appended to as names are noted, not written once at exit, so that the
// harness can name launches while the program runs (it converts records as they reach the
// disk). Lines noted wait here (under g_kernels_mu) for the next buffer flush of any thread:
// the name of a launch reaches the file no later than the launch's record.
std::string* g_kernel_lines;
std::atomic<bool> g_kernel_lines_waiting{false};
pid_t g_kernel_file_pid = 0;  // the process whose .kernels file holds every entry noted so far

constexpr size_t kMappingBytes = (kBufferRecords + 2) * sizeof(Record);

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

int open_thread_file(int64_t tid) {
  char path[4200];
  std::snprintf(path, sizeof path, "%s/preload.%d.%lld.bin", g_dir, int(getpid()), (long long)tid);
  return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

void write_all(ThreadBuffer* b, const void* data, size_t bytes) {
  if (b->fd < 0) b->fd = open_thread_file(b->tid);
  b->dropped += write_records(b->fd, data, bytes);
}

// Writes what the buffer holds, closed by a calibration point in the spare slot, after
// what the writer thread still has of this thread: the file keeps the records' order.
void flush(ThreadBuffer* b) {
  wait_written(b);
  const uint32_t n = b->count.load(std::memory_order_acquire);
  if (n) {
    b->emitted += n - b->leading_calibrations;
    b->records[n] = calibration();
    write_all(b, b->records, (n + 1) * sizeof(Record));
  }
  b->leading_calibrations = 0;
  b->count.store(0, std::memory_order_release);
}

// What closes a segment: how many records it announces and drops, and a last
// calibration point.
Record trailer(int64_t tid, uint64_t emitted, uint64_t dropped) {
  Record t{};
  t.hook = kTrailer;
  t.ts = tid;
  t.a[0] = emitted;
  t.a[1] = dropped;
  t.a[2] = kMagic;
  const Record c = calibration();
  t.a[3] = c.a[0];
  t.a[4] = c.a[1];
  return t;
}

// Flushes and ends the thread's current segment with its trailer. The owner goes to the
// slow path on its next record (generation 0) and starts a new segment there.
void close_buffer(ThreadBuffer* b) {
  if (b->generation.exchange(0) == 0) return;
  const int saved = errno;
  flush(b);
  const Record end = trailer(b->tid, b->emitted, b->dropped);
  write_all(b, &end, sizeof end);
  if (b->fd >= 0) close(b->fd);
  b->fd = -1;
  errno = saved;
}

// A thread buffer's records, or null.
Record* map_buffer() {
  void* m = mmap(nullptr, kMappingBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return m == MAP_FAILED ? nullptr : static_cast<Record*>(m);
}

// A full buffer: sealed as flush() seals it and swapped with the spare one, which goes to
// the writer thread (buffer_writer.h). Without a spare mapping it is written here; without
// a writer, the spare's records are written here.
void flush_full(ThreadBuffer* b) {
  wait_written(b);  // the spare is free
  if (!b->spare) b->spare = map_buffer();
  if (!b->spare) return flush(b);
  const uint32_t n = b->count.load(std::memory_order_acquire);
  b->emitted += n - b->leading_calibrations;
  b->records[n] = calibration();
  if (b->fd < 0) b->fd = open_thread_file(b->tid);
  // Emptied before it is handed off: a fatal signal in between writes no record twice (the
  // full buffer's then count as missing, against the trailer's count).
  Record* const full = b->records;
  b->records = b->spare;
  b->spare = full;
  b->leading_calibrations = 0;
  b->count.store(0, std::memory_order_release);
  if (!hand_off(b, n + 1)) b->dropped += write_records(b->fd, full, (n + 1) * sizeof(Record));
}

// Starts a segment: in a thread's first record, after flush_all(), and in a forked child
// (whose copy of the buffer holds the parent's records: the parent writes those).
void attach(ThreadBuffer* b) {
  // A segment still open here was attached while flush_all() ran (it closed the others
  // and then moved the generation on): write it before starting over.
  close_buffer(b);
  if (!b->records) b->records = map_buffer();
  b->fd = -1;
  b->tid = int64_t(syscall(SYS_gettid));
  b->emitted = 0;
  b->dropped = 0;
  // Without a mapping every record of this thread is written alone: the generation
  // stays 0, so none of them takes the fast path (which would write through null).
  if (!b->records) return;
  b->records[0] = calibration();  // every segment of the file starts from a known point
  b->count.store(1, std::memory_order_relaxed);
  b->leading_calibrations = 1;
  {
    std::lock_guard lk(g_registry_mu);
    if (!b->registered) g_buffers->push_back(b);
    b->registered = true;
  }
  b->generation.store(g_shim.generation.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

// A record that has no buffer to go to (its thread is ending, or the mapping failed) is
// written as a segment of its own: slow, but not lost. (Should that write fail too, there
// is no trailer left to count it in.)
void write_alone(const Record& r) {
  const int64_t tid = int64_t(syscall(SYS_gettid));
  const Record segment[3] = {calibration(), r, trailer(tid, 1, 0)};
  const int saved = errno;
  const int fd = open_thread_file(tid);
  write_records(fd, segment, sizeof segment);
  if (fd >= 0) close(fd);
  errno = saved;
}

// Ends with the thread: its records are written and its trailer closes its file. The
// buffer of any thread but the main one then leaves the registry, before its TLS goes
// away; a record such a thread still makes (from a later TLS destructor) goes alone. The
// main thread's TLS destructors run in exit() before the atexit handlers, and cudart's
// teardown still calls the driver there: its buffer stays, starts a new segment, and
// flush_all() writes it.
struct ThreadExit {
  ~ThreadExit() {
    ThreadBuffer* b = &t_buffer;
    std::lock_guard lk(g_registry_mu);
    close_buffer(b);
    if (b->tid == int64_t(getpid())) return;
    b->exited = true;
    if (b->registered && g_buffers) std::erase(*g_buffers, b);
    b->registered = false;
    wait_written(b);  // close_buffer() waited, unless the exit flush had closed it first
    if (b->records) munmap(b->records, kMappingBytes);
    if (b->spare) munmap(b->spare, kMappingBytes);
    b->records = nullptr;
    b->spare = nullptr;
  }
};
thread_local ThreadExit t_exit;

void write_kernel_lines(bool all = false);

}  // namespace

void emit_slow(const Record& r) {
  if (!g_recording) return;
  ThreadBuffer* b = &t_buffer;
  if (!b->exited && b->generation.load(std::memory_order_relaxed) != g_shim.generation.load(std::memory_order_relaxed)) {
    (void)&t_exit;  // instantiate the thread's exit hook
    attach(b);
  }
  if (b->exited || !b->records) return write_alone(r);
  uint32_t i = b->count.load(std::memory_order_relaxed);
  if (i >= kBufferRecords) {
    const int saved = errno;  // the program must not see our write()'s errno
    flush_full(b);
    errno = saved;
    write_kernel_lines();  // the names its launches carry, with them
    i = 0;
  }
  b->records[i] = r;
  b->count.store(i + 1, std::memory_order_release);
}

namespace {

// Appends the lines that wait to this process's table. A forked child's table starts empty
// while its map holds the parent's entries: its first write is the whole map.
void write_kernel_lines_locked() {
  if (g_kernel_file_pid != getpid()) {
    g_kernel_lines->clear();
    char line[64];
    for (const auto& [handle, name] : *g_kernels) {
      std::snprintf(line, sizeof line, "0x%llx ", (unsigned long long)handle);
      *g_kernel_lines += line;
      *g_kernel_lines += name;
      *g_kernel_lines += '\n';
    }
    g_kernel_file_pid = getpid();
  }
  g_kernel_lines_waiting.store(false, std::memory_order_relaxed);
  if (g_kernel_lines->empty()) return;
  char path[4200];
  std::snprintf(path, sizeof path, "%s/preload.%d.kernels", g_dir, int(getpid()));
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    (void)write_records(fd, g_kernel_lines->data(), g_kernel_lines->size());
    close(fd);
  }
  g_kernel_lines->clear();
}

// `all`: also a forked child's table that nothing new was noted in (at its exit).
void write_kernel_lines(bool all) {
  if (!all && !g_kernel_lines_waiting.load(std::memory_order_relaxed)) return;
  const int saved = errno;
  std::lock_guard lk(g_kernels_mu);
  if (g_kernel_lines_waiting.load(std::memory_order_relaxed) || (!g_kernels->empty() && g_kernel_file_pid != getpid()))
    write_kernel_lines_locked();
  errno = saved;
}

// A new or renamed entry becomes a line to append (the converter keeps a handle's last name).
// Unchanged, nothing is written: cudart asks for the same kernel at every launch.
void note_kernel_locked(uint64_t handle, const char* name) {
  auto [it, fresh] = g_kernels->try_emplace(handle, name);
  if (!fresh) {
    if (it->second == name) return;
    it->second = name;
  }
  char line[64];
  std::snprintf(line, sizeof line, "0x%llx ", (unsigned long long)handle);
  *g_kernel_lines += line;
  *g_kernel_lines += name;
  *g_kernel_lines += '\n';
  g_kernel_lines_waiting.store(true, std::memory_order_relaxed);
  if (g_kernel_lines->size() >= (size_t(1) << 20)) write_kernel_lines_locked();  // a library registering thousands
}

void on_fatal_signal(int sig) {
  // Best effort: write what we have (write/close are async-signal-safe), then die as the
  // signal meant, with the default action.
  if (g_buffers)
    for (ThreadBuffer* b : *g_buffers) close_buffer(b);
  signal(sig, SIG_DFL);
  raise(sig);
}

// ---- devices ----
using CtxGetDeviceFn = int (*)(int*);
using BusIdFn = int (*)(char*, int, int);
std::atomic<CtxGetDeviceFn> g_ctx_get_device{nullptr};
std::atomic<BusIdFn> g_bus_id_of{nullptr};
std::atomic<uint64_t> g_devices_written{0};  // devices of this process already in its table
bool g_devices_off = false;  // CUDATRACE_PRELOAD_DEVICES=off: no device on any record

// One line "ORDINAL BUS_ID" the first time this process sees a device.
void write_device(int device) {
  if (device >= 64) return;
  const uint64_t bit = uint64_t(1) << device;
  if (g_devices_written.fetch_or(bit) & bit) return;
  const BusIdFn bus_id_of = g_bus_id_of.load(std::memory_order_acquire);
  char id[32] = {};
  if (!bus_id_of || bus_id_of(id, sizeof id - 1, device) != 0) return;
  char path[4200], line[64];
  std::snprintf(path, sizeof path, "%s/preload.%d.devices", g_dir, int(getpid()));
  const int n = std::snprintf(line, sizeof line, "%d %s\n", device, id);
  const int saved = errno;
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    (void)!write(fd, line, size_t(n));
    close(fd);
  }
  errno = saved;
}

// The process ends once exit's handlers have run, the writer thread with it: from here on
// each thread writes its own full buffers.
void flush_at_exit() {
  stop_handing_off();
  flush_all();
}

void after_fork_in_child() {
  // The parent still owns its buffers and will write them; this process starts afresh.
  g_shim.generation.fetch_add(1);
  new (&g_registry_mu) std::mutex;
  new (&g_kernels_mu) std::mutex;
  g_buffers = new std::vector<ThreadBuffer*>;
  ThreadBuffer& b = t_buffer;  // a copy of the parent's: its records and file are the parent's
  if (b.fd >= 0) close(b.fd);
  b.fd = -1;
  b.in_flight = 0;  // what the parent's writer writes is the parent's
  writer_after_fork();
  b.generation = 0;
  b.registered = false;
  g_owner = getpid();
  g_devices_written = 0;  // another process: its own table
  contexts_may_have_changed();  // the parent's contexts are not this process's
}

__attribute__((constructor)) void start() {
  const char* dir = std::getenv(kDirEnv);
  if (!dir || !*dir || std::strlen(dir) >= sizeof g_dir) return;
  std::strcpy(g_dir, dir);
  g_owner = getpid();
  g_buffers = new std::vector<ThreadBuffer*>;
  g_kernels = new std::unordered_map<uint64_t, std::string>;
  g_stub_names = new std::unordered_map<uint64_t, std::string>;
  g_kernel_lines = new std::string;
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  std::atexit(flush_at_exit);
  if (const char* d = std::getenv(kDevicesEnv)) g_devices_off = std::strcmp(d, "off") == 0;
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
  g_shim.live = true;
}

}  // namespace

bool recording() { return g_recording; }

void note_libcuda_loaded(void* libcuda_handle) {
  if (!g_recording || g_devices_off || !libcuda_handle || g_shim.ctx_get_current.load(std::memory_order_relaxed)) return;
  const DlsymFn lookup = real_dlsym();
  g_ctx_get_device.store(reinterpret_cast<CtxGetDeviceFn>(lookup(libcuda_handle, "cuCtxGetDevice")));
  g_bus_id_of.store(reinterpret_cast<BusIdFn>(lookup(libcuda_handle, "cuDeviceGetPCIBusId")), std::memory_order_release);
  g_shim.ctx_get_current.store(reinterpret_cast<CtxGetCurrentFn>(lookup(libcuda_handle, "cuCtxGetCurrent")),
                               std::memory_order_release);
}

// The thread keeps nothing valid: ask which context is current, and that context's device
// unless it is the one asked about last, in this epoch. Kept only when known: a thread
// with no context (or whose context names no device) asks again at its next record.
uint16_t device_tag_slow() {
  const CtxGetCurrentFn get_current = g_shim.ctx_get_current.load(std::memory_order_acquire);
  if (!get_current) return 0;
  // Read before asking: a change announced while we ask leaves what we keep stale, never
  // what the next record reads.
  const uint32_t epoch = g_shim.context_epoch.load(std::memory_order_acquire);
  const int saved = errno;  // the program must not see the driver's errno
  ThreadBuffer& b = t_buffer;
  void* context = nullptr;
  uint16_t tag = 0;
  if (get_current(&context) == 0 && context) {
    if (context == b.last_context && b.context_epoch == epoch) {
      tag = b.last_device_tag;
    } else {
      int device = -1;
      const CtxGetDeviceFn get_device = g_ctx_get_device.load(std::memory_order_relaxed);
      if (get_device && get_device(&device) == 0 && device >= 0 && device < int(kRecordDevice)) {
        tag = uint16_t(kRecordDevice | device);
        write_device(device);
      }
      b.last_context = context;
      b.context_epoch = epoch;
    }
    b.last_device_tag = tag;
    if (tag) b.device_epoch = epoch;
  }
  errno = saved;
  return tag;
}

}  // namespace cudatrace::preload

// For the per-call benchmark's in-process A/B: with recording paused the hooks only
// forward, so alternating paused and live batches in one process isolates what recording
// costs from everything a separate process run would vary. Returns the previous state.
extern "C" __attribute__((visibility("default"))) int cudatrace_pause(int paused) {
  using namespace cudatrace::preload;
  // Paused, the hooks saw no call, context changes included: the devices kept are asked again.
  if (!paused) contexts_may_have_changed();
  const bool was_live = g_shim.live.exchange(!paused && g_recording);
  return was_live ? 0 : 1;
}

// The calling thread's records so far (tracers/pause_hook.h): those its buffers have
// handed on, and those held now, less the calibration points among them.
extern "C" __attribute__((visibility("default"))) unsigned long long cudatrace_records(void) {
  const cudatrace::preload::ThreadBuffer& b = cudatrace::preload::t_buffer;
  return b.emitted + b.count.load(std::memory_order_relaxed) - b.leading_calibrations;
}

namespace cudatrace::preload {

void note_kernel(uint64_t handle, const char* name) {
  if (!g_recording || !name) return;
  std::lock_guard lk(g_kernels_mu);
  note_kernel_locked(handle, name);
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
  note_kernel_locked(host_stub, name);
}

void flush_all() {
  if (!g_recording) return;
  {
    // Held while closing: a thread that ends meanwhile waits before its TLS goes away.
    std::lock_guard lk(g_registry_mu);
    for (ThreadBuffer* b : *g_buffers) close_buffer(b);
  }
  write_kernel_lines(true);
  write_generic_table();
  // Any thread that calls CUDA after this starts a new segment of its file.
  g_shim.generation.fetch_add(1);
}

void flush_before_exec() {
  if (getpid() != g_owner) return;  // a vfork child: the parent, which owns them, writes its records
  flush_all();
}

}  // namespace cudatrace::preload
