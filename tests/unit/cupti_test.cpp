// The cupti method's host-side parts, no GPU and no root needed: the injection library's
// USDT probes and semaphores, its argument slots against hooks.def, CUPTI's callback names,
// and the decoder with its correlation join.
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "common/elf_file.h"
#include "test_support.h"
#include "common/spawn.h"
#include "tracers/cupti/injection/call_slots.h"
#include "tracers/call_args.h"
#include "tracers/cupti/cupti_decode.h"
#ifdef CUDATRACE_HAVE_BPF
#include "tracers/cupti/cupti_tracer.h"
#endif

using namespace cudatrace;

namespace {

struct SdtNote {
  std::string provider, name, args;
  uint64_t pc = 0, semaphore = 0;
};

// The .note.stapsdt notes of an ELF64 file, and the address range of its .probes section.
std::vector<SdtNote> sdt_notes(const std::string& bytes, uint64_t& probes_lo, uint64_t& probes_hi) {
  std::vector<SdtNote> notes;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(bytes.data() + eh->e_shoff);
  const char* shstr = bytes.data() + sh[eh->e_shstrndx].sh_offset;
  for (int i = 0; i < eh->e_shnum; ++i) {
    const std::string section = shstr + sh[i].sh_name;
    if (section == ".probes") probes_lo = sh[i].sh_addr, probes_hi = sh[i].sh_addr + sh[i].sh_size;
    if (section != ".note.stapsdt") continue;
    size_t off = sh[i].sh_offset;
    const size_t end = off + sh[i].sh_size;
    while (off + sizeof(Elf64_Nhdr) <= end) {
      const auto* nh = reinterpret_cast<const Elf64_Nhdr*>(bytes.data() + off);
      const char* desc = bytes.data() + off + sizeof(Elf64_Nhdr) + ((nh->n_namesz + 3) & ~3u);
      SdtNote n;
      std::memcpy(&n.pc, desc, 8);
      std::memcpy(&n.semaphore, desc + 16, 8);
      n.provider = desc + 24;
      n.name = desc + 24 + n.provider.size() + 1;
      n.args = desc + 24 + n.provider.size() + 1 + n.name.size() + 1;
      notes.push_back(n);
      off += sizeof(Elf64_Nhdr) + ((nh->n_namesz + 3) & ~3u) + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return notes;
}

size_t count_args(const std::string& spec) {
  if (spec.empty()) return 0;
  return size_t(std::count(spec.begin(), spec.end(), ' ')) + 1;
}

}  // namespace

// Every probe the collector attaches to is in the library, with a semaphore in .probes
// (an unattached probe must cost next to nothing) and the argument count the BPF side reads.
TEST(CuptiLibrary, UsdtProbesWithSemaphores) {
  const std::string bytes = read_elf_bytes(CUDATRACE_CUPTI_LIBRARY);
  ASSERT_TRUE(is_elf64(CUDATRACE_CUPTI_LIBRARY));
  uint64_t lo = 0, hi = 0;
  const auto notes = sdt_notes(bytes, lo, hi);
  ASSERT_GT(hi, lo) << "no .probes section: the probes have no semaphores";
  const std::map<std::string, size_t> expected{{"api_enter", 3}, {"api_exit", 12}, {"api_batch", 2}, {"kernel", 8},
                                               {"activity_dropped", 1}, {"status", 3}, {"summary", 4}};
  std::map<std::string, size_t> seen;
  for (const auto& n : notes) {
    if (n.provider != "cudatrace") continue;
    EXPECT_GE(n.semaphore, lo) << n.name;
    EXPECT_LT(n.semaphore, hi) << n.name;
    EXPECT_NE(n.pc, 0u) << n.name;
    seen[n.name] = count_args(n.args);
  }
  EXPECT_EQ(seen, expected);
}

TEST(CuptiLibrary, ExportsOnlyItsEntryPoints) {
  std::string error;
  std::set<std::string> exported;
  for (const auto& f : function_symbols(CUDATRACE_CUPTI_LIBRARY, false, error)) exported.insert(f.name);
  EXPECT_TRUE(exported.count("InitializeInjection")) << error;
  EXPECT_TRUE(exported.count("cudatrace_cupti_on_api"));
  EXPECT_TRUE(exported.count("cudatrace_cupti_on_kernel"));
  EXPECT_TRUE(exported.count("cudatrace_pause"));
  EXPECT_TRUE(exported.count("cudatrace_records")) << "the per-call benchmark's record count (tracers/pause_hook.h)";
  EXPECT_EQ(exported.size(), 5u) << "hidden visibility keeps the rest (and static libstdc++) out";
}

// The per-call benchmark's in-process A/B: pausing turns off what the mode turned on
// (callback domains, activity kinds) and resuming turns it on again; the fake CUPTI says
// what is on (bits: runtime and driver callbacks, kernel, runtime and driver API activity).
// The cost references split full mode's cost into those parts, so each must switch
// exactly its own.
TEST(CuptiLibrary, PauseSwitchesCallbacksAndActivityOffAndOn) {
  const std::pair<const char*, const char*> modes[] = {
      {"full", "pause 7 0 7\n"},          {"bare", "pause 3 0 3\n"},
      {"bare-runtime", "pause 1 0 1\n"},  {"bare-driver", "pause 2 0 2\n"},
      {"bare-clock", "pause 3 0 3\n"},   {"bare-tsc", "pause 3 0 3\n"},
      {"count", "pause 3 0 3\n"},         {"kernel-activity", "pause 4 0 4\n"},
      {"api-activity", "pause 28 0 28\n"}};
  for (const auto& [mode, expected] : modes) {
    const SpawnResult r = spawn_and_wait({"/usr/bin/env", "FAKE_APP_CHECK_PAUSE=1", std::string("CUDATRACE_CUPTI_MODE=") + mode,
                                          std::string("CUDA_INJECTION64_PATH=") + CUDATRACE_CUPTI_LIBRARY, CUDATRACE_CUPTI_FAKE_APP},
                                         true);
    EXPECT_EQ(r.exit_code, 0) << mode << ": " << r.output << r.error;
    EXPECT_NE(r.output.find(expected), std::string::npos) << mode << ": " << r.output;
  }
}

// call_slots.def fills the same slots, in the same order, as hooks.def names them.
TEST(CuptiSlots, EveryEntryMatchesHooksDef) {
  struct Entry {
    std::string cbid;
    size_t slots;
  };
#define CT_NARGS(...) CT_NARGS_(__VA_ARGS__, 5, 4, 3, 2, 1, 0)
#define CT_NARGS_(a, b, c, d, e, n, ...) n
#define RT(id, ...) {#id, CT_NARGS(__VA_ARGS__)},
#define RT_LIKE(id, type, ...) {#id, CT_NARGS(__VA_ARGS__)},
#define DRV(id, ...) {#id, CT_NARGS(__VA_ARGS__)},
  const std::vector<Entry> entries{
#include "tracers/cupti/injection/call_slots.def"
  };
#undef RT
#undef RT_LIKE
#undef DRV
  ASSERT_GT(entries.size(), 80u);
  for (const auto& e : entries) {
    std::string name = e.cbid;
    // Runtime ids carry CUPTI's version suffix; driver ids are the symbol itself.
    if (name.rfind("cuda", 0) == 0 || name.rfind("__cuda", 0) == 0) name = name.substr(0, name.rfind("_v"));
    const CallInfo* call = find_call(name);
    ASSERT_NE(call, nullptr) << e.cbid << " is not in hooks.def";
    EXPECT_EQ(call->slots.size(), e.slots) << e.cbid;
  }
}

// The library writes a call's record over the last one in its batch slot without clearing
// it first: whatever the call leaves unused must come out 0.
TEST(CuptiSlots, EverySlotIsWrittenTheUnusedOnesZero) {
  uint64_t s[cupti::kSlots];
  std::fill(std::begin(s), std::end(s), ~uint64_t(0));
  cudaSetDevice_v3020_params d{3};
  EXPECT_TRUE(cupti::fill_slots(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, &d, s));
  EXPECT_EQ(s[0], 3u);
  for (int i = 1; i < cupti::kSlots; ++i) EXPECT_EQ(s[i], 0u) << "slot " << i;
  std::fill(std::begin(s), std::end(s), ~uint64_t(0));
  EXPECT_FALSE(cupti::fill_slots(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, &d, s));
  for (int i = 0; i < cupti::kSlots; ++i) EXPECT_EQ(s[i], 0u) << "a call not in call_slots.def, slot " << i;
  std::fill(std::begin(s), std::end(s), ~uint64_t(0));
  EXPECT_FALSE(cupti::fill_slots(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, nullptr, s));
  for (int i = 0; i < cupti::kSlots; ++i) EXPECT_EQ(s[i], 0u) << "no parameters, slot " << i;
}

TEST(CuptiSlots, OutParametersAfterTheCallAndNullConfigs) {
  uint64_t s[cupti::kSlots] = {};
  void* ptr = reinterpret_cast<void*>(0xabc000);
  cudaMalloc_v3020_params m{&ptr, 1 << 20};
  EXPECT_TRUE(cupti::fill_slots(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &m, s));
  EXPECT_EQ(s[0], 1u << 20);
  EXPECT_EQ(s[1], 0xabc000u);
  m.devPtr = nullptr;  // a failing call's null out-pointer is not read
  EXPECT_TRUE(cupti::fill_slots(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &m, s));
  EXPECT_EQ(s[1], 0u);

  cudaLaunchKernel_v7000_params l{reinterpret_cast<const void*>(0x42), dim3(4096, 2, 1), dim3(256, 1, 1), nullptr, 64,
                                  reinterpret_cast<cudaStream_t>(0x77)};
  EXPECT_TRUE(cupti::fill_slots(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, &l, s));
  EXPECT_EQ(s[0], 0x42u);
  EXPECT_EQ(s[1], pack_dim3(4096, 2, 1));
  EXPECT_EQ(s[2], pack_dim3(256, 1, 1));
  EXPECT_EQ(s[3], 64u);
  EXPECT_EQ(s[4], 0x77u);

  cuLaunchKernelEx_params ex{nullptr, reinterpret_cast<CUfunction>(0x99), nullptr, nullptr};
  EXPECT_TRUE(cupti::fill_slots(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &ex, s));
  EXPECT_EQ(s[0], 0x99u);
  EXPECT_EQ(s[1], 0u) << "a null launch config reads as zeros";

  cudaSetDevice_v3020_params d{-1};
  EXPECT_TRUE(cupti::fill_slots(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, &d, s));
  EXPECT_EQ(int64_t(s[0]), -1);
  EXPECT_FALSE(cupti::fill_slots(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, &d, s));
}

#ifdef CUDATRACE_HAVE_BPF
TEST(CuptiOptions, RingSizeAndHandOver) {
  EXPECT_EQ(cupti_options({}).ring_bytes, 64u << 20);
  EXPECT_FALSE(cupti_options({}).per_call);
  EXPECT_TRUE(cupti_options({{"per_call", "1"}}).per_call);
  EXPECT_EQ(cupti_options({{"ring_mb", "8"}}).ring_bytes, 8u << 20);
  EXPECT_THROW(cupti_options({{"per_call", "yes"}}), std::invalid_argument);
  EXPECT_THROW(cupti_options({{"ring_mb", "3"}}), std::invalid_argument);
  try {
    cupti_options({{"colour", "blue"}});
    ADD_FAILURE() << "an unknown option must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("valid: ring_mb, per_call"), std::string::npos) << e.what();
  }
}
#endif

TEST(CuptiNames, RuntimeVersionSuffixDroppedDriverKept) {
  EXPECT_EQ(cupti_callback_name(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020), "cudaMemcpy");
  EXPECT_EQ(cupti_callback_name(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000),
            "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(cupti_callback_name(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000),
            "__cudaLaunchKernel");
  EXPECT_EQ(cupti_callback_name(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2), "cuMemAlloc_v2");
  EXPECT_EQ(cupti_callback_name(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz), "cuLaunchKernel_ptsz");
  EXPECT_EQ(cupti_callback_name(kCuptiRuntimeDomain, 99999), "cbid:2:99999");
  EXPECT_EQ(cupti_callback_name(7, 1), "cbid:7:1");
}

namespace {

cupti_record api(uint32_t domain, uint32_t cbid, uint64_t corr, uint32_t tid, uint64_t t0, int64_t ret,
                 std::initializer_list<uint64_t> slots, const char* text = nullptr) {
  cupti_record r{};
  r.kind = CUPTI_REC_API;
  r.pid = 100;
  r.tid = tid;
  r.id = uint64_t(domain) << 32 | cbid;
  r.corr = corr;
  r.t0 = t0;
  r.t1 = t0 + 500;
  r.ret = ret;
  size_t i = 0;
  for (uint64_t s : slots) r.v[i++] = s;
  if (text) {
    std::strncpy(r.text, text, sizeof r.text - 1);
    r.flags |= CUPTI_F_TEXT;
  }
  return r;
}

}  // namespace

TEST(CuptiDecode, CallsArgumentsAndTheKernelJoinedToItsLaunch) {
  std::vector<cupti_record> records;
  cupti_record loaded{};
  loaded.kind = CUPTI_REC_STATUS;
  loaded.id = 0;
  loaded.v[0] = 130001;
  loaded.t0 = 900;
  std::strcpy(loaded.text, "full");
  loaded.flags = CUPTI_F_TEXT;
  records.push_back(loaded);
  records.push_back(api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1, 11, 1000, 0, {4096, 0xdead000}));
  records.push_back(api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 2, 11, 2000, 1, {0x1000, 0x2000, 64, 1}));
  // Exit order: the driver launch returns before the runtime launch around it.
  records.push_back(api(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 3, 11, 3100, 0,
                        {0x5151, pack_dim3(4, 2, 1), pack_dim3(256, 1, 1), 0, 0}, "fake_kernel"));
  records.push_back(api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 3, 11, 3000, 0,
                        {0x4242, pack_dim3(4, 2, 1), pack_dim3(256, 1, 1), 0, 0}, "fake_kernel"));
  cupti_record k{};
  k.kind = CUPTI_REC_KERNEL;
  k.pid = 100;
  k.tid = 99;  // CUPTI's own thread
  k.corr = 3;
  k.t0 = 5000;
  k.t1 = 7500;
  k.v[0] = pack_dim3(4, 2, 1);
  k.v[1] = pack_dim3(256, 1, 1);
  k.v[2] = 7;
  std::strcpy(k.text, "fake_kernel");
  k.flags = CUPTI_F_TEXT;
  records.push_back(k);
  cupti_record dropped{};
  dropped.kind = CUPTI_REC_DROPPED;
  dropped.v[0] = 2;
  records.push_back(dropped);
  cupti_record summary{};
  summary.kind = CUPTI_REC_SUMMARY;
  summary.v[0] = 4;
  summary.v[1] = 1;
  records.push_back(summary);
  records.push_back(cupti_record{});  // zeroed: no record

  CuptiDecodeStats stats;
  const auto events = decode_cupti_records(records, stats);
  EXPECT_EQ(stats.records, int64_t(records.size() - 1)) << "a zeroed record is not one";
  EXPECT_TRUE(stats.loaded);
  EXPECT_EQ(stats.mode, "full");
  EXPECT_EQ(stats.cupti_version, 130001u);
  EXPECT_EQ(stats.loaded_ns, 900);
  EXPECT_EQ(stats.api_calls, 4);
  EXPECT_EQ(stats.kernels, 1);
  EXPECT_EQ(stats.kernels_joined, 1);
  EXPECT_EQ(stats.activity_dropped, 2);
  EXPECT_TRUE(stats.summary);
  EXPECT_EQ(stats.library_api_exits, 4u);
  ASSERT_EQ(events.size(), 5u);
  // In the order the calls began.
  EXPECT_EQ(events[0].name, "cudaMalloc");
  EXPECT_EQ(events[0].args["bytes"], 4096);
  EXPECT_EQ(events[0].args["ptr"], "0xdead000");
  EXPECT_EQ(events[0].dur, 500);
  EXPECT_EQ(events[1].name, "cudaMemcpy");
  EXPECT_EQ(events[1].ret, 1);
  EXPECT_EQ(events[1].args["kind"], "HtoD");
  EXPECT_EQ(events[2].name, "__cudaLaunchKernel");
  EXPECT_EQ(events[2].layer, "runtime");
  EXPECT_EQ(events[2].args["kernel"], "fake_kernel");
  EXPECT_EQ(events[2].args["grid"], nlohmann::json({4, 2, 1}));
  EXPECT_EQ(events[3].name, "cuLaunchKernel");
  EXPECT_EQ(events[3].layer, "driver");
  EXPECT_EQ(events[3].args["kernel"], "fake_kernel");
  const Event& gpu = events[4];
  EXPECT_EQ(gpu.layer, "gpu-activity");
  EXPECT_EQ(gpu.name, "fake_kernel");
  EXPECT_EQ(gpu.dur, 2500);
  EXPECT_EQ(gpu.tid, 11) << "the launching thread, not CUPTI's";
  EXPECT_EQ(gpu.args["launched_by"], "__cudaLaunchKernel") << "the runtime launch wins over the driver's";
  EXPECT_EQ(gpu.args["block"], nlohmann::json({256, 1, 1}));
  EXPECT_EQ(gpu.corr, 3u);
}

