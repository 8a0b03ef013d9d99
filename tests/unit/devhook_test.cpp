// The devhook method's host-side parts, no GPU needed: fatbins built here (compressed and
// plain) parsed, their PTX rewritten and assembled by ptxas for sm_80 and sm_90, the
// decoder on a ring written by hand, and the agent preloaded into a real workload.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/event_store.h"
#include "common/event_io.h"
#include "ledger/ledger.h"
#include "test_support.h"
#include "tracers/devhook/devhook_decode.h"
#include "tracers/devhook/devhook_tracer.h"
#include "tracers/devhook/fatbin.h"
#include "tracers/devhook/ptx_rewrite.h"

using namespace cudatrace;
using namespace cudatrace::devhook;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string fixture(const std::string& variant) {
  return slurp(fs::path(CUDATRACE_DEVHOOK_FIXTURES) / ("probe_kernels." + variant + ".fatbin"));
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const FatbinEntry& ptx_for(const Fatbin& f, uint32_t arch) {
  std::string why;
  const FatbinEntry* e = pick_ptx(f, arch, why);
  if (!e) throw std::runtime_error(why);
  return *e;
}

}  // namespace

TEST(DevhookFatbin, CompressedAndPlainHoldTheSamePtx) {
  const std::string zstd = fixture("zstd"), plain = fixture("plain");
  const Fatbin fz = parse_fatbin(zstd.data(), zstd.size());
  const Fatbin fp = parse_fatbin(plain.data(), plain.size());
  EXPECT_EQ(fz.size, zstd.size());
  // sm_80 machine code, compute_80 and compute_90 PTX in each.
  for (const Fatbin* f : {&fz, &fp}) {
    int ptx = 0, elf = 0;
    for (const auto& e : f->entries) {
      ptx += e.kind == EntryKind::kPtx;
      elf += e.kind == EntryKind::kElf;
    }
    EXPECT_EQ(ptx, 2);
    EXPECT_EQ(elf, 1);
  }
  for (uint32_t arch : {80u, 90u}) {
    const FatbinEntry& z = ptx_for(fz, arch);
    const FatbinEntry& p = ptx_for(fp, arch);
    EXPECT_EQ(z.compression, Compression::kZstd);
    EXPECT_EQ(p.compression, Compression::kNone);
    EXPECT_LT(z.payload_size, p.payload_size);
    const std::string text = ptx_text(z);
    EXPECT_EQ(text, ptx_text(p));
    EXPECT_NE(text.find(".target sm_" + std::to_string(arch)), std::string::npos);
    EXPECT_NE(text.find(".entry vecadd("), std::string::npos);
    EXPECT_EQ(text.find('\0'), std::string::npos);
  }
}

TEST(DevhookFatbin, PicksTheNewestPtxTheGpuCanRun) {
  const std::string zstd = fixture("zstd");
  const Fatbin f = parse_fatbin(zstd.data(), zstd.size());
  std::string why;
  EXPECT_EQ(pick_ptx(f, 90, why)->arch, 90u);
  EXPECT_EQ(pick_ptx(f, 120, why)->arch, 90u);
  EXPECT_EQ(pick_ptx(f, 86, why)->arch, 80u);
  EXPECT_EQ(pick_ptx(f, 75, why), nullptr);
  EXPECT_NE(why.find("no PTX for compute_75"), std::string::npos) << why;
  EXPECT_NE(why.find("sm_80"), std::string::npos) << why;
}

TEST(DevhookFatbin, TheWrapperCudartReceivesLeadsToTheSameContainer) {
  const std::string zstd = fixture("zstd");
  struct {
    uint32_t magic, version;
    const void* data;
    const void* unused;
  } wrapper{kWrapperMagic, 1, zstd.data(), nullptr};
  EXPECT_EQ(parse_fatbin(&wrapper).entries.size(), parse_fatbin(zstd.data(), zstd.size()).entries.size());
}

