// The uprobe method's BPF side: one entry and one exit program, attached once per CUDA
// function with a cookie that says which function it is and what to capture. Only the
// target's process tree is traced (process_tree.bpf.h).
#include <linux/types.h>
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "process_tree.bpf.h"
#include "ring_wakeup.bpf.h"
#include "uprobe_event.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile int mode = UPROBE_MODE_FULL;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 << 20);  // the loader sets the size the user asked for
} calls SEC(".maps");

// Loader notifications (struct uprobe_load_notice), read at once by the follower thread.
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 << 10);
} loads SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, UPROBE_LOST_KINDS);
  __type(key, __u32);
  __type(value, __u64);
} lost SEC(".maps");

struct frame {
  __u64 cookie;
  __u64 enter_ns;
  __u64 args[UPROBE_ARGS];
  char blob[UPROBE_BLOB];
  __u32 has_blob;
  __u32 pad;
};

struct frames {
  __u32 depth;
  __u32 pad;
  struct frame f[UPROBE_MAX_DEPTH];
};

// Calls in flight, per thread: entry pushes, exit pops (uretprobes fire in LIFO order).
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, __u32);  // tid
  __type(value, struct frames);
} stacks SEC(".maps");

// A zeroed `frames` to create a thread's entry from (too big for the BPF stack).
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct frames);
} zero_frames SEC(".maps");

static __always_inline void count_loss(__u32 kind) {
  __u64* n = bpf_map_lookup_elem(&lost, &kind);
  if (n) *n += 1;
}

static __always_inline void capture_entry(struct pt_regs* ctx, __u64 cookie, __u64* args, char* blob, __u32* has_blob) {
  args[0] = PT_REGS_PARM1(ctx);
  args[1] = PT_REGS_PARM2(ctx);
  args[2] = PT_REGS_PARM3(ctx);
  args[3] = PT_REGS_PARM4(ctx);
  args[4] = PT_REGS_PARM5(ctx);
  args[5] = ctx->r9;  // this libbpf's bpf_tracing.h stops at PARM5 on x86-64
  int stack_words = UPROBE_COOKIE_STACK(cookie);
  if (stack_words > 0) {
    // At the first instruction, sp points at the return address; argument 7 is above it.
    __u64 sp = PT_REGS_SP(ctx);
    if (stack_words > UPROBE_STACK_ARGS) stack_words = UPROBE_STACK_ARGS;
    bpf_probe_read_user(&args[UPROBE_REG_ARGS], stack_words * sizeof(__u64), (void*)(sp + 8));
  }
  int b = UPROBE_COOKIE_BLOB(cookie);
  *has_blob = 0;
  if (b >= 0 && b < UPROBE_ARGS) {
    const void* src = (const void*)args[b & 0xF];
    long got = UPROBE_COOKIE_BLOB_STR(cookie) ? bpf_probe_read_user_str(blob, UPROBE_BLOB, src)
                                              : bpf_probe_read_user(blob, UPROBE_BLOB, src);
    *has_blob = got >= 0;
  }
}

SEC("uprobe")
int call_enter(struct pt_regs* ctx) {
  if (mode == UPROBE_MODE_EMPTY) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32, tid = (__u32)id;
  if (!is_traced(tgid)) return 0;
  __u64 cookie = bpf_get_attach_cookie(ctx);

  if (mode == UPROBE_MODE_ENTER) {
    struct uprobe_call* c = bpf_ringbuf_reserve(&calls, sizeof(*c), 0);
    if (!c) {
      count_loss(UPROBE_LOST_RING_FULL);
      return 0;
    }
    c->enter_ns = bpf_ktime_get_ns();
    c->exit_ns = 0;
    c->cookie = cookie;
    c->pid = tgid;
    c->tid = tid;
    c->depth = 0;
    c->ret = 0;
    c->out = 0;
    __u32 has_blob = 0;
    capture_entry(ctx, cookie, c->args, c->blob, &has_blob);
    c->flags = has_blob ? UPROBE_F_BLOB : 0;
    bpf_ringbuf_submit(c, ring_wakeup_flag(&calls));
    return 0;
  }

  struct frames* st = bpf_map_lookup_elem(&stacks, &tid);
  if (!st) {
    __u32 zero = 0;
    struct frames* z = bpf_map_lookup_elem(&zero_frames, &zero);
    if (!z || bpf_map_update_elem(&stacks, &tid, z, BPF_NOEXIST) != 0) {
      count_loss(UPROBE_LOST_THREADS_FULL);
      return 0;
    }
    st = bpf_map_lookup_elem(&stacks, &tid);
    if (!st) return 0;
  }
  __u32 depth = st->depth;
  if (depth >= UPROBE_MAX_DEPTH) {
    // Still counted up, so that this call's exit pops nothing of its callers'.
    st->depth = depth + 1;
    count_loss(UPROBE_LOST_TOO_DEEP);
    return 0;
  }
  struct frame* f = &st->f[depth];
  f->cookie = cookie;
  capture_entry(ctx, cookie, f->args, f->blob, &f->has_blob);
  st->depth = depth + 1;
  f->enter_ns = bpf_ktime_get_ns();  // last: the capture above is the probe's cost, not the call's
  return 0;
}

