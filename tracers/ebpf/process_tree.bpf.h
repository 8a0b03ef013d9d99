/* Which processes a method traces: the loader seeds `traced` with the target's pid, and
 * every fork of a traced process adds the child. Probes on shared files fire in every
 * process that maps them; the programs keep only these. Included by each .bpf.c. */
#ifndef CUDATRACE_PROCESS_TREE_BPF_H
#define CUDATRACE_PROCESS_TREE_BPF_H

/* Only the fields we read; CO-RE finds them in the running kernel's task_struct. */
struct task_struct {
  int pid;
  int tgid;
} __attribute__((preserve_access_index));

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32); /* tgid */
  __type(value, __u8);
} traced SEC(".maps");

static __always_inline int is_traced(__u32 tgid) { return bpf_map_lookup_elem(&traced, &tgid) != 0; }

/* Children of a traced process are traced too (threads share the tgid already). */
SEC("raw_tp/sched_process_fork")
int on_fork(struct bpf_raw_tracepoint_args* ctx) {
  __u32 parent = bpf_get_current_pid_tgid() >> 32;
  if (!is_traced(parent)) return 0;
  struct task_struct* child = (struct task_struct*)ctx->args[1];
  __u32 child_tgid = BPF_CORE_READ(child, tgid);
  __u8 one = 1;
  bpf_map_update_elem(&traced, &child_tgid, &one, BPF_ANY);
  return 0;
}

#endif
