#include "tracers/uprobe/uprobe_decode.h"

#include "common/elf_file.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace cudatrace {

struct NamingCall {
  const char* symbol;
  const char* blob;
  const char* sources;
  bool plumbing;  // the runtime's own bookkeeping, never an event
};

namespace {

int word_index(const std::string& s, const std::string& token) {
  size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(s, &used);
  } catch (const std::exception&) {
  }
  if (used != s.size() || n < 0 || n >= UPROBE_ARGS) throw std::invalid_argument("bad probe source '" + token + "'");
  return n;
}

// Splits a trailing width marker off: "3w" -> ("3", 32).
std::pair<std::string, int> width(std::string s) {
  if (!s.empty() && s.back() == 'w') return {s.substr(0, s.size() - 1), 32};
  if (!s.empty() && s.back() == 'b') return {s.substr(0, s.size() - 1), 8};
  return {s, 64};
}

// The calls that tie kernel handles to names. Slot 0 of each: the handle it defines (or
// the stub it reads); the blob: the name, when the call carries one.
constexpr NamingCall kNamingCalls[] = {
    {"__cudaRegisterFunction", "str:3", "1", true},  // (fatbin, stub, device_fun, name, ...)
    {"__cudaGetKernel", "", "*0 1", true},           // (cudaKernel_t* out, stub)
    {"cuLibraryGetKernel", "str:2", "*0", false},    // (CUkernel* out, lib, name)
    {"cuModuleGetFunction", "str:2", "*0", false},   // (CUfunction* out, mod, name)
    {"cuKernelGetFunction", "", "*0 1", false},      // (CUfunction* out, CUkernel)
};

const NamingCall* naming_call(std::string_view symbol) {
  for (const auto& n : kNamingCalls)
    if (symbol == n.symbol) return &n;
  return nullptr;
}

uint64_t masked(uint64_t v, int bits) { return bits == 64 ? v : v & ((uint64_t(1) << bits) - 1); }

uint64_t blob_u64(const uprobe_call& c, int off, int bits) {
  uint64_t v = 0;
  if (off >= 0 && off + bits / 8 <= UPROBE_BLOB) std::memcpy(&v, c.blob + off, size_t(bits / 8));
  return v;
}

// The value of one slot, as hooks.def lays it out; false when the capture lacks it.
bool slot_value(const ProbeSource& s, const uprobe_call& c, uint64_t& v) {
  const bool blob = c.flags & UPROBE_F_BLOB;
  switch (s.kind) {
    case ProbeSource::Word: v = masked(c.args[s.a], s.bits); return true;
    case ProbeSource::Out: v = masked(c.out, s.bits); return c.flags & UPROBE_F_OUT;
    case ProbeSource::DimPair:
      v = pack_dim3(uint32_t(c.args[s.a]), uint32_t(c.args[s.a] >> 32), uint32_t(c.args[s.b]));
      return true;
    case ProbeSource::DimTriple:
      v = pack_dim3(uint32_t(c.args[s.a]), uint32_t(c.args[s.b]), uint32_t(c.args[s.c]));
      return true;
    case ProbeSource::BlobWord: v = blob_u64(c, s.a, s.bits); return blob;
    case ProbeSource::BlobDim:
      v = pack_dim3(uint32_t(blob_u64(c, s.a, 32)), uint32_t(blob_u64(c, s.a + 4, 32)),
                    uint32_t(blob_u64(c, s.a + 8, 32)));
      return blob;
  }
  return false;
}

std::string blob_string(const uprobe_call& c) {
  if (!(c.flags & UPROBE_F_BLOB)) return {};
  return std::string(c.blob, strnlen(c.blob, UPROBE_BLOB));
}

}  // namespace

