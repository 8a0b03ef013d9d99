#include "tracers/devhook/ptx_rewrite.h"

#include <algorithm>
#include <cstddef>
#include <regex>
#include <stdexcept>

namespace cudatrace::devhook {

namespace {

// The probe bodies, shared by every call site. Layouts and the drain protocol:
// device_record.h. A probe works on the sub-ring of its SM (%smid modulo their number), so
// that claims from different SMs do not queue on one counter. In block mode the entry
// probe claims two slots there, its own and the exit probe's, with one atomic, then loads
// limit, both in device memory, and the exit probe only stores: no atomic and no load stand
// between a block and its end. In thread mode every probe claims its own slot, one lane for
// its warp's active lanes: a thread that held its exit slot from entry could stall the
// drain while it waits at a barrier for a thread of its block that waits for room. Records
// are two stores into device memory, the second (which carries the claim's lap) after the
// first. A full sub-ring: the probe polls limit, which only the drain raises, with a
// nanosleep between reads, for kRingFullWaitNs at most; then it counts its records
// dropped and gets no slot (-1).
constexpr const char* kClaimHead = R"(
// cudatrace devhook: claims a slot in this SM's sub-ring, whose control block is __dh_ring
// (in block mode two: the entry's and the exit's); waits while they do not fit, and counts
// them dropped after waiting too long or once another probe has (the slot is then -1).
.func (.param .b64 __dh_slot) __devhook_claim(.param .b64 __dh_ring)
{
	.reg .pred %p;
	.reg .b32 %r<12>;
	.reg .b64 %rd<12>;
	ld.param.b64 %rd1, [__dh_ring];
	cvta.to.global.u64 %rd1, %rd1;
)";

// Block mode: thread (0,0,0) claims its block's two slots; both must fit.
constexpr const char* kClaimForTheBlock = "\tatom.global.add.u64 %rd3, [%rd1], 2;\n\tadd.s64 %rd5, %rd3, 1;\n";

// Thread mode: the highest active lane claims a slot for every active lane of its warp
// and hands the first on; each lane takes the one of its rank among them.
constexpr const char* kClaimForTheWarp = R"(	activemask.b32 %r7;
	popc.b32 %r8, %r7;
	mov.u32 %r9, %lanemask_lt;
	and.b32 %r9, %r9, %r7;
	popc.b32 %r9, %r9;
	bfind.u32 %r10, %r7;
	mov.u32 %r11, %laneid;
	setp.eq.u32 %p, %r11, %r10;
	cvt.u64.u32 %rd9, %r8;
	mov.u64 %rd3, 0;
	@%p atom.global.add.u64 %rd3, [%rd1], %rd9;
	mov.b64 {%r2, %r3}, %rd3;
	shfl.sync.idx.b32 %r2, %r2, %r10, 31, %r7;
	shfl.sync.idx.b32 %r3, %r3, %r10, 31, %r7;
	mov.b64 %rd3, {%r2, %r3};
	cvt.u64.u32 %rd9, %r9;
	add.s64 %rd3, %rd3, %rd9;
	mov.u64 %rd5, %rd3;
)";

constexpr const char* kClaimTail = R"(	ld.volatile.global.u64 %rd4, [%rd1+168];
	setp.lt.u64 %p, %rd5, %rd4;
	@%p bra $__dh_room;
	ld.volatile.global.u64 %rd4, [%rd1+128];
	setp.ne.u64 %p, %rd4, 0;
	@%p bra $__dh_full;
	mov.u64 %rd10, %globaltimer;
$__dh_wait:
	nanosleep.u32 2000;
	ld.volatile.global.u64 %rd4, [%rd1+168];
	setp.lt.u64 %p, %rd5, %rd4;
	@%p bra $__dh_room;
	mov.u64 %rd11, %globaltimer;
	sub.u64 %rd11, %rd11, %rd10;
	setp.lt.u64 %p, %rd11, 1000000000;
	@%p bra $__dh_wait;
$__dh_full:
	sub.u64 %rd9, %rd5, %rd3;
	add.u64 %rd9, %rd9, 1;
	red.global.add.u64 [%rd1+128], %rd9;
	mov.u64 %rd3, -1;
$__dh_room:
	st.param.b64 [__dh_slot], %rd3;
	ret;
}
)";