namespace {
cupti_record kernel_record(uint64_t corr) {
  cupti_record k{};
  k.kind = CUPTI_REC_KERNEL;
  k.pid = 100;
  k.tid = 99;  // CUPTI's own thread
  k.corr = corr;
  k.t0 = 10000 + corr;
  k.t1 = k.t0 + 10;
  return k;
}
}  // namespace

// Streamed, kernels are joined whichever comes first: the kernel (its launch's batch not yet
// handed over) or the launch; a driver launch alone joins once the runtime one cannot come.
// The tracer hands calls over packed (no JSON per call, 10^8 of them); the events must be
// those the whole-event path gives, field for field, args included.
TEST(CuptiDecode, CallsHandedOverPackedAreTheEventsTheWholePathGives) {
  cupti_record unknown = api(kCuptiDriverDomain, 99999, 4, 11, 4000, 0, {}, "some_kernel");
  cupti_record on_device = api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 5, 12, 5000, 2, {64, 0xbeef});
  on_device.flags |= CUPTI_F_DEVICE | (3u << CUPTI_DEVICE_SHIFT);
  const std::vector<cupti_record> records = {
      api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 2, 11, 2000, 1, {0x1000, 0x2000, 64, 1}),
      api(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 3, 11, 3100, 0,
          {0x5151, pack_dim3(4, 2, 1), pack_dim3(256, 1, 1), 0, 0}, "fake_kernel"),
      api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 3, 11, 3000, 0,
          {0x4242, pack_dim3(4, 2, 1), pack_dim3(256, 1, 1), 0, 0}, "fake_kernel"),
      unknown, on_device};
  CuptiDecodeStats whole_stats, packed_stats;
  std::vector<Event> whole, packed;
  {
    CuptiRecordDecoder d(whole_stats, [&](Event&& e) { whole.push_back(std::move(e)); });
    for (const auto& r : records) d.add(r);
    d.finish();
  }
  {
    CuptiRecordDecoder d(
        packed_stats, [&](Event&& e) { packed.push_back(std::move(e)); }, 16, 16,
        [&](const Event& e, const PackedArgs& args) {
          packed.push_back(e);
          packed.back().args = unpack_args(args.bytes());
        });
    for (const auto& r : records) d.add(r);
    d.finish();
  }
  ASSERT_EQ(whole.size(), records.size());
  testsupport::expect_same_events(packed, whole);
  EXPECT_EQ(whole[1].args.value("kernel", ""), "fake_kernel") << whole[1].args.dump();
  EXPECT_EQ(whole[3].args, nlohmann::json({{"kernel", "some_kernel"}})) << "an id hooks.def does not lay out";
  EXPECT_EQ(whole[4].device, 3);
  EXPECT_EQ(packed_stats.unknown_callbacks, 1);
  EXPECT_EQ(whole_stats.unknown_callbacks, 1);
}