ProbeSpec parse_probe_spec(const std::string& blob, const std::string& sources) {
  ProbeSpec spec;
  if (!blob.empty()) {
    if (blob.rfind("str:", 0) == 0)
      spec.blob_string = true;
    else if (blob.rfind("raw:", 0) != 0)
      throw std::invalid_argument("bad blob '" + blob + "' (want str:N or raw:N)");
    spec.blob_arg = word_index(blob.substr(4), blob);
  }
  int highest_word = -1;
  std::istringstream in(sources);
  std::string token;
  while (in >> token) {
    ProbeSource s;
    if (token[0] == '*') {
      auto [w, bits] = width(token.substr(1));
      s.kind = ProbeSource::Out;
      s.a = word_index(w, token);
      s.bits = bits;
      if (spec.out_arg >= 0 && spec.out_arg != s.a) throw std::invalid_argument("two out-parameters in '" + sources + "'");
      spec.out_arg = s.a;
    } else if (token[0] == '@') {
      if (spec.blob_arg < 0) throw std::invalid_argument("'" + token + "' needs a blob");
      std::string rest = token.substr(1);
      if (rest.size() > 2 && rest.compare(rest.size() - 2, 2, "/d") == 0) {
        s.kind = ProbeSource::BlobDim;
        rest.resize(rest.size() - 2);
      } else {
        s.kind = ProbeSource::BlobWord;
        std::tie(rest, s.bits) = width(rest);
      }
      s.a = std::stoi(rest);
      if (s.a < 0 || s.a + (s.kind == ProbeSource::BlobDim ? 12 : s.bits / 8) > UPROBE_BLOB)
        throw std::invalid_argument("'" + token + "' reads past the blob");
    } else if (auto plus = token.find('+'); plus != std::string::npos) {
      s.kind = ProbeSource::DimPair;
      s.a = word_index(token.substr(0, plus), token);
      s.b = word_index(token.substr(plus + 1), token);
    } else if (std::count(token.begin(), token.end(), ',') == 2) {
      size_t c1 = token.find(','), c2 = token.find(',', c1 + 1);
      s.kind = ProbeSource::DimTriple;
      s.a = word_index(token.substr(0, c1), token);
      s.b = word_index(token.substr(c1 + 1, c2 - c1 - 1), token);
      s.c = word_index(token.substr(c2 + 1), token);
    } else {
      auto [w, bits] = width(token);
      s.a = word_index(w, token);
      s.bits = bits;
    }
    highest_word = std::max({highest_word, s.kind == ProbeSource::BlobWord || s.kind == ProbeSource::BlobDim ? -1 : s.a,
                             s.kind == ProbeSource::DimPair || s.kind == ProbeSource::DimTriple ? s.b : -1,
                             s.kind == ProbeSource::DimTriple ? s.c : -1});
    spec.slots.push_back(s);
  }
  highest_word = std::max(highest_word, spec.blob_arg);
  spec.stack_words = std::max(0, highest_word + 1 - UPROBE_REG_ARGS);
  if (spec.slots.size() > kMaxArgSlots) throw std::invalid_argument("more than 5 slots in '" + sources + "'");
  return spec;
}

const ProbeSpec* probe_spec(std::string_view symbol) {
  static const std::map<std::string, ProbeSpec, std::less<>> specs = [] {
    std::map<std::string, ProbeSpec, std::less<>> m;
#define PROBE(symbol, blob, sources) m[#symbol] = parse_probe_spec(blob, sources);
#include "tracers/uprobe/probe_specs.def"
#undef PROBE
    for (const auto& n : kNamingCalls) m[n.symbol] = parse_probe_spec(n.blob, n.sources);
    return m;
  }();
  auto it = specs.find(symbol);
  return it == specs.end() ? nullptr : &it->second;
}

uint64_t probe_cookie(size_t index, std::string_view symbol) {
  uint64_t cookie = index & 0xFFFF;
  if (const ProbeSpec* s = probe_spec(symbol)) {
    cookie |= uint64_t(s->out_arg + 1) << 16;
    cookie |= uint64_t(s->blob_arg + 1) << 20;
    cookie |= uint64_t(s->blob_string) << 24;
    cookie |= uint64_t(std::min(s->stack_words, UPROBE_STACK_ARGS)) << 25;
  }
  return cookie;
}

NameFromFile kernel_names_from_executable(const std::filesystem::path& exe) {
  // Read on first need only (most runs read every name from memory), and then once.
  struct Image {
    bool loaded = false;
    std::string bytes;
    std::vector<FunctionSymbol> symbols;
  };
  auto image = std::make_shared<Image>();
  return [exe, image](uint64_t stub, uint64_t name_address) -> std::string {
    if (!image->loaded) {
      std::string error;
      image->loaded = true;
      image->symbols = function_symbols(exe, true, error);
      image->bytes = read_elf_bytes(exe);
    }
    for (const auto& s : image->symbols) {
      if (s.vaddr > stub || ((stub - s.vaddr) & 0xFFF) != 0) continue;  // the base is page-aligned
      const uint64_t base = stub - s.vaddr;
      if (name_address < base) continue;
      if (string_at_vaddr_of(image->bytes, name_address - base) == s.name) return s.name;
    }
    return {};
  };
}