TEST(DevhookFatbin, MalformedInputIsRejectedWithAReason) {
  std::string zstd = fixture("zstd");
  EXPECT_THROW(parse_fatbin(zstd.data(), zstd.size() - 1), FatbinError);  // cut short
  EXPECT_THROW(parse_fatbin(zstd.data(), 8), FatbinError);
  std::string bad = zstd;
  bad[0] = 'x';
  EXPECT_THROW(parse_fatbin(bad.data(), bad.size()), FatbinError);
  EXPECT_THROW(parse_fatbin(nullptr), FatbinError);
  // A corrupt compressed payload: decompression fails loudly, never returns garbage PTX.
  const Fatbin f = parse_fatbin(zstd.data(), zstd.size());
  FatbinEntry e = ptx_for(f, 90);
  std::string broken(reinterpret_cast<const char*>(e.payload), e.payload_size);
  broken[broken.size() / 2] ^= 0x5a;
  broken[4] ^= 0x5a;
  e.payload = reinterpret_cast<const uint8_t*>(broken.data());
  EXPECT_THROW(ptx_text(e), FatbinError);
}

class DevhookRewrite : public ::testing::TestWithParam<std::tuple<uint32_t, ProbeMode>> {};

// The rewritten PTX of every fixture kernel assembles with the toolkit's ptxas, for the
// architecture its PTX targets, in both probe modes.
TEST_P(DevhookRewrite, AssemblesWithPtxas) {
  const auto [arch, mode] = GetParam();
  const std::string zstd = fixture("zstd");
  const Fatbin f = parse_fatbin(zstd.data(), zstd.size());
  const RewrittenPtx r = rewrite_ptx(ptx_text(ptx_for(f, arch)), mode);

  std::map<std::string, int> params, exits;
  for (const auto& k : r.kernels) {
    EXPECT_TRUE(k.instrumented) << k.name << ": " << k.why_not;
    EXPECT_GE(k.exits, 1) << k.name;
    params[k.name] = k.params;
    exits[k.name] = k.exits;
  }
  EXPECT_EQ(params.size(), 6u);
  EXPECT_EQ(params["vecadd"], 4);
  EXPECT_EQ(params["no_params"], 0);
  EXPECT_EQ(params["by_value"], 2);
  EXPECT_EQ(params["grid3d"], 1);
  EXPECT_EQ(params["_Z5scaleIfEvPT_S0_i"], 3);
  EXPECT_EQ(params["early_exits"], 2);
  EXPECT_GE(exits["early_exits"], 2) << "its returns and exit; statements each branch to the exit probe";
  // One entry and one exit probe per kernel; every return but the exit probe's own is gone.
  EXPECT_EQ(count(r.ptx, "call __devhook_write"), 2 * r.kernels.size());
  // In block mode the entry probe claims the exit's slot too; per thread each probe claims.
  EXPECT_EQ(count(r.ptx, "call (dh_cs), __devhook_claim"), (mode == ProbeMode::kThread ? 2 : 1) * r.kernels.size());
  EXPECT_EQ(count(r.ptx, ".param .u64 __dh_ring"), r.kernels.size());
  EXPECT_EQ(count(r.ptx, "setp.ne.u32 %dh_p"), mode == ProbeMode::kBlock ? 2 * r.kernels.size() : 0u);
  EXPECT_NE(r.ptx.find(".entry __devhook_clock"), std::string::npos);
  // Claims go to the SM's sub-ring; in thread mode one lane claims for its warp.
  EXPECT_EQ(count(r.ptx, "and.b32 %dh_r0, %dh_r0, " + std::to_string(kDefaultSubrings - 1) + ";"), r.kernels.size());
  EXPECT_EQ(count(r.ptx, "activemask.b32"), mode == ProbeMode::kThread ? 1u : 0u);

  const fs::path dir = testsupport::temp_dir("devhook-ptx");
  std::ofstream(dir / "rewritten.ptx") << r.ptx;
  const auto res = testsupport::run_command(std::string(CUDATRACE_PTXAS) + " -arch=sm_" + std::to_string(arch) + " " +
                                            (dir / "rewritten.ptx").string() + " -o " + (dir / "out.cubin").string());
  EXPECT_EQ(res.exit_code, 0) << res.output;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Archs, DevhookRewrite,
                         ::testing::Combine(::testing::Values(80u, 90u),
                                            ::testing::Values(ProbeMode::kBlock, ProbeMode::kThread)),
                         [](const auto& info) {
                           return "sm_" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == ProbeMode::kBlock ? "_block" : "_thread");
                         });