TEST(CuptiDecode, KernelsJoinTheirLaunchInEitherOrderWithinBoundedWindows) {
  std::vector<Event> out;
  CuptiDecodeStats stats;
  CuptiRecordDecoder d(stats, [&](Event&& e) { out.push_back(std::move(e)); }, 2, 2);
  d.add(kernel_record(1));  // before its launches
  EXPECT_TRUE(out.empty()) << "it waits for its launch";
  d.add(api(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, 11, 3100, 0, {0x51, 0, 0, 0, 0}));
  ASSERT_EQ(out.size(), 1u) << "the driver launch goes out; the kernel waits for the runtime one";
  d.add(api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 1, 11, 3000, 0, {0x42, 0, 0, 0, 0}));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].layer, "gpu-activity");
  EXPECT_EQ(out[2].tid, 11);
  EXPECT_EQ(out[2].args["launched_by"], "__cudaLaunchKernel");
  // A driver-API program: its kernels join the driver launch when they leave the window.
  d.add(api(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 2, 12, 4000, 0, {0x51, 0, 0, 0, 0}));
  d.add(kernel_record(2));
  d.add(kernel_record(50));  // a launch never seen
  d.add(kernel_record(51));  // the third waiting: the oldest (corr 2) leaves the window
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[4].corr, 2u);
  EXPECT_EQ(out[4].tid, 12);
  EXPECT_EQ(out[4].args["launched_by"], "cuLaunchKernel");
  d.finish();
  ASSERT_EQ(out.size(), 7u);
  EXPECT_EQ(stats.kernels_joined, 2);
  EXPECT_EQ(stats.kernels_unjoined_past_window, 2) << "corr 50 and 51 had no launch";
  // The launch window is bounded too: after three more launches, the first is forgotten.
  for (uint64_t c : {60, 61, 62})
    d.add(api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, c, 13, 5000 + c, 0, {0x42, 0, 0, 0, 0}));
  d.add(kernel_record(61));
  EXPECT_EQ(out.back().tid, 13);
  d.add(kernel_record(2));  // its launch left the window long ago
  d.finish();
  EXPECT_EQ(out.back().tid, 99);
}

