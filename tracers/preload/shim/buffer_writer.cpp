#include "tracers/preload/shim/buffer_writer.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>

#include "tracers/preload/shim/recorder.h"

namespace cudatrace::preload {

namespace {

// Buffers waiting for the writer, in the order they were handed off. Each thread has at
// most one in flight, so the queue is never longer than the threads that record.
// Never destroyed: the writer waits on them while exit() runs the destructors (a
// condition variable's would wait for it).
std::mutex g_mu;
std::condition_variable* g_ready = new std::condition_variable;
std::deque<ThreadBuffer*>* g_queue = new std::deque<ThreadBuffer*>;
// The process whose writer runs (a forked child has none until its first hand-off), and
// whether hand-offs are refused (the exit flush began, or the writer could not start).
pid_t g_writer_pid = 0;
std::atomic<bool> g_refused{false};
thread_local bool t_is_writer = false;

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void* writer_main(void*) {
  t_is_writer = true;
  for (;;) {
    ThreadBuffer* b;
    {
      std::unique_lock lk(g_mu);
      g_ready->wait(lk, [] { return !g_queue->empty(); });
      b = g_queue->front();
      g_queue->pop_front();
    }
    const uint32_t n = b->in_flight.load(std::memory_order_acquire);
    // Its owner touches neither the spare buffer, the descriptor nor the counter until
    // in_flight is 0 again (wait_written()), which the release below publishes.
    b->dropped += write_records(b->fd, b->spare, size_t(n) * sizeof(Record));
    b->in_flight.store(0, std::memory_order_release);
    futex_wake(&b->in_flight);
  }
  return nullptr;
}

// Started by the first hand-off of a process, inheriting hand_off()'s mask, which blocks
// every signal: a signal the program expects goes to one of its own threads, and the
// fatal-signal flush never runs here, where it would wait for the writer's own write.
// Under g_mu.
bool start_writer_locked() {
  if (g_writer_pid == getpid()) return true;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 << 10);
  pthread_t thread;
  const bool started = pthread_create(&thread, &attr, writer_main, nullptr) == 0;
  pthread_attr_destroy(&attr);
  if (!started) {
    g_refused.store(true, std::memory_order_relaxed);  // written by each thread itself, as before
    return false;
  }
  pthread_setname_np(thread, "cudatrace-write");
  g_writer_pid = getpid();
  return true;
}

}  // namespace

bool hand_off(ThreadBuffer* b, uint32_t records) {
  if (g_refused.load(std::memory_order_relaxed) || records == 0) return false;
  // No signal while the lock is held: a fatal-signal flush here would wait for a buffer
  // that the writer, needing the lock to take it, could never write. (Two system calls
  // per 8192 records.)
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  bool handed = false;
  {
    std::lock_guard lk(g_mu);
    if (!g_refused.load(std::memory_order_relaxed) && start_writer_locked()) {
      b->in_flight.store(records, std::memory_order_release);
      g_queue->push_back(b);
      g_ready->notify_one();
      handed = true;
    }
  }
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  return handed;
}

void wait_written(ThreadBuffer* b) {
  if (t_is_writer) return;
  // A futex wait, not a lock: this runs in the fatal-signal handler too.
  for (uint32_t v; (v = b->in_flight.load(std::memory_order_acquire)) != 0;)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&b->in_flight), FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
}

void stop_handing_off() { g_refused.store(true, std::memory_order_relaxed); }

void writer_after_fork() {
  // The parent's lock and queue as they were copied: this process starts with neither.
  new (&g_mu) std::mutex;
  g_ready = new std::condition_variable;
  g_queue = new std::deque<ThreadBuffer*>;
  g_writer_pid = 0;
}

}  // namespace cudatrace::preload