constexpr const char* kWriteFunction = R"(
// cudatrace devhook: writes one DeviceRecord of kind __dh_kind (1: entry, 2: exit) into
// claim __dh_slot, unless the claim was dropped (-1).
.func __devhook_write(.param .b64 __dh_ring, .param .b64 __dh_slot, .param .b64 __dh_launch, .param .b32 __dh_kind)
{
	.reg .pred %p;
	.reg .b32 %r<9>;
	.reg .b64 %rd<14>;
	ld.param.b64 %rd3, [__dh_slot];
	setp.eq.s64 %p, %rd3, -1;
	@%p bra $__dh_done;
	ld.param.b64 %rd1, [__dh_ring];
	ld.param.b64 %rd2, [__dh_launch];
	ld.param.b32 %r1, [__dh_kind];
	cvta.to.global.u64 %rd1, %rd1;
	ld.global.u64 %rd4, [%rd1+136];
	sub.u64 %rd4, %rd4, 1;
	and.b64 %rd6, %rd3, %rd4;
	ld.global.u64 %rd5, [%rd1+144];
	cvta.to.global.u64 %rd5, %rd5;
	shl.b64 %rd6, %rd6, 5;
	add.s64 %rd5, %rd5, %rd6;
	mov.u64 %rd7, %globaltimer;
	st.global.v2.u64 [%rd5], {%rd7, %rd2};
	mov.u32 %r2, %ctaid.z;
	shl.b32 %r2, %r2, 16;
	mov.u32 %r3, %ctaid.y;
	or.b32 %r2, %r2, %r3;
	mov.u32 %r3, %tid.z;
	shl.b32 %r3, %r3, 10;
	mov.u32 %r4, %tid.y;
	or.b32 %r3, %r3, %r4;
	shl.b32 %r3, %r3, 10;
	mov.u32 %r4, %tid.x;
	or.b32 %r3, %r3, %r4;
	mov.u32 %r4, %smid;
	shl.b32 %r4, %r4, 8;
	or.b32 %r4, %r4, %r1;
	ld.global.u32 %r7, [%rd1+176];
	shr.b64 %rd13, %rd3, %r7;
	cvt.u32.u64 %r8, %rd13;
	shl.b32 %r8, %r8, 16;
	or.b32 %r4, %r4, %r8;
	mov.u32 %r5, %ctaid.x;
	st.global.v4.u32 [%rd5+16], {%r5, %r2, %r3, %r4};
$__dh_done:
	ret;
}
)";

std::string probe_functions(ProbeMode mode) {
  return std::string(kClaimHead) + (mode == ProbeMode::kThread ? kClaimForTheWarp : kClaimForTheBlock) + kClaimTail +
         kWriteFunction;
}

static_assert(offsetof(RingControl, dropped) == 128 && offsetof(RingControl, capacity) == 136 &&
              offsetof(RingControl, records) == 144 && offsetof(RingControl, tickets) == 152 &&
              offsetof(RingControl, limit) == 168 && offsetof(RingControl, capacity_log2) == 176 &&
              sizeof(RingControl) == 256,
              "the probes read the control block at these offsets, and sub-rings' blocks 256 bytes apart");
static_assert(kRingFullWaitNs == 1000000000, "__devhook_claim waits 1000000000 ns for room");

// A graph replays a kernel node with the parameters it was captured with, so the launch
// number alone cannot tell its executions apart. A node's launch word carries, above bit
// 40, its slot (+1) in a table of counters in device memory; every probe that opens a block
// (or a thread, per thread) takes a ticket there, and ticket / (records per execution) is
// the execution. Executions of one node never overlap (CUDA orders the launches of a graph
// exec), so each gets its own number. The record's launch word is the launch number with
// the execution above bit 40.
constexpr const char* kExecutionFunction = R"(
// cudatrace devhook: the launch word of this execution of a graph kernel node.
.func (.param .b64 __dh_word) __devhook_execution(.param .b64 __dh_ring, .param .b64 __dh_launch, .param .b32 __dh_per_thread)
{
	.reg .pred %p;
	.reg .b32 %r<4>;
	.reg .b64 %rd<8>;
	ld.param.b64 %rd1, [__dh_ring];
	ld.param.b64 %rd2, [__dh_launch];
	ld.param.b32 %r1, [__dh_per_thread];
	cvta.to.global.u64 %rd1, %rd1;
	ld.global.u64 %rd3, [%rd1+152];
	cvta.to.global.u64 %rd3, %rd3;
	shr.u64 %rd4, %rd2, 40;
	sub.u64 %rd4, %rd4, 1;
	shl.b64 %rd4, %rd4, 3;
	add.s64 %rd3, %rd3, %rd4;
	atom.global.add.u64 %rd5, [%rd3], 1;
	mov.u32 %r2, %nctaid.x;
	mov.u32 %r3, %nctaid.y;
	mul.wide.u32 %rd6, %r2, %r3;
	mov.u32 %r2, %nctaid.z;
	cvt.u64.u32 %rd7, %r2;
	mul.lo.u64 %rd6, %rd6, %rd7;
	setp.eq.u32 %p, %r1, 0;
	@%p bra $__dh_per_block;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %ntid.y;
	mul.lo.u32 %r2, %r2, %r3;
	mov.u32 %r3, %ntid.z;
	mul.lo.u32 %r2, %r2, %r3;
	cvt.u64.u32 %rd7, %r2;
	mul.lo.u64 %rd6, %rd6, %rd7;
$__dh_per_block:
	div.u64 %rd5, %rd5, %rd6;
	shl.b64 %rd5, %rd5, 40;
	and.b64 %rd2, %rd2, 1099511627775;
	or.b64 %rd2, %rd2, %rd5;
	st.param.b64 [__dh_word], %rd2;
	ret;
}
)";