// Hand-written PTX for an older target (a driver-API program's sm_50 kernel): the probes'
// nanosleep needs sm_70, so the module is raised to it, and assembles for the GPU.
TEST(DevhookRewriteText, AnOlderTargetIsRaisedToWhatTheProbesNeed) {
  const std::string ptx = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry empty_kernel() { ret; }\n";
  const RewrittenPtx r = rewrite_ptx(ptx, ProbeMode::kBlock);
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_TRUE(r.kernels[0].instrumented) << r.kernels[0].why_not;
  EXPECT_NE(r.ptx.find(".target sm_70"), std::string::npos) << r.ptx.substr(0, 200);
  EXPECT_EQ(r.ptx.find(".target sm_50"), std::string::npos);
  const fs::path dir = testsupport::temp_dir("devhook-old-target");
  std::ofstream(dir / "rewritten.ptx") << r.ptx;
  const auto res = testsupport::run_command(std::string(CUDATRACE_PTXAS) + " -arch=sm_90 " + (dir / "rewritten.ptx").string() +
                                            " -o " + (dir / "out.cubin").string());
  EXPECT_EQ(res.exit_code, 0) << res.output;
  // A newer target stays as it is.
  EXPECT_NE(rewrite_ptx(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n", ProbeMode::kBlock)
                .ptx.find(".target sm_90"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(DevhookRewriteText, EveryReturnPointBranchesToTheExitProbe) {
  const std::string ptx = R"(.version 9.0
.target sm_90
.address_size 64

.func (.param .b32 r) helper(.param .b32 x)
{
	ret;
}

.visible .entry k(
	.param .u64 k_param_0
)
.maxntid 128, 1, 1
{
	.reg .pred 	%p<3>;
	@%p1 ret;
	@!%p2 exit;
	{
	ret;
	}
	// ret; in a comment stays
	ret;
}
)";
  const RewrittenPtx r = rewrite_ptx(ptx, ProbeMode::kBlock);
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].exits, 4);
  EXPECT_EQ(r.kernels[0].params, 1);
  EXPECT_NE(r.ptx.find("@%p1 bra $__dh_exit_0;"), std::string::npos) << r.ptx;
  EXPECT_NE(r.ptx.find("@!%p2 bra $__dh_exit_0;"), std::string::npos) << r.ptx;
  EXPECT_NE(r.ptx.find("// ret; in a comment stays"), std::string::npos);
  EXPECT_NE(r.ptx.find(".maxntid 128, 1, 1"), std::string::npos);
  // The device function keeps its own return.
  EXPECT_NE(r.ptx.find("helper(.param .b32 x)\n{\n\tret;\n}"), std::string::npos) << r.ptx;
  EXPECT_THROW(rewrite_ptx("not ptx at all", ProbeMode::kBlock), std::runtime_error);
  // Sub-rings: a power of two up to kMaxSubrings, the probe's mask one less.
  EXPECT_NE(rewrite_ptx(ptx, ProbeMode::kBlock, 1).ptx.find("and.b32 %dh_r0, %dh_r0, 0;"), std::string::npos);
  for (uint32_t bad : {0u, 3u, 2 * kMaxSubrings}) EXPECT_THROW(rewrite_ptx(ptx, ProbeMode::kBlock, bad), std::invalid_argument);
}

// PTX written by hand, not as nvcc writes it: several statements to a line, a label before
// the return, a comment after it, a `bra exit;` whose operand only looks like one, and a
// kernel that ends without any return. Every one is instrumented, and assembles.
TEST(DevhookRewriteText, HandWrittenPtxIsInstrumentedWhateverItsLayout) {
  const std::string ptx = R"(.version 8.0
.target sm_80
.address_size 64

.visible .entry two_on_a_line(.param .u32 n)
{
	.reg .pred %p<2>; .reg .b32 %r<2>;
	ld.param.u32 %r1, [n]; setp.eq.u32 %p1, %r1, 0; @%p1 ret; add.u32 %r1, %r1, 1; ret; // done
}

.visible .entry labelled(.param .u32 n)
{
	.reg .pred %p<2>; .reg .b32 %r<2>;
	ld.param.u32 %r1, [n];
	setp.eq.u32 %p1, %r1, 0;
	@%p1 bra exit;
	add.u32 %r1, %r1, 1;
exit: ret; /* the only return */
}

.visible .entry falls_off_the_end()
{
	.reg .b32 %r<2>;
	mov.u32 %r1, 1;
}
)";
  const RewrittenPtx r = rewrite_ptx(ptx, ProbeMode::kBlock);
  ASSERT_EQ(r.kernels.size(), 3u);
  for (const auto& k : r.kernels) EXPECT_TRUE(k.instrumented) << k.name << ": " << k.why_not;
  EXPECT_EQ(r.kernels[0].exits, 2);
  EXPECT_EQ(r.kernels[1].exits, 1) << "`bra exit;` is a branch to a label, not a return";
  EXPECT_EQ(r.kernels[2].exits, 0) << "falls through into the exit probe";
  EXPECT_NE(r.ptx.find("@%p1 bra exit;"), std::string::npos) << r.ptx;
  EXPECT_NE(r.ptx.find("exit: bra $__dh_exit_1;"), std::string::npos) << r.ptx;
  EXPECT_EQ(count(r.ptx, "call __devhook_write"), 6u);
  const fs::path dir = testsupport::temp_dir("devhook-handwritten");
  std::ofstream(dir / "rewritten.ptx") << r.ptx;
  const auto res = testsupport::run_command(std::string(CUDATRACE_PTXAS) + " -arch=sm_80 " +
                                            (dir / "rewritten.ptx").string() + " -o " + (dir / "out.cubin").string());
  EXPECT_EQ(res.exit_code, 0) << res.output;
}

