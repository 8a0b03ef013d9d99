#include "tracers/devhook/agent/ring_drain.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cudatrace::devhook {

struct DrainedRing {
  DeviceRecord* slots;
  uint64_t mask;
  volatile uint64_t* consumed;
  uint64_t next = 0;  // the next claim to take
  uint64_t taken = 0;
  bool finished = false;
};

namespace {

// One process's drain. A child made by fork() starts its own (the parent's thread did
// not come along, and its lock and buffer are the parent's): the state is per pid.
struct Drain {
  pid_t pid = getpid();
  std::mutex mu;
  int fd = -1;
  std::vector<DeviceRecord> buffer;
  uint64_t unwritten = 0;
  std::vector<std::unique_ptr<DrainedRing>> rings;
  std::thread thread;
  std::atomic<bool> stop{false};
};

Drain* g_drain = nullptr;

Drain& drain() {
  if (!g_drain || g_drain->pid != getpid()) g_drain = new Drain;  // a forked child's is leaked, never used
  return *g_drain;
}

constexpr size_t kBufferRecords = size_t(1) << 15;  // 1 MiB per write

void flush(Drain& d) {
  const char* p = reinterpret_cast<const char*>(d.buffer.data());
  size_t left = d.buffer.size() * sizeof(DeviceRecord);
  while (left > 0 && d.fd >= 0) {
    const ssize_t n = write(d.fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    left -= size_t(n);
  }
  d.unwritten += (left + sizeof(DeviceRecord) - 1) / sizeof(DeviceRecord);
  d.buffer.clear();
}

// A slot is filled when both of its 16-byte halves have arrived: gpu_ns is never 0, and
// neither is kind.
bool filled(const DeviceRecord& s) {
  const auto* words = reinterpret_cast<const volatile uint64_t*>(&s);
  return words[0] != 0 && (words[3] >> 32 & 0xff) != 0;
}

void take(Drain& d, DrainedRing& r, DeviceRecord& s) {
  std::atomic_thread_fence(std::memory_order_acquire);
  d.buffer.push_back(s);
  std::memset(static_cast<void*>(&s), 0, sizeof s);
  ++r.taken;
  if (d.buffer.size() == kBufferRecords) flush(d);
}

// Probes waiting on a full ring resume as soon as the count moves: it is published every
// this many records, not once per pass.
constexpr uint64_t kPublishEvery = 4096;

void publish(DrainedRing& r) {
  std::atomic_thread_fence(std::memory_order_release);  // the zeroes before the count
  *r.consumed = r.next;
}

// Takes the records that follow in claim order, one ring's worth at most (so that the
// other rings, and drain_finish, get their turn while kernels keep writing), and
// publishes the count. Under d.mu.
bool drain_in_order(Drain& d, DrainedRing& r) {
  const uint64_t start = r.next;
  while (r.next - start <= r.mask && filled(r.slots[r.next & r.mask])) {
    take(d, r, r.slots[r.next & r.mask]);
    if (++r.next % kPublishEvery == 0) publish(r);
  }
  if (r.next == start) return false;
  publish(r);
  return true;
}

void run(Drain* d) {
  auto idle = std::chrono::microseconds(20);
  while (!d->stop.load(std::memory_order_acquire)) {
    bool progress = false;
    {
      std::lock_guard lock(d->mu);
      for (auto& r : d->rings)
        if (!r->finished) progress |= drain_in_order(*d, *r);
    }
    if (progress) {
      idle = std::chrono::microseconds(20);
      continue;
    }
    std::this_thread::sleep_for(idle);
    idle = std::min<std::chrono::microseconds>(idle * 2, std::chrono::milliseconds(2));
  }
}

}  // namespace

bool drain_open(const std::string& path, bool background, std::string* error) {
  Drain& d = drain();
  std::lock_guard lock(d.mu);
  if (d.fd >= 0) return true;
  d.fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (d.fd < 0) {
    *error = "cannot create " + path + ": " + std::strerror(errno);
    return false;
  }
  d.buffer.reserve(kBufferRecords);
  if (background) d.thread = std::thread(run, &d);
  return true;
}

DrainedRing* drain_add(DeviceRecord* slots, uint64_t capacity, volatile uint64_t* consumed) {
  Drain& d = drain();
  std::lock_guard lock(d.mu);
  d.rings.push_back(std::make_unique<DrainedRing>(DrainedRing{slots, capacity - 1, consumed}));
  return d.rings.back().get();
}

uint64_t drain_finish(DrainedRing* r) {
  Drain& d = drain();
  std::lock_guard lock(d.mu);
  if (!r || r->finished) return r ? r->taken : 0;
  drain_in_order(d, *r);
  // Past an empty slot (a probe that gave up left it so), what the ring still holds.
  for (uint64_t i = 1; i <= r->mask; ++i)
    if (DeviceRecord& s = r->slots[(r->next + i) & r->mask]; filled(s)) take(d, *r, s);
  r->finished = true;
  return r->taken;
}

uint64_t drain_close() {
  Drain& d = drain();
  d.stop.store(true, std::memory_order_release);
  if (d.thread.joinable()) d.thread.join();
  std::lock_guard lock(d.mu);
  flush(d);
  return d.unwritten;
}

}  // namespace cudatrace::devhook