TEST(CuptiDecode, SubscriberTakenAndUnknownIdsAreReported) {
  cupti_record taken{};
  taken.kind = CUPTI_REC_STATUS;
  taken.id = 1;
  std::strcpy(taken.text, "Nsight Systems");
  taken.flags = CUPTI_F_TEXT;
  cupti_record unknown = api(kCuptiRuntimeDomain, 60000, 9, 1, 10, 0, {});
  cupti_record orphan{};  // a kernel whose launch was never seen
  orphan.kind = CUPTI_REC_KERNEL;
  orphan.corr = 77;
  CuptiDecodeStats stats;
  const auto events = decode_cupti_records({taken, unknown, orphan}, stats);
  EXPECT_FALSE(stats.loaded);
  ASSERT_EQ(stats.problems.size(), 1u);
  EXPECT_NE(stats.problems[0].find("Nsight Systems"), std::string::npos);
  EXPECT_EQ(stats.unknown_callbacks, 1);
  EXPECT_EQ(stats.kernels, 1);
  EXPECT_EQ(stats.kernels_joined, 0);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].name, "cbid:2:60000");
  EXPECT_EQ(events[0].name, "kernel") << "a nameless kernel record keeps a name";
}

namespace {
// A batch as the collector hands it over: its head (the clock's two points, and how many
// calls follow), then CUPTI_BATCH slots, the first of them the calls.
void push_batch(std::vector<cupti_record>& records, uint32_t tid, std::array<uint64_t, 5> clock,
                std::vector<cupti_record> calls) {
  cupti_record head{};
  head.kind = CUPTI_REC_BATCH;
  head.pid = 100;
  head.tid = tid;
  head.t0 = clock[0];
  head.v[0] = clock[1];
  head.t1 = clock[2];
  head.v[1] = clock[3];
  head.v[2] = clock[4];
  head.v[3] = calls.size();
  records.push_back(head);
  calls.resize(CUPTI_BATCH);
  records.insert(records.end(), calls.begin(), calls.end());
}
// 2 ticks per ns between (1000 ticks, 5 ms) and (3000 ticks, 5 ms + 1000 ns); brackets of 40 ticks.
constexpr std::array<uint64_t, 5> kClock{1000, 5000000, 3000, 5001000, 40};
}  // namespace

