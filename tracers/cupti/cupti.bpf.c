// The cupti method's BPF side: programs on the injection library's USDT probes
// (tracers/cupti/injection/usdt_probes.h), attached through libbpf's USDT support, which reads each argument
// wherever the probe's note says the compiler put it. Each hit becomes one record in the
// ring buffer; only the target's process tree is traced (process_tree.bpf.h).
#include <linux/types.h>
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <stdbool.h>  // usdt.bpf.h uses bool without including it
#include <bpf/usdt.bpf.h>

#include "cupti_event.h"
#include "process_tree.bpf.h"
#include "ring_wakeup.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 << 20);  // the loader sets the size the user asked for
} records SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, CUPTI_LOST_KINDS);
  __type(key, __u32);
  __type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(__u32 kind, __u64 n) {
  __u64* counter = bpf_map_lookup_elem(&lost, &kind);
  if (counter) *counter += n;
}

// A zeroed record of `kind` from the current traced process, or null (untraced, or the
// ring is full: counted).
static __always_inline struct cupti_record* begin(__u32 kind) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!is_traced(id >> 32)) return 0;
  struct cupti_record* r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
  if (!r) {
    // Counted by what was lost, so that a call is not counted again among the calls the
    // library emitted and the collector never received (cupti_loss.h).
    count_lost(kind == CUPTI_REC_API      ? CUPTI_LOST_RING_FULL
               : kind == CUPTI_REC_KERNEL ? CUPTI_LOST_RING_FULL_KERNELS
                                          : CUPTI_LOST_RING_FULL_OTHER,
               1);
    return 0;
  }
  __builtin_memset(r, 0, sizeof(*r));
  r->kind = kind;
  r->pid = id >> 32;
  r->tid = (__u32)id;
  return r;
}

static __always_inline void read_text(struct cupti_record* r, __u64 user_ptr) {
  if (user_ptr && bpf_probe_read_user_str(r->text, sizeof(r->text), (const void*)user_ptr) > 0) r->flags |= CUPTI_F_TEXT;
}

static __always_inline void finish(struct cupti_record* r) { bpf_ringbuf_submit(r, ring_wakeup_flag(&records)); }

SEC("usdt")
int BPF_USDT(api_exit, __u64 corr, __u64 id, __s64 ret, __u64 enter_ns, __u64 exit_ns, __u64 s0, __u64 s1, __u64 s2,
             __u64 s3, __u64 s4, __u64 kernel_name, __u64 device_flags) {
  struct cupti_record* r = begin(CUPTI_REC_API);
  if (!r) return 0;
  r->corr = corr;
  r->id = id;
  r->ret = ret;
  r->t0 = enter_ns;
  r->t1 = exit_ns;
  r->v[0] = s0;
  r->v[1] = s1;
  r->v[2] = s2;
  r->v[3] = s3;
  r->v[4] = s4;
  r->flags = (__u32)device_flags & CUPTI_F_LIBRARY;
  read_text(r, kernel_name);
  finish(r);
  return 0;
}

// A thread's batch of finished calls (tracers/cupti/injection/usdt_probes.h): one copy into one sample of
// its head and CUPTI_BATCH call records. Only the head is written here (who made the calls,
// how many there are): a loop over the records cost about as much as the copy, and kept the
// program from loading with larger batches.
SEC("usdt")
int BPF_USDT(api_batch, __u64 calls, __u64 count) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!is_traced(id >> 32)) return 0;
  if (count > CUPTI_BATCH) count = CUPTI_BATCH;
  struct cupti_batch* b = bpf_ringbuf_reserve(&records, sizeof(*b), 0);
  if (!b) {
    count_lost(CUPTI_LOST_RING_FULL, count);
    return 0;
  }
  if (bpf_probe_read_user(b, sizeof(*b), (const void*)calls) != 0) {
    bpf_ringbuf_discard(b, BPF_RB_NO_WAKEUP);
    count_lost(CUPTI_LOST_UNREADABLE, count);
    return 0;
  }
  /* A batch another thread of the process handed over at exit names its own thread; the
     process is still the kernel's word. */
  const __u32 handed = b->head.flags & CUPTI_F_HANDED_OVER;
  b->head.kind = CUPTI_REC_BATCH;
  b->head.pid = id >> 32;
  if (!handed) b->head.tid = (__u32)id;
  b->head.flags = handed;
  b->head.v[3] = count;
  bpf_ringbuf_submit(b, ring_wakeup_flag(&records));
  return 0;
}

SEC("usdt")
int BPF_USDT(kernel, __u64 corr, __u64 start, __u64 end, __u64 grid, __u64 block, __u64 stream, __u64 device,
             __u64 name) {
  struct cupti_record* r = begin(CUPTI_REC_KERNEL);
  if (!r) return 0;
  r->corr = corr;
  r->t0 = start;
  r->t1 = end;
  r->v[0] = grid;
  r->v[1] = block;
  r->v[2] = stream;
  r->v[3] = device;
  read_text(r, name);
  finish(r);
  return 0;
}

SEC("usdt")
int BPF_USDT(activity_dropped, __u64 count) {
  struct cupti_record* r = begin(CUPTI_REC_DROPPED);
  if (!r) return 0;
  r->v[0] = count;
  finish(r);
  return 0;
}

SEC("usdt")
int BPF_USDT(status, __u64 code, __u64 value, __u64 text) {
  struct cupti_record* r = begin(CUPTI_REC_STATUS);
  if (!r) return 0;
  r->id = code;
  r->t0 = bpf_ktime_get_ns();  // when the library subscribed: calls before it are not seen
  r->v[0] = value;
  read_text(r, text);
  finish(r);
  return 0;
}

SEC("usdt")
int BPF_USDT(summary, __u64 api_exits, __u64 kernels, __u64 dropped, __u64 left_out) {
  struct cupti_record* r = begin(CUPTI_REC_SUMMARY);
  if (!r) return 0;
  r->v[0] = api_exits;
  r->v[1] = kernels;
  r->v[2] = dropped;
  r->v[3] = left_out;
  finish(r);
  return 0;
}
