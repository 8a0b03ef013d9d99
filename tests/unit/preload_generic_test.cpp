// The shim's generic forwarders, called directly: whatever the real function's signature
// (integers past the registers, floats, structs by value in registers and on the stack,
// a struct returned in registers or through memory), every argument must arrive and the
// result come back, recorded or not. And the export table they serve must cover every
// function the toolkit's libcudart.so and libcuda export.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "test_support.h"
#include "tracers/preload/shim/generic_hooks.h"
#include "tracers/preload/shim/recorder.h"

using namespace cudatrace::preload;

namespace {

int eight(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f, uint64_t g, uint64_t h) {
  // Weighted so that any argument in the wrong place changes the result.
  return int(a * 1 + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8);
}
int none() { return 42; }
// Six words in registers and all kMaxStackArgWords (16) on the stack: the most a generic
// forwarder passes.
uint64_t twenty_two(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t s0,
                    uint64_t s1, uint64_t s2, uint64_t s3, uint64_t s4, uint64_t s5, uint64_t s6, uint64_t s7,
                    uint64_t s8, uint64_t s9, uint64_t s10, uint64_t s11, uint64_t s12, uint64_t s13, uint64_t s14,
                    uint64_t s15) {
  const uint64_t v[] = {a0, a1, a2, a3, a4, a5, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15};
  uint64_t h = 0;
  for (uint64_t x : v) h = h * 31 + x;
  return h;
}

struct Small {  // 12 bytes: two integer registers, as dim3
  unsigned x, y, z;
};
struct Big {  // 40 bytes: passed in memory, on the stack
  double d[5];
};
struct Pair {  // 16 bytes: returned in rax:rdx
  uint64_t lo, hi;
};

// Eight floats fill xmm0..xmm7, the ninth goes to the stack, with the big struct.
double floats(float a, double b, Small s, float c, double d, Big big, float e, float f, float g, float h, float i,
              int64_t n) {
  return a + 2 * b + 3 * s.x + 5 * s.y + 7 * s.z + 11 * c + 13 * d + 17 * (big.d[0] + 2 * big.d[4]) + 19 * e +
         23 * f + 29 * g + 31 * h + 37 * i + 41 * double(n);
}
Pair pair(uint64_t a, uint64_t b) { return {a + 1, b + 2}; }
Big big_result(double seed) { return {{seed, seed + 1, seed + 2, seed + 3, seed + 4}}; }
const char* pointer_result(int i) { return i ? "sixty-four bits" : nullptr; }

template <class F>
F wrap(const char* name, F f) {
  void* w = generic_wrapper_for(name, false, reinterpret_cast<void*>(f));
  EXPECT_NE(w, nullptr) << name;
  return reinterpret_cast<F>(w);
}

// Every way a forwarder runs: not recording (a jump), and recording (a call and a copy).
class PreloadGeneric : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    saved_ = g_shim.live;
    g_shim.live = GetParam();
  }
  void TearDown() override { g_shim.live = saved_; }
  bool saved_ = false;
};

}  // namespace

