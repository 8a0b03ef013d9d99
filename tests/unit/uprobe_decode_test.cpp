// The uprobe method's host-side logic, without BPF: the probe spec notation, the cookie,
// turning captured calls into events (arguments, kernel names, nesting), and the
// ld.so cache lookup.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "common/elf_file.h"
#include "tracers/ebpf/ring_option.h"
#include "tracers/uprobe/library_search.h"
#include "tracers/uprobe/uprobe_decode.h"
#include "tracers/uprobe/uprobe_tracer.h"
#include "test_support.h"

using namespace cudatrace;

namespace {

uprobe_call call(unsigned fn, uint64_t enter, uint64_t exit, uint32_t tid, std::initializer_list<uint64_t> args,
                 int64_t ret = 0) {
  uprobe_call c{};
  c.enter_ns = enter;
  c.exit_ns = exit;
  c.cookie = fn;
  c.pid = 100;
  c.tid = tid;
  c.flags = exit ? UPROBE_F_EXIT : 0;
  c.ret = ret;
  size_t i = 0;
  for (uint64_t a : args) c.args[i++] = a;
  return c;
}

// cudaMalloc, cuLaunchKernel and cudaSetDevice, as one file's probes.
std::vector<ProbedFunction> malloc_launch_set_device() {
  return {{"cudaMalloc", "runtime", "/lib", 0x10}, {"cuLaunchKernel", "driver", "/lib", 0x20},
          {"cudaSetDevice", "runtime", "/lib", 0x30}};
}

// cudaMalloc(ptr, 4096) returning, its out-parameter read.
uprobe_call malloc_with_its_pointer() {
  uprobe_call m = call(0, 1000, 2000, 7, {0x7ffd0000, 4096});
  m.out = 0xdead0000;
  m.flags |= UPROBE_F_OUT;
  return m;
}

}  // namespace

TEST(ProbeSpec, EveryLineParsesAndMatchesHooksDef) {
  // Every decoded call has as many sources as hooks.def has slots for it.
  for (const auto& info : call_table()) {
    const ProbeSpec* spec = probe_spec(info.name);
    if (!spec) continue;
    EXPECT_EQ(spec->slots.size(), info.slots.size()) << info.name;
  }
  ASSERT_NE(probe_spec("cudaMalloc"), nullptr);
  EXPECT_EQ(probe_spec("cudaMalloc")->out_arg, 0);
  EXPECT_EQ(probe_spec("cuLaunchKernel")->stack_words, 3);  // bz, smem, stream
  EXPECT_EQ(probe_spec("cudaLaunchKernel")->stack_words, 2);
  EXPECT_EQ(probe_spec("cudaLaunchKernelExC")->blob_arg, 0);
}

TEST(ProbeSpec, BadTokensAreRefused) {
  EXPECT_THROW(parse_probe_spec("", "12"), std::invalid_argument);   // past the 11 captured words
  EXPECT_THROW(parse_probe_spec("", "x"), std::invalid_argument);
  EXPECT_THROW(parse_probe_spec("", "@0"), std::invalid_argument);   // a blob offset without a blob
  EXPECT_THROW(parse_probe_spec("raw:0", "@60"), std::invalid_argument);  // past the blob's end
  EXPECT_THROW(parse_probe_spec("", "*0 *1"), std::invalid_argument);     // one out-parameter at most
  EXPECT_THROW(parse_probe_spec("hex:1", "0"), std::invalid_argument);
}

TEST(ProbeSpec, CookieCarriesWhatToCapture) {
  const uint64_t c = probe_cookie(42, "cuLibraryGetKernel");  // out *0, name string in arg 2
  EXPECT_EQ(UPROBE_COOKIE_FN(c), 42u);
  EXPECT_EQ(UPROBE_COOKIE_OUT(c), 0);
  EXPECT_EQ(UPROBE_COOKIE_BLOB(c), 2);
  EXPECT_EQ(UPROBE_COOKIE_BLOB_STR(c), 1);
  const uint64_t none = probe_cookie(7, "cudaDeviceSynchronize");
  EXPECT_EQ(UPROBE_COOKIE_OUT(none), -1);
  EXPECT_EQ(UPROBE_COOKIE_BLOB(none), -1);
  EXPECT_EQ(UPROBE_COOKIE_STACK(none), 0);
  EXPECT_EQ(UPROBE_COOKIE_STACK(probe_cookie(1, "cuLaunchKernel")), 3);
}