TEST(DevhookOptions, ParsedAndRejectedWithTheValidChoices) {
  EXPECT_EQ(devhook_options({}).mode, ProbeMode::kBlock);
  EXPECT_EQ(devhook_options({}).ring_records, kDefaultRingRecords);
  EXPECT_EQ(devhook_options({{"mode", "thread"}}).mode, ProbeMode::kThread);
  EXPECT_EQ(devhook_options({{"ring_records", "1000"}}).ring_records, 1000u);
  EXPECT_THROW(devhook_options({{"mode", "warp"}}), std::invalid_argument);
  EXPECT_THROW(devhook_options({{"ring_records", "0"}}), std::invalid_argument);
  EXPECT_THROW(devhook_options({{"ring_records", "12x"}}), std::invalid_argument);
  EXPECT_TRUE(devhook_options({}).drain);
  EXPECT_FALSE(devhook_options({{"drain", "off"}}).drain);
  EXPECT_THROW(devhook_options({{"drain", "no"}}), std::invalid_argument);
  EXPECT_EQ(devhook_options({}).subrings, kDefaultSubrings);
  EXPECT_EQ(devhook_options({{"subrings", "1"}}).subrings, 1u);
  EXPECT_EQ(devhook_options({{"subrings", "64"}}).subrings, 64u);
  for (const char* bad : {"0", "3", "128", "x"})
    EXPECT_THROW(devhook_options({{"subrings", bad}}), std::invalid_argument) << bad;
  try {
    devhook_options({{"ring", "1"}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("valid: mode, ring_records, subrings, drain"), std::string::npos);
  }
}

TEST(DevhookNames, KernelNamesAsAPersonWritesThem) {
  EXPECT_EQ(kernel_display_name("vecadd_kernel"), "vecadd_kernel");
  EXPECT_EQ(kernel_display_name("_Z5scaleIfEvPT_S0_i"), "void scale<float>");
  EXPECT_EQ(kernel_display_name("_Z6kernelPfi"), "kernel");
  EXPECT_EQ(kernel_display_name("_Znot-mangled"), "_Znot-mangled");
}

namespace {

// Records as a sub-ring gives them, on their third lap around it (the decoder reads the SM
// past the lap).
DeviceRecord rec(uint64_t launch, uint32_t bx, uint32_t tid, RecordKind kind, uint64_t ns, uint32_t sm = 3) {
  return {ns, launch, bx, 0, tid, 2u << 16 | sm << 8 | kind};
}

// A report and records file as the agent writes them: kernel 0 launched twice (grid 2,
// block 64), one context, every claim kept or dropped unless `unfilled` says otherwise.
fs::path write_agent_output(const std::string& mode, const std::vector<DeviceRecord>& ring, uint64_t dropped,
                            int pid = 4242, uint64_t unfilled = 0, uint64_t unwritten = 0) {
  const fs::path dir = testsupport::temp_dir("devhook-decode");
  json rep = {{"pid", pid},
              {"mode", mode},
              {"ring_records", ring.size()},
              {"records_unwritten", unwritten},
              {"contexts", {{{"arch", 90}, {"records", ring.size()},
                             {"claimed", ring.size() + dropped + unfilled}, {"dropped", dropped},
                             {"clock_offset_ns", 1000}, {"clock_uncertainty_ns", 5000}}}},
              {"fatbins", {{{"prepared", true}, {"source", "compute_90, zstd"}, {"error", ""}}}},
              {"kernels", {{{"name", "vecadd_kernel"}, {"fatbin", 0}, {"launches", 3}, {"instrumented", 2},
                            {"why_not", ""}}}},
              {"launches", {{0, 0, 2, 1, 1, 64, 1, 1, ""}, {0, 0, 2, 1, 1, 64, 1, 1, ""}}},
              {"uninstrumented", {{"the instrumented launch failed (CUDA_ERROR_INVALID_VALUE): the original ran", 1}}}};
  std::ofstream(dir / ("devhook." + std::to_string(pid) + ".json")) << rep.dump();
  std::ofstream out(dir / ("devhook." + std::to_string(pid) + ".records"), std::ios::binary);
  out.write(reinterpret_cast<const char*>(ring.data()), std::streamsize(ring.size() * sizeof(DeviceRecord)));
  return dir;
}

}  // namespace

TEST(DevhookDecode, BlockModePairsEntryAndExitPerBlock) {
  std::vector<DeviceRecord> ring = {rec(0, 0, 0, kEntry, 5000), rec(0, 1, 0, kEntry, 5100), rec(0, 0, 0, kExit, 5900),
                                    rec(1, 0, 0, kEntry, 7000), rec(1, 0, 0, kExit, 7400), DeviceRecord{}};
  const fs::path dir = write_agent_output("block", ring, 2);
  const TracerReport rep = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "shared", 4242);
  EXPECT_EQ(rep.error, "");
  EXPECT_EQ(rep.layers, std::vector<std::string>{"device"});
  EXPECT_EQ(rep.device_mode, "block");
  EXPECT_EQ(rep.loss["ring_full"], 2);
  EXPECT_EQ(rep.loss["unfilled_slots"], 1);
  EXPECT_EQ(rep.notes["launches"], 3);
  EXPECT_EQ(rep.notes["launches_instrumented"], 2);
  EXPECT_EQ(rep.notes["uninstrumented_launches"].size(), 1u);
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 3u);  // (launch 0, block 0), (launch 0, block 1), (launch 1, block 0)
  EXPECT_EQ(events[0].name, "vecadd_kernel");
  EXPECT_EQ(events[0].ts, 4000);  // GPU time minus the calibrated offset
  EXPECT_EQ(events[0].dur, 900);
  EXPECT_EQ(events[0].args["sm"], 3);
  EXPECT_EQ(events[0].args["seen"], "entry+exit");
  EXPECT_EQ(events[1].args["block"], json({1, 0, 0}));
  EXPECT_EQ(events[1].args["seen"], "entry");
  EXPECT_FALSE(events[1].dur.has_value());
  EXPECT_EQ(events[2].args["launch"], 1);
  // One of three launches ran unchanged: a result, with its reason, not a note.
  EXPECT_EQ(rep.notes["coverage"]["launches_seen"], 3);
  EXPECT_EQ(rep.notes["coverage"]["launches_instrumented"], 2);
  ASSERT_EQ(rep.partly_unobserved.count("device"), 1u);
  EXPECT_NE(rep.partly_unobserved.at("device").find("2 of 3 launches instrumented (of those that reached the agent)"), std::string::npos)
      << rep.partly_unobserved.at("device");
  EXPECT_NE(rep.partly_unobserved.at("device").find("the original ran (1)"), std::string::npos);
  fs::remove_all(dir);
}