TEST_P(PreloadGeneric, ForwardsRegisterAndStackArguments) {
  auto call = wrap("cuTestEight", &eight);
  EXPECT_EQ(call(1, 2, 3, 4, 5, 6, 7, 8), eight(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_EQ(call(8, 7, 6, 5, 4, 3, 2, 1), eight(8, 7, 6, 5, 4, 3, 2, 1));
  EXPECT_EQ(reinterpret_cast<void*>(wrap("cuTestEight", &eight)), reinterpret_cast<void*>(call))
      << "one forwarder per function";
  auto most = wrap("cuTestTwentyTwo", &twenty_two);
  EXPECT_EQ(most(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22),
            twenty_two(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22));
  // Under the name of a function with neither stack nor xmm arguments (cuCtxGetDevice), a
  // forwarder skips both: an integer-only call still arrives whole.
  auto slim = reinterpret_cast<decltype(&eight)>(generic_wrapper_for("cuCtxGetDevice", false, reinterpret_cast<void*>(&eight)));
  ASSERT_NE(slim, nullptr);
  EXPECT_EQ(slim(1, 2, 3, 4, 5, 6, 0, 0), eight(1, 2, 3, 4, 5, 6, 0, 0));
  auto zero = wrap("cuTestNone", &none);
  EXPECT_NE(reinterpret_cast<void*>(zero), reinterpret_cast<void*>(call));
  EXPECT_EQ(zero(), 42);
}

TEST_P(PreloadGeneric, ForwardsFloatsStructsAndEveryReturnType) {
  const Small s{3, 5, 7};
  const Big big{{1.5, 2.5, 3.5, 4.5, 5.5}};
  auto f = wrap("cuTestFloats", &floats);
  EXPECT_DOUBLE_EQ(f(1.25f, 2.5, s, 3.75f, 4.5, big, 5.25f, 6.5f, 7.75f, 8.5f, 9.25f, -10),
                   floats(1.25f, 2.5, s, 3.75f, 4.5, big, 5.25f, 6.5f, 7.75f, 8.5f, 9.25f, -10));
  const Pair p = wrap("cuTestPair", &pair)(10, 20);
  EXPECT_EQ(p.lo, 11u);
  EXPECT_EQ(p.hi, 22u);
  const Big b = wrap("cuTestBig", &big_result)(0.5);
  EXPECT_DOUBLE_EQ(b.d[0], 0.5);
  EXPECT_DOUBLE_EQ(b.d[4], 4.5);
  EXPECT_STREQ(wrap("cuTestPointer", &pointer_result)(1), "sixty-four bits") << "all 64 bits of rax come back";
}

INSTANTIATE_TEST_SUITE_P(Recording, PreloadGeneric, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "live" : "paused"; });

TEST(PreloadGenericSlots, CuGetProcAddressIsNeverWrappedGenerically) {
  EXPECT_EQ(generic_wrapper_for("cuGetProcAddress_v2", false, reinterpret_cast<void*>(&none)), nullptr);
}

// Every function the toolkit's libcudart.so and driver stub export is in the shim's table,
// and the shim exports it (cudart's registration plumbing aside, by design).
TEST(PreloadExports, EveryToolkitExportIsCoveredAndExported) {
  const auto shim = testsupport::dynamic_symbols("--defined-only", CUDATRACE_PRELOAD_SHIM);
  ASSERT_GT(shim.size(), 500u) << "nm found too little in " << CUDATRACE_PRELOAD_SHIM;
  int checked = 0;
  for (const char* lib : {CUDATRACE_TOOLKIT_CUDART, CUDATRACE_TOOLKIT_LIBCUDA}) {
    const auto names = testsupport::dynamic_symbols("--defined-only", lib);
    ASSERT_GT(names.size(), 300u) << lib;
    for (const auto& name : names) {
      if (name.rfind("cu", 0) != 0 && name.rfind("__cuda", 0) != 0) continue;
      ++checked;
      const ExportInfo* e = find_export(name);
      ASSERT_NE(e, nullptr) << name << " (" << lib << ") is not in the shim's export table";
      if (e->kind == ExportKind::Plumbing)
        EXPECT_EQ(shim.count(name), 0u) << name << " is plumbing: the shim must not stand in front of it";
      else
        EXPECT_EQ(shim.count(name), 1u) << name << " is not exported by the shim";
    }
  }
  int count = 0;
  export_table(&count);
  EXPECT_EQ(checked, count) << "the table holds what the toolkit exports, nothing else";
}

// A generic forwarder copies kMaxStackArgWords words of stack arguments: every generic
// function the headers declare must fit (its parameters, all of them on the stack at
// worst, take no more), and the ones the headers do not declare are few and named.
TEST(PreloadExports, GenericForwardersFitEveryDeclaredSignature) {
  int count = 0;
  const ExportInfo* table = export_table(&count);
  int generic = 0, undeclared = 0, listed = 0;
  std::string undeclared_names;
  for (int i = 0; i < count; ++i) {
    const ExportInfo& e = table[i];
    listed += e.kind == ExportKind::Listed;
    if (e.kind != ExportKind::Generic) continue;
    ++generic;
    EXPECT_EQ(export_of_slot(e.slot), &e);
    if (!e.declared) {
      ++undeclared;
      undeclared_names += std::string(" ") + e.name;
      continue;
    }
    EXPECT_LE(e.arg_words, kMaxStackArgWords) << e.name << " takes more than a generic forwarder copies";
  }
  EXPECT_GT(listed, 100);
  EXPECT_GT(generic, 800);
  // Legacy entry points kept for old binaries (cuMemAlloc before _v2, ...) and interop
  // calls whose headers need a graphics stack: forwarded all the same.
  EXPECT_LT(undeclared * 4, generic) << undeclared_names;
  std::printf("exports: %d (%d with argument tables, %d generic, %d of them not declared by the headers)\n", count,
              listed, generic, undeclared);
  // What each forwarder keeps, from the prototypes.
  EXPECT_EQ(find_export("cuCtxGetDevice")->frame, 0) << "one pointer: nothing to keep";
  EXPECT_EQ(find_export("cuTexRefSetMipmapLevelBias")->frame, kSaveXmm) << "a float";
  EXPECT_TRUE(find_export("cudaMalloc3D")->frame & kCopyStack) << "a 24-byte struct by value";
  EXPECT_TRUE(find_export("cuLaunchCooperativeKernel")->frame & kCopyStack) << "11 words";
  EXPECT_EQ(cudatrace_generic_frames.of[find_export("cuCtxGetDevice")->slot], kReturnsCode)
      << "the slim path, and its result recorded";
  EXPECT_EQ(find_export("cudaGetErrorString")->frame, 0) << "a pointer comes back in rax alone";
  EXPECT_EQ(slot_flags(nullptr), kFullFrame | kReturnsCode) << "a function the shim knows nothing of";
  int slim = 0;
  for (int i = 0; i < count; ++i)
    slim += table[i].kind == ExportKind::Generic && table[i].declared && !table[i].frame && !context_flags(table[i].name);
  std::printf("generic exports on the forwarder's slim path: %d of %d\n", slim, generic);
  EXPECT_GT(slim * 2, generic) << "most CUDA functions need no frame";
  const ExportInfo* s = find_export("cudaGetErrorString");
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->returns_code) << "a pointer result is not an error code";
  EXPECT_TRUE(find_export("cuModuleLoadData")->returns_code);
}