// A batch's calls carry TSC ticks, mapped to CLOCK_MONOTONIC ns along the line through the two
// points its head carries; a call with no usable clock keeps its place, not a made-up time,
// and is counted.
TEST(CuptiDecode, TicksAreMappedToTheMonotonicClockThroughTheirBatchsPoints) {
  std::vector<cupti_record> records;
  cupti_record get = api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 1, 11, 1500, 0, {0});
  get.t1 = 2900;
  get.flags |= CUPTI_F_TICKS;
  cupti_record unstamped = get;  // its entry callback came before the library subscribed
  unstamped.corr = 2;
  unstamped.t0 = 0;
  const cupti_record in_ns = api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 4, 11, 7000000, 0, {0});
  push_batch(records, 11, kClock, {get, unstamped, in_ns});
  cupti_record alone = get;  // not in a batch: no clock of its own
  alone.corr = 3;
  records.push_back(alone);
  cupti_record late = get;
  late.corr = 5;
  push_batch(records, 11, {3000, 5001000, 3000, 5001000, 0}, {late});  // no interval between the points
  cupti_record early = get;  // began before its batch's first point: mapped all the same, and counted
  early.corr = 6;
  early.t0 = 600;
  push_batch(records, 11, kClock, {early});

  CuptiDecodeStats stats;
  std::map<uint64_t, Event> by_corr;
  for (Event& e : decode_cupti_records(records, stats)) by_corr[e.corr.value_or(0)] = std::move(e);
  ASSERT_EQ(by_corr.size(), 6u);
  EXPECT_EQ(by_corr[1].ts, 5000250);
  EXPECT_EQ(by_corr[1].dur, 700);
  EXPECT_EQ(by_corr[2].ts, 0) << "an entry never stamped stays unknown";
  EXPECT_FALSE(by_corr[2].dur.has_value());
  EXPECT_EQ(by_corr[3].ts, 0) << "ticks outside a batch have no clock to map them";
  EXPECT_EQ(by_corr[4].ts, 7000000) << "a call without CUPTI_F_TICKS is in ns already";
  EXPECT_EQ(by_corr[4].dur, 500);
  EXPECT_EQ(by_corr[5].ts, 0) << "a clock with no interval between its points maps nothing";
  EXPECT_EQ(by_corr[6].ts, 4999800);
  EXPECT_EQ(stats.calls_in_ticks, 3);
  EXPECT_EQ(stats.calls_extrapolated, 1);
  EXPECT_EQ(stats.calls_untimed, 2);
  EXPECT_DOUBLE_EQ(stats.clock_spread_ns_max, 10.0) << "half of 40 ticks, at 2 ticks per ns";
  EXPECT_EQ(stats.api_calls, 6);
}

