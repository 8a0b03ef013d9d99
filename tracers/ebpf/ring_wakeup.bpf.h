/* When a BPF program should wake the ring buffer's reader. Waking it for every record
 * costs more than the record itself (the uprobe card has the figure), so wake it only when
 * the ring is a quarter full; otherwise the reader finds the records on its next timed
 * poll. */
#ifndef CUDATRACE_RING_WAKEUP_BPF_H
#define CUDATRACE_RING_WAKEUP_BPF_H

static __always_inline __u64 ring_wakeup_flag(void* ring) {
  __u64 avail = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA);
  __u64 size = bpf_ringbuf_query(ring, BPF_RB_RING_SIZE);
  return avail > size / 4 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

#endif