TEST(UprobeDecode, ArgumentsFromRegistersStackAndOutParameters) {
  const std::vector<ProbedFunction> fns = malloc_launch_set_device();
  const uprobe_call m = malloc_with_its_pointer();
  // cuLaunchKernel(f, gx, gy, gz, bx, by, | bz, smem, stream): the last three on the stack.
  uprobe_call l = call(1, 3000, 4000, 7, {0xf00, 2, 3, 1, 128, 1, 1, 0xFFFFFFFF00000010ull, 0x5000});
  // An int argument whose register has garbage above bit 31.
  uprobe_call d = call(2, 5000, 6000, 7, {0xABCD000000000001ull}, int64_t(0xFFFFFFFF00000065ull));
  DecodeStats stats;
  auto events = decode_uprobe_calls({d, l, m}, fns, stats);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].name, "cudaMalloc");
  EXPECT_EQ(events[0].args["bytes"], 4096);
  EXPECT_EQ(events[0].args["ptr"], "0xdead0000");
  EXPECT_EQ(*events[0].dur, 1000);
  EXPECT_EQ(events[1].args["grid"], nlohmann::json({2, 3, 1}));
  EXPECT_EQ(events[1].args["block"], nlohmann::json({128, 1, 1}));
  EXPECT_EQ(events[1].args["smem"], 16);  // the low 32 bits of the stack word
  EXPECT_EQ(events[1].args["stream"], "0x5000");
  EXPECT_EQ(events[2].args["device"], 1);
  EXPECT_EQ(*events[2].ret, 101);  // cudaError_t is 32 bits wide
}

// The tracer decodes while the program runs: calls go out packed, and the functions of a
// library probed late reach the decoder only when asked for. The events are those of the
// whole path, args included; a record of a function not probed (yet) is counted, not guessed.
TEST(UprobeDecode, LiveDecodingPacksTheSameEventsAndLearnsLateFunctions) {
  const std::vector<ProbedFunction> fns = malloc_launch_set_device();
  const uprobe_call m = malloc_with_its_pointer();
  const uprobe_call l = call(1, 3000, 4000, 7, {0xf00, 2, 3, 1, 128, 1, 1, 0x10, 0x5000});
  const uprobe_call partial = call(0, 4500, 4600, 7, {0x10, 64}, 2);  // its out-parameter not read
  const uprobe_call d = call(2, 5000, 6000, 7, {1});
  const uprobe_call beyond = call(3, 7000, 8000, 7, {});
  DecodeStats whole_stats, live_stats;
  std::vector<Event> whole = decode_uprobe_calls({m, l, partial, d}, fns, whole_stats);
  size_t offered = 1;  // the library with the other two functions is probed "later"
  std::vector<Event> live;
  UprobeCallDecoder decoder(
      [&](size_t known, std::vector<ProbedFunction>& into) {
        for (size_t i = known; i < offered; ++i) into.push_back(fns[i]);
      },
      live_stats, {}, [&](const Event& e, const PackedArgs& args) {
        live.push_back(e);
        live.back().args = unpack_args(args.bytes());
      });
  decoder.add(m);
  offered = 3;
  for (const uprobe_call& c : {l, partial, d, beyond}) decoder.add(c);
  decoder.finish();
  testsupport::expect_same_events(live, whole);
  EXPECT_FALSE(live[2].args.contains("ptr")) << live[2].args.dump();
  EXPECT_EQ(live_stats.unknown_function, 1) << "function 3 was never probed";
  EXPECT_EQ(whole_stats.unknown_function, 0);
}