constexpr const char* kClockEntry = R"(
// cudatrace devhook: one thread stores %globaltimer, to relate it to the host's clock.
.visible .entry __devhook_clock(.param .u64 __dh_out)
{
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [__dh_out];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u64 %rd2, %globaltimer;
	st.global.u64 [%rd1], %rd2;
	ret;
}
)";

constexpr const char* kAddedParams = "\t.param .u64 __dh_ring,\n\t.param .u64 __dh_launch\n";

// A copy of the text with comments and string literals blanked out (same length), so
// that searching it finds only code, at the positions of the original.
std::string code_only(const std::string& s) {
  std::string m = s;
  for (size_t i = 0; i < m.size(); ++i) {
    if (m.compare(i, 2, "//") == 0) {
      while (i < m.size() && m[i] != '\n') m[i++] = ' ';
    } else if (m.compare(i, 2, "/*") == 0) {
      const size_t end = m.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? m.size() : end + 2;
      for (; i < stop; ++i)
        if (m[i] != '\n') m[i] = ' ';
      --i;
    } else if (m[i] == '"') {
      m[i++] = ' ';
      while (i < m.size() && m[i] != '"' && m[i] != '\n') m[i++] = ' ';
      if (i < m.size() && m[i] == '"') m[i] = ' ';
    }
  }
  return m;
}

// Index of the bracket closing the one at `open`, or npos.
size_t matching(const std::string& code, size_t open, char o, char c) {
  int depth = 0;
  for (size_t i = open; i < code.size(); ++i) {
    if (code[i] == o) ++depth;
    if (code[i] == c && --depth == 0) return i;
  }
  return std::string::npos;
}

bool is_ident(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '$' || ch == '.'; }

struct Edit {
  size_t at, erase;
  std::string insert;
};

