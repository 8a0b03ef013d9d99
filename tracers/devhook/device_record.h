#pragma once
// What the injected device probes write, shared by the PTX rewriter (which emits the
// stores), the agent (which allocates the ring and saves it) and the decoder.
//
// The ring lives in device memory, split into sub-rings: a probe works on the one of its
// SM (%smid modulo their number), so that the claims of different SMs do not queue on one
// counter, and its stores stay on the GPU (records written across PCIe into mapped host
// memory cost several times what device stores do: the card has the figures). Each sub-ring has
// a control block of its own, in device memory, with its claim counter. In block mode the
// entry probe claims two slots with one atomic, its own and the exit probe's, so the exit
// probe only stores; in thread mode each probe claims, one lane for its warp.
//
// A sub-ring wraps, and a host thread of the agent drains it while kernels run, in a CUDA
// context of its own (so that its copies never queue behind the program's work): it copies
// the claims that follow the ones it has taken out of device memory, takes them in claim
// order up to the first slot not yet filled for that claim (a record carries its claim's
// lap around the sub-ring, so a slot's record of the previous lap is never taken for this
// one, and slots need no zeroing on the GPU), and then raises the sub-ring's `limit` in
// device memory to what it has taken + capacity. A probe may write the claims it holds
// while the last is < limit; past it, the probe waits, polling limit. A record is never
// overwritten before it is read. A probe that has waited kRingFullWaitNs (the drain is
// stuck) counts its records dropped instead, and from then on every probe that finds its
// sub-ring full drops at once: loss is exact, and a stuck drain costs the program one
// wait, not one per record. In block mode a block's exit slot is held from its entry, so a
// full sub-ring waits for its oldest running block to end. Not in thread mode: there a
// thread holding its exit slot could wait at a barrier for a thread of its own block that
// waits for room, and neither would move.
#include <cstdint>

namespace cudatrace::devhook {

// One probe hit: 32 bytes, written by two 16-byte vector stores into one 32-byte sector,
// the second after the first. The ring starts zeroed and kind is never 0, so a slot that
// was claimed but never filled can be told apart; the lap tells this claim's record from
// the slot's previous one.
struct DeviceRecord {
  uint64_t gpu_ns;      // %globaltimer
  uint64_t launch;      // launch word: the launch's sequence number (the agent's launch
                        // table) in bits 0-39, a graph node's execution in bits 40-63
  uint32_t block_x;     // %ctaid.x
  uint32_t block_yz;    // %ctaid.y | %ctaid.z << 16
  uint32_t thread;      // %tid.x | %tid.y << 10 | %tid.z << 20
  uint32_t sm_kind;     // lap << 16 | %smid << 8 | kind; lap: claim / sub-ring capacity, low 16 bits
};
static_assert(sizeof(DeviceRecord) == 32);

enum RecordKind : uint32_t { kEntry = 1, kExit = 2 };

// One sub-ring's, in device memory (an array of them, one per sub-ring, 256 bytes apart);
// the probes read capacity and records and bump the counters. claimed
// has a 128-byte line of its own: every probe's atomic goes there, and the volatile read of
// limit that follows it would otherwise queue behind the other probes' atomics (a
// measurable share of vecadd's cost in block mode: the card has the figures).
struct alignas(128) RingControl {
  uint64_t claimed;       // claims handed out (claim k goes to slot k % capacity)
  uint64_t claimed_line[15];
  uint64_t dropped;       // probe hits that gave up on a full ring
  uint64_t capacity;      // this sub-ring's slots, a power of two
  uint64_t records;       // device address of its DeviceRecord array (device memory)
  uint64_t tickets;       // device address of the graph nodes' counters (u64 each)
  uint64_t ticket_slots;  // how many
  uint64_t limit;         // claims below it may be written: the drain's count + capacity
  uint64_t capacity_log2;  // the probes' lap is claim >> capacity_log2
  uint64_t spare[9];
};
static_assert(sizeof(RingControl) == 256);

// Sub-rings per context: a power of two, at most one per SM that a GPU may have.
inline constexpr uint32_t kMaxSubrings = 64;
inline constexpr uint32_t kDefaultSubrings = 32;

// How long a probe waits for room in a full ring before it counts a drop.
inline constexpr uint64_t kRingFullWaitNs = 1000000000;

// The launch word (the kernel's added parameter, and DeviceRecord::launch).
inline constexpr int kExecutionShift = 40;
inline constexpr uint64_t kLaunchMask = (uint64_t(1) << kExecutionShift) - 1;
inline uint64_t launch_number(uint64_t word) { return word & kLaunchMask; }
inline uint64_t execution_number(uint64_t word) { return word >> kExecutionShift; }
// A graph node's parameter: its counter slot, + 1 (0 = not a graph node).
inline uint64_t graph_node_word(uint64_t launch, uint64_t slot) { return launch | ((slot + 1) << kExecutionShift); }
// Counters for this many graph kernel nodes per context (512 KiB of device memory).
inline constexpr uint64_t kTicketSlots = 65536;

inline uint32_t record_kind(const DeviceRecord& r) { return r.sm_kind & 0xff; }
inline uint32_t record_sm(const DeviceRecord& r) { return (r.sm_kind >> 8) & 0xff; }
inline uint32_t record_lap(const DeviceRecord& r) { return r.sm_kind >> 16; }
inline uint32_t block_y(const DeviceRecord& r) { return r.block_yz & 0xffff; }
inline uint32_t block_z(const DeviceRecord& r) { return r.block_yz >> 16; }
inline uint32_t thread_x(const DeviceRecord& r) { return r.thread & 0x3ff; }
inline uint32_t thread_y(const DeviceRecord& r) { return (r.thread >> 10) & 0x3ff; }
inline uint32_t thread_z(const DeviceRecord& r) { return r.thread >> 20; }

// Probe placement: one record per block (thread 0,0,0 at entry and at exit) or one per thread.
enum class ProbeMode { kBlock, kThread };

// Environment the tracer hands the agent.
inline constexpr const char* kOutDirEnv = "CUDATRACE_DEVHOOK_DIR";
inline constexpr const char* kModeEnv = "CUDATRACE_DEVHOOK_MODE";          // "block" or "thread"
inline constexpr const char* kRingRecordsEnv = "CUDATRACE_DEVHOOK_RING_RECORDS";  // rounded up to a power of two
inline constexpr uint64_t kDefaultRingRecords = uint64_t(2) << 20;  // 64 MiB of device memory (and as much pinned for the drain)
inline constexpr const char* kSubringsEnv = "CUDATRACE_DEVHOOK_SUBRINGS";  // a power of two, 1 to kMaxSubrings
// "off": no drain while kernels run (the ring is read when the context goes), for tests
// of the full-ring path.
inline constexpr const char* kDrainEnv = "CUDATRACE_DEVHOOK_DRAIN";

}  // namespace cudatrace::devhook