TEST(UprobeDecode, OutParameterNotReadIsLeftOutNotInvented) {
  std::vector<ProbedFunction> fns{{"cudaMalloc", "runtime", "/lib", 0x10}};
  DecodeStats stats;
  auto events = decode_uprobe_calls({call(0, 1, 2, 7, {0x10, 64}, 2)}, fns, stats);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].args["bytes"], 64);
  EXPECT_FALSE(events[0].args.contains("ptr"));
}

TEST(UprobeDecode, SameLayerNestingIsFoldedOtherLayersKept) {
  std::vector<ProbedFunction> fns{{"__cudaLaunchKernel", "runtime", "/lib", 0x10},
                                  {"cudaLaunchKernel", "runtime", "/lib", 0x20},
                                  {"cuLaunchKernel", "driver", "/lib", 0x30}};
  // __cudaLaunchKernel [0,100] calls cudaLaunchKernel [10,90], which calls cuLaunchKernel [20,80].
  std::vector<uprobe_call> calls{call(2, 20, 80, 7, {}), call(1, 10, 90, 7, {}), call(0, 0, 100, 7, {}),
                                 call(1, 200, 300, 8, {})};  // another thread: not nested
  calls[0].depth = 2;  // the probes' nesting depth at entry
  calls[1].depth = 1;
  DecodeStats stats;
  auto events = decode_uprobe_calls(calls, fns, stats);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].name, "__cudaLaunchKernel");
  EXPECT_EQ(events[1].name, "cuLaunchKernel");
  EXPECT_EQ(events[2].name, "cudaLaunchKernel");
  EXPECT_EQ(events[2].tid, 8);
  EXPECT_EQ(stats.folded_nested, 1);
  EXPECT_EQ(stats.folded_by_name["cudaLaunchKernel"], 1);
}

TEST(UprobeDecode, NestedCallsWaitForTheirOuterCallInTheRingsOrder) {
  std::vector<ProbedFunction> fns{{"cudaMemcpy", "runtime", "/lib", 0x10},
                                  {"cudaMemcpyInternal", "runtime", "/lib", 0x20},
                                  {"cuMemcpy", "driver", "/lib", 0x30}};
  std::vector<Event> out;
  DecodeStats stats;
  UprobeCallDecoder d(fns, stats, {}, [&](Event&& e) { out.push_back(std::move(e)); });
  // Ring order: what returns first comes first. Thread 7: cudaMemcpy [0,100] calls
  // cudaMemcpyInternal [10,90], which calls cuMemcpy [20,80]; thread 8 runs meanwhile.
  uprobe_call drv = call(2, 20, 80, 7, {}), inner = call(1, 10, 90, 7, {}), outer = call(0, 0, 100, 7, {});
  drv.depth = 2;
  inner.depth = 1;
  d.add(drv);
  d.add(inner);
  d.add(call(2, 30, 40, 8, {}));  // another thread's outermost call: out at once
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tid, 8);
  d.add(outer);
  ASSERT_EQ(out.size(), 3u) << "the outer call settles what waited on its thread";
  EXPECT_EQ(out[1].name, "cudaMemcpy");
  EXPECT_EQ(out[2].name, "cuMemcpy");
  EXPECT_EQ(stats.folded_nested, 1);
  // A nested call whose outer call never comes is settled at the end and counted.
  uprobe_call orphan = call(2, 500, 510, 7, {});
  orphan.depth = 1;
  d.add(orphan);
  EXPECT_EQ(out.size(), 3u);
  d.finish();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(stats.settled_at_end, 1);
  EXPECT_EQ(stats.settled_over_window, 0);
}