// A graph kernel node replayed three times: its records carry one launch number and the
// execution above bit 40. Each execution's blocks are events of their own, and the node's
// executions (read by the agent from its counter) are in the notes.
// What the benchmark reads before it deletes a run's output: the same counters as the
// conversion, from the reports alone.
TEST(DevhookDecode, LossCountersWithoutTheRecords) {
  // (An empty slot in the records file would be one more unfilled_slots that only the
  // conversion sees; the drain never writes one.)
  std::vector<DeviceRecord> ring = {rec(0, 0, 0, kEntry, 5000), rec(0, 0, 0, kExit, 5900)};
  const fs::path dir = write_agent_output("block", ring, 2, 4242, 1);
  const auto loss = devhook_loss_counters(dir);
  ASSERT_TRUE(loss.has_value());
  const TracerReport rep = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "shared", 4242);
  for (const char* counter : {"ring_full", "unfilled_slots", "records_unwritten", "contexts_unread"})
    EXPECT_EQ(loss->at(counter), rep.loss.at(counter)) << counter;
  EXPECT_EQ(loss->at("ring_full"), 2);
  EXPECT_GT(loss->at("unfilled_slots"), 0);
  fs::remove_all(dir);
  EXPECT_FALSE(devhook_loss_counters(testsupport::temp_dir("devhook-none")).has_value()) << "no report: not known";
}

