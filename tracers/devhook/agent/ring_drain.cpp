#include "tracers/devhook/agent/ring_drain.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tracers/devhook/agent/driver_api.h"

namespace cudatrace::devhook {

struct DrainedRing {
  RingMemory m;
  std::vector<uint64_t> next;  // per sub-ring: the next claim to take
  DrainTotals totals;
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

// Writes n records, counting those the file system refused.
void write_records(Drain& d, const DeviceRecord* records, size_t n) {
  const char* p = reinterpret_cast<const char*>(records);
  size_t left = n * sizeof(DeviceRecord);
  while (left > 0 && d.fd >= 0) {
    const ssize_t w = write(d.fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w;
    left -= size_t(w);
  }
  d.unwritten += (left + sizeof(DeviceRecord) - 1) / sizeof(DeviceRecord);
}

void flush(Drain& d) {
  write_records(d, d.buffer.data(), d.buffer.size());
  d.buffer.clear();
}

// A copied slot holds claim `claim`'s record when its second half, written last, had
// arrived with that claim's lap (kind is never 0, and gpu_ns neither).
bool filled(const DeviceRecord& s, uint64_t claim, const RingMemory& m) {
  return s.gpu_ns != 0 && record_kind(s) != 0 && record_lap(s) == ((claim / m.sub_capacity) & 0xffff);
}

// Records taken: a long run goes from the staging copy straight to the file.
void take(Drain& d, DrainedRing& r, const DeviceRecord* s, size_t n) {
  r.totals.taken += n;
  if (n >= kBufferRecords / 4) {
    flush(d);
    write_records(d, s, n);
    return;
  }
  d.buffer.insert(d.buffer.end(), s, s + n);
  if (d.buffer.size() >= kBufferRecords) flush(d);
}

// The ring stops being drained at the first call that fails (the context was destroyed
// where the agent could not see it, or broke); what it held is counted by the caller.
bool check(DrainedRing& r, CUresult res, const char* what) {
  if (res == CUDA_SUCCESS) return true;
  if (r.totals.error.empty()) r.totals.error = std::string(what) + " failed: " + error_name(res);
  r.finished = true;
  return false;
}

// Queues a copy of `count` slots of sub-ring `sub` from claim `first` on into staging,
// which mirrors the device layout (at most two spans: the sub-ring wraps).
bool copy_slots(DrainedRing& r, uint32_t sub, uint64_t first, uint64_t count) {
  const uint64_t cap = r.m.sub_capacity, start = first & (cap - 1);
  const uint64_t spans[2][2] = {{start, std::min(count, cap - start)}, {0, count - std::min(count, cap - start)}};
  for (const auto& [at, n] : spans) {
    if (n == 0) continue;
    const uint64_t slot = uint64_t(sub) * cap + at;
    if (!check(r,
               driver().memcpy_dtoh_async(r.m.staging + slot, r.m.records + slot * sizeof(DeviceRecord),
                                          n * sizeof(DeviceRecord), r.m.stream),
               "cuMemcpyDtoHAsync of the ring"))
      return false;
  }
  return true;
}

// The control blocks, copied into r.m.controls; totals updated.
bool read_controls(DrainedRing& r) {
  const DriverApi& cu = driver();
  if (!check(r, cu.memcpy_dtoh_async(r.m.controls, r.m.control, r.m.subrings * sizeof(RingControl), r.m.stream),
             "cuMemcpyDtoHAsync of the ring's control blocks") ||
      !check(r, cu.stream_synchronize(r.m.stream), "cuStreamSynchronize of the drain's stream"))
    return false;
  r.totals.claimed = r.totals.dropped = 0;
  for (uint32_t i = 0; i < r.m.subrings; ++i) {
    r.totals.claimed += r.m.controls[i].claimed;
    r.totals.dropped += r.m.controls[i].dropped;
  }
  r.totals.read = true;
  return true;
}

// One pass over a ring: per sub-ring, copies the claims since the last one it took (a
// sub-ring's worth at most), takes them in claim order up to the first not yet filled and
// raises the sub-ring's limit past them. Under d.mu, with the ring's context current. True
// when it took something.
bool drain_in_order(Drain& d, DrainedRing& r) {
  const DriverApi& cu = driver();
  if (!read_controls(r)) return false;
  const uint32_t k = r.m.subrings;
  const uint64_t cap = r.m.sub_capacity;
  std::vector<uint64_t> copied(k, 0), took(k, 0);
  bool any = false;
  for (uint32_t i = 0; i < k; ++i) {
    copied[i] = std::min(r.m.controls[i].claimed - r.next[i], cap);
    if (copied[i] && !copy_slots(r, i, r.next[i], copied[i])) return false;
    any |= copied[i] != 0;
  }
  if (!any || !check(r, cu.stream_synchronize(r.m.stream), "cuStreamSynchronize of the drain's stream")) return false;
  any = false;
  for (uint32_t i = 0; i < k; ++i) {
    const DeviceRecord* sub = r.m.staging + uint64_t(i) * cap;
    while (took[i] < copied[i] && filled(sub[(r.next[i] + took[i]) & (cap - 1)], r.next[i] + took[i], r.m)) ++took[i];
    // In claim order: at most two runs, the sub-ring wraps.
    const uint64_t start = r.next[i] & (cap - 1), first = std::min(took[i], cap - start);
    if (first) take(d, r, sub + start, first);
    if (took[i] > first) take(d, r, sub, took[i] - first);
    any |= took[i] != 0;
  }
  if (!any) return false;
  // The probes wait on limit in device memory: raised for every sub-ring in one copy
  // (8 bytes into each 256-byte control block). r.m.limits is not written again before
  // this copy has run: the next pass starts by synchronising the stream.
  for (uint32_t i = 0; i < k; ++i) r.m.limits[i] = (r.next[i] += took[i]) + cap;
  CUDA_MEMCPY2D limits{};
  limits.srcMemoryType = CU_MEMORYTYPE_HOST;
  limits.srcHost = r.m.limits;
  limits.srcPitch = sizeof(uint64_t);
  limits.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  limits.dstDevice = r.m.control + offsetof(RingControl, limit);
  limits.dstPitch = sizeof(RingControl);
  limits.WidthInBytes = sizeof(uint64_t);
  limits.Height = k;
  return check(r, cu.memcpy_2d_async(&limits, r.m.stream), "cuMemcpy2DAsync of the ring's limits");
}

void run(Drain* d) {
  // The drain's copies are legal while the program captures a graph on another thread.
  CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
  driver().exchange_capture_mode(&relaxed);
  auto idle = std::chrono::microseconds(20);
  while (!d->stop.load(std::memory_order_acquire)) {
    bool progress = false;
    {
      std::lock_guard lock(d->mu);
      for (auto& r : d->rings) {
        if (r->finished || !check(*r, driver().ctx_set_current(r->m.ctx), "cuCtxSetCurrent of the ring's context"))
          continue;
        progress |= drain_in_order(*d, *r);
      }
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

DrainedRing* drain_add(const RingMemory& ring) {
  Drain& d = drain();
  std::lock_guard lock(d.mu);
  auto r = std::make_unique<DrainedRing>();
  r->m = ring;
  r->next.assign(ring.subrings, 0);
  d.rings.push_back(std::move(r));
  return d.rings.back().get();
}

DrainTotals drain_finish(DrainedRing* r) {
  Drain& d = drain();
  std::lock_guard lock(d.mu);
  if (!r) return {};
  if (r->finished) return r->totals;
  CUcontext previous = nullptr;
  driver().ctx_get_current(&previous);
  struct Restore {
    CUcontext ctx;
    ~Restore() { driver().ctx_set_current(ctx); }
  } restore{previous};
  if (!check(*r, driver().ctx_set_current(r->m.ctx), "cuCtxSetCurrent of the drain's context")) return r->totals;
  while (drain_in_order(d, *r)) {
  }
  if (r->finished) return r->totals;
  // Past an empty slot (a probe that gave up left it so), what the sub-rings still hold.
  const uint64_t cap = r->m.sub_capacity;
  bool copied = true;
  std::vector<bool> holes(r->m.subrings);
  for (uint32_t i = 0; i < r->m.subrings && copied; ++i)
    if ((holes[i] = r->m.controls[i].claimed != r->next[i])) copied = copy_slots(*r, i, r->next[i], cap);
  if (copied && check(*r, driver().stream_synchronize(r->m.stream), "cuStreamSynchronize of the drain's stream"))
    for (uint32_t i = 0; i < r->m.subrings; ++i)
      for (uint64_t j = 1; holes[i] && j < cap; ++j)
        if (const DeviceRecord& s = r->m.staging[uint64_t(i) * cap + ((r->next[i] + j) & (cap - 1))];
            filled(s, r->next[i] + j, r->m))
          take(d, *r, &s, 1);
  r->finished = true;
  return r->totals;
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