UprobeCallDecoder::UprobeCallDecoder(const std::vector<ProbedFunction>& functions, DecodeStats& stats,
                                     NameFromFile name_from_file, Sink sink, size_t max_waiting)
    : functions_(functions),
      stats_(stats),
      name_from_file_(std::move(name_from_file)),
      sink_(std::move(sink)),
      max_waiting_(std::max<size_t>(1, max_waiting)) {}

UprobeCallDecoder::UprobeCallDecoder(MoreFunctions more, DecodeStats& stats, NameFromFile name_from_file,
                                     CallSink calls, size_t max_waiting)
    : more_(std::move(more)),
      stats_(stats),
      name_from_file_(std::move(name_from_file)),
      calls_(std::move(calls)),
      max_waiting_(std::max<size_t>(1, max_waiting)) {}

// What each probed function is, looked up once rather than per call.
bool UprobeCallDecoder::known(unsigned fn) {
  if (fn < known_.size()) return true;
  if (fn >= functions_.size() && more_) more_(functions_.size(), functions_);
  if (fn >= functions_.size()) return false;
  while (known_.size() < functions_.size()) {
    const std::string& symbol = functions_[known_.size()].symbol;
    const NamingCall* n = naming_call(symbol);
    const CallInfo* info = find_call(symbol);
    const ProbeSpec* spec = probe_spec(symbol);
    known_.push_back({n, !n && info && spec ? info : nullptr, spec});
  }
  return true;
}

void UprobeCallDecoder::learn_name(const uprobe_call& c, const NamingCall& n) {
  const std::string_view sym = n.symbol;
  KernelNames& k = names_[c.pid];
  const bool ok = !(c.flags & UPROBE_F_EXIT) || int32_t(c.ret) == 0;
  if (sym == "__cudaRegisterFunction") {
    std::string name = blob_string(c);
    if (name.empty() && name_from_file_) {
      name = name_from_file_(c.args[1], c.args[3]);
      stats_.names_from_file += !name.empty();
    }
    if (!name.empty()) k[c.args[1]] = name;
  } else if ((c.flags & UPROBE_F_OUT) && ok) {
    const uint64_t from = sym == "__cudaGetKernel" || sym == "cuKernelGetFunction" ? c.args[1] : 0;
    if (from) {
      if (auto it = k.find(from); it != k.end()) k[c.out] = it->second;
    } else if (std::string name = blob_string(c); !name.empty()) {
      k[c.out] = name;
    }
  }
}

void UprobeCallDecoder::add(const uprobe_call& c) {
  ++stats_.records;
  const unsigned fn = UPROBE_COOKIE_FN(c.cookie);
  if (!known(fn)) {
    ++stats_.unknown_function;
    return;
  }
  const Known& k = known_[fn];
  if (k.naming) learn_name(c, *k.naming);
  const bool outermost = c.depth == 0 || !(c.flags & UPROBE_F_EXIT);
  if (k.naming && k.naming->plumbing) {
    ++stats_.plumbing;  // never an event, and never a caller that folds one
    if (outermost && waiting_.count(c.tid)) settle(c.tid);
    return;
  }
  auto it = waiting_.find(c.tid);
  if (outermost && it == waiting_.end()) {
    emit(c);  // nothing nested in it was traced: the common case, settled at once
    return;
  }
  if (it == waiting_.end()) it = waiting_.emplace(c.tid, std::vector<uprobe_call>{}).first;
  it->second.push_back(c);
  ++waiting_total_;
  if (outermost) {
    settle(c.tid);
  } else if (waiting_total_ > max_waiting_) {
    stats_.settled_over_window += int64_t(it->second.size());
    settle(c.tid);
  }
}