TEST(DevhookDecode, GraphReplaysOfOneNodeStayApart) {
  std::vector<DeviceRecord> ring;
  for (uint64_t exec = 0; exec < 3; ++exec)
    for (uint32_t b = 0; b < 2; ++b) {
      const uint64_t word = 1 | exec << kExecutionShift;  // launch 1 is the graph node
      ring.push_back(rec(word, b, 0, kEntry, 1000 * exec + 10 * b));
      ring.push_back(rec(word, b, 0, kExit, 1000 * exec + 10 * b + 5));
    }
  ring.push_back(rec(0, 0, 0, kEntry, 50));  // launch 0, not a graph node
  ring.push_back(rec(0, 1, 0, kEntry, 60));
  const fs::path dir = testsupport::temp_dir("devhook-decode");
  json rep = {{"pid", 11},
              {"mode", "block"},
              {"contexts", {{{"arch", 90}, {"records", ring.size()}, {"claimed", ring.size()},
                             {"dropped", 0}, {"clock_offset_ns", 0}, {"clock_uncertainty_ns", 100}}}},
              {"fatbins", {{{"prepared", true}, {"source", "compute_90, zstd"}, {"error", ""}}}},
              {"kernels", {{{"name", "graph_inc"}, {"fatbin", 0}, {"launches", 2}, {"instrumented", 2}, {"why_not", ""}}}},
              {"launches", {{0, 0, 2, 1, 1, 64, 1, 1, "", nullptr}, {0, 0, 2, 1, 1, 64, 1, 1, "", 3}}},
              {"uninstrumented", json::object()}};
  std::ofstream(dir / "devhook.11.json") << rep.dump();
  {
    std::ofstream out(dir / "devhook.11.records", std::ios::binary);
    out.write(reinterpret_cast<const char*>(ring.data()), std::streamsize(ring.size() * sizeof(DeviceRecord)));
  }
  const TracerReport r = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "shared", 11);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.partly_unobserved.empty());
  EXPECT_EQ(r.notes["graph_nodes"], 1);
  EXPECT_EQ(r.notes["graph_executions"], 3);
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 8u);  // 2 blocks of launch 0, and 2 blocks x 3 executions of the node
  std::set<std::pair<int64_t, int64_t>> runs;
  for (const auto& e : events) runs.insert({e.args["launch"].get<int64_t>(), e.args["execution"].get<int64_t>()});
  EXPECT_EQ(runs, (std::set<std::pair<int64_t, int64_t>>{{0, 0}, {1, 0}, {1, 1}, {1, 2}}));
  for (const auto& e : events)
    if (e.args["launch"] == 1) EXPECT_EQ(e.dur, 5) << "entry and exit of one execution's block paired";
  fs::remove_all(dir);
}

// Nothing could be instrumented (a cubin has no PTX): the device layer is not observed,
// and the reason with its count says why, never an empty green layer.
TEST(DevhookDecode, NoInstrumentedLaunchIsNotObservedWithTheReason) {
  const fs::path dir = testsupport::temp_dir("devhook-decode");
  json rep = {{"pid", 12}, {"mode", "block"}, {"contexts", json::array()},
              {"fatbins", {{{"prepared", true}, {"source", ""}, {"error", "a cubin: machine code only, no PTX to rewrite"},
                            {"via", "cuModuleLoadData"}}}},
              {"kernels", {{{"name", "k"}, {"fatbin", 0}, {"launches", 4}, {"instrumented", 0},
                            {"why_not", "a cubin: machine code only, no PTX to rewrite"}}}},
              {"launches", json::array()},
              {"uninstrumented", {{"kernel k: a cubin: machine code only, no PTX to rewrite", 4}}}};
  std::ofstream(dir / "devhook.12.json") << rep.dump();
  const TracerReport r = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "static", 12);
  EXPECT_TRUE(r.layers.empty());
  ASSERT_EQ(r.unobserved.count("device"), 1u);
  EXPECT_EQ(r.unobserved.at("device").rfind(
                "none of the 4 launches that reached the agent could be instrumented: kernel k: a cubin: machine code "
                "only, no PTX to rewrite (4); ",
                0),
            0u)
      << r.unobserved.at("device");
  // It does not pass the launches it saw for the program's: a launcher's own pointers go past it.
  EXPECT_NE(r.unobserved.at("device").find("never reach the agent"), std::string::npos);
  EXPECT_EQ(r.notes["driver_api_images"], 1);
  fs::remove_all(dir);
}

