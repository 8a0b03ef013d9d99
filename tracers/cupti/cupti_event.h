/* The record the cupti method's BPF programs hand to user space, one per USDT probe hit
 * of the injection library (tracers/cupti/injection/usdt_probes.h says what each probe carries). Shared by
 * tracers/cupti/cupti.bpf.c and tracers/cupti/, so both sides agree byte for byte. */
#ifndef CUDATRACE_CUPTI_EVENT_H
#define CUDATRACE_CUPTI_EVENT_H

#include <linux/types.h>

#define CUPTI_SLOTS 5
#define CUPTI_TEXT 64

enum cupti_record_kind {
  CUPTI_REC_API = 1,      /* id = domain << 32 | cbid; t0/t1 = enter/exit; ret; v = slots; text = kernel;
                             flags may carry the device (CUPTI_F_DEVICE) */
  CUPTI_REC_KERNEL = 2,   /* t0/t1 = GPU start/end; v = grid, block, stream, device; text = name */
  CUPTI_REC_DROPPED = 3,  /* v[0] = activity records CUPTI dropped */
  CUPTI_REC_STATUS = 4,   /* id = enum cudatrace_cupti_status; t0 = when; v[0] = value; text = message */
  CUPTI_REC_SUMMARY = 5,  /* v[0..2] = api exits, kernels, activity dropped, as the library counted;
                             v[3] = driver calls inside runtime calls it left out (CUPTI_LEFT_OUT_CBID) */
  CUPTI_REC_BATCH = 6,    /* heads a batch (struct cupti_batch): pid, tid and v[3] = how many of the
                             CUPTI_BATCH records after it are calls, all three the collector's; the
                             library's clock: t0 ticks at v[0] CLOCK_MONOTONIC ns, t1 ticks at v[1]
                             ns, v[2] = the wider of the two points' brackets, in ticks. The batch's
                             CUPTI_F_TICKS calls began after the first point. */
};

/* Counters of what did not reach user space, one slot each in a per-CPU array. */
enum cupti_loss {
  CUPTI_LOST_RING_FULL = 0,         /* ring buffer reserve failed: calls lost (a call's record, or
                                       a batch's calls) */
  CUPTI_LOST_UNREADABLE = 1,        /* a batched call could not be read from the process */
  CUPTI_LOST_RING_FULL_KERNELS = 2, /* ring buffer reserve failed: a kernel's record lost */
  CUPTI_LOST_RING_FULL_OTHER = 3,   /* ring buffer reserve failed: a status, summary or
                                       dropped-count record lost */
  CUPTI_LOST_KINDS = 4,
};

#define CUPTI_F_TEXT 1u /* text holds a string */
/* The call's device, as the injection library read it from the context current when the
 * call returned (cuptiGetDeviceId): CUPTI_F_DEVICE set, the ordinal in the top 16 bits.
 * The library's word, kept by the collector (CUPTI_F_LIBRARY); CUPTI_F_TEXT is the collector's. */
#define CUPTI_F_DEVICE 2u
#define CUPTI_DEVICE_SHIFT 16
/* t0 and t1 are TSC ticks (tracers/cupti/injection/call_clock.h), to be mapped to CLOCK_MONOTONIC
 * ns with the CUPTI_REC_BATCH record that heads the call's batch; without it they are ns. */
#define CUPTI_F_TICKS 4u
/* On a batch's head only, set by the library: another thread handed this batch over, at
 * exit, for a thread still alive then (api_calls.cpp, hand_over_live_threads), and the head's
 * tid is the library's word for the thread that made the calls. The collector keeps that tid
 * and this flag; every other batch's tid is the kernel's. */
#define CUPTI_F_HANDED_OVER 8u
#define CUPTI_F_LIBRARY 0xFFFF0006u

/* The driver call the library leaves out when a runtime call of the same thread is in
 * flight: cuKernelGetName (CUPTI's driver callback id, cupti_driver_cbid.h), which cudart
 * makes for a launch only while a CUPTI subscriber is attached; the runtime launch's record
 * carries the name it returns, and nothing scores it (harness/score/verdict.cpp,
 * kMadeForCupti). Counted, and sent with the summary. */
#define CUPTI_LEFT_OUT_CBID 719

/* A thread's finished calls, kept by the injection library as records laid out as the
 * ring's and handed over through the api_batch probe CUPTI_BATCH at a time: one probe hit
 * and one ring sample per batch instead of one per call (a probe hit costs about as much as
 * a CUDA call: see the card). The collector copies the batch as it is and writes only its
 * head: who made the calls is the kernel's word, not the process's, so the decoder takes
 * kind, pid and tid of the calls from the head, keeps only the library's flags
 * (CUPTI_F_LIBRARY) and reads the text no further than the field. Slots past the head's
 * count are not calls. 256 a batch: a hand-over costs about the same whatever its size (the
 * trap and the program's start, about 4 µs on the test VM), so with the fake CUPTI's loop
 * under the collector a record cost 122 ns at 64 a batch, 90 at 128 and 74 at 256 (the
 * library's own work about 50 of them). The price: a live thread's calls not yet handed
 * over at exit, up to 255: the exiting thread hands them over for it (CUPTI_F_HANDED_OVER),
 * and those it cannot (a thread inside a callback then, no membarrier) are counted lost,
 * api_calls_not_received. */
#define CUPTI_BATCH 256

struct cupti_record {
  __u32 kind;
  __u32 pid, tid;
  __u32 flags;
  __u64 id;
  __u64 corr;
  __u64 t0, t1;
  __s64 ret;
  __u64 v[CUPTI_SLOTS];
  char text[CUPTI_TEXT];
};

struct cupti_batch {
  struct cupti_record head; /* CUPTI_REC_BATCH */
  struct cupti_record calls[CUPTI_BATCH];
};


#endif