// A probe: kind 1 (entry) or 2 (exit); in block mode only thread (0,0,0) makes it. The
// entry probe sets what the exit probe reuses: %dh_d0, its sub-ring's control block;
// %dh_s, the claimed slot; %dh_l, the record's launch word (a graph node's execution is
// numbered once, at entry).
std::string probe(ProbeMode mode, RecordKind kind, uint32_t subrings, const std::string& skip_label) {
  std::string s = "\t// cudatrace devhook: " + std::string(kind == kEntry ? "entry" : "exit") + " probe\n";
  if (mode == ProbeMode::kBlock) {
    s += "\tmov.u32 %dh_r0, %tid.x;\n\tmov.u32 %dh_r1, %tid.y;\n\tor.b32 %dh_r0, %dh_r0, %dh_r1;\n"
         "\tmov.u32 %dh_r1, %tid.z;\n\tor.b32 %dh_r0, %dh_r0, %dh_r1;\n\tsetp.ne.u32 %dh_p, %dh_r0, 0;\n"
         "\t@%dh_p bra " + skip_label + ";\n";
  }
  if (kind == kEntry) {
    const std::string plain = skip_label + "_plain";
    s += "\tld.param.u64 %dh_d0, [__dh_ring];\n\tmov.u32 %dh_r0, %smid;\n\tand.b32 %dh_r0, %dh_r0, " +
         std::to_string(subrings - 1) +
         ";\n\tmul.wide.u32 %dh_d1, %dh_r0, 256;\n\tadd.s64 %dh_d0, %dh_d0, %dh_d1;\n"
         "\tld.param.u64 %dh_l, [__dh_launch];\n\tshr.u64 %dh_d1, %dh_l, 40;\n\tsetp.eq.u64 %dh_p, %dh_d1, 0;\n"
         "\t@%dh_p bra " + plain + ";\n"
         "\t{\n\t.param .b64 dh_e0;\n\t.param .b64 dh_e1;\n\t.param .b32 dh_e2;\n\t.param .b64 dh_ev;\n"
         "\tst.param.b64 [dh_e0], %dh_d0;\n\tst.param.b64 [dh_e1], %dh_l;\n"
         "\tst.param.b32 [dh_e2], " + std::string(mode == ProbeMode::kThread ? "1" : "0") + ";\n"
         "\tcall (dh_ev), __devhook_execution, (dh_e0, dh_e1, dh_e2);\n"
         "\tld.param.b64 %dh_l, [dh_ev];\n\t}\n" + plain + ":\n";
  }
  const std::string claim =
      "\t{\n\t.param .b64 dh_c0;\n\t.param .b64 dh_cs;\n\tst.param.b64 [dh_c0], %dh_d0;\n"
      "\tcall (dh_cs), __devhook_claim, (dh_c0);\n\tld.param.b64 %dh_s, [dh_cs];\n\t}\n";
  if (kind == kEntry || mode == ProbeMode::kThread)
    s += claim;
  else  // block mode's exit: the second of the two slots claimed at entry, if any
    s += "\tsetp.ne.s64 %dh_p, %dh_s, -1;\n\t@%dh_p add.s64 %dh_s, %dh_s, 1;\n";
  s += "\t{\n\t.param .b64 dh_a0;\n\t.param .b64 dh_a1;\n\t.param .b64 dh_a2;\n\t.param .b32 dh_a3;\n"
       "\tst.param.b64 [dh_a0], %dh_d0;\n\tst.param.b64 [dh_a1], %dh_s;\n\tst.param.b64 [dh_a2], %dh_l;\n"
       "\tst.param.b32 [dh_a3], " + std::to_string(int(kind)) + ";\n"
       "\tcall __devhook_write, (dh_a0, dh_a1, dh_a2, dh_a3);\n\t}\n";
  if (mode == ProbeMode::kBlock) s += skip_label + ":\n";
  return s;
}

}  // namespace

namespace {

// `text` with its comments (// to the end of the line, /* ... */) replaced by spaces, so
// that positions in it are positions in `text`.
std::string without_comments(std::string text) {
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == '/' && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') text[i++] = ' ';
    } else if (text[i] == '/' && text[i + 1] == '*') {
      const size_t end = text.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? text.size() : end + 2;
      for (; i < stop; ++i)
        if (text[i] != '\n') text[i] = ' ';
      --i;
    }
  }
  return text;
}

}  // namespace