TEST(DevhookDecode, ThreadModeCountsDistinctThreadsPerBlock) {
  std::vector<DeviceRecord> ring;
  for (uint32_t t = 0; t < 64; ++t) ring.push_back(rec(0, 0, t, kEntry, 100 + t));
  for (uint32_t t = 0; t < 60; ++t) ring.push_back(rec(0, 0, t, kExit, 300 + t));
  ring.push_back(rec(0, 1, 5, kExit, 400));  // thread 5 of block 1: its entry was dropped
  ring.push_back(rec(0, 1, 5 | 2 << 10, kExit, 410));  // thread (5,2,0): the block is 64 x 1 x 1
  const fs::path dir = write_agent_output("thread", ring, 1);
  const TracerReport rep = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "shared", 4242);
  EXPECT_EQ(rep.device_mode, "thread");
  EXPECT_EQ(rep.loss["thread_outside_block"], 1);
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].args["threads"], 64);
  EXPECT_EQ(events[1].args["threads"], 1);
  EXPECT_EQ(events[1].args["seen"], "exit");
  fs::remove_all(dir);
}

TEST(DevhookDecode, StaticCudartAndAMissingReportAreExplained) {
  const fs::path dir = testsupport::temp_dir("devhook-decode");
  json rep = {{"pid", 7}, {"mode", "block"}, {"contexts", json::array()}, {"fatbins", json::array()},
              {"kernels", json::array()}, {"launches", json::array()}, {"uninstrumented", json::object()}};
  std::ofstream(dir / "devhook.7.json") << rep.dump();
  TracerReport r = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "static", 7);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.layers.empty());
  EXPECT_NE(r.notes["why_nothing"].get<std::string>().find("statically"), std::string::npos);
  EXPECT_EQ(r.unobserved["device"], r.notes["why_nothing"].get<std::string>());
  // The traced program itself left no report: it died before its exit handlers ran.
  fs::remove(dir / cudatrace::kEventsFile);  // root creates it exclusively: a second conversion writes anew
  r = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "shared", 8);
  EXPECT_NE(r.error.find("wrote no report for pid 8"), std::string::npos) << r.error;
  fs::remove_all(dir);
}

// The agent preloaded into the errors workload (shared cudart). Here, without a GPU, every
// launch runs unchanged and is counted with its reason; on a GPU the bad-configuration
// launch fails instrumented and runs unchanged. Either way the program's exit status and
// output are those of a run without the agent, and every launch is accounted for.
TEST(DevhookAgent, PreloadedIntoAWorkloadChangesNothingAndAccountsForEveryLaunch) {
  const std::string workload = std::string(CUDATRACE_WORKLOAD_DIR) + "/errors.shared";
  const fs::path dir = testsupport::temp_dir("devhook-agent");
  const auto plain = testsupport::run_command(std::string(ledger::kEnvVar) + "=" + (dir / "plain.jsonl").string() + " " + workload);
  const auto traced = testsupport::run_command(std::string(kOutDirEnv) + "=" + dir.string() + " LD_PRELOAD=" +
                                               CUDATRACE_DEVHOOK_AGENT + " " + ledger::kEnvVar + "=" +
                                               (dir / "traced.jsonl").string() + " " + workload);
  EXPECT_EQ(traced.exit_code, plain.exit_code) << traced.output;
  std::vector<json> reports;
  for (const auto& e : fs::directory_iterator(dir))
    if (std::regex_match(e.path().filename().string(), std::regex(R"(devhook\.\d+\.json)")))
      reports.push_back(json::parse(slurp(e.path())));
  ASSERT_EQ(reports.size(), 1u) << traced.output;
  const json& rep = reports[0];
  ASSERT_GE(rep["fatbins"].size(), 1u);
  ASSERT_EQ(rep["kernels"].size(), 1u);
  EXPECT_EQ(rep["kernels"][0]["name"], "empty_kernel");
  const auto ledger = read_events(dir / "traced.jsonl").events;
  int64_t launches = 0;
  for (const auto& t : ledger) launches += t.name == "cudaLaunchKernel";
  EXPECT_GT(launches, 0);
  EXPECT_EQ(rep["kernels"][0]["launches"], launches);
  int64_t accounted = rep["kernels"][0]["instrumented"].get<int64_t>();
  for (const auto& [reason, n] : rep["uninstrumented"].items()) accounted += n.get<int64_t>();
  EXPECT_EQ(accounted, launches) << rep.dump();
  // The runtime calls and their return codes are the same as without the agent.
  const auto plain_ledger = read_events(dir / "plain.jsonl").events;
  ASSERT_EQ(ledger.size(), plain_ledger.size());
  for (size_t i = 0; i < ledger.size(); ++i) {
    EXPECT_EQ(ledger[i].name, plain_ledger[i].name);
    EXPECT_EQ(ledger[i].ret, plain_ledger[i].ret) << ledger[i].name;
  }
  fs::remove_all(dir);
}