TEST(UprobeDecode, WaitingCallsAreBoundedAndWhatPassesTheWindowIsCounted) {
  std::vector<ProbedFunction> fns{{"cudaMemcpy", "runtime", "/lib", 0x10}, {"cuMemcpy", "driver", "/lib", 0x30}};
  int64_t emitted = 0;
  DecodeStats stats;
  UprobeCallDecoder d(fns, stats, {}, [&](Event&&) { ++emitted; }, 4);
  for (uint64_t i = 0; i < 10; ++i) {
    uprobe_call c = call(1, 10 + 2 * i, 11 + 2 * i, 7, {});
    c.depth = 1;  // inside a call that has not returned yet
    d.add(c);
  }
  EXPECT_EQ(emitted, 10 - 10 % 5) << "settled every time the window overflowed";
  EXPECT_EQ(stats.settled_over_window, 10);
  d.add(call(0, 0, 100, 7, {}));
  d.finish();
  EXPECT_EQ(emitted, 11);
}

TEST(UprobeDecode, KernelNamesFromRegistrationAndHandles) {
  std::vector<ProbedFunction> fns{{"__cudaRegisterFunction", "runtime", "/exe", 0x10},
                                  {"__cudaGetKernel", "runtime", "/exe", 0x20},
                                  {"__cudaLaunchKernel", "runtime", "/exe", 0x30},
                                  {"cuLibraryGetKernel", "driver", "/lib", 0x40},
                                  {"cuLaunchKernel", "driver", "/lib", 0x50}};
  uprobe_call reg = call(0, 10, 20, 7, {0, 0x4000, 0, 0x9000});
  std::strcpy(reg.blob, "vecAdd");
  reg.flags |= UPROBE_F_BLOB;
  uprobe_call get = call(1, 30, 40, 7, {0x7ff0, 0x4000});
  get.out = 0xAA00;
  get.flags |= UPROBE_F_OUT;
  uprobe_call lib = call(3, 50, 60, 7, {0x7ff8, 0, 0x9100});
  std::strcpy(lib.blob, "vecAdd");
  lib.flags |= UPROBE_F_BLOB | UPROBE_F_OUT;
  lib.out = 0xBB00;
  uprobe_call launch = call(2, 70, 100, 7, {0xAA00, 1 | 1ull << 32, 1, 256 | 1ull << 32, 1});
  uprobe_call drv = call(4, 80, 90, 7, {0xBB00, 1, 1, 1, 256, 1, 1, 0, 0});
  uprobe_call unnamed = call(4, 200, 210, 7, {0xCC00, 1, 1, 1, 1, 1, 1, 0, 0});
  DecodeStats stats;
  auto events = decode_uprobe_calls({launch, drv, reg, get, lib, unnamed}, fns, stats);
  ASSERT_EQ(events.size(), 4u) << "the two runtime naming calls are plumbing, not emitted";
  EXPECT_EQ(stats.plumbing, 2);
  EXPECT_EQ(events[0].name, "cuLibraryGetKernel");
  EXPECT_EQ(events[1].args["kernel"], "vecAdd");  // __cudaLaunchKernel via stub -> handle
  EXPECT_EQ(events[2].args["kernel"], "vecAdd");  // cuLaunchKernel via the library's handle
  EXPECT_EQ(events[3].args["kernel"], "0xcc00");  // unknown: the handle, never a guess
}

TEST(UprobeDecode, NameFromTheFileWhenMemoryCouldNotBeRead) {
  std::vector<ProbedFunction> fns{{"__cudaRegisterFunction", "runtime", "/exe", 0x10},
                                  {"cudaLaunchKernel", "runtime", "/exe", 0x20}};
  uprobe_call reg = call(0, 10, 20, 7, {0, 0x4000, 0, 0x9000});  // no blob: the page was not resident
  uprobe_call launch = call(1, 30, 40, 7, {0x4000, 1 | 1ull << 32, 1, 1 | 1ull << 32, 1});
  DecodeStats stats;
  auto events = decode_uprobe_calls({reg, launch}, fns, stats, [](uint64_t stub, uint64_t name) {
    return stub == 0x4000 && name == 0x9000 ? std::string("saxpy") : std::string();
  });
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].args["kernel"], "saxpy");
  EXPECT_EQ(stats.names_from_file, 1);
}

