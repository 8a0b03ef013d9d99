/* The record the uprobe method's BPF programs hand to user space, and the cookie that
 * tells one shared program what to capture for the function it is attached to. Shared
 * by tracers/uprobe/uprobe.bpf.c and tracers/uprobe/, so both sides agree byte for byte. */
#ifndef CUDATRACE_UPROBE_EVENT_H
#define CUDATRACE_UPROBE_EVENT_H

#include <linux/types.h>

#define UPROBE_REG_ARGS 6   /* x86-64 SysV: rdi rsi rdx rcx r8 r9 */
#define UPROBE_STACK_ARGS 5 /* the 7th argument onwards, read from the caller's stack */
#define UPROBE_ARGS (UPROBE_REG_ARGS + UPROBE_STACK_ARGS)
#define UPROBE_BLOB 64      /* a string or struct an argument points to, read at entry */
#define UPROBE_MAX_DEPTH 8  /* nested traced calls per thread (runtime -> driver -> ...) */

/* Cookie layout (64 bits, one per attachment):
 *   bits  0-15 function index in the loader's table
 *   bits 16-19 1 + the argument whose pointee (8 bytes) is read at exit (0: none)
 *   bits 20-23 1 + the argument whose pointee is copied into blob at entry (0: none)
 *   bit  24    blob is a NUL-terminated string (else UPROBE_BLOB raw bytes)
 *   bits 25-27 how many stack words to read (0..UPROBE_STACK_ARGS) */
#define UPROBE_COOKIE_FN(c) ((unsigned)((c) & 0xFFFF))
#define UPROBE_COOKIE_OUT(c) ((int)(((c) >> 16) & 0xF) - 1)
#define UPROBE_COOKIE_BLOB(c) ((int)(((c) >> 20) & 0xF) - 1)
#define UPROBE_COOKIE_BLOB_STR(c) ((int)(((c) >> 24) & 1))
#define UPROBE_COOKIE_STACK(c) ((int)(((c) >> 25) & 0x7))

/* What the programs do (set through rodata before load). */
enum uprobe_mode {
  UPROBE_MODE_FULL = 0,  /* entry + exit: one record per call with duration and return code */
  UPROBE_MODE_ENTER = 1, /* entry only: one record per call, no return code */
  UPROBE_MODE_EMPTY = 2, /* the programs return at once: the cost of the probe itself */
};

/* Counters of what did not reach user space, one slot each in a per-CPU array. */
enum uprobe_loss {
  UPROBE_LOST_RING_FULL = 0,   /* ring buffer reserve failed: the call is lost */
  UPROBE_LOST_TOO_DEEP = 1,    /* more than UPROBE_MAX_DEPTH nested calls: the inner one is lost */
  UPROBE_LOST_NO_ENTRY = 2,    /* an exit whose entry was not recorded */
  UPROBE_LOST_THREADS_FULL = 3,/* the per-thread frame map was full: the call is lost */
  UPROBE_LOST_LOAD_NOTICE = 4, /* a loader notification that could not be queued: the process
                                * ran on unheld, and what it loaded is found at its next one */
  UPROBE_LOST_KINDS = 5,
};

#define UPROBE_F_EXIT 1u /* exit_ns, ret valid */
#define UPROBE_F_OUT 2u  /* out valid */
#define UPROBE_F_BLOB 4u /* blob valid */

struct uprobe_call {
  __u64 enter_ns; /* bpf_ktime_get_ns: CLOCK_MONOTONIC, the ledger's clock */
  __u64 exit_ns;
  __u64 cookie;
  __u32 pid, tid;
  __u32 flags;
  __u32 depth; /* nesting depth at entry (0: outermost traced call) */
  __s64 ret;
  __u64 out;
  __u64 args[UPROBE_ARGS];
  char blob[UPROBE_BLOB];
};

/* The dynamic loader's notification (its debugger hook, _dl_debug_state, with r_state
 * RT_CONSISTENT): the process has just mapped libraries and runs none of their code before
 * returning. The program stops the process (SIGSTOP) and queues this on the `loads` ring;
 * the loader probes what is new and resumes it (tracers/uprobe/load_follower.h).
 * The probe's cookie: the distance from _dl_debug_state to _r_debug in ld.so (0: unknown,
 * every notification then holds the process). */
struct uprobe_load_notice {
  __u64 time_ns; /* bpf_ktime_get_ns at the notification */
  __u32 pid, tid;
  __s32 r_state; /* -1: unread */
  __u32 held;    /* 1: SIGSTOP sent; the process waits to be resumed */
};

#define UPROBE_R_STATE_OFFSET 24 /* offsetof(struct r_debug, r_state) on x86-64 */
#define UPROBE_RT_CONSISTENT 0

#endif
