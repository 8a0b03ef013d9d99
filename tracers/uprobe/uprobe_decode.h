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
  std::map<std::string, int64_t> folded_by_name;
};

// Calls (in any order) -> events sorted by thread and entry time. A call made from
// inside another traced call of the same layer (cudart calling its own exported
// functions, libcuda calling its own) is an implementation detail, not a call of the
// program: it is folded into its caller and counted in `stats`.
// `name_from_file`: when a registration's kernel name could not be read from memory (a
// probe cannot fault a page in), the name from the executable's file given the stub's and
// the name's run-time addresses; empty when it cannot tell.
using NameFromFile = std::function<std::string(uint64_t stub, uint64_t name_address)>;
std::vector<Event> decode_uprobe_calls(std::vector<uprobe_call> calls, const std::vector<ProbedFunction>& functions,
                                       DecodeStats& stats, const NameFromFile& name_from_file = {});

// A NameFromFile for one executable: a host stub has the kernel's own symbol name, so the
// load base is the one that puts a function symbol at the stub's address *and* that
// symbol's name at the name's address.
NameFromFile kernel_names_from_executable(const std::filesystem::path& exe);

}  // namespace cudatrace