RewrittenPtx rewrite_ptx(const std::string& ptx, ProbeMode mode, uint32_t subrings) {
  if (subrings == 0 || subrings > kMaxSubrings || (subrings & (subrings - 1)) != 0)
    throw std::invalid_argument("sub-rings: a power of two from 1 to " + std::to_string(kMaxSubrings));
  const std::string code = code_only(ptx);
  if (code.find(".version") == std::string::npos) throw std::runtime_error("not PTX: no .version directive");
  std::vector<Edit> edits;
  RewrittenPtx out;

  // __devhook_emit goes after the module header, before any kernel that calls it.
  size_t header = code.find(".address_size");
  if (header == std::string::npos) header = code.find(".target");
  if (header == std::string::npos) throw std::runtime_error("not PTX: no .target directive");
  header = code.find('\n', header);
  edits.push_back({header == std::string::npos ? code.size() : header + 1, 0,
                   probe_functions(mode) + kExecutionFunction});
  // The probes wait with nanosleep, which needs sm_70: a module written for an older target
  // (a kernel in hand-written PTX for sm_50) is raised to sm_70, which every GPU that CUDA 13
  // supports (sm_75 and later) is past. The driver JITs it for the device either way.
  if (const size_t target = code.find(".target"); target != std::string::npos) {
    size_t at = target + 7;
    while (at < code.size() && (code[at] == ' ' || code[at] == '\t')) ++at;
    if (code.compare(at, 3, "sm_") == 0) {
      size_t digits = at + 3, end = digits;
      while (end < code.size() && std::isdigit(static_cast<unsigned char>(code[end]))) ++end;
      if (end > digits && end - digits <= 3 && std::stoi(code.substr(digits, end - digits)) < 70)
        edits.push_back({digits, end - digits, "70"});
    }
  }

  int depth = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i] == '{') ++depth;
    if (code[i] == '}') --depth;
    if (depth != 0 || code.compare(i, 6, ".entry") != 0 || (i > 0 && is_ident(code[i - 1])) ||
        (i + 6 < code.size() && is_ident(code[i + 6])))
      continue;
    PtxKernel k;
    size_t at = i + 6;
    while (at < code.size() && std::isspace(static_cast<unsigned char>(code[at]))) ++at;
    const size_t name_begin = at;
    while (at < code.size() && is_ident(code[at])) ++at;
    k.name = ptx.substr(name_begin, at - name_begin);
    const size_t after_name = at;
    while (at < code.size() && std::isspace(static_cast<unsigned char>(code[at]))) ++at;
    size_t params_end = after_name;
    Edit params{after_name, 0, " (\n" + std::string(kAddedParams) + ")"};
    if (at < code.size() && code[at] == '(') {
      const size_t close = matching(code, at, '(', ')');
      if (close == std::string::npos) throw std::runtime_error("unbalanced parameter list of " + k.name);
      const std::string list = code.substr(at + 1, close - at - 1);
      const bool empty = list.find_first_not_of(" \t\r\n") == std::string::npos;
      k.params = empty ? 0 : 1 + int(std::count(list.begin(), list.end(), ','));
      params = {close, 0, (empty ? "\n" : ",\n") + std::string(kAddedParams)};
      params_end = close + 1;
    }
    const size_t open = code.find_first_of("{;", params_end);
    if (open == std::string::npos || code[open] == ';') {
      i = open == std::string::npos ? code.size() : open;  // a declaration: no body to probe
      continue;
    }
    const size_t close = matching(code, open, '{', '}');
    if (close == std::string::npos) throw std::runtime_error("unbalanced body of " + k.name);
    const std::string id = std::to_string(out.kernels.size());
    const std::string exit_label = "$__dh_exit_" + id;

    std::vector<Edit> body;
    // Every return point becomes a branch to the exit probe: each `ret` or `exit`
    // statement (guarded or not, after a label, several to a line, a comment after it),
    // found in the body with its comments blanked out. A body that ends without one falls
    // through into the exit probe, which is placed last.
    const std::string masked = without_comments(code.substr(open + 1, close - open - 1));
    static const std::regex return_stmt(R"((@!?%[\w$]+\s+)?\b(ret|exit)(\.uni)?\s*;)");
    for (auto it = std::sregex_iterator(masked.begin(), masked.end(), return_stmt); it != std::sregex_iterator(); ++it) {
      const std::smatch& m = *it;
      const size_t at = size_t(m.position(0));
      // Only an instruction: what comes before is the start of a statement (the body's
      // start, a `;`, a brace or a label's `:`), never an operand (`bra exit;`).
      size_t before = at;
      while (before > 0 && std::isspace(static_cast<unsigned char>(masked[before - 1]))) --before;
      if (before > 0 && std::string(";{}:").find(masked[before - 1]) == std::string::npos) continue;
      body.push_back({open + 1 + at, size_t(m.length(0)), m[1].str() + "bra " + exit_label + ";"});
      ++k.exits;
    }
    edits.push_back(params);
    edits.push_back({open + 1, 0,
                     "\n\t.reg .pred %dh_p;\n\t.reg .b32 %dh_r<2>;\n\t.reg .b64 %dh_d<2>;\n\t.reg .b64 %dh_l;\n"
                     "\t.reg .b64 %dh_s;\n" +
                         probe(mode, kEntry, subrings, "$__dh_entry_done_" + id)});
    edits.insert(edits.end(), body.begin(), body.end());
    edits.push_back({close, 0, exit_label + ":\n" + probe(mode, kExit, subrings, "$__dh_exit_done_" + id) + "\tret;\n"});
    k.instrumented = true;
    out.kernels.push_back(k);
    i = close;
    depth = 0;
  }
  edits.push_back({ptx.size(), 0, kClockEntry});

  // Apply from the end, so that earlier positions stay valid.
  std::stable_sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at > b.at; });
  out.ptx = ptx;
  for (const auto& e : edits) out.ptx.replace(e.at, e.erase, e.insert);
  return out;
}

}  // namespace cudatrace::devhook