SEC("uretprobe")
int call_exit(struct pt_regs* ctx) {
  if (mode != UPROBE_MODE_FULL) return 0;
  __u64 now = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tid = (__u32)id;
  struct frames* st = bpf_map_lookup_elem(&stacks, &tid);
  if (!st) return 0;  // not a traced thread (untraced processes never get an entry)
  __u32 depth = st->depth;
  if (depth == 0) {
    count_loss(UPROBE_LOST_NO_ENTRY);
    return 0;
  }
  depth -= 1;
  st->depth = depth;
  if (depth >= UPROBE_MAX_DEPTH) return 0;  // its entry was already counted as lost
  struct frame* f = &st->f[depth];
  __u64 cookie = bpf_get_attach_cookie(ctx);
  if (f->cookie != cookie) {
    // An exit that does not belong to the innermost entry (a longjmp skipped exits).
    count_loss(UPROBE_LOST_NO_ENTRY);
    return 0;
  }
  struct uprobe_call* c = bpf_ringbuf_reserve(&calls, sizeof(*c), 0);
  if (!c) {
    count_loss(UPROBE_LOST_RING_FULL);
    return 0;
  }
  c->enter_ns = f->enter_ns;
  c->exit_ns = now;
  c->cookie = cookie;
  c->pid = id >> 32;
  c->tid = tid;
  c->depth = depth;
  c->ret = PT_REGS_RC(ctx);
  c->flags = UPROBE_F_EXIT;
  __builtin_memcpy(c->args, f->args, sizeof(c->args));
  if (f->has_blob) {
    __builtin_memcpy(c->blob, f->blob, sizeof(c->blob));
    c->flags |= UPROBE_F_BLOB;
  } else {
    // The entry read can fail on a page not yet faulted in (a probe cannot fault pages in):
    // a kernel name read by cudart at registration is resident once the call returns.
    int b = UPROBE_COOKIE_BLOB(cookie);
    if (b >= 0 && b < UPROBE_ARGS) {
      const void* src = (const void*)f->args[b & 0xF];
      long got = UPROBE_COOKIE_BLOB_STR(cookie) ? bpf_probe_read_user_str(c->blob, UPROBE_BLOB, src)
                                                : bpf_probe_read_user(c->blob, UPROBE_BLOB, src);
      if (got >= 0) c->flags |= UPROBE_F_BLOB;
    }
  }
  c->out = 0;
  int o = UPROBE_COOKIE_OUT(cookie);
  if (o >= 0 && o < UPROBE_ARGS) {
    // Read the out-parameter now that the call has filled it in.
    if (bpf_probe_read_user(&c->out, sizeof(c->out), (const void*)f->args[o & 0xF]) == 0) c->flags |= UPROBE_F_OUT;
  }
  bpf_ringbuf_submit(c, ring_wakeup_flag(&calls));
  return 0;
}

// The dynamic loader's debugger hook in ld.so, called when the set of loaded objects
// changes: at start once every initial library is mapped and relocated, and in each
// dlopen/dlclose, with _r_debug.r_state RT_ADD/RT_DELETE before and RT_CONSISTENT after.
// At RT_CONSISTENT no code of a new library has run yet (its constructors come after):
// the process is stopped here, in every mode (the cost floor needs the same probes), until
// user space has probed what it mapped, so that no call into it can go unseen.
#define SIGSTOP_NUMBER 19
SEC("uprobe")
int loader_notice(struct pt_regs* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  if (!is_traced(tgid)) return 0;
  __s64 to_r_debug = (__s64)bpf_get_attach_cookie(ctx);
  int state = -1;
  if (to_r_debug) {
    // A uprobe handler sees ip at the probed instruction: _dl_debug_state in this process.
    const void* r_state = (const void*)(PT_REGS_IP(ctx) + to_r_debug + UPROBE_R_STATE_OFFSET);
    if (bpf_probe_read_user(&state, sizeof(state), r_state) != 0) state = -1;
  }
  if (state > UPROBE_RT_CONSISTENT) return 0;  // mid-change: wait for the consistent state
  struct uprobe_load_notice* n = bpf_ringbuf_reserve(&loads, sizeof(*n), 0);
  if (!n) {
    // Never stop a process nobody will be told to resume.
    count_loss(UPROBE_LOST_LOAD_NOTICE);
    return 0;
  }
  n->time_ns = bpf_ktime_get_ns();
  n->pid = tgid;
  n->tid = (__u32)id;
  n->r_state = state;
  n->held = bpf_send_signal(SIGSTOP_NUMBER) == 0;
  bpf_ringbuf_submit(n, BPF_RB_FORCE_WAKEUP);
  return 0;
}

// A thread that ends frees its frame stack.
SEC("raw_tp/sched_process_exit")
int on_exit(struct bpf_raw_tracepoint_args* ctx) {
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  bpf_map_delete_elem(&stacks, &tid);
  return 0;
}