TEST(UprobeDecode, StaticWorkloadKernelNameFromItsOwnFile) {
  // The errors workload's kernel is extern "C" empty_kernel: its host stub has that name.
  const std::string exe = std::string(CUDATRACE_WORKLOAD_DIR) + "/errors.static";
  std::string error;
  uint64_t stub = 0;
  for (const auto& s : function_symbols(exe, true, error))
    if (s.name == "empty_kernel") stub = s.vaddr;
  ASSERT_NE(stub, 0u);
  // Where the name string lies: a file offset of "empty_kernel\0"; in this PIE its address
  // is that offset or a few pages above it (segment alignment).
  std::ifstream in(exe, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), {});
  auto resolve = kernel_names_from_executable(exe);
  const uint64_t base = 0x555500000000;
  bool found = false;
  for (size_t at = data.find(std::string("\0empty_kernel\0", 14)); at != std::string::npos && !found;
       at = data.find(std::string("\0empty_kernel\0", 14), at + 1))
    for (uint64_t shift = 0; shift <= 0x10000 && !found; shift += 0x1000)
      if (string_at_vaddr(exe, at + 1 + shift) == "empty_kernel")
        found = resolve(base + stub, base + at + 1 + shift) == "empty_kernel";
  EXPECT_TRUE(found);
  EXPECT_EQ(resolve(base + stub + 1, base), "") << "an address no stub is at names nothing";
}

TEST(LibrarySearch, LdCacheLines) {
  const std::string out =
      "3 libs found in cache `/etc/ld.so.cache'\n"
      "\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n"
      "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
      "\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so\n";
  EXPECT_EQ(ld_cache_lookup(out, "libcuda.so.1"), "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_EQ(ld_cache_lookup(out, "libcuda.so"), "/usr/lib/x86_64-linux-gnu/libcuda.so");
  EXPECT_EQ(ld_cache_lookup(out, "libcudart.so.13"), "");
}

TEST(LibrarySearch, SharedWorkloadFindsCudartThroughItsRunpath) {
  const std::string exe = std::string(CUDATRACE_WORKLOAD_DIR) + "/errors.shared";
  std::string soname;
  for (const auto& lib : needed_libraries(exe))
    if (lib.rfind("libcudart.so", 0) == 0) soname = lib;
  ASSERT_FALSE(soname.empty());
  LibraryLookup found = find_library(soname, exe, "");
  ASSERT_FALSE(found.path.empty()) << found.via;
  EXPECT_NE(found.via.find("RUNPATH"), std::string::npos) << found.via;
  // LD_LIBRARY_PATH comes before RUNPATH, as ld.so has it.
  LibraryLookup via_env = find_library(soname, exe, found.path.parent_path().string());
  EXPECT_EQ(via_env.via, "LD_LIBRARY_PATH");
  EXPECT_FALSE(find_library("libnosuchthing.so.9", exe, "").via.empty());
}

TEST(UprobeOptions, RingSize) {
  EXPECT_EQ(ring_bytes_option({}, "uprobe"), 64u << 20);
  EXPECT_EQ(ring_bytes_option({{"ring_mb", "1"}}, "uprobe"), 1u << 20);
  EXPECT_THROW(ring_bytes_option({{"ring_mb", "3"}}, "uprobe"), std::invalid_argument);
  EXPECT_THROW(ring_bytes_option({{"ring_mb", "0"}}, "uprobe"), std::invalid_argument);
  EXPECT_THROW(ring_bytes_option({{"ring_mb", "x"}}, "uprobe"), std::invalid_argument);
  // The kernel's ring size is a 32-bit count of bytes: 2048 MiB is the largest that fits.
  EXPECT_EQ(ring_bytes_option({{"ring_mb", "2048"}}, "uprobe"), uint64_t(2048) << 20);
  EXPECT_THROW(ring_bytes_option({{"ring_mb", "4096"}}, "uprobe"), std::invalid_argument);
  EXPECT_THROW(ring_bytes_option({{"ring_mb", "18446744073709551616"}}, "uprobe"), std::invalid_argument);
}