// One thread's waiting calls in entry order, folding same-layer nesting (an enclosing call
// enters first, and on a tie in time, has the lower depth).
void UprobeCallDecoder::settle(uint32_t tid) {
  auto node = waiting_.extract(tid);
  std::vector<uprobe_call>& calls = node.mapped();
  waiting_total_ -= calls.size();
  std::sort(calls.begin(), calls.end(), [](const uprobe_call& x, const uprobe_call& y) {
    return x.enter_ns != y.enter_ns ? x.enter_ns < y.enter_ns : x.depth < y.depth;
  });
  struct Open {
    uint64_t exit_ns;
    const std::string* layer;
  };
  std::vector<Open> open;
  for (const auto& c : calls) {
    const ProbedFunction& f = functions_[UPROBE_COOKIE_FN(c.cookie)];
    const bool has_exit = c.flags & UPROBE_F_EXIT;
    while (!open.empty() && open.back().exit_ns < c.enter_ns) open.pop_back();
    const bool nested_same_layer = has_exit && !open.empty() && *open.back().layer == f.layer;
    if (has_exit) open.push_back({c.exit_ns, &f.layer});
    if (nested_same_layer) {
      ++stats_.folded_nested;
      ++stats_.folded_by_name[f.symbol];
      continue;
    }
    emit(c);
  }
}

void UprobeCallDecoder::finish() {
  while (!waiting_.empty()) {
    stats_.settled_at_end += int64_t(waiting_.begin()->second.size());
    settle(waiting_.begin()->first);
  }
}

// Leaves out what was not captured (an out-parameter that could not be read), never a 0.
void UprobeCallDecoder::pack_call_args(const uprobe_call& c, const Known& k) {
  const CallInfo* info = k.info;
  if (!info) return packed_.start(0);
  const KernelNames& names = names_[c.pid];
  uint64_t slots[kMaxArgSlots] = {};
  bool complete = true;
  const size_t n = std::min(k.spec->slots.size(), info->slots.size());
  for (size_t i = 0; i < n; ++i) complete = slot_value(k.spec->slots[i], c, slots[i]) && complete;
  if (complete) return pack_args(*info, slots, names, packed_);
  CallInfo present{info->layer, info->name, {}};
  uint64_t captured[kMaxArgSlots] = {};
  for (size_t i = 0; i < n; ++i) {
    uint64_t v;
    if (!slot_value(k.spec->slots[i], c, v)) continue;
    captured[present.slots.size()] = v;
    present.slots.push_back(info->slots[i]);
  }
  pack_args(present, captured, names, packed_);
}

void UprobeCallDecoder::emit(const uprobe_call& c) {
  const unsigned fn = UPROBE_COOKIE_FN(c.cookie);
  const ProbedFunction& f = functions_[fn];
  Event& e = call_;
  e.layer = f.layer;
  e.name = f.symbol;
  e.ts = int64_t(c.enter_ns);
  const bool has_exit = c.flags & UPROBE_F_EXIT;
  e.dur = has_exit ? std::optional<int64_t>(int64_t(c.exit_ns - c.enter_ns)) : std::nullopt;
  e.ret = has_exit ? std::optional<int64_t>(int32_t(c.ret)) : std::nullopt;
  e.pid = c.pid;
  e.tid = c.tid;
  pack_call_args(c, known_[fn]);
  ++stats_.emitted;
  if (calls_) return calls_(e, packed_);
  Event whole = e;
  whole.args = unpack_args(packed_.bytes());
  sink_(std::move(whole));
}

std::vector<Event> decode_uprobe_calls(std::vector<uprobe_call> calls, const std::vector<ProbedFunction>& functions,
                                       DecodeStats& stats, const NameFromFile& name_from_file) {
  // The ring's order: records are written as calls return (entry-only records as they enter).
  auto written = [](const uprobe_call& c) { return (c.flags & UPROBE_F_EXIT) ? c.exit_ns : c.enter_ns; };
  std::stable_sort(calls.begin(), calls.end(),
                   [&](const uprobe_call& x, const uprobe_call& y) { return written(x) < written(y); });
  std::vector<Event> events;
  UprobeCallDecoder decoder(functions, stats, name_from_file, [&](Event&& e) { events.push_back(std::move(e)); });
  for (const auto& c : calls) decoder.add(c);
  decoder.finish();
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.tid != b.tid ? a.tid < b.tid : a.ts < b.ts; });
  return events;
}

}  // namespace cudatrace
