#pragma once
// The user-space half of the uprobe method that needs no BPF: which functions get a probe
// and what each probe captures (probe_specs.def, compiled into the attachment's cookie),
// and the turning of captured calls into events. Kept apart from the loader so that the
// unit tests can check it on any machine.
#include <linux/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tracers/uprobe/uprobe_event.h"
#include "common/event.h"
#include "tracers/call_args.h"

namespace cudatrace {

// Where one argument slot comes from (see probe_specs.def for the notation).
struct ProbeSource {
  enum Kind { Word, Out, DimPair, DimTriple, BlobWord, BlobDim } kind = Word;
  int a = 0, b = 0, c = 0;  // word indexes, or the blob offset
  int bits = 64;            // 64, 32 or 8: the part of the value that is the argument
};

struct ProbeSpec {
  int blob_arg = -1;       // argument whose pointee is copied at entry
  bool blob_string = false;
  int out_arg = -1;        // argument whose pointee is read at exit
  int stack_words = 0;     // stack words to read beyond the six registers
  std::vector<ProbeSource> slots;
};

// Parses one PROBE line's strings; throws std::invalid_argument naming the bad token.
ProbeSpec parse_probe_spec(const std::string& blob, const std::string& sources);
// The spec for `symbol`: from probe_specs.def, or one of the calls read to name kernels.
// nullptr: no arguments to capture.
const ProbeSpec* probe_spec(std::string_view symbol);

struct ProbedFunction {
  std::string symbol;
  std::string layer;  // runtime or driver
  std::string binary;
  uint64_t offset = 0;
};

uint64_t probe_cookie(size_t index, std::string_view symbol);

struct DecodeStats {
  int64_t records = 0;
  int64_t emitted = 0;
  int64_t plumbing = 0;       // naming calls consumed, not emitted
  int64_t folded_nested = 0;  // calls made from inside another call of the same layer
  int64_t unknown_function = 0;
  int64_t names_from_file = 0;  // kernel names read from the executable, not from memory
  // Nested calls settled before their outermost call's record came: past the window (their
  // same-layer caller, if any, could not fold them) or at the end (it never came: lost, or
  // still running when the process died). The first is loss of a fold, so it is loss.
  int64_t settled_over_window = 0;
  int64_t settled_at_end = 0;
  std::map<std::string, int64_t> folded_by_name;
};

// `name_from_file`: when a registration's kernel name could not be read from memory (a
// probe cannot fault a page in), the name from the executable's file given the stub's and
// the name's run-time addresses; empty when it cannot tell.
using NameFromFile = std::function<std::string(uint64_t stub, uint64_t name_address)>;

// Captured calls -> events, as the calls are read, in the ring's order. In entry+exit mode
// a call's record is written when it returns, so every call nested in it (depth > 0) comes
// before it: those wait, per thread, until their outermost call's record arrives, and are
// then settled together. A call made from inside another traced call of the same layer
// (cudart calling its own exported functions, libcuda calling its own) is an implementation
// detail, not a call of the program: it is folded into its caller and counted in `stats`.
// Kernel names are learnt as the naming calls are read: a handle is named before it is
// launched. Memory: the calls waiting for their outer call, at most `max_waiting`.
struct NamingCall;  // a call that ties a kernel handle to a name (uprobe_decode.cpp)
// Calls go to `calls` with their args packed as the store keeps them, from one event the
// decoder reuses (10^8 calls: no JSON object and no allocation per call); where `calls` is
// not given, to `sink` whole.
class UprobeCallDecoder {
 public:
  using Sink = std::function<void(Event&&)>;
  using CallSink = std::function<void(const Event&, const PackedArgs&)>;
  // Appends the functions probed since the first `known` of them: the decoder runs while
  // the program does, and a library mapped late brings new ones (at the end of the list).
  using MoreFunctions = std::function<void(size_t known, std::vector<ProbedFunction>& into)>;
  UprobeCallDecoder(const std::vector<ProbedFunction>& functions, DecodeStats& stats, NameFromFile name_from_file,
                    Sink sink, size_t max_waiting = size_t(1) << 18);
  UprobeCallDecoder(MoreFunctions more, DecodeStats& stats, NameFromFile name_from_file, CallSink calls,
                    size_t max_waiting = size_t(1) << 18);
  void add(const uprobe_call& c);
  // Settles what still waits (its outer call never came).
  void finish();

 private:
  struct Known {
    const NamingCall* naming;
    const CallInfo* info;  // set only when its arguments are decoded
    const ProbeSpec* spec;
  };
  bool known(unsigned fn);  // learns the functions up to `fn`; false: no such function
  void learn_name(const uprobe_call& c, const NamingCall& n);
  void settle(uint32_t tid);
  void emit(const uprobe_call& c);
  void pack_call_args(const uprobe_call& c, const Known& k);

  std::vector<ProbedFunction> functions_;
  MoreFunctions more_;
  DecodeStats& stats_;
  NameFromFile name_from_file_;
  Sink sink_;
  CallSink calls_;
  size_t max_waiting_;
  std::vector<Known> known_;
  Event call_;         // the call being emitted: reused, so its strings keep their capacity
  PackedArgs packed_;  // and its args
  std::unordered_map<uint32_t, KernelNames> names_;            // per process
  std::unordered_map<uint32_t, std::vector<uprobe_call>> waiting_;  // per thread
  size_t waiting_total_ = 0;
};

// The same over a vector in any order (the unit tests' form): the calls are put in the
// ring's order (by return), and the events come back sorted by thread and entry time.
std::vector<Event> decode_uprobe_calls(std::vector<uprobe_call> calls, const std::vector<ProbedFunction>& functions,
                                       DecodeStats& stats, const NameFromFile& name_from_file = {});

// A NameFromFile for one executable: a host stub has the kernel's own symbol name, so the
// load base is the one that puts a function symbol at the stub's address *and* that
// symbol's name at the name's address.
NameFromFile kernel_names_from_executable(const std::filesystem::path& exe);

}  // namespace cudatrace