// The collector copies a batch as the library wrote it and writes only its head: a call's
// kind, process and thread are the head's whatever its slot says, its flags only the
// library's own, its text no longer than the field, and the slots past the head's count
// (last batches' leftovers) are no calls.
TEST(CuptiDecode, ABatchsCallsAreItsHeadsThreadsWhateverTheSlotsSay) {
  std::vector<cupti_record> records;
  cupti_record forged = api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 1, 777, 1500, 0, {0});
  forged.kind = 0;
  forged.pid = 666;
  forged.flags = 0xFFFFFFFFu & ~CUPTI_F_TICKS;  // CUPTI_F_TEXT among them, with an empty text
  cupti_record unterminated = api(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 2, 777, 1600, 0, {0x51});
  std::memset(unterminated.text, 'x', sizeof unterminated.text);
  cupti_record leftover = api(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 3, 11, 1700, 0, {0});
  push_batch(records, 11, kClock, {forged, unterminated, leftover});
  records[0].v[3] = 2;  // the head says two calls: the third slot is a leftover
  CuptiDecodeStats stats;
  const auto events = decode_cupti_records(records, stats);
  ASSERT_EQ(events.size(), 2u);
  for (const Event& e : events) {
    EXPECT_EQ(e.pid, 100) << e.name;
    EXPECT_EQ(e.tid, 11) << e.name;
  }
  EXPECT_EQ(events[0].name, "cudaGetDevice");
  EXPECT_EQ(events[0].device, 0xFFFF) << "the library's device word is kept";
  EXPECT_EQ(events[1].name, "cuLaunchKernel");
  EXPECT_EQ(events[1].args["kernel"], std::string(CUPTI_TEXT - 1, 'x'));
  EXPECT_EQ(stats.records, 3) << "the head and two calls";
  EXPECT_EQ(stats.api_calls, 2);
}