// A library with a cudart of its own (privatert's, as cuBLAS has): its kernels never reach
// the agent. The agent names it in its report, and the device layer says what it misses
// there instead of a clean zero. No GPU needed: the report is written at exit either way.
TEST(DevhookAgent, NamesALibraryWithACudartOfItsOwn) {
  const std::string workload = std::string(CUDATRACE_WORKLOAD_DIR) + "/privatert.shared";
  const fs::path dir = testsupport::temp_dir("devhook-privatert");
  const auto traced = testsupport::run_command(std::string(kOutDirEnv) + "=" + dir.string() + " LD_PRELOAD=" +
                                               CUDATRACE_DEVHOOK_AGENT + " " + ledger::kEnvVar + "=" +
                                               (dir / "traced.jsonl").string() + " " + workload);
  int64_t pid = -1;
  json rep;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, std::regex(R"(devhook\.(\d+)\.json)"))) {
      pid = std::stoll(m[1]);
      rep = json::parse(slurp(e.path()));
    }
  }
  ASSERT_GT(pid, 0) << traced.output;
  ASSERT_EQ(rep["private_cudart"].size(), 1u) << rep.dump();
  EXPECT_EQ(fs::path(rep["private_cudart"][0].get<std::string>()).filename(), "libprivatert.so");
  const TracerReport r = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "shared", pid);
  const std::string why = r.unobserved.count("device") ? r.unobserved.at("device")
                          : r.partly_unobserved.count("device") ? r.partly_unobserved.at("device")
                                                                : "";
  EXPECT_NE(why.find("libprivatert.so never reach the agent"), std::string::npos) << why;
  fs::remove_all(dir);
}

// The agent drains the ring while kernels run and writes only what it took: a claim that
// was neither taken nor dropped (a kernel that died half-way) is unfilled, and records the
// file system refused are lost; both are loss, never a silent shortfall.
TEST(DevhookDecode, ClaimsNeitherTakenNorDroppedAndUnwrittenRecordsAreLoss) {
  const std::vector<DeviceRecord> ring = {rec(0, 0, 0, kEntry, 5000), rec(1, 1, 0, kEntry, 7000),
                                          rec(0, 0, 0, kExit, 5900), rec(0, 1, 0, kEntry, 5100)};
  const fs::path dir = write_agent_output("block", ring, 2, 4242, 3, 7);
  const TracerReport rep = convert_devhook_output(dir, dir / cudatrace::kEventsFile, "shared", 4242);
  EXPECT_EQ(rep.error, "");
  EXPECT_EQ(rep.loss["ring_full"], 2);
  EXPECT_EQ(rep.loss["unfilled_slots"], 3);
  EXPECT_EQ(rep.loss["records_unwritten"], 7);
  EXPECT_EQ(rep.notes["records"], 4);
  const auto events = read_events(dir / cudatrace::kEventsFile).events;
  ASSERT_EQ(events.size(), 3u);
  for (const auto& e : events)
    if (e.args["launch"] == 0 && e.args["block"][0] == 0) EXPECT_EQ(e.dur, 900) << "entry and exit apart in the file";
  fs::remove_all(dir);
}