// The calls after which a thread's device is asked again (recorder.h, device_tag()): every
// variant of each, in the toolkit's exports, carries its flag and stays off the slim path
// (which cannot drop the kept device); a name the toolkit does not export would be a typo.
TEST(PreloadExports, ContextChangingCallsAreMarkedAndNeverSlim) {
  int count = 0;
  const ExportInfo* table = export_table(&count);
  std::map<std::string, int> thread_changers, all_changers;
  for (int i = 0; i < count; ++i) {
    const ExportInfo& e = table[i];
    const uint8_t f = context_flags(e.name);
    if (f & kChangesThreadContext) ++thread_changers[e.name];
    if (f & kChangesContexts) ++all_changers[e.name];
    if (e.kind != ExportKind::Generic) continue;
    const uint8_t frames = cudatrace_generic_frames.of[e.slot];
    EXPECT_EQ(frames & (kChangesThreadContext | kChangesContexts), f) << e.name;
  }
  for (const char* name : {"cuCtxSetCurrent", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuCtxCreate_v2",
                           "cuCtxCreate_v3", "cuDevicePrimaryCtxRetain", "cudaInitDevice", "cudaSetDeviceFlags"})
    EXPECT_TRUE(thread_changers.count(name)) << name;
  for (const char* name : {"cuCtxDestroy_v2", "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxReset_v2",
                           "cudaDeviceReset"})  // and cudaThreadExit, which CUDA 13 dropped
    EXPECT_TRUE(all_changers.count(name)) << name;
  EXPECT_EQ(context_flags("cuCtxGetCurrent"), 0);
  EXPECT_EQ(context_flags("cuCtxSetCurrent_v2"), kChangesThreadContext) << "a later version is the same call";
  EXPECT_EQ(context_flags("cuCtxSetCurrentX"), 0);
  EXPECT_TRUE(changes_context(k_cudaSetDevice)) << "a listed hook";
  EXPECT_FALSE(changes_context(k_cudaGetDevice));
}

// What a forwarder of such a call does, live: the calling thread's kept device is dropped
// (a set), or every thread's (a destroy); any other call keeps it. A run-time slot (an
// address cuGetProcAddress hands out that no export has, here a version the toolkit does
// not know) takes the flag from the name it was asked by.
TEST(PreloadGenericSlots, ContextChangingForwardersDropTheKeptDevice) {
  const bool saved = g_shim.live;
  g_shim.live = true;
  auto keep = [] {
    t_buffer.device_epoch = g_shim.context_epoch.load();
    t_buffer.last_device_tag = kRecordDevice | 1;
  };
  auto one = [](void*) { return 0; };
  using Fn = int (*)(void*);
  const auto set = reinterpret_cast<Fn>(generic_wrapper_for("cuCtxSetCurrent_v9", false, reinterpret_cast<void*>(+one)));
  const auto destroy = reinterpret_cast<Fn>(generic_wrapper_for("cuCtxDestroy_v9", false, reinterpret_cast<void*>(+[](void*) { return 0; })));
  const auto get = reinterpret_cast<Fn>(generic_wrapper_for("cuCtxGetCurrent", false, reinterpret_cast<void*>(+[](void*) { return 0; })));
  ASSERT_TRUE(set && destroy && get);
  for (int round = 0; round < 2; ++round) {  // the first call resolves, the second runs as every later one
    keep();
    EXPECT_EQ(get(nullptr), 0);
    EXPECT_EQ(t_buffer.device_epoch, g_shim.context_epoch.load()) << "kept";
    EXPECT_EQ(set(nullptr), 0);
    EXPECT_EQ(t_buffer.device_epoch, 0u) << "this thread's dropped";
    keep();
    const uint32_t epoch = g_shim.context_epoch.load();
    EXPECT_EQ(destroy(nullptr), 0);
    EXPECT_NE(g_shim.context_epoch.load(), epoch) << "every thread's dropped";
    EXPECT_NE(t_buffer.device_epoch, g_shim.context_epoch.load());
    EXPECT_EQ(g_shim.context_epoch.load() % 2, 1u) << "an epoch is never 0, a thread's 'not known'";
  }
  t_buffer.device_epoch = 0;
  g_shim.live = saved;
}