// Each loss counter counts what its name says, and a call lost in the ring or unreadable is
// not counted again among the calls the library emitted and the collector never received:
// the harness adds the counters up into the events a run lost. (A run at 10^8 calls read
// 768 unreadable batched calls and 768 not received, the same calls: 1,536 lost were shown.)
TEST(CuptiLoss, NoCallIsCountedUnderTwoNames) {
  CuptiDecodeStats stats;
  stats.summary = true;
  stats.library_api_exits = 1000, stats.api_calls = 990;
  stats.library_kernels = 50, stats.kernels = 47;
  CuptiCollectorLoss c;
  c.lost.assign(CUPTI_LOST_KINDS, 0);
  c.lost[CUPTI_LOST_RING_FULL] = 3;
  c.lost[CUPTI_LOST_UNREADABLE] = 5;
  c.lost[CUPTI_LOST_RING_FULL_KERNELS] = 2;
  c.lost[CUPTI_LOST_RING_FULL_OTHER] = 1;
  const nlohmann::json loss = cupti_loss_counters(c, stats);
  EXPECT_EQ(loss["ring_full"], 3);
  EXPECT_EQ(loss["unreadable_batched_calls"], 5);
  EXPECT_EQ(loss["api_calls_not_received"], 2) << "10 calls short, 8 of them counted already";
  EXPECT_EQ(loss["ring_full_kernels"], 2);
  EXPECT_EQ(loss["kernels_not_received"], 1) << "3 kernels short, 2 of them counted already";
  EXPECT_EQ(loss["ring_full_status_records"], 1);

  // All of them unreadable: nothing more is left unreceived.
  c.lost.assign(CUPTI_LOST_KINDS, 0);
  c.lost[CUPTI_LOST_UNREADABLE] = 10;
  EXPECT_EQ(cupti_loss_counters(c, stats)["api_calls_not_received"], 0);
  EXPECT_EQ(cupti_loss_counters(c, stats)["kernels_not_received"], 3);

  // Without the library's summary there is nothing to compare with.
  stats.summary = false;
  EXPECT_FALSE(cupti_loss_counters(c, stats).contains("api_calls_not_received"));
}
